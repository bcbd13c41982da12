/* The scale searches of the k-quants and the legacy types (quant_search.h), as ggml's
 * make_qx_quants, make_qkx2_quants and make_qp_quants compute them.
 *
 * make_qx_quants tries 18 scales on the same values, and ggml runs each trial as its
 * own chain of additions, every step waiting on the one before. The trials do not
 * depend on each other until the best is picked, so here they run side by side, one
 * trial a lane (quant_vec.h), and the pick then walks the trials in ggml's order.
 * make_qkx2_quants's trials cannot (each starts from the minimum of the best one
 * before it): there the lanes are four groups, which never depend on each other. */
#include "quant_search.h"
#include "quant_impl.h"
#include "quant_vec.h"

#include <math.h>

/* ggml's clamp of an integer to lo..hi, MAX(lo, MIN(hi, v)). */
static int clampi(int v, int lo, int hi)
{
	return quant_maxi(lo, quant_mini(hi, v));
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

float quant_make_qx(int n, int nmax, const float *x, const float *w, int8_t *L)
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
		sumlx += w[i] * x[i] * l;
		suml2 += w[i] * l * l;
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
		float wx = w[i] * x[i];
		for (int g = 0; g < G; g++) {
			qk_vi l = v_clamp(v_nearest_int(vis[g] * x[i]), -nmax, nmax - 1);
			qk_vf lf = __builtin_convertvector(l, qk_vf);
			lv[g][i] = l;
			vlx[g] += wx * lf;
			vl2[g] += (w[i] * lf) * lf;
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

/* Each lane follows ggml's one group exactly: its operations in ggml's order, its
 * branches turned into per-lane selects (a group of equal values is finished off at
 * the end, as ggml's early return has it). */
void quant_make_qkx(int n, int nmax, const float *x, const float *w, uint8_t *L,
                    float *scale_out, float *the_min, float rmin, float rdelta, int nstep,
                    bool use_mad)
{
	qk_vf xt[32], wt[32];
	qk_vi lt[32], laux[32];

	if (n < 1 || n > 32)
		return;         /* never: the callers' groups are 16 or 32 */
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
		if (!v_any(fits))
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

/* make_qp_quants keeps its quants in uint8_t: a negative one (only from a negative
 * value) wraps there and is read back wrapped, while the sums take the int before the
 * store. Both are kept as ggml has them. */
float quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *w)
{
	float max = 0;

	for (int i = 0; i < n; i++)
		max = quant_maxf(max, x[i]);
	if (max < QK_GROUP_EPS) {
		memset(L, 0, (size_t)n);
		return 0.f;
	}
	float iscale = nmax / max;
	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)quant_nearest_int(iscale * x[i]);
	float scale = 1 / iscale;
	float best_mse = 0;
	for (int i = 0; i < n; i++) {
		float diff = x[i] - scale * L[i];
		best_mse += w[i] * diff * diff;
	}
	for (int is = -4; is <= 4; is++) {
		if (is == 0)
			continue;
		float iscale_is = (0.1f * is + nmax) / max;
		float scale_is = 1 / iscale_is;
		float mse = 0;
		for (int i = 0; i < n; i++) {
			int l = quant_mini(nmax, quant_nearest_int(iscale_is * x[i]));
			float diff = x[i] - scale_is * l;
			mse += w[i] * diff * diff;
		}
		if (mse < best_mse) {
			best_mse = mse;
			iscale = iscale_is;
		}
	}
	float sumlx = 0, suml2 = 0;
	for (int i = 0; i < n; i++) {
		int l = quant_mini(nmax, quant_nearest_int(iscale * x[i]));
		L[i] = (uint8_t)l;
		sumlx += w[i] * x[i] * l;
		suml2 += w[i] * l * l;
	}
	for (int itry = 0; itry < 5; itry++) {
		int n_changed = 0;
		for (int i = 0; i < n; i++) {
			float slx = sumlx - w[i] * x[i] * L[i];
			float sl2 = suml2 - w[i] * L[i] * L[i];
			if (!(slx > 0 && sl2 > 0))
				continue;
			int new_l = quant_mini(nmax, quant_nearest_int(x[i] * sl2 / slx));
			if (new_l == L[i])
				continue;
			slx += w[i] * x[i] * new_l;
			sl2 += w[i] * new_l * new_l;
			if (slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (uint8_t)new_l;
				sumlx = slx;
				suml2 = sl2;
				n_changed++;
			}
		}
		if (!n_changed)
			break;
	}
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void quant_fit_sums4(int n, const float *w, const float *xval, const int8_t *const L[4],
                     float sumqx[4], float sumq2[4])
{
	qk_vf sqx = { 0 }, sq2 = { 0 };

	for (int i = 0; i < n; i++) {
		const qk_vi l = { L[0][i], L[1][i], L[2][i], L[3][i] };
		const qk_vf q = __builtin_convertvector(2 * l + 1, qk_vf);
		sqx += (w[i] * xval[i]) * q;
		sq2 += (w[i] * q) * q;
	}
	for (int k = 0; k < QK_LANES; k++) {
		sumqx[k] = sqx[k];
		sumq2[k] = sq2[k];
	}
}
