/* The plain float types as quantizations (ggml_quantize_chunk's F32, F16 and BF16
 * cases): a block is one value, stored little-endian. f16 and bf16 round as ggml's
 * conversions do (half.h). */
#include "quant_impl.h"

#include "half.h"

/* f32: the values' bits unchanged (NaN payloads included). */
void quant_f32(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof u);
		quant_put32(y + 4 * i, u);
	}
}

/* f16: ggml_fp32_to_fp16_row, one GGML_FP32_TO_FP16 a value. */
void quant_f16(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++)
		quant_put16(y + 2 * i, f32_to_fp16(x[i]));
}

/* bf16: ggml_fp32_to_bf16_row_ref (the portable one, never the AVX512-BF16 path, which
 * would flush subnormals), one ggml_compute_fp32_to_bf16 a value. */
void quant_bf16(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++)
		quant_put16(y + 2 * i, f32_to_bf16(x[i]));
}
