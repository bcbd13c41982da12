/* The 2-bit i-quants, iq2_xxs, iq2_xs and iq2_s, as ggml's quantize_row_iq2_xxs_impl,
 * quantize_row_iq2_xs_impl and quantize_row_iq2_s_impl write them: each group of 8
 * values a sign pattern and one of the grid's rows of 8 magnitudes (levels 0..2, odd
 * values 1, 3, 5), found by trial scales: each value rounded to its level, a group off
 * the grid moved to the nearest row in its neighbour list (quant_grid.h), the trial
 * with the best weighted least-squares fit kept, then refitted. A value's weight is
 * its column's matrix value times sqrt(sigma2 + x^2), sigma2 the super-block's mean
 * x^2 (twice it for iq2_s); iq2_s alone has a form without a matrix (weights
 * sigma2 / 4 + x^2). Every float operation is ggml's, in its order, so the searches
 * take ggml's turns and the bytes come out the same; a super-block depends on its own
 * values and columns only. */
#include "quant_impl.h"
#include "quant_grid.h"
#include "quant_search.h"

#include "blocks.h"
#include "half.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>

#define IQ2_KMAXQ 3             /* ggml's kMaxQ: levels 0..2 (odd values 1..5) */
#define IQ2_S_EPS 1e-8f         /* ggml's GROUP_MAX_EPS_IQ2_S */

/* The row of g nearest to the 8 magnitudes xval at scale, among the neighbour list of
 * point u: the first with the smallest sum of w * (scale * q - x)^2, q = 2 level + 1
 * (iq2_find_best_neighbour); L receives its levels. A sum must be below FLT_MAX to
 * count: where none is (NaN, or overflow), ggml stops the process, and this takes the
 * list's first row (row 0 at a point without a list, which ggml has no answer for
 * either). A term of the sum depends only on the value and the level, so the 24 terms
 * are made first, each as ggml makes it ((w * diff) * diff), and each row's sum adds
 * its 8 in ggml's order: the same bits for a fraction of the work. */
static int nearest_row(const struct quant_grid *g, uint32_t u, const float *xval,
                       const float *w, float scale, int8_t *L)
{
	const uint16_t *nb = quant_grid_neighbours(g, u);
	float term[8][4];
	float best_d2 = FLT_MAX;
	int best = nb && nb[0] ? nb[1] : 0;

	for (int i = 0; i < 8; i++)
		for (int l = 0; l < 3; l++) {
			const float diff = scale * (float)(2 * l + 1) - xval[i];
			term[i][l] = w[i] * diff * diff;
		}
	for (int j = 1; nb && j <= nb[0]; j++) {
		const uint8_t *lv = g->level[nb[j]];
		float d2 = 0;
		for (int i = 0; i < 8; i++)
			d2 += term[i][lv[i]];
		if (d2 < best_d2) {
			best_d2 = d2;
			best = nb[j];
		}
	}
	for (int i = 0; i < 8; i++)
		L[i] = (int8_t)g->level[best][i];
	return best;
}

/* The level (0..2) of magnitude v at inverse scale id: round((id * v - 1) / 2). */
static int level_of(float v, float id)
{
	return quant_odd_level(v, id, IQ2_KMAXQ - 1);
}

/* The point of 8 levels (2 bits each, level i at bit 2i), as ggml's uint16_t holds it. */
static uint32_t point_of(const int8_t *L)
{
	uint32_t u = 0;

	for (int i = 0; i < 8; i++)
		u |= (uint32_t)L[i] << (2 * i);
	return u & 0xffff;
}

/* The 8 levels of the group at xval, rounded at inverse scale id into L, moved to the
 * nearest row at scale (weights waux) where they are off the grid. Returns whether
 * they were on it. */
static bool group_levels(const struct quant_grid *g, const float *xval, const float *waux,
                         float id, float scale, int8_t *L)
{
	for (int i = 0; i < 8; i++)
		L[i] = (int8_t)level_of(xval[i], id);
	const uint32_t u = point_of(L);
	if (g->map[u] >= 0)
		return true;
	nearest_row(g, u, xval, waux, scale, L);
	return false;
}

/* The grid row of a group's levels L: map's row, or where they are off the grid (which
 * ggml stops the process on, "Oops: found point not on grid") row 0. */
static uint32_t row_of(const struct quant_grid *g, const int8_t *L)
{
	const int32_t r = g->map[point_of(L)];

	return r >= 0 ? (uint32_t)r : 0;
}

/* sum w x q and sum w q q over n values, q = 2L + 1, in order ((w * x) * q, (w * q) * q). */
static void fit_sums(int n, const float *w, const float *xval, const int8_t *L, float *sumqx,
                     float *sumq2)
{
	float sqx = 0, sq2 = 0;

	for (int i = 0; i < n; i++) {
		const float q = (float)(2 * L[i] + 1);
		sqx += w[i] * xval[i] * q;
		sq2 += w[i] * q * q;
	}
	*sumqx = sqx;
	*sumq2 = sq2;
}

/* The weights of a super-block x (256 values) under the matrix's qw:
 * qw * sqrt(sigma2 + x^2), sigma2 = the x^2 summed in order, times twice / 256. */
static void weights_of(const float *x, const float *qw, float twice, float *w)
{
	float sumx2 = 0;

	for (int i = 0; i < QK_K; i++)
		sumx2 += x[i] * x[i];
	const float sigma2 = twice * sumx2 / QK_K;
	for (int i = 0; i < QK_K; i++)
		w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}

/* The magnitudes of a group of 8 values xb into xval, and its sign bits (bit i: value
 * i negative), with iq2_xxs's and iq2_xs's parity trick: the signs stored are 7 bits
 * and the 8th is their parity, so where an odd count is negative, the value of least
 * weight * x^2 (the first of equals) keeps its sign, its magnitude negated instead. */
static uint8_t parity_signs(const float *xb, const float *weight, float *xval)
{
	int nflip = 0;
	uint8_t s = 0;

	for (int i = 0; i < 8; i++) {
		if (xb[i] >= 0) {
			xval[i] = xb[i];
		} else {
			xval[i] = -xb[i];
			nflip++;
			s |= (uint8_t)(1u << i);
		}
	}
	if (nflip % 2) {
		int imin = 0;
		float min = weight[imin] * xb[imin] * xb[imin];
		for (int i = 1; i < 8; i++) {
			const float ax = weight[i] * xb[i] * xb[i];
			if (ax < min) {
				min = ax;
				imin = i;
			}
		}
		xval[imin] = -xval[imin];
		s ^= (uint8_t)(1u << imin);
	}
	return s & 127;
}

/* One iq2_xxs sub-block of 32 values xb with weights weight: its scale (>= 0 but for
 * NaN input), the levels of its four groups in L, their 7-bit signs in signs. ggml's
 * search: a first scale from make_qp_quants (nmax 4), then 13 trials around
 * 5 / (3 * that scale), each group on the grid, the best fit kept, then every group
 * again at its scale and refitted. *skip says whether the sub-block is left out (ggml's
 * early continue: below GROUP_MAX_EPS, or a first scale that is not positive); it is
 * then 0. */
static float xxs_sub_block(const struct quant_grid *g, const float *xb, const float *weight,
                           int8_t *L, uint8_t *signs, bool *skip)
{
	float xval[32], waux[32];
	int8_t Laux[32];

	for (int i = 0; i < 32; i++)
		waux[i] = sqrtf(weight[i]);
	for (int k = 0; k < 4; k++)
		signs[k] = parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
	float max = xval[0];
	for (int i = 1; i < 32; i++)
		max = quant_maxf(max, xval[i]);
	*skip = true;
	if (max < QK_GROUP_EPS)
		return 0;
	float scale = quant_make_qp(32, IQ2_KMAXQ + 1, xval, (uint8_t *)L, weight);
	const float eff_max = scale * IQ2_KMAXQ;
	if (eff_max <= 0)
		return 0;
	*skip = false;
	float best = 0;
	for (int is = -6; is <= 6; is++) {
		const float id = (2 * IQ2_KMAXQ - 1 + is * 0.1f) / eff_max;
		const float this_scale = 1 / id;
		for (int k = 0; k < 4; k++)
			group_levels(g, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k);
		float sumqx, sumq2;
		fit_sums(32, weight, xval, Laux, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			scale = sumqx / sumq2;
			best = scale * sumqx;
			memcpy(L, Laux, 32);
		}
	}
	if (scale > 0) {
		const float id = 1 / scale;
		for (int k = 0; k < 4; k++)
			group_levels(g, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
		float sumqx, sumq2;
		fit_sums(32, weight, xval, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {
		/* never, says ggml; but if so the magnitudes change sign */
		scale = -scale;
		for (int k = 0; k < 4; k++)
			signs[k] = (uint8_t)(~signs[k] & 127);
	}
	return scale;
}

/* iq2_xxs, 66 bytes a block of 256 (blocks.h draws it):
 *
 *   0    2                                                        66
 *   +----+--------------------------------------------------------+
 *   | d  | qs: per sub-block of 32, two u32 LE                    |
 *   +----+--------------------------------------------------------+
 *          word 0: byte k = grid row of group k (8 values)
 *          word 1: bits 7k+6..7k = the 7 sign bits of group k, bits 31..28 = the
 *                  sub-block's scale nibble s
 *
 * d = the largest sub-block scale / 31; s = round((scale / d - 1) / 2), 0..15. A block
 * whose every sub-block scale is 0 is all zeros. qw must not be NULL. */
void quant_iq2_xxs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                     float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ2_XXS);
	float weight[QK_K], scales[QK_K / 32];
	int8_t L[32];
	uint8_t signs[4];
	uint32_t q2[2 * (QK_K / 32)];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, qw += QK_K,
	     y += sizeof(struct block_iq2_xxs)) {
		float max_scale = 0;

		memset(q2, 0, sizeof q2);
		weights_of(x, qw, 1, weight);
		for (int ib = 0; ib < QK_K / 32; ib++) {
			bool skip;
			const float scale = xxs_sub_block(g, x + 32 * ib, weight + 32 * ib, L, signs,
			                                  &skip);
			scales[ib] = scale;
			if (skip)
				continue;
			for (int k = 0; k < 4; k++) {
				q2[2 * ib] |= row_of(g, L + 8 * k) << (8 * k);
				q2[2 * ib + 1] |= (uint32_t)signs[k] << (7 * k);
			}
			max_scale = quant_maxf(max_scale, scale);
		}
		quant_put16(y + offsetof(struct block_iq2_xxs, d), f32_to_fp16(0.f));
		uint8_t *qs = y + offsetof(struct block_iq2_xxs, qs);
		if (!max_scale) {
			memset(qs, 0, QK_K / 4);
			continue;
		}
		const float d = max_scale / 31;
		const float id = 1 / d;
		quant_put16(y + offsetof(struct block_iq2_xxs, d), f32_to_fp16(d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const int l = quant_odd_level(scales[ib], id, 15);
			q2[2 * ib + 1] |= (uint32_t)l << 28;
		}
		for (int w = 0; w < 2 * (QK_K / 32); w++)
			quant_put32(qs + 4 * w, q2[w]);
	}
}

/* One sub-block of 16 values xb of iq2_xs (parity true: 7-bit signs with the parity
 * trick) or iq2_s (8-bit signs), weights weight: its scale (>= 0 but for NaN input),
 * the levels of its two groups in L, their signs in signs. ggml's search: 19 trials
 * around 5 / max, the best fit kept; then the groups its trial found off the grid
 * again at the best scale, and a refit. *skip says whether the sub-block is left out
 * (its largest magnitude below eps); it is then 0. */
static float xs_sub_block(const struct quant_grid *g, const float *xb, const float *weight,
                          int8_t *L, uint8_t *signs, bool parity, float eps, bool *skip)
{
	float xval[16], waux[16];
	int8_t Laux[16];
	bool on_grid[2], on_grid_aux[2];

	for (int i = 0; i < 16; i++)
		waux[i] = sqrtf(weight[i]);
	for (int k = 0; k < 2; k++) {
		if (parity) {
			signs[k] = parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
			continue;
		}
		uint8_t s = 0;
		for (int i = 0; i < 8; i++) {
			const float v = xb[8 * k + i];
			xval[8 * k + i] = v >= 0 ? v : -v;
			s |= (uint8_t)((v >= 0 ? 0u : 1u) << i);
		}
		signs[k] = s;
	}
	float max = xval[0];
	for (int i = 1; i < 16; i++)
		max = quant_maxf(max, xval[i]);
	memset(L, 0, 16);
	*skip = max < eps;
	if (*skip)
		return 0;

	float best = 0;
	float scale = max / (2 * IQ2_KMAXQ - 1);
	on_grid[0] = on_grid[1] = true;
	for (int is = -9; is <= 9; is++) {
		const float id = (2 * IQ2_KMAXQ - 1 + is * 0.1f) / max;
		const float this_scale = 1 / id;
		for (int k = 0; k < 2; k++)
			on_grid_aux[k] = group_levels(g, xval + 8 * k, waux + 8 * k, id, this_scale,
			                              Laux + 8 * k);
		float sumqx, sumq2;
		fit_sums(16, weight, xval, Laux, &sumqx, &sumq2);
		if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
			scale = sumqx / sumq2;
			best = scale * sumqx;
			memcpy(L, Laux, 16);
			on_grid[0] = on_grid_aux[0];
			on_grid[1] = on_grid_aux[1];
		}
	}
	if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
		const float id = 1 / scale;
		for (int k = 0; k < 2; k++)
			if (!on_grid[k])
				group_levels(g, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
		float sumqx, sumq2;
		fit_sums(16, weight, xval, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {
		scale = -scale;
		for (int k = 0; k < 2; k++)
			signs[k] = (uint8_t)(parity ? ~signs[k] & 127 : ~signs[k]);
	}
	return scale;
}

/* The scale nibbles of 16 sub-blocks against d = max_scale / 31, two a byte (sub-block
 * 2m low, 2m + 1 high): round((scale / d - 1) / 2), 0..15. */
static void scale_nibbles(const float *scales, float max_scale, uint8_t *out)
{
	const float id = 1 / (max_scale / 31);

	for (int ib = 0; ib < QK_K / 16; ib++) {
		const int l = quant_odd_level(scales[ib], id, 15);
		if (ib % 2 == 0)
			out[ib / 2] = (uint8_t)l;
		else
			out[ib / 2] |= (uint8_t)(l << 4);
	}
}

/* iq2_xs, 74 bytes a block of 256:
 *
 *   0    2                                  66           74
 *   +----+----------------------------------+------------+
 *   | d  | qs[32]: u16 LE, one per 8 values | scales[8]  |
 *   +----+----------------------------------+------------+
 *          bits 15..9: the group's 7 sign     nibble per sub-block of 16: low for
 *          bits, 8..0: its grid row           the first of two, high for the second
 *
 * d = the largest sub-block scale / 31 (fp16 0 and all zero quants and scales when it
 * is 0). qw must not be NULL. */
void quant_iq2_xs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                    float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ2_XS);
	float weight[QK_K], scales[QK_K / 16];
	int8_t L[16];
	uint8_t signs[2];
	uint16_t q2[QK_K / 8];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, qw += QK_K,
	     y += sizeof(struct block_iq2_xs)) {
		uint8_t *sc = y + offsetof(struct block_iq2_xs, scales);
		uint8_t *qs = y + offsetof(struct block_iq2_xs, qs);
		float max_scale = 0;

		memset(q2, 0, sizeof q2);
		memset(sc, 0, QK_K / 32);
		quant_put16(y + offsetof(struct block_iq2_xs, d), f32_to_fp16(0.f));
		weights_of(x, qw, 1, weight);
		for (int ib = 0; ib < QK_K / 16; ib++) {
			bool skip;
			const float scale = xs_sub_block(g, x + 16 * ib, weight + 16 * ib, L, signs,
			                                 true, QK_GROUP_EPS, &skip);
			scales[ib] = scale;
			if (skip)
				continue;
			for (int k = 0; k < 2; k++)
				q2[2 * ib + k] = (uint16_t)(row_of(g, L + 8 * k) | (uint32_t)signs[k] << 9);
			max_scale = quant_maxf(max_scale, scale);
		}
		if (!max_scale) {
			memset(qs, 0, QK_K / 4);
			continue;
		}
		quant_put16(y + offsetof(struct block_iq2_xs, d), f32_to_fp16(max_scale / 31));
		scale_nibbles(scales, max_scale, sc);
		for (int k = 0; k < QK_K / 8; k++)
			quant_put16(qs + 2 * k, q2[k]);
	}
}

/* iq2_s, 82 bytes a block of 256:
 *
 *   0    2              34             66       74          82
 *   +----+--------------+--------------+--------+-----------+
 *   | d  | qs[32]       | signs[32]    | qh[8]  | scales[8] |
 *   +----+--------------+--------------+--------+-----------+
 *          low 8 bits of  bit i: value   bits 2j+1..2j of qh[m]: bits 9..8 of
 *          group k's row  i of group k   group 4m + j's row; scales as iq2_xs's
 *                         negative
 *
 * d = 0.9875 * the largest sub-block scale / 31, the nibbles rounded against the
 * scale / 31 without the 0.9875. A block whose every scale is 0 is all zeros. qw NULL:
 * weights sigma2 / 4 + x^2 (ggml's quantize_row_iq2_s_ref). */
void quant_iq2_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                   float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ2_S);
	float weight[QK_K], scales[QK_K / 16];
	int8_t L[16];
	uint8_t signs[2];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, y += sizeof(struct block_iq2_s),
	     qw = qw ? qw + QK_K : NULL) {
		uint8_t *qs = y + offsetof(struct block_iq2_s, qs);
		uint8_t *qh = y + offsetof(struct block_iq2_s, qh);
		float max_scale = 0;

		memset(y, 0, sizeof(struct block_iq2_s));
		quant_put16(y + offsetof(struct block_iq2_s, d), f32_to_fp16(0.f));
		if (qw) {
			weights_of(x, qw, 2, weight);
		} else {
			float sumx2 = 0;
			for (int i = 0; i < QK_K; i++)
				sumx2 += x[i] * x[i];
			const float sigma2 = 2 * sumx2 / QK_K;
			for (int i = 0; i < QK_K; i++)
				weight[i] = 0.25f * sigma2 + x[i] * x[i];
		}
		for (int ib = 0; ib < QK_K / 16; ib++) {
			bool skip;
			const float scale = xs_sub_block(g, x + 16 * ib, weight + 16 * ib, L, signs,
			                                 false, IQ2_S_EPS, &skip);
			scales[ib] = scale;
			if (skip)
				continue;
			for (int k = 0; k < 2; k++) {
				const int i8 = 2 * ib + k;
				const uint32_t row = row_of(g, L + 8 * k);
				qs[i8] = (uint8_t)(row & 255);
				qh[i8 / 4] |= (uint8_t)((row >> 8) << (2 * (i8 % 4)));
				qs[QK_K / 8 + i8] = signs[k];
			}
			max_scale = quant_maxf(max_scale, scale);
		}
		if (!max_scale)
			continue;
		quant_put16(y + offsetof(struct block_iq2_s, d), f32_to_fp16(max_scale / 31 * 0.9875f));
		scale_nibbles(scales, max_scale, y + offsetof(struct block_iq2_s, scales));
	}
}
