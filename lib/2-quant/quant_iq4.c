/* The non-linear 4-bit quantizations, iq4_nl (blocks of 32) and iq4_xs (256 in
 * sub-blocks of 32 with 6-bit scales), as ggml_quantize_chunk makes them without an
 * importance matrix: quantize_iq4_nl and quantize_iq4_xs, which run
 * quantize_row_iq4_nl_impl with ntry = 7, a search over 15 trial scales. That is not
 * quantize_row_iq4_nl_ref (ntry = -1, no search): llama_model_quantize() goes through
 * ggml_quantize_chunk, so its bytes are the search's. A value's weight is its square.
 * The same float operations in the same order as ggml, so the same bytes for any
 * input; blocks.h draws both layouts. */
#include "quant_impl.h"

#include "blocks.h"
#include "ggml_tables.h"
#include "half.h"

#include <math.h>

/* ggml's GROUP_MAX_EPS: a sub-block whose largest magnitude is below it gets scale 0. */
#define IQ4_EPS 1e-15f

/* How far the trial scales go either side of the first one (ggml's ntry). */
#define IQ4_NTRY 7

/* The index of the level of kvalues_iq4nl nearest to v, as ggml's best_index_int8
 * finds it: 0 at or below the first level, 15 at or above the last (and for NaN, where
 * its bisection ends), else the lower of the two levels around v where
 * v - lower < upper - v in floats, the upper one otherwise (a tie goes up). The
 * bisection's upper bound is the count of levels <= v, which is counted here instead,
 * without branches: the same index, several times faster on values that take turns. */
static int iq4_nearest(float v)
{
	const int8_t *kv = kvalues_iq4nl;

	if (v <= kv[0])
		return 0;
	if (!(v < kv[15]))
		return 15;
	int hi = 1;
	for (int m = 1; m < 15; m++)
		hi += kv[m] <= v;
	return v - kv[hi - 1] < kv[hi] - v ? hi - 1 : hi;
}

/* The levels (as floats) nearest to id * x[j] for the 32 values of a sub-block, the
 * same as kvalues_iq4nl[iq4_nearest(id * x[j])] but for all 32 at once, in loops the
 * compiler vectorizes: the level at or below v and the one above it are found by
 * selecting through the sorted levels, then the same comparison picks one. */
static void iq4_levels32(const float *x, float id, float q[32])
{
	const int8_t *kv = kvalues_iq4nl;
	const float first = kv[0], last = kv[15];
	float v[32], below[32], above[32];

	for (int j = 0; j < 32; j++) {
		v[j] = id * x[j];
		below[j] = first;
		above[j] = last;
	}
	for (int m = 1; m < 15; m++) {
		const float level = kv[m];
		for (int j = 0; j < 32; j++)
			below[j] = level <= v[j] ? level : below[j];
	}
	for (int m = 14; m > 0; m--) {
		const float level = kv[m];
		for (int j = 0; j < 32; j++)
			above[j] = level > v[j] ? level : above[j];
	}
	for (int j = 0; j < 32; j++) {
		float l = v[j] - below[j] < above[j] - v[j] ? below[j] : above[j];
		l = v[j] <= first ? first : l;
		q[j] = v[j] < last ? l : last;      /* and for NaN */
	}
}

/* The sums of the weighted least-squares fit of x (32 values, weights w) to the levels
 * chosen at inverse scale id: sum w q x and sum w q q, accumulated in order as ggml
 * does ((w * q) * x, then (w * q) * q); the products are made first, all at once. */
static void iq4_sums(const float *x, const float *w, float id, float *sumqx, float *sumq2)
{
	float q[32], pqx[32], pq2[32];
	float sqx = 0.0f, sq2 = 0.0f;

	iq4_levels32(x, id, q);
	for (int j = 0; j < 32; j++) {
		pqx[j] = w[j] * q[j] * x[j];
		pq2[j] = w[j] * q[j] * q[j];
	}
	for (int j = 0; j < 32; j++) {
		sqx += pqx[j];
		sq2 += pq2[j];
	}
	*sumqx = sqx;
	*sumq2 = sq2;
}

/* The scale of one sub-block of 32 values x under the weights w: 0 if its largest
 * magnitude is below IQ4_EPS; else the least-squares scale for the levels that the
 * largest-magnitude value (max, signed) picks as level 0 (-127), then the best of the
 * trial scales where max lands on -127 + t, t = -7..7 (best: largest sumqx^2 / sumq2,
 * the first of equals). */
static float iq4_block_scale(const float *x, const float *w)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < 32; j++) {
		const float ax = fabsf(x[j]);
		if (ax > amax) {
			amax = ax;
			max = x[j];
		}
	}
	if (amax < IQ4_EPS)
		return 0.0f;

	float sumqx, sumq2;
	float d = -max / kvalues_iq4nl[0];
	iq4_sums(x, w, 1 / d, &sumqx, &sumq2);
	d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
	float best = d * sumqx;
	for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; itry++) {
		const float id = (itry + kvalues_iq4nl[0]) / max;
		iq4_sums(x, w, id, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			d = sumqx / sumq2;
			best = d * sumqx;
		}
	}
	return d;
}

/* ggml's sigma2 of quantize_row_iq4_nl_impl under a matrix: the super-block's sbs
 * values (32 for iq4_nl, 256 for iq4_xs) squared and summed in order, times 2 / sbs. */
static float iq4_sigma2(const float *sb, int sbs)
{
	float sigma2 = 0;

	for (int j = 0; j < sbs; j++)
		sigma2 += sb[j] * sb[j];
	return sigma2 * (2.f / sbs);
}

/* The weights of the 32 values x of a sub-block: x^2 without a matrix (qw NULL); with
 * one, qw[j] * sqrt(sigma2 + x^2), qw the sub-block's columns. */
static void iq4_weights(const float *x, const float *qw, float sigma2, float w[32])
{
	for (int j = 0; j < 32; j++)
		w[j] = qw ? qw[j] * sqrtf(sigma2 + x[j] * x[j]) : x[j] * x[j];
}

/* Packs 32 values at inverse scale id into 16 bytes: the low nibble of byte j is the
 * level index of value j, the high nibble that of value j + 16. */
static void iq4_pack(const float *x, float id, uint8_t *qs)
{
	for (int j = 0; j < 16; j++) {
		const int lo = iq4_nearest(id * x[j]);
		const int hi = iq4_nearest(id * x[j + 16]);
		qs[j] = (uint8_t)(lo | hi << 4);
	}
}

/* iq4_nl, 18 bytes a block of 32:
 *
 *   0      2                          18
 *   +------+--------------------------+
 *   |  d   | qs[16]: hhhh llll        |   llll: level of value j, hhhh: of value j + 16
 *   +------+--------------------------+
 *
 * d = the searched scale (iq4_block_scale), stored as fp16; the levels are then chosen
 * at 1 / d as a float (not the fp16), 8 (level 1) for every value when d = 0. */
void quant_iq4_nl(const float *x, uint8_t *y, int64_t nblocks)
{
	quant_iq4_nl_w(x, y, nblocks, NULL, 0);
}

/* iq4_nl without a matrix (qw NULL) or with one (the matrix's value for each of x),
 * which changes the weights only (iq4_weights). */
void quant_iq4_nl_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                    float row_sigma2)
{
	float w[32];

	(void)row_sigma2;
	for (int64_t i = 0; i < nblocks; i++, x += QK4_NL, y += sizeof(struct block_iq4_nl),
	     qw = qw ? qw + QK4_NL : NULL) {
		iq4_weights(x, qw, qw ? iq4_sigma2(x, QK4_NL) : 0, w);
		const float d = iq4_block_scale(x, w);

		quant_put16(y + offsetof(struct block_iq4_nl, d), f32_to_fp16(d));
		iq4_pack(x, d != 0.0f ? 1 / d : 0.0f, y + offsetof(struct block_iq4_nl, qs));
	}
}

/* iq4_xs, 136 bytes a block of 256:
 *
 *   0      2          4             8                                      136
 *   +------+----------+-------------+---------------------------------------+
 *   |  d   | scales_h | scales_l[4] | qs[128]: 8 runs of 16, as iq4_nl's    |
 *   +------+----------+-------------+---------------------------------------+
 *            u16 LE:    byte k/2: ls of sub-block k, low nibble for even k
 *            bits 2k+1..2k: high 2 bits of the 6-bit ls of sub-block k
 *
 * Each sub-block's scale as iq4_nl's; the super-block's d = -(the scale of largest
 * magnitude) / 32, so that one is ls = 0 (-32 * d); ls - 32 = round(scale / d) clamped
 * to -32..31, and the levels are chosen at 1 / (d * (ls - 32)) as floats. A block of
 * zeros has d = -0 (fp16 0x8000), as in ggml. */
void quant_iq4_xs(const float *x, uint8_t *y, int64_t nblocks)
{
	quant_iq4_xs_w(x, y, nblocks, NULL, 0);
}

/* iq4_xs without a matrix (qw NULL) or with one, as iq4_nl. */
void quant_iq4_xs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                    float row_sigma2)
{
	float w[32];

	(void)row_sigma2;
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_iq4_xs),
	     qw = qw ? qw + QK_K : NULL) {
		float scales[QK_K / 32];
		float max_scale = 0.0f, amax_scale = 0.0f;
		const float sigma2 = qw ? iq4_sigma2(x, QK_K) : 0;

		for (int ib = 0; ib < QK_K / 32; ib++) {
			iq4_weights(x + 32 * ib, qw ? qw + 32 * ib : NULL, sigma2, w);
			scales[ib] = iq4_block_scale(x + 32 * ib, w);
			if (fabsf(scales[ib]) > amax_scale) {
				amax_scale = fabsf(scales[ib]);
				max_scale = scales[ib];
			}
		}

		const float d = -max_scale / 32;
		const float id = d != 0.0f ? 1 / d : 0.0f;
		uint8_t *scales_l = y + offsetof(struct block_iq4_xs, scales_l);
		uint16_t scales_h = 0;

		quant_put16(y + offsetof(struct block_iq4_xs, d), f32_to_fp16(d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const int l = quant_maxi(-32, quant_mini(31, quant_nearest_int(id * scales[ib])));
			const float dl = d * l;
			const unsigned ls = (unsigned)(l + 32);

			iq4_pack(x + 32 * ib, dl != 0.0f ? 1 / dl : 0.0f,
			         y + offsetof(struct block_iq4_xs, qs) + 16 * ib);
			if (ib % 2 == 0)
				scales_l[ib / 2] = (uint8_t)(ls & 0xf);
			else
				scales_l[ib / 2] |= (uint8_t)((ls & 0xf) << 4);
			scales_h |= (uint16_t)((ls >> 4) << (2 * ib));
		}
		quant_put16(y + offsetof(struct block_iq4_xs, scales_h), scales_h);
	}
}
