/* The k-quants: super-blocks of QK_K = 256 weights cut into sub-blocks of 16 or 32,
 * each sub-block with its own small integer scale (and min), which one or two fp16
 * super-block scales bring back to floats. Multi-byte fields are little-endian and
 * blocks sit at any alignment, so fields are read from bytes at their offsetof, never
 * through a struct pointer. The float operations are ggml's, in ggml's order (scale
 * times sub-block scale first, then times the quant), so that NaN, inf and subnormal
 * super-block scales come out as ggml's dequantize_row_* makes them. */
#include "dequant.h"
#include "dequant_scalar.h"
#include "blocks.h"

#include "gguf.h"

/* The 256 2-bit planes of q2_K and q3_K, in weight order. */
static void unpack_2bit(const uint8_t *qs, int q[QK_K])
{
	for (int h = 0; h < 2; h++)
		for (int plane = 0; plane < 4; plane++)
			for (int l = 0; l < 32; l++)
				*q++ = qs[32 * h + l] >> (2 * plane) & 3;
}

/* The 256 quants of q4_K, or of q5_K when qh supplies their fifth bits. */
static void unpack_4bit(const uint8_t *qs, const uint8_t *qh, int q[QK_K])
{
	for (int s = 0; s < 8; s++)
		for (int l = 0; l < 32; l++) {
			int low = qs[32 * (s / 2) + l] >> (4 * (s % 2)) & 0x0f;
			int high = qh ? (qh[l] >> s & 1) << 4 : 0;
			*q++ = low | high;
		}
}

/* q3_K's 16 sub-block scales, unbiased to -32..31. */
static void unpack_q3_scales(const uint8_t *s, int sc[16])
{
	for (int j = 0; j < 16; j++) {
		int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
		int high = s[8 + j % 4] >> (2 * (j / 4)) & 3;
		sc[j] = (low | high << 4) - 32;
	}
}

/* q4_K and q5_K share everything past the quants: w = (d * sc) * q - (dmin * m). */
static void scale_k4(const uint8_t *scales, float d, float dmin, const int q[QK_K], float *dst)
{
	for (int s = 0; s < 8; s++) {
		uint8_t sc, m;
		k4_scale_min(scales, s, &sc, &m);
		float ds = d * (float)sc;
		float ms = dmin * (float)m;
		for (int l = 0; l < 32; l++)
			dst[32 * s + l] = ds * (float)q[32 * s + l] - ms;
	}
}

/* q2_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 16. */
void dequant_q2_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q2_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q2_K, d));
		float dmin = half_at(FIELD(blk, block_q2_K, dmin));
		const uint8_t *scales = FIELD(blk, block_q2_K, scales);

		unpack_2bit(FIELD(blk, block_q2_K, qs), q);
		for (int s = 0; s < 16; s++) {
			float ds = d * (float)(scales[s] & 0x0f);
			float ms = dmin * (float)(scales[s] >> 4);
			for (int l = 0; l < 16; l++)
				dst[16 * s + l] = ds * (float)q[16 * s + l] - ms;
		}
	}
}

/* q3_K super-blocks to floats: (d * (scale - 32)) * (q - 4) per sub-block of 16. */
void dequant_q3_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K], sc[16];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q3_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q3_K, d));
		const uint8_t *hmask = FIELD(blk, block_q3_K, hmask);

		unpack_2bit(FIELD(blk, block_q3_K, qs), q);
		for (int n = 0; n < QK_K; n++)
			q[n] |= (hmask[n % 32] >> (n / 32) & 1) << 2;
		unpack_q3_scales(FIELD(blk, block_q3_K, scales), sc);
		for (int s = 0; s < 16; s++) {
			float ds = d * (float)sc[s];
			for (int l = 0; l < 16; l++)
				dst[16 * s + l] = ds * (float)(q[16 * s + l] - 4);
		}
	}
}

/* q4_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 32. */
void dequant_q4_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q4_K), dst += QK_K) {
		unpack_4bit(FIELD(blk, block_q4_K, qs), NULL, q);
		scale_k4(FIELD(blk, block_q4_K, scales), half_at(FIELD(blk, block_q4_K, d)),
		         half_at(FIELD(blk, block_q4_K, dmin)), q, dst);
	}
}

/* q5_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 32. */
void dequant_q5_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q5_K), dst += QK_K) {
		unpack_4bit(FIELD(blk, block_q5_K, qs), FIELD(blk, block_q5_K, qh), q);
		scale_k4(FIELD(blk, block_q5_K, scales), half_at(FIELD(blk, block_q5_K, d)),
		         half_at(FIELD(blk, block_q5_K, dmin)), q, dst);
	}
}

/* q6_K super-blocks to floats: (d * scale) * (q - 32) per sub-block of 16. */
void dequant_q6_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q6_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q6_K, d));
		const uint8_t *ql = FIELD(blk, block_q6_K, ql);
		const uint8_t *qh = FIELD(blk, block_q6_K, qh);
		const int8_t *scales = (const int8_t *)FIELD(blk, block_q6_K, scales);

		for (int h = 0; h < 2; h++)
			for (int k = 0; k < 4; k++)
				for (int l = 0; l < 32; l++) {
					int n = 128 * h + 32 * k + l;
					int low = ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2)) & 0x0f;
					int high = qh[32 * h + l] >> (2 * k) & 3;
					int q = (low | high << 4) - 32;
					dst[n] = d * (float)scales[n / 16] * (float)q;
				}
	}
}
