/* The k-quants: super-blocks of 256 values in sub-blocks of 16 or 32, as ggml writes
 * them without an importance matrix (quantize_row_q{2,3,4,5,6}_K_ref) and with one
 * (quantize_row_q{2,3,4,5,6}_K_impl, the _w functions). Each searches a scale (and a
 * minimum) per sub-block that fits its values best (quant_search.h), then quantizes
 * those scales themselves against one fp16 super-scale, then the values against the
 * scales as they will be decoded; a matrix weighs each value in the searches (its
 * column's value times sqrt(sigma2 + x^2), sigma2 the super-block's mean x^2) and
 * changes how the scales are quantized. A super-block depends on its own values and
 * columns only. Every float operation is ggml's, in ggml's order (with
 * -ffp-contract=off), so that each search takes the same turns and the bytes come out
 * the same, NaN and inf inputs included. blocks.h has each layout in full. */
#include "quant_impl.h"
#include "quant_search.h"
#include "quant_vec.h"

#include "blocks.h"
#include "half.h"

#include <math.h>
#include <stdbool.h>

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
		if (!v_any(changed))
			break;
	}
	qk_vf scale = v_select(suml2 > 0.0f, sumlx / suml2, zero);
	for (int k = 0; k < QK_LANES; k++) {
		scale_out[k] = empty[k] ? 0.f : scale[k];
		for (int i = 0; i < n; i++)
			L[k * n + i] = (int8_t)(empty[k] ? 0 : lt[i][k] + nmax);
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

/* The sum of x^2 over a super-block, in order from 0, times 2, over 256: ggml's sigma2
 * of the weighted k-quants but q2_K (which has no 2) and of most i-quants. */
static float sigma2_k(const float *x)
{
	float sum_x2 = 0;

	for (int l = 0; l < QK_K; l++)
		sum_x2 += x[l] * x[l];
	return 2 * sum_x2 / QK_K;
}

/* The weights ggml's quantize_row_*_impl give n values x under the matrix's qw:
 * qw * sqrt(sigma2 + x^2), into w; and the sum of each group of g of them, in order
 * from 0, into sw (n / g sums). */
static void weigh(int n, int g, const float *x, const float *qw, float sigma2, float *w,
                  float *sw)
{
	for (int l = 0; l < n; l++)
		w[l] = qw[l] * sqrtf(sigma2 + x[l] * x[l]);
	for (int j = 0; j < n / g; j++) {
		float sum = 0;
		for (int l = 0; l < g; l++)
			sum += w[g * j + l];
		sw[j] = sum;
	}
}

/* q2_K's last step, weighted or not: with d, dmin and the 4-bit scales and minimums
 * written at y, every value of x quantized again against its sub-block's scale and
 * minimum as decoded (0..3, into L; where the decoded scale is 0, the search's quants
 * in L stay), and L packed into qs. */
static void q2_K_finish(const float *x, uint8_t *y, uint8_t L[QK_K])
{
	const uint8_t *sc = y + offsetof(struct block_q2_K, scales);
	const float d_all = half_at(y + offsetof(struct block_q2_K, d));
	const float dmin_all = half_at(y + offsetof(struct block_q2_K, dmin));

	for (int j = 0; j < QK_K / 16; j++) {
		const float d = d_all * (sc[j] & 0xF);
		if (!d)
			continue;
		const float dm = dmin_all * (sc[j] >> 4);
		for (int ii = 0; ii < 16; ii++) {
			int l = quant_nearest_int((x[16 * j + ii] + dm) / d);
			L[16 * j + ii] = (uint8_t)clampi(l, 0, 3);
		}
	}
	pack_2bit_planes(L, y + offsetof(struct block_q2_K, qs));
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
			quant_make_qkx(16, 3, x + 16 * j, weights + 16 * j, L + 16 * j, &scales[j],
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

		q2_K_finish(x, y, L);
	}
}

/* q2_K under a matrix (ggml's quantize_row_q2_K_impl): weights qw * sqrt(sigma2 + x^2),
 * sigma2 the super-block's mean x^2 (no 2 here); each sub-block of 16 a scale and a
 * minimum from make_qkx3_quants (rmin -0.9, 36 steps of 0.05, squared error); the
 * scales and the minimums quantized to 4 bits by make_qp_quants, weighted by each
 * sub-block's summed weight; then as without one. qw NULL: quant_q2_K. */
void quant_q2_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	uint8_t L[QK_K], Ls[QK_K / 16], Lm[QK_K / 16];
	float weights[QK_K], sw[QK_K / 16], mins[QK_K / 16], scales[QK_K / 16];

	(void)row_sigma2;
	if (!qw) {
		quant_q2_K(x, y, nblocks);
		return;
	}
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q2_K), qw += QK_K) {
		float sumx2 = 0;
		for (int j = 0; j < QK_K; j++)
			sumx2 += x[j] * x[j];
		weigh(QK_K, 16, x, qw, sumx2 / QK_K, weights, sw);
		for (int j = 0; j < QK_K / 16; j += QK_LANES)
			quant_make_qkx(16, 3, x + 16 * j, weights + 16 * j, L + 16 * j, &scales[j],
			               &mins[j], -0.9f, 0.05f, 36, false);
		const float dm = quant_make_qp(QK_K / 16, 15, scales, Ls, sw);
		const float mm = quant_make_qp(QK_K / 16, 15, mins, Lm, sw);
		quant_put16(y + offsetof(struct block_q2_K, d), f32_to_fp16(dm));
		quant_put16(y + offsetof(struct block_q2_K, dmin), f32_to_fp16(mm));
		uint8_t *sc = y + offsetof(struct block_q2_K, scales);
		for (int j = 0; j < QK_K / 16; j++)
			sc[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
		q2_K_finish(x, y, L);
	}
}

/* q3_K's last step, weighted or not: with d and the 6-bit scales written at y, every
 * value of x quantized again against its sub-block's scale as decoded (0..7, into L;
 * where the decoded scale is 0, the search's quants in L stay), then bit 2 of each
 * into hmask and the low 2 bits into the planes of qs (without ggml's branch on
 * q > 3, which random data mispredicts). */
static void q3_K_finish(const float *x, uint8_t *y, int8_t L[QK_K])
{
	const uint8_t *sc = y + offsetof(struct block_q3_K, scales);
	const float d_all = half_at(y + offsetof(struct block_q3_K, d));

	for (int j = 0; j < QK_K / 16; j++) {
		int s = j < 8 ? sc[j] & 0xF : sc[j - 8] >> 4;
		s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
		float d = d_all * s;
		if (!d)
			continue;
		for (int ii = 0; ii < 16; ii++) {
			int l = quant_nearest_int(x[16 * j + ii] / d);
			L[16 * j + ii] = (int8_t)(clampi(l, -4, 3) + 4);
		}
	}

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

		q3_K_finish(x, y, L);
	}
}

/* q3_K under a matrix (ggml's quantize_row_q3_K_impl): weights qw * sqrt(sigma2 + x^2);
 * each sub-block of 16 a signed scale from make_qx_quants under them; the scales
 * quantized to 6 bits by make_qx_quants again, weighted by each sub-block's summed
 * weight; then as without one. qw NULL: quant_q3_K. */
void quant_q3_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	int8_t L[QK_K], Ls[QK_K / 16];
	float weights[QK_K], sw[QK_K / 16], scales[QK_K / 16];

	(void)row_sigma2;
	if (!qw) {
		quant_q3_K(x, y, nblocks);
		return;
	}
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q3_K), qw += QK_K) {
		weigh(QK_K, 16, x, qw, sigma2_k(x), weights, sw);
		for (int j = 0; j < QK_K / 16; j++)
			scales[j] = quant_make_qx(16, 4, x + 16 * j, weights + 16 * j, L + 16 * j);
		uint8_t *sc = y + offsetof(struct block_q3_K, scales);
		memset(sc, 0, 12);
		const float d_block = quant_make_qx(QK_K / 16, 32, scales, sw, Ls);
		for (int j = 0; j < QK_K / 16; j++) {
			int l = Ls[j];
			if (j < 8)
				sc[j] = (uint8_t)(l & 0xF);
			else
				sc[j - 8] |= (uint8_t)((l & 0xF) << 4);
			l >>= 4;
			sc[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
		}
		quant_put16(y + offsetof(struct block_q3_K, d), f32_to_fp16(d_block));
		q3_K_finish(x, y, L);
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

/* What q4_K and q5_K share without a matrix: for each sub-block of 32, a scale and a
 * minimum from make_qkx2_quants (weights rms + |x|, squared error; nmax and the
 * search's rmin and nstep are the type's), the search's quants in L (0..nmax); both
 * quantized to 6 bits against the largest of each into the 12 scale bytes sc and the
 * fp16 d and dmin at dp and dminp. */
static void k4_scales_plain(const float *x, int nmax, float rmin, int nstep, uint8_t *sc,
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
		quant_make_qkx(32, nmax, x + 32 * j, weights + 32 * j, L + 32 * j, &scales[j],
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
}

/* What q4_K and q5_K share under a matrix (ggml's quantize_row_q{4,5}_K_impl): for
 * each sub-block of 32, weights from the matrix's qw (weigh), a scale and a minimum
 * from make_qkx3_quants (rmin -0.9, 36 steps of 0.05), its quants in L (0..nmax); the
 * scales and the minimums quantized to 6 bits by make_qp_quants weighted by each
 * sub-block's summed weight (clamped to 63 where clamp, as q5_K does and q4_K does
 * not), into sc, d and dmin. */
static void k4_scales_weighted(const float *x, const float *qw, int nmax, bool clamp,
                               uint8_t *sc, uint8_t *dp, uint8_t *dminp, uint8_t L[QK_K])
{
	uint8_t ls[QK_K / 32], lm[QK_K / 32];
	float weights[QK_K], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];

	weigh(QK_K, 32, x, qw, sigma2_k(x), weights, sw);
	for (int j = 0; j < QK_K / 32; j += QK_LANES)
		quant_make_qkx(32, nmax, x + 32 * j, weights + 32 * j, L + 32 * j, &scales[j],
		               &mins[j], -0.9f, 0.05f, 36, false);
	const float d_block = quant_make_qp(QK_K / 32, 63, scales, ls, sw);
	const float m_block = quant_make_qp(QK_K / 32, 63, mins, lm, sw);
	for (int j = 0; clamp && j < QK_K / 32; j++) {
		ls[j] = ls[j] < 63 ? ls[j] : 63;
		lm[j] = lm[j] < 63 ? lm[j] : 63;
	}
	pack_scale_min_k4(ls, lm, sc);
	quant_put16(dp, f32_to_fp16(d_block));
	quant_put16(dminp, f32_to_fp16(m_block));
}

/* q4_K's and q5_K's last step: every value of x quantized again against its
 * sub-block's scale and minimum as decoded from sc, d and dmin, into L (0..nmax; where
 * the decoded scale is 0, the search's quants in L stay). */
static void k4_requantize(const float *x, int nmax, const uint8_t *sc, const uint8_t *dp,
                          const uint8_t *dminp, uint8_t L[QK_K])
{
	const float d_all = half_at(dp), dmin_all = half_at(dminp);

	for (int j = 0; j < QK_K / 32; j++) {
		uint8_t s, m;
		k4_scale_min(sc, j, &s, &m);
		const float d = d_all * s;
		if (!d)
			continue;
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
	quant_q4_K_w(x, y, nblocks, NULL, 0);
}

/* q4_K without a matrix (qw NULL) or with one (the matrix's value for each of x),
 * its sub-block scales by k4_scales_plain or k4_scales_weighted. */
void quant_q4_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	uint8_t L[QK_K];

	(void)row_sigma2;
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q4_K)) {
		uint8_t *sc = y + offsetof(struct block_q4_K, scales);
		uint8_t *dp = y + offsetof(struct block_q4_K, d);
		uint8_t *dminp = y + offsetof(struct block_q4_K, dmin);
		if (qw) {
			k4_scales_weighted(x, qw, 15, false, sc, dp, dminp, L);
			qw += QK_K;
		} else {
			k4_scales_plain(x, 15, -1.f, 20, sc, dp, dminp, L);
		}
		k4_requantize(x, 15, sc, dp, dminp, L);
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
	quant_q5_K_w(x, y, nblocks, NULL, 0);
}

/* q5_K without a matrix (qw NULL) or with one, as q4_K. */
void quant_q5_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	uint8_t L[QK_K];

	(void)row_sigma2;
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q5_K)) {
		uint8_t *sc = y + offsetof(struct block_q5_K, scales);
		uint8_t *dp = y + offsetof(struct block_q5_K, d);
		uint8_t *dminp = y + offsetof(struct block_q5_K, dmin);
		if (qw) {
			k4_scales_weighted(x, qw, 31, true, sc, dp, dminp, L);
			qw += QK_K;
		} else {
			k4_scales_plain(x, 31, -0.5f, 15, sc, dp, dminp, L);
		}
		k4_requantize(x, 31, sc, dp, dminp, L);
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
 * Each sub-block of 16 gets a scale from make_qx_quants, weighted by x^2 or, under a
 * matrix, by the matrix's values themselves (ggml's quantize_row_q6_K_impl uses no
 * sigma2); the scales are quantized to int8 against the one of largest magnitude
 * (-128 at it), then the values again against the decoded scales. A super-block whose
 * scales are all ~0 is all zero bytes. */
void quant_q6_K(const float *x, uint8_t *y, int64_t nblocks)
{
	quant_q6_K_w(x, y, nblocks, NULL, 0);
}

/* q6_K without a matrix (qw NULL) or with one (the matrix's value for each of x). */
void quant_q6_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                  float row_sigma2)
{
	int8_t L[QK_K];
	float scales[QK_K / 16], w2[16];

	(void)row_sigma2;
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_q6_K),
	     qw = qw ? qw + QK_K : NULL) {
		float max_scale = 0, max_abs_scale = 0;

		for (int ib = 0; ib < QK_K / 16; ib++) {
			const float *xb = x + 16 * ib;
			const float *w = qw ? qw + 16 * ib : w2;
			for (int l = 0; !qw && l < 16; l++)
				w2[l] = xb[l] * xb[l];
			const float scale = quant_make_qx(16, 32, xb, w, L + 16 * ib);
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
