/* The quantizers: float32 values into the blocks of a ggml type, byte for byte as
 * llama.cpp writes them: without an importance matrix (quant_row) as its reference
 * quantizers (ggml-quants.c's quantize_row_*_ref and the fp16 and bf16 conversions of
 * ggml.c) do, which is what llama_model_quantize() does without one
 * (ggml_quantize_chunk with imatrix NULL), and with one (quant_row_weighted and the
 * functions below it). Without a matrix every block depends on its own block_elems
 * values only, so any run of whole blocks can be quantized alone and in any order.
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

/* Under an importance matrix: what llama_model_quantize() writes given one, which is
 * ggml_quantize_chunk(type, x, y, 0, nrows, n_per_row, imatrix) with imatrix the
 * matrix's n_per_row values for the tensor (its columns; the same for every row of a
 * tensor, of an expert's rows in a stack of experts). The matrix changes the k-quants,
 * the legacy q4_0 .. q5_1, iq4_nl, iq4_xs and iq3_s; it makes the types that cannot be
 * made without one (iq2_xxs, iq2_xs, iq1_s) and those llama-quantize makes only with
 * one (iq2_s, iq3_xxs, iq1_m, which ggml also quantizes without: weights NULL gives
 * those bytes); ggml ignores it for q8_0, mxfp4, tq1_0, tq2_0, q1_0, q2_0 and the
 * float types, and so does this (their bytes are quant_row's).
 *
 * Every block of a k- or i-quant depends on its own values and their matrix columns
 * only. q4_0, q4_1, q5_0 and q5_1 under a matrix also take one value of their whole
 * row (ggml's sigma2: the sum of x^2 over the row, in order, over its length), so a
 * part of a row is quantized in two steps: quant_row_prepare once for the row, then
 * quant_blocks_weighted for any run of its whole blocks, in any order, at any time,
 * on any thread (the prepared state is plain data: keep it, copy it).
 *
 * NaN and inf inputs: as quant_row's (the blocks llama.cpp's check refuses aside),
 * with one more case that no file holds. Where llama.cpp's quantizer of an i-quant
 * stops the process instead of writing (an assertion: a sub-block scale that comes out
 * NaN, or a group whose every weighted distance to the grid rows is NaN or overflows,
 * which NaN or inf input, or values and matrix entries large enough that a squared
 * distance overflows, bring about) there are no bytes to match, and where it reads
 * past its arrays on the way (iq1's fallback scan of the whole grid, iq2_xxs's map at
 * a point off its range) none to trust: these write bytes anyway, the same every
 * time, never crash (a neighbour list's first row, row 0 for a group off the grid).
 * And under a matrix one NaN reaches the weights of its whole super-block (row, for
 * the legacy types), so NaNs meet NaNs; x86 keeps the first operand's, which is the
 * compiler's pick, not the same in every unrolled copy of ggml's loops, so a block
 * whose bytes show a NaN's payload (its scales 0 or NaN: it decodes to zeros, or is
 * refused) may differ from ggml's in those bits. */

/* The state of one row for quant_blocks_weighted, made by quant_row_prepare. */
struct quant_row_ctx {
	uint32_t type;          /* the type it was prepared for */
	int64_t n_per_row;      /* the row's length in values */
	bool weighted;          /* prepared for a matrix (weights given) */
	float sigma2;           /* q4_0 .. q5_1 under a matrix: the row's value; else 0 */
};

/* Whether quant_row_weighted makes type (false for an id out of range). */
bool quant_can_make_weighted(enum ggml_type_id type);

/* Whether type cannot be made without a matrix (weights NULL is refused): iq2_xxs,
 * iq2_xs and iq1_s, as ggml_quantize_requires_imatrix says. */
bool quant_requires_weights(enum ggml_type_id type);

/* Whether quant_row_prepare of type needs the whole row's values: true for q4_0,
 * q4_1, q5_0 and q5_1 under a matrix (weighted), false otherwise. */
bool quant_row_needs_values(enum ggml_type_id type, bool weighted);

/* Quantizes one row of n values x (n a multiple of the type's block size) into y, as
 * ggml_quantize_chunk does with the matrix weights (n values, the row's columns), or
 * without one where weights is NULL: y receives n / block * block_bytes bytes, at any
 * alignment. x, weights and y must not overlap; none is kept. Returns 0, or -EINVAL
 * for a type quant_can_make_weighted refuses, weights NULL for a type that requires
 * them, or an n that is negative or not whole blocks (nothing is written then).
 * Thread-safe: the grids that the i-quants search are built once, on first use. */
int quant_row_weighted(enum ggml_type_id type, const float *x, void *y, int64_t n,
                       const float *weights);

/* Prepares *ctx for quantizing parts of one row of type, of n_per_row values (whole
 * blocks), under the matrix (weights non-NULL; only whether it is NULL matters here,
 * the matrix's values are not read) or without one: x_row, the row's values, is read
 * where quant_row_needs_values says so and may be NULL elsewhere. Returns 0, or
 * -EINVAL as quant_row_weighted refuses, or for x_row NULL where it is needed (*ctx
 * is then unset). */
int quant_row_prepare(enum ggml_type_id type, const float *x_row, int64_t n_per_row,
                      const float *weights, struct quant_row_ctx *ctx);

/* Quantizes a run of n values x of a row prepared in ctx (whole blocks, starting at a
 * block boundary of the row) into y, under the matrix's values for those n columns
 * (weights: the row's weights plus the run's offset in the row), or none where the row
 * was prepared without: the same bytes as that part of quant_row_weighted's output for
 * the whole row. Returns 0, or -EINVAL for a type other than ctx's, weights NULL or not
 * against how ctx was prepared, or an n that is negative, not whole blocks or longer
 * than the row (nothing is written then). Thread-safe. */
int quant_blocks_weighted(enum ggml_type_id type, const float *x, void *y, int64_t n,
                          const float *weights, const struct quant_row_ctx *ctx);

#endif
