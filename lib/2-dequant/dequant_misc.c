/* The ternary types (tq1_0 tq2_0), the FP4 microscaling types (mxfp4 nvfp4) and the
 * plain 1- and 2-bit types (q1_0 q2_0).
 *
 * Each function follows the float operation order of ggml's dequantize_row_* so that its
 * output is the same bit for bit, NaN and infinite scales included. Blocks are copied out
 * of src with memcpy (src may be unaligned) and fp16 fields read as little-endian bytes. */
#include "dequant.h"
#include "dequant_scalar.h"
#include "blocks.h"
#include "ggml_tables.h"

#include <math.h>
#include <string.h>

/* count * ntrits values: trit n of every byte of q, for n = 0, 1, ... */
static float *put_trits(float *y, const uint8_t *q, int count, int ntrits, float d)
{
	static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
	for (int n = 0; n < ntrits; n++) {
		for (int m = 0; m < count; m++) {
			const uint8_t rest = (uint8_t)(q[m] * pow3[n]);
			const int trit = (rest * 3) >> 8;
			*y++ = (float)(trit - 1) * d;
		}
	}
	return y;
}

/* Decodes nblocks tq1_0 blocks into 256 floats each. */
void dequant_tq1_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_tq1_0)) {
		struct block_tq1_0 b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
		dst = put_trits(dst, b.qs, 32, 5, d);
		dst = put_trits(dst, b.qs + 32, 16, 5, d);
		dst = put_trits(dst, b.qh, 4, 4, d);
	}
}

/* Decodes nblocks tq2_0 blocks into 256 floats each. */
void dequant_tq2_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_tq2_0)) {
		struct block_tq2_0 b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
		for (int run = 0; run < 64; run += 32)
			for (int shift = 0; shift < 8; shift += 2)
				for (int m = 0; m < 32; m++)
					*dst++ = (float)(((b.qs[run + m] >> shift) & 3) - 1) * d;
	}
}

/* 2n FP4 (E2M1) values from n bytes: low nibbles to y[0..n), high to y[n..2n).
 * kvalues_fp4 holds twice the E2M1 values (0 0.5 1 1.5 2 3 4 6, then negated) so that
 * they are integers; the scale decoders below halve the scale to make up for it. */
static void put_fp4(float *y, float d, const uint8_t *qs, int n)
{
	for (int j = 0; j < n; j++) {
		y[j] = kvalues_fp4[qs[j] & 0xf] * d;
		y[j + n] = kvalues_fp4[qs[j] >> 4] * d;
	}
}

/* Half an E8M0 scale, 2^(e - 128): from 2^-128 (subnormal) up to 2^127, never inf/NaN. */
static float e8m0_half(uint8_t e)
{
	return ldexpf(1.0f, (int)e - 128);
}

/* Decodes nblocks mxfp4 blocks into 32 floats each. */
void dequant_mxfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_mxfp4), dst += QK_MXFP4) {
		struct block_mxfp4 b;
		memcpy(&b, p, sizeof b);
		put_fp4(dst, e8m0_half(b.e), b.qs, 16);
	}
}

/* Decodes nblocks nvfp4 blocks into 64 floats each. */
void dequant_nvfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_nvfp4)) {
		struct block_nvfp4 b;
		memcpy(&b, p, sizeof b);
		for (int s = 0; s < 4; s++, dst += 16)
			put_fp4(dst, ue4m3_half(b.d[s]), b.qs + 8 * s, 8);
	}
}

/* Decodes nblocks q1_0 blocks into 128 floats each. */
void dequant_q1_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q1_0), dst += QK1_0) {
		struct block_q1_0 b;
		memcpy(&b, p, sizeof b);
		/* picked by lookup, not by branch: the bits are data (0.8 -> 8.0 GB/s) */
		const float d = half_at(&b.d), value[2] = { -d, d };
		for (int j = 0; j < QK1_0; j++)
			dst[j] = value[(b.qs[j / 8] >> (j % 8)) & 1];
	}
}

/* Decodes nblocks q2_0 blocks into 64 floats each. */
void dequant_q2_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q2_0), dst += QK2_0) {
		struct block_q2_0 b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
		for (int j = 0; j < QK2_0; j++)
			dst[j] = (float)(((b.qs[j / 4] >> 2 * (j % 4)) & 3) - 1) * d;
	}
}
