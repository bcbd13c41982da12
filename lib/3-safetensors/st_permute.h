/* The converter's q/k permute (LlamaModel.permute, for llama, mistral and mixtral): the
 * rows of a q or k projection (its first dimension, n_head heads of head_dim rows)
 * reordered within each head from the checkpoint's two halves (rotary pairs split) to
 * interleaved pairs, as numpy's reshape(n_head, 2, head_dim / 2, ...).swapaxes(1, 2)
 * does. Each converted row is one whole checkpoint row, so a read converts it row by
 * row, block by block, without the tensor. */
#ifndef GGUFS_ST_PERMUTE_H
#define GGUFS_ST_PERMUTE_H

#include <stdbool.h>
#include <stdint.h>

/* The heads the converter splits a tensor into: n_head for q, n_head_kv for k when it
 * differs from n_head (its "n_head_kv is not None and n_head != n_head_kv"). */
uint32_t st_permute_heads(bool is_k, uint32_t n_head, uint32_t n_head_kv);

/* Whether rows rows split into n_head heads of an even count each (else numpy's reshape
 * fails, and the converter with it). */
bool st_permute_fits(uint64_t rows, uint32_t n_head);

/* The checkpoint's row that converted row r (< rows) is, for rows that fit n_head. */
uint64_t st_permute_row(uint64_t rows, uint32_t n_head, uint64_t r);

#endif
