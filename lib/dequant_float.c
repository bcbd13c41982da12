/* Plain element types: every "block" is one element, stored little-endian as GGUF
 * stores everything. The integer types and f64 become the float nearest their value,
 * as a C conversion would give it. */
#include "dequant.h"

#include <string.h>

#include "gguf.h"

/* f32 is copied by its bit pattern so that NaN payloads survive untouched. */
static void dequant_f32(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 4) {
		uint32_t bits = gguf_le32(p);
		memcpy(&dst[i], &bits, sizeof bits);
	}
}

/* f16: IEEE binary16, s eeeee mmmmmmmmmm. */
static void dequant_f16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = fp16_to_f32(gguf_le16(p));
}

/* bf16: the top 16 bits of a binary32, s eeeeeeee mmmmmmm. */
static void dequant_bf16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = bf16_to_f32(gguf_le16(p));
}

/* f64 rounded to the nearest float; out of range becomes inf, NaN stays NaN. */
static void dequant_f64(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 8) {
		uint64_t bits = gguf_le64(p);
		double v;
		memcpy(&v, &bits, sizeof v);
		dst[i] = (float)v;
	}
}

/* i8: two's complement byte to its value. */
static void dequant_i8(const void *src, float *dst, uint64_t nblocks)
{
	const int8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++)
		dst[i] = (float)p[i];
}

/* i16: two's complement to its value (exact). */
static void dequant_i16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = (float)(int16_t)gguf_le16(p);
}

/* i32: two's complement to the nearest float (rounds beyond 2^24). */
static void dequant_i32(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 4)
		dst[i] = (float)(int32_t)gguf_le32(p);
}

/* i64: two's complement to the nearest float (rounds beyond 2^24). */
static void dequant_i64(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 8)
		dst[i] = (float)(int64_t)gguf_le64(p);
}

const struct dequant_impl dequant_float_impls[] = {
	{ GGML_TYPE_F32, 1, sizeof(float), dequant_f32 },
	{ GGML_TYPE_F16, 1, sizeof(uint16_t), dequant_f16 },
	{ GGML_TYPE_BF16, 1, sizeof(uint16_t), dequant_bf16 },
	{ GGML_TYPE_F64, 1, sizeof(double), dequant_f64 },
	{ GGML_TYPE_I8, 1, sizeof(int8_t), dequant_i8 },
	{ GGML_TYPE_I16, 1, sizeof(int16_t), dequant_i16 },
	{ GGML_TYPE_I32, 1, sizeof(int32_t), dequant_i32 },
	{ GGML_TYPE_I64, 1, sizeof(int64_t), dequant_i64 },
	{ 0, 0, 0, NULL },
};
