/* Lanes of floats and ints as gcc's vector extensions give them (QK_LANES a vector:
 * one SSE2 register), for the searches that run several independent trials or
 * sub-blocks side by side. Each lane does one scalar computation's operations in its
 * order, so a lane's bits are what the scalar code gives: IEEE arithmetic is the same
 * in a lane as alone (with -ffp-contract=off, nothing is fused). Branches become
 * per-lane selects. Private to this layer. */
#ifndef GGUFS_QUANT_VEC_H
#define GGUFS_QUANT_VEC_H

#include <stdint.h>

#define QK_LANES 4
typedef float qk_vf __attribute__((vector_size(4 * QK_LANES)));
typedef int32_t qk_vi __attribute__((vector_size(4 * QK_LANES)));

/* quant_nearest_int in every lane. */
static inline __attribute__((always_inline)) qk_vi v_nearest_int(qk_vf f)
{
	qk_vi i = (qk_vi)(f + 12582912.f);
	return (i & 0x007fffff) - 0x00400000;
}

/* ggml's MAX(lo, MIN(hi, v)) in every lane. */
static inline __attribute__((always_inline)) qk_vi v_clamp(qk_vi v, int lo, int hi)
{
	qk_vi vlo = (qk_vi){ 0 } + lo, vhi = (qk_vi){ 0 } + hi;
	qk_vi below = v < vlo;
	v = (v & ~below) | (vlo & below);
	qk_vi above = v > vhi;
	return (v & ~above) | (vhi & above);
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

/* Whether any lane of mask is set. */
static inline __attribute__((always_inline)) int v_any(qk_vi mask)
{
	return (mask[0] | mask[1] | mask[2] | mask[3]) != 0;
}

#endif
