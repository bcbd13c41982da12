/* A test-only splitter that cuts a GGUF file into shards the way llama.cpp's gguf-split
 * does: files PREFIX-%05d-of-%05d.gguf numbered from 1; every shard carries split.no
 * (uint16, from 0), split.count (uint16) and split.tensors.count (int32); only the first
 * carries the original metadata; tensors are dealt out in order, about evenly. */
#ifndef GGUFS_TEST_SPLIT_H
#define GGUFS_TEST_SPLIT_H

#include <stdint.h>

/* Writes count shards of the GGUF file src next to prefix; tweak, when not NULL, is
 * called for each shard before its split keys are written and may change them (to make
 * broken sets). Returns 0, or -1 if src does not parse or a write fails. */
struct split_keys {
	uint16_t no;
	uint16_t count;
	int32_t tensors_count;
	uint64_t first;   /* index of the shard's first tensor (it ends where the next starts) */
};
int gguf_split(const char *src, const char *prefix, unsigned count,
               void (*tweak)(unsigned shard, struct split_keys *k));

#endif
