/* The k-quants: super-blocks of 256 values in sub-blocks of 16 or 32, as ggml's
 * quantize_row_q{2,3,4,5,6}_K_ref write them (no importance matrix). Each searches a
 * scale (and a minimum) per sub-block that fits its values best, then quantizes those
 * scales themselves against one fp16 super-scale, then the values against the scales
 * as they will be decoded. Every float operation is ggml's, in ggml's order (with
 * -ffp-contract=off), so that each search takes the same turns and the bytes come out
 * the same, NaN and inf inputs included. blocks.h has each layout in full. */
#include "quant_impl.h"

#include "blocks.h"
#include "half.h"

#include <math.h>
#include <stdbool.h>

/* Below this, a sub-block is all zeros (ggml's GROUP_MAX_EPS). */
#define QK_GROUP_EPS 1e-15f

/* An int stored into int8_t, as gcc does it: its low byte, signed. */
static int wrap_int8(int v)
{
	v &= 0xff;
	return v > 127 ? v - 256 : v;
}

/* ggml's clamp of an integer to lo..hi, MAX(lo, MIN(hi, v)). */
static int clampi(int v, int lo, int hi)
{
	return quant_maxi(lo, quant_mini(hi, v));
}

/* make_qx_quants tries 18 scales on the same values, and ggml runs each trial as its
 * own loop of additions, a chain where every step waits on the one before. The trials
 * do not depend on each other until the best is picked, so here they run side by side,
 * one trial a lane of a vector (gcc's vector extensions, 4 lanes: one SSE2 register):
 * each lane does its trial's operations in ggml's order, and the pick then walks the
 * trials in ggml's order. Exact: IEEE arithmetic gives a lane the bits the scalar
 * operation gives. make_qkx2_quants's trials cannot (each starts from the minimum of
 * the best one before it), nor can make_q3_quants's passes: there the lanes are four
 * sub-blocks, which never depend on each other. */
#define QK_LANES 4
typedef float qk_vf __attribute__((vector_size(4 * QK_LANES)));
typedef int32_t qk_vi __attribute__((vector_size(4 * QK_LANES)));

/* quant_nearest_int in every lane. */
static inline __attribute__((always_inline)) qk_vi v_nearest_int(qk_vf f)
{
	qk_vi i = (qk_vi)(f + 12582912.f);
	return (i & 0x007fffff) - 0x00400000;
}

/* clampi in every lane. */
static inline __attribute__((always_inline)) qk_vi v_clamp(qk_vi v, int lo, int hi)
{
	qk_vi vlo = (qk_vi){ 0 } + lo, vhi = (qk_vi){ 0 } + hi;
	qk_vi below = v < vlo;
	v = (v & ~below) | (vlo & below);
	qk_vi above = v > vhi;
	return (v & ~above) | (vhi & above);
}

/* The value of largest magnitude among n (the first of equal ones), signed, and its
 * magnitude in *amax; 0 and 0 when every value is 0 or NaN. */
static float signed_absmax(int n, const float *x, float *amax)
{
	float max = 0, a = 0;

	for (int i = 0; i < n; i++) {
		float ax = fabsf(x[i]);
		if (ax > a) {
			a = ax;
			max = x[i];
		}
	}
	*amax = a;
	return max;
}

/* ggml's make_qx_quants with rmse_type 1 and no weights (the one q6_K uses): a scale
 * for n values and their quants L[i] in 0..2 nmax - 1 (q = L - nmax), the scale being
 * the least-squares one weighted by x^2, from the best of 19 trial inverse scales
 * around -nmax / max. Returns the scale; 0 with every L 0 for an all-zero group. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L)
{
	float amax;
	float max = signed_absmax(n, x, &amax);

	if (amax < QK_GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = -nmax / max;
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
		L[i] = (int8_t)(l + nmax);
		float w = x[i] * x[i];
		sumlx += w * x[i] * l;
		suml2 += w * l * l;
	}
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;

	/* the 18 trials is = -9..-1, 1..9, side by side (the last 2 lanes idle) */
	enum { G = 5 };
	float isc[G * QK_LANES];
	for (int t = 0; t < G * QK_LANES; t++) {
		int is = t < 9 ? t - 9 : t - 8;
		isc[t] = -(nmax + 0.1f * is) / max;
	}
	qk_vf vis[G], vlx[G], vl2[G];
	qk_vi lv[G][32];
	for (int g = 0; g < G; g++) {
		memcpy(&vis[g], isc + g * QK_LANES, sizeof vis[g]);
		vlx[g] = vl2[g] = (qk_vf){ 0 };
	}
	for (int i = 0; i < n; i++) {
		float w = x[i] * x[i];
		float wx = w * x[i];
		for (int g = 0; g < G; g++) {
			qk_vi l = v_clamp(v_nearest_int(vis[g] * x[i]), -nmax, nmax - 1);
			qk_vf lf = __builtin_convertvector(l, qk_vf);
			lv[g][i] = l;
			vlx[g] += wx * lf;
			vl2[g] += (w * lf) * lf;
		}
	}
	for (int t = 0; t < 18; t++) {
		int g = t / QK_LANES, k = t % QK_LANES;
		float trial_lx = vlx[g][k], trial_l2 = vl2[g][k];
		if (trial_l2 > 0 && trial_lx * trial_lx > best * trial_l2) {
			for (int i = 0; i < n; i++)
				L[i] = (int8_t)(nmax + lv[g][i][k]);
			scale = trial_lx / trial_l2;
			best = scale * trial_lx;
		}
	}
	return scale;
}

/* Where mask (all ones or zeros a lane) is set, a; elsewhere b. */
static inline __attribute__((always_inline)) qk_vf v_select(qk_vi mask, qk_vf a, qk_vf b)
{
	return (qk_vf)(((qk_vi)a & mask) | ((qk_vi)b & ~mask));
}

static inline __attribute__((always_inline)) qk_vi v_select_i(qk_vi mask, qk_vi a, qk_vi b)
{
	return (a & mask) | (b & ~mask);
}

/* fabsf in every lane. */
static inline __attribute__((always_inline)) qk_vf v_fabs(qk_vf f)
{
	return (qk_vf)((qk_vi)f & 0x7fffffff);
}

/* ggml's make_q3_quants with do_rmse (q3_K's), for QK_LANES groups at once, one a lane:
 * group k is the n values x[k n ..]. For each: quants L[k n + i] in 0..2 nmax - 1
 * (q = L - nmax) from -nmax / max, then up to 5 passes that move one quant at a time
 * where that raises the x^2-weighted fit; the fitted scale goes to scale_out[k] (0 with
 * every L 0 for an all-zero group). n <= 16.
 *
 * Each lane follows ggml's one group exactly, its branches turned into per-lane
 * selects. ggml stops after a pass that changed nothing; a lane here may run more
 * passes while another lane still changes, but a pass over an unchanged state makes the
 * same decisions again, so it changes nothing either. */
static void make_q3_quants(int n, int nmax, const float *x, int8_t *L, float *scale_out)
{
	qk_vf xt[16];
	qk_vi lt[16];
	const qk_vf zero = { 0 };

	for (int i = 0; i < n; i++)
		for (int k = 0; k < QK_LANES; k++)
			xt[i][k] = x[k * n + i];

	qk_vf amax = zero, max = zero;
	for (int i = 0; i < n; i++) {
		qk_vf ax = v_fabs(xt[i]);
		qk_vi larger = ax > amax;
		amax = v_select(larger, ax, amax);
		max = v_select(larger, xt[i], max);
	}
	const qk_vi empty = amax < QK_GROUP_EPS;  /* ggml returns 0, all quants 0 */

	qk_vf iscale = (float)-nmax / max;
	qk_vf sumlx = zero, suml2 = zero;
	for (int i = 0; i < n; i++) {
		lt[i] = v_clamp(v_nearest_int(iscale * xt[i]), -nmax, nmax - 1);
		qk_vf l = __builtin_convertvector(lt[i], qk_vf);
		qk_vf w = xt[i] * xt[i];
		sumlx += w * xt[i] * l;
		suml2 += w * l * l;
	}
	for (int itry = 0; itry < 5; itry++) {
		qk_vi changed = { 0 };
		for (int i = 0; i < n; i++) {
			qk_vf w = xt[i] * xt[i];
			qk_vf l = __builtin_convertvector(lt[i], qk_vf);
			qk_vf slx = sumlx - w * xt[i] * l;
			qk_vi positive = slx > 0;
			qk_vf sl2 = suml2 - w * l * l;
			qk_vi new_l = v_clamp(v_nearest_int(xt[i] * sl2 / slx), -nmax, nmax - 1);
			qk_vf nl = __builtin_convertvector(new_l, qk_vf);
			slx += w * xt[i] * nl;
			sl2 += w * nl * nl;
			qk_vi take = positive & (new_l != lt[i]) & (sl2 > 0) &
			             (slx * slx * suml2 > sumlx * sumlx * sl2);
			lt[i] = v_select_i(take, new_l, lt[i]);
			sumlx = v_select(take, slx, sumlx);
			suml2 = v_select(take, sl2, suml2);
			changed |= take;
		}
		if (!(changed[0] | changed[1] | changed[2] | changed[3]))
			break;
	}
	qk_vf scale = v_select(suml2 > 0.0f, sumlx / suml2, zero);
	for (int k = 0; k < QK_LANES; k++) {
		scale_out[k] = empty[k] ? 0.f : scale[k];
		for (int i = 0; i < n; i++)
			L[k * n + i] = (int8_t)(empty[k] ? 0 : lt[i][k] + nmax);
	}
}

/* ggml's make_qkx2_quants, for QK_LANES sub-blocks at once, one a lane: sub-block k is
 * the n values x[k n ..] with weights w[k n ..]. For each: a scale and a minimum, and
 * the quants L[k n + i] in 0..nmax (x ~ scale * L - the minimum), the best by weighted
 * error (absolute with use_mad, else squared) among the plain fit from the range and
 * nstep + 1 least-squares fits of trial inverse scales (rmin + rdelta * is + nmax) /
 * range, each trial starting from the minimum of the best before it. The scale goes to
 * scale[k], the minimum, negated (so >= 0), to the_min[k]. n <= 32.
 *
 * Each lane follows ggml's one sub-block exactly: its operations in ggml's order, its
 * branches turned into per-lane selects (a sub-block of equal values is finished off at
 * the end, as ggml's early return has it). The sub-blocks do not depend on each other,
 * so running them side by side changes no bit, and lets the chains of additions that
 * ggml waits on one at a time run four at once. */
static void make_qkx2_quants(int n, int nmax, const float *x, const float *w, uint8_t *L,
                             float *scale_out, float *the_min,
                             float rmin, float rdelta, int nstep, bool use_mad)
{
	qk_vf xt[32], wt[32];
	qk_vi lt[32], laux[32];

	for (int i = 0; i < n; i++)
		for (int k = 0; k < QK_LANES; k++) {
			xt[i][k] = x[k * n + i];
			wt[i][k] = w[k * n + i];
		}

	qk_vf min = xt[0], max = xt[0];
	qk_vf sum_w = wt[0];
	qk_vf sum_x = sum_w * xt[0];
	for (int i = 1; i < n; i++) {
		min = v_select(xt[i] < min, xt[i], min);
		max = v_select(xt[i] > max, xt[i], max);
		sum_w += wt[i];
		sum_x += wt[i] * xt[i];
	}
	const qk_vf zero = { 0 };
	min = v_select(min > 0, zero, min);
	const qk_vi flat = max == min;       /* ggml returns 0, all quants 0, -min */
	const qk_vf flat_min = min;

	qk_vf iscale = (float)nmax / (max - min);
	qk_vf scale = 1 / iscale;
	qk_vf best_error = zero;
	for (int i = 0; i < n; i++) {
		lt[i] = v_clamp(v_nearest_int(iscale * (xt[i] - min)), 0, nmax);
		qk_vf diff = scale * __builtin_convertvector(lt[i], qk_vf) + min - xt[i];
		diff = use_mad ? v_fabs(diff) : diff * diff;
		best_error += wt[i] * diff;
	}
	for (int is = 0; is <= nstep; is++) {
		iscale = (rmin + rdelta * is + nmax) / (max - min);
		qk_vf sum_l = zero, sum_l2 = zero, sum_xl = zero;
		for (int i = 0; i < n; i++) {
			laux[i] = v_clamp(v_nearest_int(iscale * (xt[i] - min)), 0, nmax);
			qk_vf l = __builtin_convertvector(laux[i], qk_vf);
			sum_l += wt[i] * l;
			sum_l2 += wt[i] * l * l;
			sum_xl += wt[i] * l * xt[i];
		}
		qk_vf D = sum_w * sum_l2 - sum_l * sum_l;
		qk_vi fits = D > 0;
		if (!(fits[0] | fits[1] | fits[2] | fits[3]))
			continue;
		qk_vf this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		qk_vf this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
		qk_vi above = this_min > 0;
		this_min = v_select(above, zero, this_min);
		this_scale = v_select(above, sum_xl / sum_l2, this_scale);
		qk_vf cur_error = zero;
		for (int i = 0; i < n; i++) {
			qk_vf diff = this_scale * __builtin_convertvector(laux[i], qk_vf) + this_min - xt[i];
			diff = use_mad ? v_fabs(diff) : diff * diff;
			cur_error += wt[i] * diff;
		}
		qk_vi better = fits & (cur_error < best_error);
		for (int i = 0; i < n; i++)
			lt[i] = v_select_i(better, laux[i], lt[i]);
		best_error = v_select(better, cur_error, best_error);
		scale = v_select(better, this_scale, scale);
		min = v_select(better, this_min, min);
	}

	scale = v_select(flat, zero, scale);
	min = v_select(flat, flat_min, min);
	for (int k = 0; k < QK_LANES; k++) {
		scale_out[k] = scale[k];
		the_min[k] = -min[k];
		for (int i = 0; i < n; i++)
			L[k * n + i] = flat[k] ? 0 : (uint8_t)lt[i][k];
	}
}

/* Packs 256 2-bit quants (L[i] in 0..3, higher bits dropped) into q2_K's and q3_K's
 * four planes: qs[32h + l] holds values 128h + l, +32, +64, +96 from bit 0 up. */
static void pack_2bit_planes(const uint8_t *L, uint8_t *qs)
{
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
			                          (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* q2_K, 84 bytes:
 *
 *   0              16                          80     82     84
 *   +--------------+---------------------------+------+------+
 *   |  scales[16]  |          qs[64]           |  d   | dmin |
 *   +--------------+---------------------------+------+------+
 *    mmmm ssss per   2-bit planes: qs[32h + l]
 *    sub-block of    = v+96 v+64 v+32 v        (v = 128h + l)
 *    16                 76   54   32  10
 *
 *   value = d * ssss * q - dmin * mmmm          q = 0..3
 *
 * Each sub-block of 16 gets a scale and a minimum from make_qkx2_quants (weights |x|,
 * absolute error); both are quantized to 4 bits against the largest of each, and the
 * values are quantized again against the 4-bit scale and minimum as decoded. */
void quant_q2_K(const float *x, uint8_t *y, int64_t nblocks)
{
	const float q4scale = 15.f;
	uint8_t L[QK_K];
	float weights[QK_K], mins[QK_K / 16], scales[QK_K / 16];

	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q2_K)) {
		uint8_t *sc = y + offsetof(struct block_q2_K, scales);
		float max_scale = 0, max_min = 0;

		for (int l = 0; l < QK_K; l++)
			weights[l] = fabsf(x[l]);
		for (int j = 0; j < QK_K / 16; j += QK_LANES)
			make_qkx2_quants(16, 3, x + 16 * j, weights + 16 * j, L + 16 * j, &scales[j],
			                 &mins[j], -0.5f, 0.1f, 15, true);
		for (int j = 0; j < QK_K / 16; j++) {
			if (scales[j] > max_scale)
				max_scale = scales[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}

		if (max_scale > 0) {
			float iscale = q4scale / max_scale;
			for (int j = 0; j < QK_K / 16; j++)
				sc[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
			quant_put16(y + offsetof(struct block_q2_K, d), f32_to_fp16(max_scale / q4scale));
		} else {
			memset(sc, 0, QK_K / 16);
			quant_put16(y + offsetof(struct block_q2_K, d), f32_to_fp16(0.f));
		}
		if (max_min > 0) {
			float iscale = q4scale / max_min;
			for (int j = 0; j < QK_K / 16; j++)
				sc[j] |= (uint8_t)((unsigned)quant_nearest_int(iscale * mins[j]) << 4);
			quant_put16(y + offsetof(struct block_q2_K, dmin), f32_to_fp16(max_min / q4scale));
		} else {
			quant_put16(y + offsetof(struct block_q2_K, dmin), f32_to_fp16(0.f));
		}

		const float d_all = half_at(y + offsetof(struct block_q2_K, d));
		const float dmin_all = half_at(y + offsetof(struct block_q2_K, dmin));
		for (int j = 0; j < QK_K / 16; j++) {
			const float d = d_all * (sc[j] & 0xF);
			if (!d)
				continue;       /* the search's quants stay */
			const float dm = dmin_all * (sc[j] >> 4);
			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int((x[16 * j + ii] + dm) / d);
				L[16 * j + ii] = (uint8_t)clampi(l, 0, 3);
			}
		}
		pack_2bit_planes(L, y + offsetof(struct block_q2_K, qs));
	}
}

/* q3_K, 110 bytes:
 *
 *   0           32                     96             108    110
 *   +-----------+----------------------+--------------+------+
 *   | hmask[32] |        qs[64]        |  scales[12]  |  d   |
 *   +-----------+----------------------+--------------+------+
 *    bit b of     low 2 bits of q, in    16 6-bit scales, stored + 32:
 *    hmask[l]:    q2_K's planes          bytes 0-7:  sc j+8 (hi) | sc j (lo), bits 0-3
 *    bit 2 of q                          bytes 8-11: bits 4-5 of sc i, i+4, i+8, i+12
 *    of value 32b + l                                from bit 0 up
 *
 *   value = d * (sc - 32) * (q - 4)           q = 0..7
 *
 * Each sub-block of 16 gets a signed scale from make_q3_quants; the scales are
 * quantized to 6 bits against the one of largest magnitude (-32 at it), then the
 * values again against the decoded scales. */
void quant_q3_K(const float *x, uint8_t *y, int64_t nblocks)
{
	int8_t L[QK_K];
	float scales[QK_K / 16];

	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q3_K)) {
		uint8_t *sc = y + offsetof(struct block_q3_K, scales);
		float max_scale = 0, amax = 0;

		for (int j = 0; j < QK_K / 16; j += QK_LANES)
			make_q3_quants(16, 4, x + 16 * j, L + 16 * j, &scales[j]);
		for (int j = 0; j < QK_K / 16; j++) {
			float scale = fabsf(scales[j]);
			if (scale > amax) {
				amax = scale;
				max_scale = scales[j];
			}
		}

		memset(sc, 0, 12);
		if (max_scale) {
			float iscale = -32.f / max_scale;
			for (int j = 0; j < QK_K / 16; j++) {
				int l = clampi(wrap_int8(quant_nearest_int(iscale * scales[j])), -32, 31) + 32;
				if (j < 8)
					sc[j] = (uint8_t)(l & 0xF);
				else
					sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
				sc[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
			}
			quant_put16(y + offsetof(struct block_q3_K, d), f32_to_fp16(1 / iscale));
		} else {
			quant_put16(y + offsetof(struct block_q3_K, d), f32_to_fp16(0.f));
		}

		const float d_all = half_at(y + offsetof(struct block_q3_K, d));
		for (int j = 0; j < QK_K / 16; j++) {
			int s = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
			s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
			float d = d_all * s;
			if (!d)
				continue;       /* the search's quants stay */
			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int(x[16 * j + ii] / d);
				L[16 * j + ii] = (int8_t)(clampi(l, -4, 3) + 4);
			}
		}

		/* bit 2 of each quant (0..7) into hmask, then the low 2 bits into the planes;
		 * without ggml's branch on q > 3, which random data mispredicts */
		uint8_t *hmask = y + offsetof(struct block_q3_K, hmask);
		uint8_t low[QK_K];
		for (int l = 0; l < 32; l++) {
			unsigned h = 0;
			for (int b = 0; b < 8; b++)
				h |= (unsigned)(L[32 * b + l] >> 2) << b;
			hmask[l] = (uint8_t)h;
		}
		for (int j = 0; j < QK_K; j++)
			low[j] = (uint8_t)(L[j] & 3);
		pack_2bit_planes(low, y + offsetof(struct block_q3_K, qs));
	}
}

/* Packs eight 6-bit scales and mins (0..63) into q4_K's and q5_K's 12 bytes (blocks.h's
 * k4_scale_min unpacks them):
 *
 *   byte j     (0..3) = SS ssssss   sc j,  SS = bits 4-5 of sc j+4
 *   byte j + 4 (0..3) = MM mmmmmm   m j,   MM = bits 4-5 of m j+4
 *   byte j + 8 (0..3) = mmmm ssss   bits 0-3 of m j+4 and of sc j+4 */
static void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8], uint8_t *sc)
{
	for (int j = 0; j < QK_K / 32; j++) {
		if (j < 4) {
			sc[j] = ls[j];
			sc[j + 4] = lm[j];
		} else {
			sc[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
			sc[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
			sc[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
		}
	}
}

/* What q4_K and q5_K share: for each sub-block of 32, a scale and a minimum from
 * make_qkx2_quants (weights rms + |x|, squared error; nmax and the search's rmin and
 * nstep are the type's); both quantized to 6 bits against the largest of each into
 * the 12 scale bytes sc and the fp16 d and dmin at dp and dminp; then every value
 * quantized again against the decoded scale and minimum, into L (0..nmax). */
static void quant_k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *sc,
                            uint8_t *dp, uint8_t *dminp, uint8_t L[QK_K])
{
	uint8_t ls[QK_K / 32], lm[QK_K / 32];
	float weights[QK_K], mins[QK_K / 32], scales[QK_K / 32];
	float max_scale = 0, max_min = 0;

	for (int j = 0; j < QK_K / 32; j++) {
		float sum_x2 = 0;
		for (int l = 0; l < 32; l++)
			sum_x2 += x[32 * j + l] * x[32 * j + l];
		float av_x = sqrtf(sum_x2 / 32);
		for (int l = 0; l < 32; l++)
			weights[32 * j + l] = av_x + fabsf(x[32 * j + l]);
	}
	for (int j = 0; j < QK_K / 32; j += QK_LANES)
		make_qkx2_quants(32, nmax, x + 32 * j, weights + 32 * j, L + 32 * j, &scales[j],
		                 &mins[j], rmin, 0.1f, nstep, false);
	for (int j = 0; j < QK_K / 32; j++) {
		if (scales[j] > max_scale)
			max_scale = scales[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}

	float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
	for (int j = 0; j < QK_K / 32; j++) {
		uint8_t s = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
		uint8_t m = (uint8_t)quant_nearest_int(inv_min * mins[j]);
		ls[j] = s < 63 ? s : 63;
		lm[j] = m < 63 ? m : 63;
	}
	pack_scale_min_k4(ls, lm, sc);
	quant_put16(dp, f32_to_fp16(max_scale / 63.f));
	quant_put16(dminp, f32_to_fp16(max_min / 63.f));

	const float d_all = half_at(dp), dmin_all = half_at(dminp);
	for (int j = 0; j < QK_K / 32; j++) {
		uint8_t s, m;
		k4_scale_min(sc, j, &s, &m);
		const float d = d_all * s;
		if (!d)
			continue;       /* the search's quants stay */
		const float dm = dmin_all * m;
		for (int ii = 0; ii < 32; ii++) {
			int l = quant_nearest_int((x[32 * j + ii] + dm) / d);
			L[32 * j + ii] = (uint8_t)clampi(l, 0, nmax);
		}
	}
}

/* q4_K, 144 bytes:
 *
 *   0      2      4              16                                144
 *   +------+------+--------------+----------------------------------+
 *   |  d   | dmin |  scales[12]  |             qs[128]              |
 *   +------+------+--------------+----------------------------------+
 *                  6-bit sc, m    qs[32c + l] = hhhh llll: values 64c + 32 + l
 *                  per 32 values  (sub-block 2c + 1) and 64c + l (sub-block 2c)
 *
 *   value = d * sc * q - dmin * m           q = 0..15
 */
void quant_q4_K(const float *x, uint8_t *y, int64_t nblocks)
{
	uint8_t L[QK_K];

	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q4_K)) {
		quant_k4_scales(x, 15, -1.f, 20, y + offsetof(struct block_q4_K, scales),
		                y + offsetof(struct block_q4_K, d),
		                y + offsetof(struct block_q4_K, dmin), L);
		uint8_t *q = y + offsetof(struct block_q4_K, qs);
		for (int j = 0; j < QK_K; j += 64, q += 32)
			for (int l = 0; l < 32; l++)
				q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
	}
}

/* q5_K, 176 bytes:
 *
 *   0      2      4              16           48                     176
 *   +------+------+--------------+------------+----------------------+
 *   |  d   | dmin |  scales[12]  |   qh[32]   |        qs[128]       |
 *   +------+------+--------------+------------+----------------------+
 *                  as q4_K        bit s of qh[l] = bit 4 of value 32s + l;
 *                                 qs: the low 4 bits, as q4_K's
 *
 *   value = d * sc * q - dmin * m           q = 0..31
 */
void quant_q5_K(const float *x, uint8_t *y, int64_t nblocks)
{
	uint8_t L[QK_K];

	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q5_K)) {
		quant_k4_scales(x, 31, -0.5f, 15, y + offsetof(struct block_q5_K, scales),
		                y + offsetof(struct block_q5_K, d),
		                y + offsetof(struct block_q5_K, dmin), L);
		uint8_t *qh = y + offsetof(struct block_q5_K, qh);
		uint8_t *ql = y + offsetof(struct block_q5_K, qs);
		memset(qh, 0, QK_K / 8);
		for (int n = 0, s = 0; n < QK_K; n += 64, s += 2, ql += 32) {
			for (int j = 0; j < 32; j++) {
				int l1 = L[n + j], l2 = L[n + j + 32];
				if (l1 > 15) {
					l1 -= 16;
					qh[j] |= (uint8_t)(1u << s);
				}
				if (l2 > 15) {
					l2 -= 16;
					qh[j] |= (uint8_t)(2u << s);
				}
				ql[j] = (uint8_t)(l1 | (l2 << 4));
			}
		}
	}
}

/* q6_K, 210 bytes:
 *
 *   0                   128             192          208    210
 *   +-------------------+---------------+------------+------+
 *   |      ql[128]      |    qh[64]     | scales[16] |  d   |
 *   +-------------------+---------------+------------+------+
 *    low 4 bits of q     bits 4-5 of q   int8, one per 16 values
 *
 *   In half h (0, 1), l = 0..31, v = 128h + l:
 *     ql[64h + l]      = v+64 | v      (hhhh llll)
 *     ql[64h + 32 + l] = v+96 | v+32
 *     qh[32h + l]      = v+96 v+64 v+32 v   (2 bits each, from bit 0 up)
 *
 *   value = d * scale * (q - 32)            q = 0..63
 *
 * Each sub-block of 16 gets a scale from make_qx_quants; the scales are quantized to
 * int8 against the one of largest magnitude (-128 at it), then the values again
 * against the decoded scales. A super-block whose scales are all ~0 is all zero bytes. */
void quant_q6_K(const float *x, uint8_t *y, int64_t nblocks)
{
	int8_t L[QK_K];
	float scales[QK_K / 16];

	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q6_K)) {
		float max_scale = 0, max_abs_scale = 0;

		for (int ib = 0; ib < QK_K / 16; ib++) {
			const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
			scales[ib] = scale;
			const float abs_scale = fabsf(scale);
			if (abs_scale > max_abs_scale) {
				max_abs_scale = abs_scale;
				max_scale = scale;
			}
		}

		if (max_abs_scale < QK_GROUP_EPS) {
			memset(y, 0, sizeof(struct block_q6_K));
			quant_put16(y + offsetof(struct block_q6_K, d), f32_to_fp16(0.f));
			continue;
		}

		int8_t *sc = (int8_t *)(y + offsetof(struct block_q6_K, scales));
		float iscale = -128.f / max_scale;
		quant_put16(y + offsetof(struct block_q6_K, d), f32_to_fp16(1 / iscale));
		for (int ib = 0; ib < QK_K / 16; ib++)
			sc[ib] = (int8_t)wrap_int8(quant_mini(127, quant_nearest_int(iscale * scales[ib])));

		const float d_all = half_at(y + offsetof(struct block_q6_K, d));
		for (int j = 0; j < QK_K / 16; j++) {
			float d = d_all * sc[j];
			if (!d)
				continue;       /* the search's quants stay */
			for (int ii = 0; ii < 16; ii++) {
				int l = quant_nearest_int(x[16 * j + ii] / d);
				L[16 * j + ii] = (int8_t)(clampi(l, -32, 31) + 32);
			}
		}

		uint8_t *ql = y + offsetof(struct block_q6_K, ql);
		uint8_t *qh = y + offsetof(struct block_q6_K, qh);
		for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
			for (int l = 0; l < 32; l++) {
				const uint8_t q1 = L[j + l + 0] & 0xF;
				const uint8_t q2 = L[j + l + 32] & 0xF;
				const uint8_t q3 = L[j + l + 64] & 0xF;
				const uint8_t q4 = L[j + l + 96] & 0xF;
				ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
				ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
				qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
				                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
			}
		}
	}
}
