/* A tensor's values quantized to another type, any byte range of them: what
 * llama_model_quantize() writes for a tensor it converts (quants/NAME.gguf), made from
 * only the blocks the range touches. The values are the tensor's float32 values as the
 * reader gives them (reader_f32: fp16, bf16 and quantized blocks dequantized as ggml
 * does), quantized by lib/2-quant (quant_row: ggml's reference quantizers, no
 * importance matrix). Every block of the new type depends on its own values only, so
 * a range needs nothing else. */
#ifndef GGUFS_READER_QUANT_H
#define GGUFS_READER_QUANT_H

#include <stdint.h>

#include "model.h"

/* Writes bytes [off, off + len) of tensor i's values quantized as type (its bytes:
 * n_elements / block x block bytes; t->ne[0] a multiple of the block) into buf: only
 * those blocks are read, dequantized and quantized, a bounded number at a time. 0,
 * -EIO (the source's bytes could not be read), -EINVAL (a type quant_row does not
 * make, a range outside, a tensor without a dequantizer) or -ENOMEM. Thread-safe. */
int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t type, uint64_t off,
                 uint64_t len, void *buf);

#endif
