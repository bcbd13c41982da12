/* The scale searches the k-quants and the legacy types share (ggml-quants.c's
 * make_qx_quants, make_qkx2_quants / make_qkx3_quants and make_qp_quants): each fits
 * a scale (and a minimum) to a group of values under weights, by ggml's float
 * operations in ggml's order, so that every comparison takes ggml's turn and the
 * quants come out the same, NaN and inf included. Private to this layer. */
#ifndef GGUFS_QUANT_SEARCH_H
#define GGUFS_QUANT_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

/* Below this largest magnitude a group is all zeros (ggml's GROUP_MAX_EPS). */
#define QK_GROUP_EPS 1e-15f

/* ggml's make_qx_quants with rmse_type 1 and weights w (n of them): a signed scale for
 * the n values x (n <= 32) and their quants L[i] in 0..2 nmax - 1 (q = L - nmax), the
 * scale being the w-weighted least-squares one from the best of 19 trial inverse
 * scales around -nmax / max (max the value of largest magnitude). Returns the scale;
 * 0 with every L 0 for a group whose largest magnitude is below QK_GROUP_EPS. */
float quant_make_qx(int n, int nmax, const float *x, const float *w, int8_t *L);

/* ggml's make_qkx2_quants, which is also make_qkx3_quants given weights, for four
 * groups at once: group k is the n values x[k n ..] (n <= 32) with weights w[k n ..].
 * For each: a scale and a minimum, and the quants L[k n + i] in 0..nmax (x ~ scale * L
 * - the minimum), the best by weighted error (absolute with use_mad, else squared)
 * among the plain fit from the range and nstep + 1 least-squares fits of trial inverse
 * scales (rmin + rdelta * is + nmax) / range. The scales go to scale[0..3], the
 * minimums, negated (so >= 0 for finite input), to the_min[0..3]. */
void quant_make_qkx(int n, int nmax, const float *x, const float *w, uint8_t *L,
                    float *scale, float *the_min, float rmin, float rdelta, int nstep,
                    bool use_mad);

/* ggml's make_qp_quants: a positive scale for the n values x (n <= 16; a super-block's
 * sub-block scales or minimums) with weights w, and their quants L[i] = 0..nmax as
 * ggml's uint8_t holds them (a negative quant wraps, as there): the best of 9 trial
 * scales by weighted squared error, then up to 5 passes moving one quant at a time.
 * Returns the scale; 0 with every L 0 when the largest value is below QK_GROUP_EPS. */
float quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *w);

/* The sums of the i-quants' trials, for four sets of levels at once: for each k, over
 * the n values xval with weights w, sum w x q and sum w q q with q = 2 L[k][i] + 1, in
 * order ((w * x) * q, then (w * q) * q), as ggml's loops of iq2_* and iq3_* add them
 * one trial at a time; the four chains side by side, one a lane. */
void quant_fit_sums4(int n, const float *w, const float *xval, const int8_t *const L[4],
                     float sumqx[4], float sumq2[4]);

#endif
