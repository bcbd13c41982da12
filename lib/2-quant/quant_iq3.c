/* The 3-bit i-quants, iq3_s and iq3_xxs: 256 values in sub-blocks of 32, each value a
 * sign and one of 8 magnitudes (levels 0..7, odd values 1, 3, .. 15 in the search),
 * four at a time from a grid of allowed combinations (512 rows for iq3_s, 256 for
 * iq3_xxs), as ggml's quantize_row_iq3_s_impl and quantize_row_iq3_xxs_impl write them:
 * for each sub-block, trial scales (19 for iq3_s, 31 for iq3_xxs), each value rounded
 * to its level and each group of four moved to the nearest grid row where it is off
 * the grid, the trial with the best weighted least-squares fit kept, then refitted. A
 * value's weight is its square without a matrix, its column's matrix value times
 * sqrt(sigma2 + x^2) with one, sigma2 twice the super-block's mean x^2. The same float
 * operations in the same order as ggml, so the same bytes; and ggml's quirks kept,
 * which the bytes show: iq3_s's all-zero sub-block does not advance the qs and signs it
 * writes (the next sub-block's go where its would have), a block's d is 1.033 (iq3_s)
 * or 1.0125 (iq3_xxs) times the scale its sub-block scales are rounded against, and
 * iq3_xxs keeps 7 sign bits a group of 8 (the 8th their parity: ggml flips the value
 * of least weight * x^2 to make it so). */
#include "quant_impl.h"
#include "quant_grid.h"
#include "quant_search.h"
#include "quant_vec.h"

#include "blocks.h"
#include "ggml_tables.h"
#include "half.h"

#include <float.h>
#include <math.h>

#define IQ3S_SUB 32             /* values a sub-block (ggml's IQ3S_BLOCK_SIZE) */
#define IQ3S_GROUPS (IQ3S_SUB / 4)
#define IQ3S_KMAXQ 8            /* levels per magnitude */
#define IQ3XXS_EPS 1e-8f        /* ggml's GROUP_MAX_EPS_IQ3_XXS */

/* Which grid row is nearest to the four magnitudes xval at scale: the first in the
 * point's neighbour list nb (a count, then rows) with the smallest sum of
 * w * (scale * q - x)^2, q the row's odd values 2 * level + 1; L receives the row's
 * levels. A sum must be below FLT_MAX to count: where none is (huge or NaN input),
 * ggml aborts, and this takes the list's first row (row 0 without a list, which a
 * grid built whole never lacks). A row's four terms are made side by side (lanes,
 * each ggml's (w * diff) * diff), then added in ggml's order; the pick is a select,
 * not a branch (which the data make unpredictable). Returns the row. */
static int nearest_row(const struct quant_grid *g, const uint16_t *nb, const float *xval,
                       const float *w, float scale, int8_t *L)
{
	const qk_vf xv = { xval[0], xval[1], xval[2], xval[3] };
	const qk_vf wv = { w[0], w[1], w[2], w[3] };
	float best_d2 = FLT_MAX;
	int best = nb && nb[0] ? nb[1] : 0;

	for (int j = 1; nb && j <= nb[0]; j++) {
		qk_vf q;
		memcpy(&q, g->odd[nb[j]], sizeof q);
		const qk_vf diff = scale * q - xv;
		const qk_vf t = wv * diff * diff;
		const float d2 = (((0 + t[0]) + t[1]) + t[2]) + t[3];
		const bool better = d2 < best_d2;
		best = better ? nb[j] : best;
		best_d2 = better ? d2 : best_d2;
	}
	for (int i = 0; i < 4; i++)
		L[i] = (int8_t)g->level[best][i];
	return best;
}

/* The level (0..7) of magnitude v at inverse scale id: round((id * v - 1) / 2). */
static int level_of(float v, float id)
{
	return quant_odd_level(v, id, IQ3S_KMAXQ - 1);
}

/* The point of four levels. */
static int point_of(const int8_t *L)
{
	int u = 0;

	for (int i = 0; i < 4; i++)
		u |= L[i] << (3 * i);
	return u;
}

/* The levels of group k's four magnitudes at inverse scale id into L[4k..], moved to
 * the nearest grid row (at scale, weights waux) where they are off the grid. Returns
 * whether they were on it. */
static bool group_levels(const struct quant_grid *g, const float *xval, const float *waux,
                         float id, float scale, int k, int8_t *L)
{
	for (int i = 0; i < 4; i++)
		L[4 * k + i] = (int8_t)level_of(xval[4 * k + i], id);
	const int u = point_of(L + 4 * k);
	if (g->map[u] >= 0)
		return true;
	nearest_row(g, quant_grid_neighbours(g, (uint32_t)u), xval + 4 * k, waux + 4 * k, scale,
	            L + 4 * k);
	return false;
}

/* sum w x q and sum w q q over the sub-block, q = 2L + 1, accumulated in order as ggml
 * does ((w * x) * q, then (w * q) * q). */
static void fit_sums(const float *w, const float *xval, const int8_t *L, float *sumqx,
                     float *sumq2)
{
	float sqx = 0, sq2 = 0;

	for (int i = 0; i < IQ3S_SUB; i++) {
		const float q = (float)(2 * L[i] + 1);
		sqx += w[i] * xval[i] * q;
		sq2 += w[i] * q * q;
	}
	*sumqx = sqx;
	*sumq2 = sq2;
}

/* The most trials a sub-block runs (iq3_xxs's 31). */
#define IQ3_MAX_TRIALS 31

/* ggml's trial loop of iq3_s (is = -9..9) and iq3_xxs (-15..15), as it ends: for each
 * trial in turn at id = (15 + 0.2 is) / max, every group's levels (on the grid, or
 * moved to the nearest row at 1 / id), then the fit; a trial with sumq2 > 0 and
 * sumqx^2 > best * sumq2 becomes the best (scale, best, L and on_grid take its). A
 * trial's levels do not depend on the trials before it, so all are made first, their
 * sums run four at a time (quant_fit_sums4), and the picks then walk them in order. */
static void run_trials(const struct quant_grid *g, const float *xval, const float *waux,
                       const float *weight, float max, int is_max, float *scale,
                       float *best, int8_t *L, bool *on_grid)
{
	int8_t Lt[IQ3_MAX_TRIALS][IQ3S_SUB];
	bool grid_t[IQ3_MAX_TRIALS][IQ3S_GROUPS];
	const int n = 2 * is_max + 1;

	for (int t = 0; t < n; t++) {
		const float id = (2 * IQ3S_KMAXQ - 1 + (t - is_max) * 0.2f) / max;
		const float this_scale = 1 / id;
		for (int k = 0; k < IQ3S_GROUPS; k++)
			grid_t[t][k] = group_levels(g, xval, waux, id, this_scale, k, Lt[t]);
	}
	for (int t0 = 0; t0 < n; t0 += 4) {
		const int8_t *sets[4];
		float sumqx[4], sumq2[4];
		for (int k = 0; k < 4; k++)
			sets[k] = Lt[t0 + k < n ? t0 + k : n - 1];
		quant_fit_sums4(IQ3S_SUB, weight, xval, sets, sumqx, sumq2);
		for (int k = 0; k < 4 && t0 + k < n; k++) {
			if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > *best * sumq2[k]) {
				*scale = sumqx[k] / sumq2[k];
				*best = *scale * sumqx[k];
				memcpy(L, Lt[t0 + k], IQ3S_SUB);
				memcpy(on_grid, grid_t[t0 + k], IQ3S_GROUPS * sizeof *on_grid);
			}
		}
	}
}

/* One sub-block of 32 values xb under the weights weight: returns its scale (>= 0),
 * with its levels in L (a grid row's for each group of four) and its sign bits in
 * signs (bit i of byte k: value 8k + i negative). *zero says whether every magnitude
 * is 0; it then returns 0 and leaves L unset, and the caller skips the sub-block. */
static float sub_block(const struct quant_grid *g, const float *xb, const float *weight,
                       int8_t *L, uint8_t *signs, bool *zero)
{
	float waux[IQ3S_SUB], xval[IQ3S_SUB];
	bool on_grid[IQ3S_GROUPS];

	for (int i = 0; i < IQ3S_SUB; i++)
		waux[i] = sqrtf(weight[i]);
	for (int k = 0; k < IQ3S_SUB / 8; k++) {
		uint8_t s = 0;
		for (int i = 0; i < 8; i++) {
			if (xb[8 * k + i] >= 0) {
				xval[8 * k + i] = xb[8 * k + i];
			} else {
				xval[8 * k + i] = -xb[8 * k + i];
				s |= (uint8_t)(1u << i);
			}
		}
		signs[k] = s;
	}
	float max = xval[0];
	for (int i = 1; i < IQ3S_SUB; i++)
		max = quant_maxf(max, xval[i]);
	*zero = max == 0;
	if (*zero)
		return 0;

	/* the trials: max lands on level 7 +- 0.2 steps; L starts at all zeros, all
	 * groups counted off the grid, as ggml's scratch does */
	memset(L, 0, IQ3S_SUB);
	float best = 0;
	float scale = max / (2 * IQ3S_KMAXQ - 1);
	for (int k = 0; k < IQ3S_GROUPS; k++)
		on_grid[k] = false;
	run_trials(g, xval, waux, weight, max, 9, &scale, &best, L, on_grid);

	/* a group moved to a neighbour: every group again at the best scale, and refit */
	int n_off = 0;
	for (int k = 0; k < IQ3S_GROUPS; k++)
		n_off += !on_grid[k];
	if (n_off > 0 && scale > 0) {
		const float id = 1 / scale;
		for (int k = 0; k < IQ3S_GROUPS; k++)
			group_levels(g, xval, waux, id, scale, k, L);
		float sumqx, sumq2;
		fit_sums(weight, xval, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {
		/* never, says ggml; but if so the magnitudes change sign */
		scale = -scale;
		for (int k = 0; k < IQ3S_SUB / 8; k++)
			signs[k] = (uint8_t)~signs[k];
	}
	return scale;
}

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

/* iq3_s, 110 bytes a block of 256:
 *
 *   0    2                   66      74                 106         110
 *   +----+-------------------+-------+------------------+-----------+
 *   | d  | qs[64]            | qh[8] | signs[32]        | scales[4] |
 *   +----+-------------------+-------+------------------+-----------+
 *         low 8 bits of the   bit k   bit i of byte j:   low nibble: sub-block 2m,
 *         9-bit grid row of   of qh   value 8j + i is    high: 2m + 1; scale =
 *         group k, 8 per sub  [s]:    negative           d * (1 + 2 * nibble)
 *                             bit 8 of group k of sub-block s
 *
 * Sub-block s's groups go to qs[8n..], its signs to signs[4n..], where n counts the
 * sub-blocks before it that were not all zeros (ggml's pointers advance only past
 * those); qh is indexed by s itself. d = 1.033 * the largest sub-block scale / 31, and
 * the nibbles round each scale against 1 / (that scale / 31) without the 1.033. */
void quant_iq3_s(const float *x, uint8_t *y, int64_t nblocks)
{
	quant_iq3_s_w(x, y, nblocks, NULL, 0);
}

/* iq3_s without a matrix (qw NULL) or with one (the matrix's value for each of x),
 * which changes the weights only (weigh_block). */
void quant_iq3_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                   float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ3_S);
	float weight[QK_K];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, y += sizeof(struct block_iq3_s),
	     qw = qw ? qw + QK_K : NULL) {
		float scales[QK_K / IQ3S_SUB];
		float max_scale = 0;

		weigh_block(x, qw, weight);
		uint8_t *qs = y + offsetof(struct block_iq3_s, qs);
		uint8_t *qh = y + offsetof(struct block_iq3_s, qh);
		uint8_t *signs = y + offsetof(struct block_iq3_s, signs);

		memset(y, 0, sizeof(struct block_iq3_s));
		quant_put16(y + offsetof(struct block_iq3_s, d), f32_to_fp16(0.0f));
		for (int ib = 0; ib < QK_K / IQ3S_SUB; ib++) {
			int8_t L[IQ3S_SUB];
			uint8_t block_signs[IQ3S_SUB / 8];
			bool zero;
			const float scale = sub_block(g, x + IQ3S_SUB * ib, weight + IQ3S_SUB * ib, L,
			                              block_signs, &zero);

			if (zero) {
				scales[ib] = 0;
				continue;
			}
			for (int k = 0; k < IQ3S_GROUPS; k++) {
				/* on the grid by construction: every group's levels are a row's */
				const int32_t row = g->map[point_of(L + 4 * k)];
				const uint32_t r = row >= 0 ? (uint32_t)row : 0;
				qs[k] = (uint8_t)(r & 0xff);
				qh[ib] |= (uint8_t)((r >> 8) << k);
			}
			qs += IQ3S_GROUPS;
			memcpy(signs, block_signs, sizeof block_signs);
			signs += sizeof block_signs;
			scales[ib] = scale;
			max_scale = quant_maxf(max_scale, scale);
		}
		if (max_scale == 0)
			continue;

		const float d = max_scale / 31;
		const float id = 1 / d;
		uint8_t *sc = y + offsetof(struct block_iq3_s, scales);
		quant_put16(y + offsetof(struct block_iq3_s, d), f32_to_fp16(d * 1.033f));
		for (int ib = 0; ib < QK_K / IQ3S_SUB; ib += 2) {
			const int l1 = quant_odd_level(scales[ib], id, 15);
			const int l2 = quant_odd_level(scales[ib + 1], id, 15);
			sc[ib / 2] = (uint8_t)(l1 | l2 << 4);
		}
	}
}

/* The magnitudes of a group of 8 values xb into xval, and its sign bits, with the
 * parity trick (as iq2_xxs's): 7 bits are kept and the 8th is their parity, so where
 * an odd count is negative, the value of least weight * x^2 (the first of equals)
 * keeps its sign, its magnitude negated instead. */
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

/* One iq3_xxs sub-block of 32 values xb under the weights weight: its scale (>= 0 but
 * for NaN input), its levels in L (a grid row's for each group of four), the 7-bit
 * signs of its four groups of 8 in signs. ggml's search: 31 trial scales around
 * 15 / max, the best fit kept; then the groups its trial found off the grid again at
 * the best scale, and a refit. *skip says whether the sub-block is left out (its
 * largest magnitude below IQ3XXS_EPS); it is then 0. */
static float xxs_sub_block(const struct quant_grid *g, const float *xb, const float *weight,
                           int8_t *L, uint8_t *signs, bool *skip)
{
	float waux[IQ3S_SUB], xval[IQ3S_SUB];
	bool on_grid[IQ3S_GROUPS];

	for (int i = 0; i < IQ3S_SUB; i++)
		waux[i] = sqrtf(weight[i]);
	for (int k = 0; k < IQ3S_SUB / 8; k++)
		signs[k] = parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
	float max = xval[0];
	for (int i = 1; i < IQ3S_SUB; i++)
		max = quant_maxf(max, xval[i]);
	memset(L, 0, IQ3S_SUB);
	*skip = max < IQ3XXS_EPS;
	if (*skip)
		return 0;

	float best = 0;
	float scale = max / (2 * IQ3S_KMAXQ - 1);
	for (int k = 0; k < IQ3S_GROUPS; k++)
		on_grid[k] = true;
	run_trials(g, xval, waux, weight, max, 15, &scale, &best, L, on_grid);
	int n_off = 0;
	for (int k = 0; k < IQ3S_GROUPS; k++)
		n_off += !on_grid[k];
	if (n_off > 0 && scale > 0) {
		const float id = 1 / scale;
		for (int k = 0; k < IQ3S_GROUPS; k++)
			if (!on_grid[k])
				group_levels(g, xval, waux, id, scale, k, L);
		float sumqx, sumq2;
		fit_sums(weight, xval, L, &sumqx, &sumq2);
		if (sumq2 > 0)
			scale = sumqx / sumq2;
	}
	if (scale < 0) {
		/* never, says ggml; but if so the magnitudes change sign */
		scale = -scale;
		for (int k = 0; k < IQ3S_SUB / 8; k++)
			signs[k] = (uint8_t)(~signs[k] & 127);
	}
	return scale;
}

/* iq3_xxs, 98 bytes a block of 256:
 *
 *   0    2                        66                                      98
 *   +----+------------------------+---------------------------------------+
 *   | d  | qs[64]: grid row of     | 8 u32 LE, one per sub-block of 32:    |
 *   |    | group k of sub-block s  | bits 7m+6..7m: the 7 sign bits of its |
 *   |    | at 8s + k               | 8 values 8m.., bits 31..28: nibble    |
 *   +----+------------------------+---------------------------------------+
 *
 * d = 1.0125 * the largest sub-block scale / 31; the nibbles round each scale against
 * 1 / (that scale / 31) without the 1.0125: round((scale / d - 1) / 2), 0..15. A block
 * whose every scale is 0 is all zeros; a left-out sub-block has zero rows and signs. */
void quant_iq3_xxs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                     float row_sigma2)
{
	const struct quant_grid *g = quant_grid_get(QUANT_GRID_IQ3_XXS);
	float weight[QK_K], scales[QK_K / IQ3S_SUB];
	int8_t L[IQ3S_SUB];
	uint8_t signs[IQ3S_SUB / 8];
	uint32_t sas[QK_K / IQ3S_SUB];

	(void)row_sigma2;
	for (int64_t ibl = 0; ibl < nblocks; ibl++, x += QK_K, y += sizeof(struct block_iq3_xxs),
	     qw = qw ? qw + QK_K : NULL) {
		uint8_t *qs = y + offsetof(struct block_iq3_xxs, qs);
		float max_scale = 0;

		memset(qs, 0, QK_K / 4);
		memset(sas, 0, sizeof sas);
		quant_put16(y + offsetof(struct block_iq3_xxs, d), f32_to_fp16(0.f));
		weigh_block(x, qw, weight);
		for (int ib = 0; ib < QK_K / IQ3S_SUB; ib++) {
			bool skip;
			const float scale = xxs_sub_block(g, x + IQ3S_SUB * ib, weight + IQ3S_SUB * ib,
			                                  L, signs, &skip);
			scales[ib] = scale;
			if (skip)
				continue;
			for (int k = 0; k < IQ3S_GROUPS; k++) {
				const int32_t row = g->map[point_of(L + 4 * k)];
				qs[IQ3S_GROUPS * ib + k] = (uint8_t)(row >= 0 ? row : 0);
			}
			sas[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 |
			          (uint32_t)signs[3] << 21;
			max_scale = quant_maxf(max_scale, scale);
		}
		if (!max_scale) {
			memset(qs, 0, 3 * QK_K / 8);
			continue;
		}
		const float d = max_scale / 31;
		const float id = 1 / d;
		quant_put16(y + offsetof(struct block_iq3_xxs, d), f32_to_fp16(d * 1.0125f));
		for (int ib = 0; ib < QK_K / IQ3S_SUB; ib++) {
			const int l = quant_odd_level(scales[ib], id, 15);
			quant_put32(qs + QK_K / 4 + 4 * ib, sas[ib] | (uint32_t)l << 28);
		}
	}
}
