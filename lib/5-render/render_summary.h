/* summary.txt: a short human summary of the model, in the spirit of llama.cpp's load
 * log (architecture, name, file type, parameters, sizes, hyperparameters, and a table of
 * tensor types with their counts and bytes); for a split model, every shard file with
 * its size. */
#ifndef GGUFS_RENDER_SUMMARY_H
#define GGUFS_RENDER_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "sink.h"

/* llama.cpp's name for a general.file_type value (enum llama_ftype): "all F32", "F16",
 * "Q4_K - Medium", ...; NULL for a value llama.cpp does not define. */
const char *summary_ftype_name(uint64_t ftype);

/* A count the way llama.cpp prints parameters: two decimals and K, M, B or T
 * ("1.10 B", "6.74 M", "0.12 K"). Returns the length. */
size_t summary_count_text(uint64_t n, char buf[32]);

/* ARCH.suffix of f (ARCH its general.architecture) as an unsigned integer: false when
 * absent, negative or not an integer. */
bool summary_arch_uint(const struct gguf_file *f, const char *suffix, uint64_t *out);

/* The bytes llama.cpp's KV cache takes per token of context at its default f16 type:
 * 2 bytes x (key length + value length) x KV heads, summed over the layers (per-layer
 * head counts as given), from the model's own keys (ARCH.block_count,
 * attention.head_count_kv, else head_count; attention.key_length and value_length,
 * else embedding_length / head_count). False when a key it needs is missing. */
bool summary_kv_bytes(const struct gguf_file *f, uint64_t *per_token);

/* The whole summary.txt of m. Its cost is one pass over the tensors and a few metadata
 * lookups; nothing is allocated. */
void render_summary(struct sink *s, const struct ggufs_model *m);

#endif
