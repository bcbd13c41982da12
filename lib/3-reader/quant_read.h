/* A tensor's bytes as llama.cpp's quantizer would store them in another ggml type: the
 * tensor data of a quantized file (quants/NAME.gguf), computed for the blocks a range
 * touches only.
 *
 * Stored as type `to`, a tensor of n elements is n / to's block_elems blocks laid one
 * after another, rows after rows (each row a whole number of blocks), so byte off of it
 * lies in block off / block_bytes, made from the source's float values of that block
 * only:
 *
 *   quantized bytes:  | block 0 | block 1 | ... | block b | ...
 *   source values:    [0, E)    [E, 2E)         [bE, (b+1)E)       E = block_elems
 *
 * The values come through reader_f32 (dequantized as ggml dequantizes, fp16 and bf16
 * widened exactly), so a fault of the source gives -EIO here as it does there, and no
 * block is ever made from bytes that were not read.
 *
 * llama.cpp's quantizer checks every tensor it reads and every block it writes
 * (ggml_validate_row_data, block_check.h) and writes no file when one fails, so there
 * are no bytes to match for such a block: a block whose values hold a NaN or infinity,
 * or whose scale comes out infinite, and a copied block that the check refuses, give
 * -EIO, said once per tensor and type in the event log. */
#ifndef GGUFS_QUANT_READ_H
#define GGUFS_QUANT_READ_H

#include <stdint.h>

#include "imatrix_file.h"
#include "model.h"

/* Bytes tensor i takes stored as type to: 0 when to cannot store it (no block layout,
 * or a row length ne0 that is not a whole number of its blocks). */
uint64_t reader_quant_size(const struct ggufs_model *m, uint64_t i, uint32_t to);

/* Writes bytes [off, off + len) of tensor i stored as type to (all of them inside
 * reader_quant_size) into buf. When to is the tensor's own type these are its stored
 * bytes (llama.cpp copies a tensor it does not convert); otherwise the tensor must have
 * a dequantizer (has_f32) and to a quantizer (quant_can_make). Memory of a read is a
 * few hundred kilobytes whatever the range. 0, or -EIO (the source's bytes could not be
 * read: why as the source said it, NULL when not wanted; or a block of the range is one
 * llama.cpp refuses, said in the event log), -EINVAL (a type or range this cannot
 * make), -ENOMEM. Thread-safe. */
int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t off,
                 uint64_t len, void *buf, char why[GGUF_ERR_MAX]);

/* The same under an importance matrix: tensor i quantized with the weights of entry w
 * of im (its ne[0] x ne[2] values: row r of the tensor takes those of its expert, r /
 * ne[1]), as llama_model_quantize does given the matrix; w NULL: without weights, as
 * reader_quant. q4_0, q4_1, q5_0 and q5_1 under a matrix take a value of the whole row
 * (quant.h), so a read of part of such a row reads all of it. Errors as reader_quant's;
 * -EINVAL also for a w of another size or a type that needs weights without them. */
int reader_quant_weighted(const struct ggufs_model *m, uint64_t i, uint32_t to,
                          const struct imatrix *im, const struct imatrix_entry *w,
                          uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX]);

#endif
