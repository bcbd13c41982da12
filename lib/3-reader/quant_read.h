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

/* What weighted reads of one tensor under its matrix entry keep between them (a quants/
 * file's converted tensor, read a block at a time by many reads on any thread, as one
 * type or another): every expert's weights, made from the entry once (not an expert per
 * read), and for q4_0, q4_1, q5_0 and q5_1 each row's value of the whole row (quant.h's
 * quant_row_ctx.sigma2), made by the first read that touches the row and kept, so that
 * a read of part of such a row reads the rest of it once, not at every read. A row
 * with a NaN or infinity keeps nothing (its reads refuse as reader_quant_weighted's). */
struct quant_prep;

/* The state for reads of tensor i under entry w of im into *out: 0, or -EINVAL (no
 * matrix or entry, or an entry of another size than ne[0] x ne[2]), -ENOMEM. Its
 * memory: the entry's weights, and 4 bytes a row for each of the four types above
 * read. m, im and w outlive it. */
int reader_quant_prep_new(const struct ggufs_model *m, uint64_t i, const struct imatrix *im,
                          const struct imatrix_entry *w, struct quant_prep **out);
void reader_quant_prep_free(struct quant_prep *p);
/* The bytes p holds. */
uint64_t reader_quant_prep_bytes(const struct quant_prep *p);

/* reader_quant_weighted(m, i, to, im, w, off, len, buf, why) of p's tensor and entry,
 * with what p keeps: the same bytes and errors. Thread-safe, p shared among threads. */
int reader_quant_prepared(struct quant_prep *p, uint32_t to, uint64_t off, uint64_t len,
                          void *buf, char why[GGUF_ERR_MAX]);

#endif
