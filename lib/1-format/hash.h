/* Hashing untrusted names for the lookup tables. Every name in a GGUF file is chosen by
 * whoever wrote it, so a fixed hash would let a file make the tables degrade to lists
 * and a mount take quadratic time. The hash starts from a per-process random seed and
 * ends in a full-avalanche mix, so that which names collide cannot be planned. */
#ifndef GGUFS_HASH_H
#define GGUFS_HASH_H

#include <stdint.h>

/* A seeded 64-bit hash of p[0..n) (FNV-1a from a random start, then murmur3's fmix64). */
uint64_t hash_bytes(const void *p, uint64_t n, uint64_t salt);

#endif
