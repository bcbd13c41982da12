/* Plain element types: every "block" is one element, stored little-endian as GGUF
 * stores everything. The integer types and f64 become the float nearest their value,
 * as a C conversion would give it. */
#include "dequant.h"
#include "dequant_scalar.h"

#include <string.h>

#include "gguf.h"

/* f32 is copied by its bit pattern so that NaN payloads survive untouched. */
void dequant_f32(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 4) {
		uint32_t bits = gguf_le32(p);
		memcpy(&dst[i], &bits, sizeof bits);
	}
}

/* f16: IEEE binary16, s eeeee mmmmmmmmmm. */
void dequant_f16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = fp16_to_f32(gguf_le16(p));
}

/* bf16: the top 16 bits of a binary32, s eeeeeeee mmmmmmm. */
void dequant_bf16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = bf16_to_f32(gguf_le16(p));
}

/* f64 rounded to the nearest float; out of range becomes inf, NaN stays NaN. */
void dequant_f64(const void *src, float *dst, uint64_t nblocks)
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
void dequant_i8(const void *src, float *dst, uint64_t nblocks)
{
	const int8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++)
		dst[i] = (float)p[i];
}

/* i16: two's complement to its value (exact). */
void dequant_i16(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 2)
		dst[i] = (float)(int16_t)gguf_le16(p);
}

/* i32: two's complement to the nearest float (rounds beyond 2^24). */
void dequant_i32(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 4)
		dst[i] = (float)(int32_t)gguf_le32(p);
}

/* i64: two's complement to the nearest float (rounds beyond 2^24). */
void dequant_i64(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;

	for (uint64_t i = 0; i < nblocks; i++, p += 8)
		dst[i] = (float)(int64_t)gguf_le64(p);
}
