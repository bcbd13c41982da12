/* The original ggml quantizations: blocks of 32 weights sharing one fp16 scale d
 * (and, for the _1 types, an fp16 offset m). Multi-byte fields are little-endian and
 * blocks sit at any alignment, so fields are read from bytes at their offsetof, never
 * through a struct pointer. The float operations are ggml's, in ggml's order, so that
 * NaN, inf and subnormal scales come out as ggml's dequantize_row_* makes them (NaN
 * for NaN; which NaN is this code's, and dequant_x86.c gives the same bits). */
#include "dequant.h"
#include "dequant_scalar.h"
#include "blocks.h"

#include "gguf.h"

#include <math.h>

/* The scale a _1 block is decoded with: d, or 0 when m is a NaN. Every value is then
 * NaN either way, but q * d + m with both a NaN d and a NaN m would come out as whichever
 * NaN the compiler put first in the add, which it may put either way round (an add
 * commutes but for NaN payloads), so that another build or the SIMD code could give
 * other bits. With d = 0 only m is a NaN: every value is m's NaN, on every compiler. */
static float affine_scale(float d, float m)
{
	return isnan(m) ? 0.0f : d;
}

/* Unpacks the 32 unsigned quants of a 4- or 5-bit block; qh is NULL for 4 bits. */
static void unpack_nibbles(const uint8_t *qs, const uint8_t *qh, int q[QK])
{
	uint32_t high = qh ? gguf_le32(qh) : 0;

	for (int j = 0; j < QK / 2; j++) {
		q[j] = (qs[j] & 0x0f) | ((high >> j) & 1) << 4;
		q[j + QK / 2] = (qs[j] >> 4) | ((high >> (j + QK / 2)) & 1) << 4;
	}
}

/* q4_0 blocks to floats: (q - 8) * d. */
void dequant_q4_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q4_0), dst += QK) {
		float d = half_at(FIELD(blk, block_q4_0, d));
		unpack_nibbles(FIELD(blk, block_q4_0, qs), NULL, q);
		for (int j = 0; j < QK; j++)
			dst[j] = (float)(q[j] - 8) * d;
	}
}

/* q4_1 blocks to floats: q * d + m. */
void dequant_q4_1(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q4_1), dst += QK) {
		float m = half_at(FIELD(blk, block_q4_1, m));
		float d = affine_scale(half_at(FIELD(blk, block_q4_1, d)), m);
		unpack_nibbles(FIELD(blk, block_q4_1, qs), NULL, q);
		for (int j = 0; j < QK; j++)
			dst[j] = (float)q[j] * d + m;
	}
}

/* q5_0 blocks to floats: (q - 16) * d. */
void dequant_q5_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q5_0), dst += QK) {
		float d = half_at(FIELD(blk, block_q5_0, d));
		unpack_nibbles(FIELD(blk, block_q5_0, qs), FIELD(blk, block_q5_0, qh), q);
		for (int j = 0; j < QK; j++)
			dst[j] = (float)(q[j] - 16) * d;
	}
}

/* q5_1 blocks to floats: q * d + m. */
void dequant_q5_1(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q5_1), dst += QK) {
		float m = half_at(FIELD(blk, block_q5_1, m));
		float d = affine_scale(half_at(FIELD(blk, block_q5_1, d)), m);
		unpack_nibbles(FIELD(blk, block_q5_1, qs), FIELD(blk, block_q5_1, qh), q);
		for (int j = 0; j < QK; j++)
			dst[j] = (float)q[j] * d + m;
	}
}

/* q8_0 blocks to floats: q * d. */
void dequant_q8_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q8_0), dst += QK) {
		float d = half_at(FIELD(blk, block_q8_0, d));
		const int8_t *qs = (const int8_t *)FIELD(blk, block_q8_0, qs);
		for (int j = 0; j < QK; j++)
			dst[j] = (float)qs[j] * d;
	}
}
