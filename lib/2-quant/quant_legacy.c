/* The legacy quantizations: blocks of 32 values sharing one fp16 scale d (and, for the
 * _1 types, an fp16 offset m), as ggml's quantize_row_q{4,5}_{0,1}_ref and
 * quantize_row_q8_0_ref write them: the same float operations in the same order, and
 * ggml's casts of a float to an 8-bit integer as x86-64 computes them (quant_cvtt), so
 * that NaN, inf and huge inputs give ggml's bytes too. Under an importance matrix
 * (ggml's quantize_row_q{4,5}_{0,1}_impl, the _w functions) d (and m) come from the
 * k-quants' searches instead, each value weighted by its column's value times
 * sqrt(sigma2 + x^2), where sigma2 is the mean x^2 of the whole row: the one value a
 * block takes from outside itself. q8_0 ignores the matrix. blocks.h has each layout. */
#include "quant_impl.h"
#include "quant_search.h"
#include "quant_vec.h"

#include "blocks.h"
#include "half.h"

#include <float.h>
#include <math.h>

/* (int8_t)f as ggml's build computes it: a 32-bit truncation, then its low byte. */
static int to_int8(float f)
{
	int v = quant_cvtt(f) & 0xff;
	return v > 127 ? v - 256 : v;
}

/* (uint8_t)f likewise. */
static int to_uint8(float f)
{
	return quant_cvtt(f) & 0xff;
}

/* (int8_t)roundf(f) as ggml's build computes it: f rounded half away from zero, then
 * the low byte of the x86 conversion. Without the call to roundf: below 2^23 in
 * magnitude, f minus its truncation is its fraction exactly, and a fraction of at least
 * one half moves the truncation one away from zero; above, f is an integer already (or
 * inf or NaN, which quant_cvtt converts as x86 does). */
static int round_to_int8(float f)
{
	if (!(fabsf(f) < 8388608.0f))
		return quant_cvtt(f) & 0xff;
	int i = (int)f;
	float frac = f - (float)i;
	i += (frac >= 0.5f) - (frac <= -0.5f);
	return i & 0xff;
}

/* The value of largest magnitude among the block's 32 (the first of equal ones), signed;
 * 0 for a block of zeros. A NaN is never larger, so it is skipped. */
static float signed_absmax(const float *x)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < QK; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	return max;
}

/* The block's smallest and largest value, from FLT_MAX and -FLT_MAX (NaNs skipped). */
static void min_max(const float *x, float *minp, float *maxp)
{
	float min = FLT_MAX, max = -FLT_MAX;

	for (int j = 0; j < QK; j++) {
		if (x[j] < min)
			min = x[j];
		if (x[j] > max)
			max = x[j];
	}
	*minp = min;
	*maxp = max;
}

/* q4_0, 18 bytes:
 *
 *   0      2                         18
 *   +------+-------------------------+
 *   |  d   | qs[16]: hhhh llll       |   llll = q of value j, hhhh = of value j + 16
 *   +------+-------------------------+
 *
 * d = the largest-magnitude value / -8, so that value is q = 0 exactly and the rest
 * fall in q = 0..15 around 8: q = min(15, (int8)(x / d + 8.5)). The low nibble is
 * stored unmasked, as ggml does (it is never above 15 but for NaN or inf input). */
void quant_q4_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK, y += sizeof(struct block_q4_0)) {
		const float d = signed_absmax(x) / -8;
		const float id = d ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_q4_0, qs);

		quant_put16(y + offsetof(struct block_q4_0, d), f32_to_fp16(d));
		for (int j = 0; j < QK / 2; j++) {
			uint8_t lo = (uint8_t)quant_mini(15, to_int8(x[j] * id + 8.5f));
			uint8_t hi = (uint8_t)quant_mini(15, to_int8(x[j + QK / 2] * id + 8.5f));
			qs[j] = (uint8_t)(lo | hi << 4);
		}
	}
}

/* q4_1, 20 bytes:
 *
 *   0      2      4                         20
 *   +------+------+-------------------------+
 *   |  d   |  m   | qs[16]: hhhh llll       |   as q4_0
 *   +------+------+-------------------------+
 *
 * m = the block's minimum, d = (max - min) / 15, q = min(15, (int8)((x - m) / d + 0.5)).
 */
void quant_q4_1(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK, y += sizeof(struct block_q4_1)) {
		float min, max;
		min_max(x, &min, &max);
		const float d = (max - min) / 15;
		const float id = d ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_q4_1, qs);

		quant_put16(y + offsetof(struct block_q4_1, d), f32_to_fp16(d));
		quant_put16(y + offsetof(struct block_q4_1, m), f32_to_fp16(min));
		for (int j = 0; j < QK / 2; j++) {
			uint8_t lo = (uint8_t)quant_mini(15, to_int8((x[j] - min) * id + 0.5f));
			uint8_t hi = (uint8_t)quant_mini(15,
			                                 to_int8((x[j + QK / 2] - min) * id + 0.5f));
			qs[j] = (uint8_t)(lo | hi << 4);
		}
	}
}

/* Splits 32 5-bit quants (q[j] for value j, each 0..255 as computed, bit 4 kept) into
 * q5's nibbles and its 32-bit word of fifth bits. */
static void pack5(const uint8_t q[QK], uint8_t *qs, uint8_t *qh)
{
	uint32_t high = 0;

	for (int j = 0; j < QK / 2; j++) {
		qs[j] = (uint8_t)((q[j] & 0x0f) | (q[j + QK / 2] & 0x0f) << 4);
		high |= (uint32_t)((q[j] & 0x10u) >> 4) << j;
		high |= (uint32_t)((q[j + QK / 2] & 0x10u) >> 4) << (j + QK / 2);
	}
	quant_put32(qh, high);
}

/* q5_0, 22 bytes:
 *
 *   0      2                6                         22
 *   +------+----------------+-------------------------+
 *   |  d   | qh: 32 bits LE | qs[16]: hhhh llll       |
 *   +------+----------------+-------------------------+
 *            bit j = bit 4    low 4 bits of values j + 16 (hhhh) and j (llll)
 *            of value j
 *
 * d = the largest-magnitude value / -16, q = min(31, (int8)(x / d + 16.5)). */
void quant_q5_0(const float *x, uint8_t *y, int64_t nblocks)
{
	uint8_t q[QK];

	for (int64_t i = 0; i < nblocks; i++, x += QK, y += sizeof(struct block_q5_0)) {
		const float d = signed_absmax(x) / -16;
		const float id = d ? 1.0f / d : 0.0f;

		quant_put16(y + offsetof(struct block_q5_0, d), f32_to_fp16(d));
		for (int j = 0; j < QK; j++)
			q[j] = (uint8_t)quant_mini(31, to_int8(x[j] * id + 16.5f));
		pack5(q, y + offsetof(struct block_q5_0, qs), y + offsetof(struct block_q5_0, qh));
	}
}

/* q5_1, 24 bytes:
 *
 *   0      2      4                8                         24
 *   +------+------+----------------+-------------------------+
 *   |  d   |  m   | qh: 32 bits LE | qs[16]: hhhh llll       |   as q5_0
 *   +------+------+----------------+-------------------------+
 *
 * m = the block's minimum, d = (max - min) / 31, q = (uint8)((x - m) / d + 0.5), with
 * no clamp (ggml has none: the maximum lands on 31.5 at most, truncated to 31). */
void quant_q5_1(const float *x, uint8_t *y, int64_t nblocks)
{
	uint8_t q[QK];

	for (int64_t i = 0; i < nblocks; i++, x += QK, y += sizeof(struct block_q5_1)) {
		float min, max;
		min_max(x, &min, &max);
		const float d = (max - min) / 31;
		const float id = d ? 1.0f / d : 0.0f;

		quant_put16(y + offsetof(struct block_q5_1, d), f32_to_fp16(d));
		quant_put16(y + offsetof(struct block_q5_1, m), f32_to_fp16(min));
		for (int j = 0; j < QK; j++)
			q[j] = (uint8_t)to_uint8((x[j] - min) * id + 0.5f);
		pack5(q, y + offsetof(struct block_q5_1, qs), y + offsetof(struct block_q5_1, qh));
	}
}

/* q8_0, 34 bytes:
 *
 *   0      2                                   34
 *   +------+-----------------------------------+
 *   |  d   | qs[32]: int8, value j in qs[j]    |
 *   +------+-----------------------------------+
 *
 * d = max |x| / 127, q = roundf(x / d) (half away from zero). amax takes ggml's
 * MAX(amax, |x|), so a NaN resets it to the next value's |x|. */
void quant_q8_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK, y += sizeof(struct block_q8_0)) {
		float amax = 0.0f;
		for (int j = 0; j < QK; j++)
			amax = quant_maxf(amax, fabsf(x[j]));
		const float d = amax / 127;
		const float id = d ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_q8_0, qs);

		quant_put16(y + offsetof(struct block_q8_0, d), f32_to_fp16(d));
		for (int j = 0; j < QK; j++)
			qs[j] = (uint8_t)round_to_int8(x[j] * id);
	}
}

/* The weights ggml's quantize_row_q{4,5}_{0,1}_impl give the 32 values x of a block
 * under the matrix's qw: qw * sqrt(sigma2 + x^2), sigma2 the row's (quant_row_prepare). */
static void legacy_weights(const float *x, const float *qw, float sigma2, float w[QK])
{
	for (int j = 0; j < QK; j++)
		w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* q4_0 under a matrix (ggml's quantize_row_q4_0_impl): d from make_qx_quants (nmax 8)
 * under legacy_weights, the quants its search found (0..15, no second rounding
 * against the fp16 d). qw NULL: quant_q4_0. */
void quant_q4_0_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	float w[QK];
	int8_t L[QK];

	if (!qw) {
		quant_q4_0(x, y, nblocks);
		return;
	}
	for (int64_t i = 0; i < nblocks; i++, x += QK, qw += QK, y += sizeof(struct block_q4_0)) {
		legacy_weights(x, qw, row_sigma2, w);
		const float d = quant_make_qx(QK, 8, x, w, L);
		uint8_t *qs = y + offsetof(struct block_q4_0, qs);
		quant_put16(y + offsetof(struct block_q4_0, d), f32_to_fp16(d));
		for (int j = 0; j < QK / 2; j++)
			qs[j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
	}
}

/* q5_0 under a matrix: as q4_0's, make_qx_quants with nmax 16 (quants 0..31). */
void quant_q5_0_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	float w[QK];
	int8_t L[QK];
	uint8_t q[QK];

	if (!qw) {
		quant_q5_0(x, y, nblocks);
		return;
	}
	for (int64_t i = 0; i < nblocks; i++, x += QK, qw += QK, y += sizeof(struct block_q5_0)) {
		legacy_weights(x, qw, row_sigma2, w);
		const float d = quant_make_qx(QK, 16, x, w, L);
		quant_put16(y + offsetof(struct block_q5_0, d), f32_to_fp16(d));
		for (int j = 0; j < QK; j++)
			q[j] = (uint8_t)L[j];
		pack5(q, y + offsetof(struct block_q5_0, qs), y + offsetof(struct block_q5_0, qh));
	}
}

/* What q4_1 and q5_1 share under a matrix (ggml's quantize_row_q{4,5}_1_impl): d and
 * the minimum m from make_qkx3_quants (rmin -0.9, 36 steps of 0.05) under
 * legacy_weights, four blocks at a time (the searches run side by side; a run's last
 * lanes repeat its last block and are dropped); the quants (0..nmax) go to put, with
 * d and m, block by block. */
static void legacy_1_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                       float sigma2, int nmax, size_t block_bytes,
                       void (*put)(uint8_t *y, float d, float m, const uint8_t *L))
{
	float xb[QK_LANES * QK], wb[QK_LANES * QK], d[QK_LANES], the_min[QK_LANES];
	uint8_t L[QK_LANES * QK];

	for (int64_t i = 0; i < nblocks; i += QK_LANES) {
		const int64_t m = nblocks - i < QK_LANES ? nblocks - i : QK_LANES;
		for (int k = 0; k < QK_LANES; k++) {
			const int64_t b = i + (k < m ? k : m - 1);
			memcpy(xb + k * QK, x + b * QK, sizeof(float) * QK);
			legacy_weights(x + b * QK, qw + b * QK, sigma2, wb + k * QK);
		}
		quant_make_qkx(QK, nmax, xb, wb, L, d, the_min, -0.9f, 0.05f, 36, false);
		for (int k = 0; k < m; k++)
			put(y + (size_t)(i + k) * block_bytes, d[k], -the_min[k], L + k * QK);
	}
}

/* q4_1's block from d, m and its 32 quants (0..15). */
static void put_q4_1(uint8_t *y, float d, float m, const uint8_t *L)
{
	uint8_t *qs = y + offsetof(struct block_q4_1, qs);

	quant_put16(y + offsetof(struct block_q4_1, d), f32_to_fp16(d));
	quant_put16(y + offsetof(struct block_q4_1, m), f32_to_fp16(m));
	for (int j = 0; j < QK / 2; j++)
		qs[j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
}

/* q5_1's block from d, m and its 32 quants (0..31). */
static void put_q5_1(uint8_t *y, float d, float m, const uint8_t *L)
{
	quant_put16(y + offsetof(struct block_q5_1, d), f32_to_fp16(d));
	quant_put16(y + offsetof(struct block_q5_1, m), f32_to_fp16(m));
	pack5(L, y + offsetof(struct block_q5_1, qs), y + offsetof(struct block_q5_1, qh));
}

/* q4_1 under a matrix (legacy_1_w, nmax 15). qw NULL: quant_q4_1. */
void quant_q4_1_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	if (!qw)
		quant_q4_1(x, y, nblocks);
	else
		legacy_1_w(x, y, nblocks, qw, row_sigma2, 15, sizeof(struct block_q4_1), put_q4_1);
}

/* q5_1 under a matrix (legacy_1_w, nmax 31). qw NULL: quant_q5_1. */
void quant_q5_1_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	if (!qw)
		quant_q5_1(x, y, nblocks);
	else
		legacy_1_w(x, y, nblocks, qw, row_sigma2, 31, sizeof(struct block_q5_1), put_q5_1);
}
