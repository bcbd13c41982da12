/* The quantizers: float32 values into the blocks of a ggml type, byte for byte as
 * llama.cpp's reference quantizers (ggml-quants.c's quantize_row_*_ref and the fp16 and
 * bf16 conversions of ggml.c) write them when no importance matrix is given, which is
 * what llama_model_quantize() does without one (ggml_quantize_chunk with imatrix NULL).
 * Every block depends on its own block_elems values only, so any run of whole blocks
 * can be quantized alone and in any order.
 *
 * NaN and inf inputs give ggml's bytes too, with one exception that no file holds: a
 * block whose fp16 scale or minimum comes out inf or NaN, which llama.cpp's check
 * (ggml_validate_row_data) refuses, so that llama_model_quantize() stops with
 * "quantized data validation failed" rather than write it. In such a block ggml's
 * quants depend on which of two NaNs its compiler's code keeps in an addition (it is
 * not the same in every unrolled copy of one loop), and these may differ. */
#ifndef GGUFS_QUANT_H
#define GGUFS_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "types.h"

/* Quantizes n values of x (n a multiple of the type's block size) into y, as ggml's
 * reference quantizer (no importance matrix) does: y receives n / block * block_bytes
 * bytes, at any alignment. x and y must not overlap; neither is kept. Returns 0, or
 * -EINVAL for a type this layer cannot make or an n that is negative or not a multiple
 * of the block size (nothing is written then). Thread-safe: no state is shared. */
int quant_row(enum ggml_type_id type, const float *x, void *y, int64_t n);

/* Whether quant_row makes type (false for an id out of range). */
bool quant_can_make(enum ggml_type_id type);

#endif
