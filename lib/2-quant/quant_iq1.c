/* The 1-bit i-quants, iq1_s and iq1_m, as ggml's quantize_row_iq1_s_impl and
 * quantize_row_iq1_m_impl write them: each value one of -1, 0, 1 plus a shift of
 * +-IQ1S_DELTA (one shift a sub-block for iq1_s, one a group of 8 for iq1_m), times a
 * sub-block scale, groups of 8 from a grid of 2048 rows (quant_grid.h). A sub-block's
 * values are sorted (quant_sort.h: glibc's order, ties included) and every split of
 * them into the three levels is tried, the best weighted least-squares fit kept; a
 * group its split puts off the grid moves to its nearest row, and the scale is
 * refitted. A value's weight is its column's matrix value times sqrt(sigma2 + x^2),
 * sigma2 twice the super-block's mean x^2 (iq1_m without a matrix: x^2). Every float
 * operation is ggml's, in its order, so every comparison takes ggml's turn; a
 * super-block depends on its own values and columns only. */
#include "quant_impl.h"
#include "quant_grid.h"
#include "quant_sort.h"
#include "quant_vec.h"

#include "blocks.h"
#include "ggml_tables.h"
#include "half.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>

#define IQ1S_SUB 32             /* values a sub-block of iq1_s */
#define IQ1M_SUB 16             /* of iq1_m */
#define IQ1S_EPS 1e-12f         /* ggml's GROUP_MAX_EPS_IQ1_S */
#define IQ1M_EPS 1e-7f          /* ggml's GROUP_MAX_EPS_IQ1_M */

/* The three levels shifted up (x_p) and down (x_m), as ggml's. */
static const float x_p[3] = { -1 + IQ1S_DELTA, IQ1S_DELTA, 1 + IQ1S_DELTA };
static const float x_m[3] = { -1 - IQ1S_DELTA, -IQ1S_DELTA, 1 - IQ1S_DELTA };

/* The weights of a super-block x (256 values): x^2 without a matrix (qw NULL); with
 * one, qw * sqrt(sigma2 + x^2), sigma2 = 2 * the x^2 summed in order / 256. */
static void weigh_block(const float *x, const float *qw, float *weight)
{
	if (!qw) {
		for (int i = 0; i < QK_K; i++)
			weight[i] = x[i] * x[i];
		return;
	}
	float sumx2 = 0;
	for (int i = 0; i < QK_K; i++)
		sumx2 += x[i] * x[i];
	const float sigma2 = 2 * sumx2 / QK_K;
	for (int i = 0; i < QK_K; i++)
		weight[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
}

/* The largest |x| of n values as ggml's MAX(max, fabsf(x)) folds them from |x[0]|. */
static float absmax(const float *x, int n)
{
	float max = fabsf(x[0]);

	for (int i = 1; i < n; i++)
		max = quant_maxf(max, fabsf(x[i]));
	return max;
}

/* The row of the grid nearest to the 8 values xb at scale with the levels xx (ggml's
 * iq1_find_best_neighbour2), among point u's neighbour list: the first with the
 * smallest sum of w * (scale * xx[level] - x)^2; L receives its levels. A sum must be
 * below FLT_MAX to count: where none is (NaN, overflow), ggml scans the whole grid
 * reading past its arrays, then stops the process; this takes the list's first row
 * (row 0 at a point without a list). The 24 terms (value, level) are made first, as
 * ggml makes each ((w * diff) * diff), and each row's sum adds its 8 in ggml's order. */
static int nearest_row(const struct quant_grid *g, uint32_t u, const float *xb,
                       const float *w, float scale, const float *xx, int8_t *L)
{
	const uint16_t *nb = quant_grid_neighbours(g, u);
	float term[8][4];
	float best_d2 = FLT_MAX;
	int best = nb && nb[0] ? nb[1] : 0;

	for (int i = 0; i < 8; i++)
		for (int l = 0; l < 3; l++) {
			const float diff = scale * xx[l] - xb[i];
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

/* The point of a group's 8 levels (2 bits each). */
static uint32_t point_of(const int8_t *L)
{
	uint32_t u = 0;

	for (int i = 0; i < 8; i++)
		u |= (uint32_t)L[i] << (2 * i);
	return u & 0xffff;
}

/* The grid row of a group's levels L, moved to the nearest row where they are off the
 * grid (L then holds that row's levels). Sets *on_grid false when it moves. */
static uint32_t row_of(const struct quant_grid *g, const float *xb, const float *w,
                       float scale, const float *xx, int8_t *L, bool *on_grid)
{
	const uint32_t u = point_of(L);
	const int32_t m = g->map[u];

	if (m >= 0)
		return (uint32_t)m;
	*on_grid = false;
	return (uint32_t)nearest_row(g, u, xb, w, scale, xx, L);
}

/* The sub-block's n values xb sorted (value, index), glibc's order. */
static void sorted(const float *xb, int n, struct quant_pair *p)
{
	for (int j = 0; j < n; j++)
		p[j] = (struct quant_pair){ xb[j], j };
	quant_sort_pairs(p, n);
}

/* One iq1_s sub-block of 32 values xb with weights w: its scale (>= 0 but for NaN
 * input), its shift (1: up, -1: down) in *shift and the grid rows of its four groups
 * in index. ggml's exhaustive search: with the values sorted, prefix sums of w x and
 * w, and for every split i1 <= i2 (values below i1 at level 0, below i2 at 1, the
 * rest at 2) both shifts tried, the best sumqx^2 / sumq2 kept (the first of equals);
 * then the groups put on the grid, and a refit where one moved. *skip says whether
 * the sub-block is left out (below IQ1S_EPS, or no split fits); it then returns 0 with
 * *shift 1. */
static float iq1s_sub_block(const struct quant_grid *g, const float *xb, const float *w,
                            int *shift, uint16_t index[4], bool *skip)
{
	struct quant_pair p[IQ1S_SUB];
	float sumx[IQ1S_SUB + 1], sumw[IQ1S_SUB + 1];
	int8_t L[IQ1S_SUB];

	*shift = 1;
	*skip = true;
	const float max = absmax(xb, IQ1S_SUB);
	if (max < IQ1S_EPS)
		return 0;
	sorted(xb, IQ1S_SUB, p);
	sumx[0] = sumw[0] = 0;
	for (int j = 0; j < IQ1S_SUB; j++) {
		const int i = p[j].index;
		sumx[j + 1] = sumx[j] + w[i] * xb[i];
		sumw[j + 1] = sumw[j] + w[i];
	}
	float best_score = -FLT_MAX, scale = max;
	int besti1 = -1, besti2 = -1, best_shift = 0;
	for (int i1 = 0; i1 <= IQ1S_SUB; i1++) {
		for (int i2 = i1; i2 <= IQ1S_SUB; i2++) {
			const float a = sumx[i1] - sumx[0], b = sumx[i2] - sumx[i1];
			const float c = sumx[IQ1S_SUB] - sumx[i2];
			const float wa = sumw[i1] - sumw[0], wb = sumw[i2] - sumw[i1];
			const float wc = sumw[IQ1S_SUB] - sumw[i2];
			float sumqx = a * x_p[0] + b * x_p[1] + c * x_p[2];
			float sumq2 = wa * x_p[0] * x_p[0] + wb * x_p[1] * x_p[1] + wc * x_p[2] * x_p[2];
			if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
				scale = sumqx / sumq2;
				best_score = scale * sumqx;
				besti1 = i1;
				besti2 = i2;
				best_shift = 1;
			}
			sumqx = a * x_m[0] + b * x_m[1] + c * x_m[2];
			sumq2 = wa * x_m[0] * x_m[0] + wb * x_m[1] * x_m[1] + wc * x_m[2] * x_m[2];
			if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
				scale = sumqx / sumq2;
				best_score = scale * sumqx;
				besti1 = i1;
				besti2 = i2;
				best_shift = -1;
			}
		}
	}
	if (besti1 < 0 || besti2 < 0 || best_shift == 0)
		return 0;
	*skip = false;
	for (int j = 0; j < IQ1S_SUB; j++)
		L[p[j].index] = (int8_t)(j < besti1 ? 0 : j < besti2 ? 1 : 2);
	if (scale < 0) {
		for (int j = 0; j < IQ1S_SUB; j++)
			L[j] = (int8_t)(2 - L[j]);
		scale = -scale;
		best_shift = -best_shift;
	}
	bool on_grid = true;
	const float *xx = best_shift == 1 ? x_p : x_m;
	for (int k = 0; k < IQ1S_SUB / 8; k++)
		index[k] = (uint16_t)row_of(g, xb + 8 * k, w + 8 * k, scale, xx, L + 8 * k, &on_grid);
	if (!on_grid) {
		float sumqx = 0, sumq2 = 0;
		for (int k = 0; k < IQ1S_SUB / 8; k++) {
			const uint8_t *lv = g->level[index[k]];
			for (int j = 0; j < 8; j++) {
				const float q = xx[lv[j]];
				sumqx += w[8 * k + j] * q * xb[8 * k + j];
				sumq2 += w[8 * k + j] * q * q;
			}
		}
		if (sumqx > 0 && sumq2 > 0)
			scale = sumqx / sumq2;
	}
	*shift = best_shift;
	return scale;
}

/* iq1_s, 50 bytes a block of 256:
 *
 *   0    2                      34                                     50
 *   +----+----------------------+--------------------------------------+
 *   | d  | qs[32]: low 8 bits   | qh[8]: u16 LE, one per sub-block of 32 |
 *   |    | of group k's row     |  15: shift down  14..12: scale s       |
 *   |    |                      |  3k+2..3k: bits 10..8 of group k's row |
 *   +----+----------------------+--------------------------------------+
 *
 * d = 1.125 * the largest sub-block scale / 15; s = round((scale / d - 1) / 2), 0..7,
 * against that scale / 15 without the 1.125; where the largest is 0, d and every s are 0
 * (the rows stay). A left-out sub-block has rows 0 and s 0. qw must not be NULL. */
void quant_iq1_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                   float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ1_S);
	float weight[QK_K], scales[QK_K / IQ1S_SUB];
	int shifts[QK_K / IQ1S_SUB];
	uint16_t qh[QK_K / IQ1S_SUB];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, qw += QK_K,
	     y += sizeof(struct block_iq1_s)) {
		uint8_t *qs = y + offsetof(struct block_iq1_s, qs);
		float max_scale = 0;

		memset(y, 0, sizeof(struct block_iq1_s));
		memset(qh, 0, sizeof qh);
		weigh_block(x, qw, weight);
		for (int ib = 0; ib < QK_K / IQ1S_SUB; ib++) {
			uint16_t index[IQ1S_SUB / 8];
			bool skip;
			const float scale = iq1s_sub_block(g, x + IQ1S_SUB * ib, weight + IQ1S_SUB * ib,
			                                   &shifts[ib], index, &skip);
			scales[ib] = scale;
			if (skip)
				continue;
			for (int k = 0; k < IQ1S_SUB / 8; k++) {
				qs[(IQ1S_SUB / 8) * ib + k] = (uint8_t)(index[k] & 255);
				qh[ib] |= (uint16_t)((index[k] >> 8) << (3 * k));
			}
			scales[ib] = scale;
			max_scale = quant_maxf(max_scale, scale);
		}
		if (max_scale) {
			const float d = max_scale / 15;
			const float id = 1 / d;
			quant_put16(y + offsetof(struct block_iq1_s, d), f32_to_fp16(d * 1.125f));
			for (int ib = 0; ib < QK_K / IQ1S_SUB; ib++) {
				int l = quant_odd_level(scales[ib], id, 7);
				if (shifts[ib] == -1)
					l |= 8;
				qh[ib] |= (uint16_t)(l << 12);
			}
		}
		for (int ib = 0; ib < QK_K / IQ1S_SUB; ib++)
			quant_put16(y + offsetof(struct block_iq1_s, qh) + 2 * ib, qh[ib]);
	}
}

/* The levels of iq1_m's group k (0, 1) under shift pair s (0..3: bit 1 the first
 * group's, bit 0 the second's, set for down). */
static const float *iq1m_levels(int s, int k)
{
	return (k == 0 ? s < 2 : s % 2 == 0) ? x_p : x_m;
}

/* One iq1_m sub-block of 16 values xb with weights w: its scale (>= 0 but for NaN
 * input), its shift pair (0..3) in *shifts and the grid rows of its two groups in
 * index. ggml's exhaustive search, every split i1 <= i2 of the sorted values under
 * each of the four shift pairs, each candidate's sums accumulated from zero over the
 * sorted values in order (level 0 below i1, 1 below i2, then 2), the four pairs one
 * lane each (their chains are independent): the chain up to i1 is shared by every i2,
 * and up to i2 grows by one term an i2, so only the tail is added anew, the same
 * additions in the same order as ggml's. Then the groups on the grid and a refit
 * where one moved. *skip says whether it is left out (below IQ1M_EPS, or no split
 * fits); it then returns 0 with *shifts 0. */
static float iq1m_sub_block(const struct quant_grid *g, const float *xb, const float *w,
                            int *shifts, uint16_t index[2], bool *skip)
{
	struct quant_pair p[IQ1M_SUB];
	qk_vf tqx[IQ1M_SUB][3], tq2[IQ1M_SUB][3];
	int8_t L[IQ1M_SUB];

	*shifts = 0;
	*skip = true;
	const float max = absmax(xb, IQ1M_SUB);
	if (max < IQ1M_EPS)
		return 0;
	sorted(xb, IQ1M_SUB, p);
	for (int j = 0; j < IQ1M_SUB; j++) {
		const int i = p[j].index;
		for (int l = 0; l < 3; l++) {
			const float ap = w[i] * x_p[l] * xb[i], am = w[i] * x_m[l] * xb[i];
			const float bp = w[i] * x_p[l] * x_p[l], bm = w[i] * x_m[l] * x_m[l];
			tqx[j][l] = i < IQ1M_SUB / 2 ? (qk_vf){ ap, ap, am, am } : (qk_vf){ ap, am, ap, am };
			tq2[j][l] = i < IQ1M_SUB / 2 ? (qk_vf){ bp, bp, bm, bm } : (qk_vf){ bp, bm, bp, bm };
		}
	}
	float best_score = -FLT_MAX, scale = max;
	int besti1 = -1, besti2 = -1, best_k = -1;
	qk_vf head_qx = { 0 }, head_q2 = { 0 };          /* the chains over j < i1 */
	for (int i1 = 0; i1 <= IQ1M_SUB; i1++) {
		qk_vf mid_qx = head_qx, mid_q2 = head_q2;  /* and over i1 <= j < i2 */
		for (int i2 = i1; i2 <= IQ1M_SUB; i2++) {
			qk_vf sqx = mid_qx, sq2 = mid_q2;
			for (int j = i2; j < IQ1M_SUB; j++) {
				sqx += tqx[j][2];
				sq2 += tq2[j][2];
			}
			for (int k = 0; k < 4; k++) {
				if (sq2[k] > 0 && sqx[k] * sqx[k] > best_score * sq2[k]) {
					scale = sqx[k] / sq2[k];
					best_score = scale * sqx[k];
					besti1 = i1;
					besti2 = i2;
					best_k = k;
				}
			}
			if (i2 < IQ1M_SUB) {
				mid_qx += tqx[i2][1];
				mid_q2 += tq2[i2][1];
			}
		}
		if (i1 < IQ1M_SUB) {
			head_qx += tqx[i1][0];
			head_q2 += tq2[i1][0];
		}
	}
	if (besti1 < 0 || besti2 < 0 || best_k < 0)
		return 0;
	*skip = false;
	for (int j = 0; j < IQ1M_SUB; j++)
		L[p[j].index] = (int8_t)(j < besti1 ? 0 : j < besti2 ? 1 : 2);
	if (scale < 0) {
		for (int j = 0; j < IQ1M_SUB; j++)
			L[j] = (int8_t)(2 - L[j]);
		scale = -scale;
		best_k = 3 - best_k;
	}
	bool on_grid = true;
	for (int k = 0; k < IQ1M_SUB / 8; k++)
		index[k] = (uint16_t)row_of(g, xb + 8 * k, w + 8 * k, scale, iq1m_levels(best_k, k),
		                            L + 8 * k, &on_grid);
	if (!on_grid) {
		float sumqx = 0, sumq2 = 0;
		for (int k = 0; k < IQ1M_SUB / 8; k++) {
			const float *xx = iq1m_levels(best_k, k);
			const uint8_t *lv = g->level[index[k]];
			for (int j = 0; j < 8; j++) {
				const float q = xx[lv[j]];
				sumqx += w[8 * k + j] * q * xb[8 * k + j];
				sumq2 += w[8 * k + j] * q * q;
			}
		}
		if (sumqx > 0 && sumq2 > 0)
			scale = sumqx / sumq2;
	}
	*shifts = best_k;
	return scale;
}

/* iq1_m, 56 bytes a block of 256:
 *
 *   0                      32                    48                     56
 *   +----------------------+---------------------+----------------------+
 *   | qs[32]: low 8 bits   | qh[16]: a byte per  | sc[4]: u16 LE, one   |
 *   | of group k's row     | sub-block of 16:    | per 64 values:       |
 *   |                      |  7: group 1 down    |  15..12: nibble m of |
 *   |                      |  6..4: its row's    |  the fp16 d (sc[m])  |
 *   |                      |  bits 10..8         |  3t+2..3t: s of its  |
 *   |                      |  3: group 0 down    |  sub-block t (0..3)  |
 *   |                      |  2..0: its bits     |                      |
 *   +----------------------+---------------------+----------------------+
 *
 * s = round((scale / dmax - 1) / 2), 0..7, dmax = the largest sub-block scale / 15;
 * then d = the least-squares scale of the whole block for those s, rows and shifts
 * (dmax if it has no positive sum of squares), times 1.1125, as fp16. A block of only
 * left-out sub-blocks is all zeros. qw NULL: weights x^2 (ggml's form without a
 * matrix). */
void quant_iq1_m_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                   float row_sigma2)
{
	static const uint8_t masks[4] = { 0x00, 0x80, 0x08, 0x88 };
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ1_S);
	float weight[QK_K], scales[QK_K / IQ1M_SUB];
	int shifts[QK_K / IQ1M_SUB];
	uint16_t index[QK_K / IQ1M_SUB][2];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, y += sizeof(struct block_iq1_m),
	     qw = qw ? qw + QK_K : NULL) {
		uint8_t *qs = y + offsetof(struct block_iq1_m, qs);
		uint8_t *qh = y + offsetof(struct block_iq1_m, qh);
		float max_scale = 0;

		memset(y, 0, sizeof(struct block_iq1_m));
		weigh_block(x, qw, weight);
		for (int ib = 0; ib < QK_K / IQ1M_SUB; ib++) {
			bool skip;
			const float scale = iq1m_sub_block(g, x + IQ1M_SUB * ib, weight + IQ1M_SUB * ib,
			                                   &shifts[ib], index[ib], &skip);
			scales[ib] = scale;
			if (skip) {
				index[ib][0] = index[ib][1] = 0;
				continue;
			}
			qs[2 * ib] = (uint8_t)(index[ib][0] & 255);
			qs[2 * ib + 1] = (uint8_t)(index[ib][1] & 255);
			qh[ib] = (uint8_t)((index[ib][0] >> 8) | ((index[ib][1] >> 8) << 4));
			max_scale = quant_maxf(max_scale, scale);
		}
		if (!max_scale)
			continue;

		uint16_t sc[4] = { 0, 0, 0, 0 };
		float d = max_scale / 15;
		const float id = 1 / d;
		float sumqx = 0, sumq2 = 0;
		for (int ib = 0; ib < QK_K / IQ1M_SUB; ib++) {
			const int l = quant_odd_level(scales[ib], id, 7);
			sc[ib / 4] |= (uint16_t)(l << (3 * (ib % 4)));
			qh[ib] |= masks[shifts[ib]];
			const float *xb = x + IQ1M_SUB * ib, *w = weight + IQ1M_SUB * ib;
			for (int k = 0; k < 2; k++) {
				const float *xx = iq1m_levels(shifts[ib], k);
				const uint8_t *lv = g->level[index[ib][k]];
				for (int j = 0; j < 8; j++) {
					const float q = xx[lv[j]] * (2 * l + 1);
					sumqx += w[8 * k + j] * q * xb[8 * k + j];
					sumq2 += w[8 * k + j] * q * q;
				}
			}
		}
		if (sumq2 > 0)
			d = sumqx / sumq2;
		const uint16_t s = f32_to_fp16(d * 1.1125f);
		sc[0] |= (uint16_t)((s & 0x000f) << 12);
		sc[1] |= (uint16_t)((s & 0x00f0) << 8);
		sc[2] |= (uint16_t)((s & 0x0f00) << 4);
		sc[3] |= (uint16_t)(s & 0xf000);
		for (int m = 0; m < 4; m++)
			quant_put16(y + offsetof(struct block_iq1_m, scales) + 2 * m, sc[m]);
	}
}
