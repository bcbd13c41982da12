/* What the quantizer files share: one function per type (quant.c's table names them),
 * and the few operations whose exact bits every family needs: ggml's rounding trick,
 * the x86 float-to-int conversion ggml's casts compile to, little-endian stores. Not a
 * public header: only this layer's files include it. */
#ifndef GGUFS_QUANT_IMPL_H
#define GGUFS_QUANT_IMPL_H

#include <stdint.h>
#include <string.h>

/* Quantizes nblocks whole blocks: nblocks * block_elems floats at x into nblocks *
 * block_bytes bytes at y (any alignment). */
typedef void (*quant_fn)(const float *x, uint8_t *y, int64_t nblocks);

/* Quantizes nblocks whole blocks under an importance matrix: x and y as quant_fn's,
 * qw the matrix's value for each of the nblocks * block_elems values of x (its columns
 * of the row), or NULL for ggml's quantizer without a matrix; row_sigma2 the value the
 * legacy types take from the whole row (quant_row_prepare), ignored by the others. */
typedef void (*quant_w_fn)(const float *x, uint8_t *y, int64_t nblocks, const float *qw,
                           float row_sigma2);

/* quant_float.c: a block is one value. */
void quant_f32(const float *x, uint8_t *y, int64_t nblocks);
void quant_f16(const float *x, uint8_t *y, int64_t nblocks);
void quant_bf16(const float *x, uint8_t *y, int64_t nblocks);

/* quant_legacy.c: blocks of 32. */
void quant_q4_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_q4_1(const float *x, uint8_t *y, int64_t nblocks);
void quant_q5_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_q5_1(const float *x, uint8_t *y, int64_t nblocks);
void quant_q8_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_q4_0_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q4_1_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q5_0_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q5_1_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_k.c: super-blocks of 256. */
void quant_q2_K(const float *x, uint8_t *y, int64_t nblocks);
void quant_q3_K(const float *x, uint8_t *y, int64_t nblocks);
void quant_q4_K(const float *x, uint8_t *y, int64_t nblocks);
void quant_q5_K(const float *x, uint8_t *y, int64_t nblocks);
void quant_q6_K(const float *x, uint8_t *y, int64_t nblocks);
void quant_q2_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q3_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q4_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q5_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_q6_K_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_iq4.c: the non-linear 4-bit types, blocks of 32 and super-blocks of 256. */
void quant_iq4_nl(const float *x, uint8_t *y, int64_t nblocks);
void quant_iq4_xs(const float *x, uint8_t *y, int64_t nblocks);
void quant_iq4_nl_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_iq4_xs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_iq3.c (with the grids of quant_grid.c): 256 values. */
void quant_iq3_s(const float *x, uint8_t *y, int64_t nblocks);
void quant_iq3_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_iq3_xxs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_iq2.c (with the grids of quant_grid.c): 256 values; xxs and xs need qw. */
void quant_iq2_xxs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_iq2_xs_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_iq2_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_iq1.c (with the grid of quant_grid.c and the sort of quant_sort.c): 256
 * values; s needs qw. */
void quant_iq1_s_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);
void quant_iq1_m_w(const float *x, uint8_t *y, int64_t nblocks, const float *qw, float row_sigma2);

/* quant_misc.c: ternary (256), MXFP4 (32), q1_0 (128) and q2_0 (64). */
void quant_tq1_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_tq2_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_mxfp4(const float *x, uint8_t *y, int64_t nblocks);
void quant_q1_0(const float *x, uint8_t *y, int64_t nblocks);
void quant_q2_0(const float *x, uint8_t *y, int64_t nblocks);

/* ggml's nearest_int: adding 1.5 * 2^23 leaves round-to-nearest-even(f) in the low
 * mantissa bits, read back as an integer. Exact for |f| <= 2^22 - 1; for larger values,
 * inf and NaN it gives what those bits give (some integer, never a trap), as ggml's does
 * in a build without asserts, which is the build that quantizes. */
static inline int quant_nearest_int(float f)
{
	float v = f + 12582912.f;
	int32_t i;
	memcpy(&i, &v, sizeof i);
	return (i & 0x007fffff) - 0x00400000;
}

/* The level l (0..max) whose odd value 2l + 1 is nearest to id * v, as the i-quants
 * round a magnitude or a sub-block scale: ggml's MAX(0, MIN(max,
 * nearest_int(0.5f * (id * v - 1)))). */
static inline int quant_odd_level(float v, float id, int max)
{
	const int l = quant_nearest_int(0.5f * (id * v - 1));
	return l < 0 ? 0 : l > max ? max : l;
}

/* (int32_t)f as x86-64 computes it (cvttss2si, cvttps2dq): toward zero, and INT32_MIN
 * for NaN and for values out of range. ggml's casts of a float to int8_t or uint8_t
 * compile to that conversion then keep the low byte; C leaves them undefined out of
 * range, so they are spelled out here to give ggml's bytes for any input. */
static inline int32_t quant_cvtt(float f)
{
	if (!(f > -2147483904.0f && f < 2147483648.0f))
		return INT32_MIN;
	return (int32_t)f;
}

/* Stores v little-endian at p (a block field, any alignment). */
static inline void quant_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void quant_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* MIN and MAX as ggml's macros are: the comparison's order decides what a NaN gives,
 * so these keep it (a > b ? a : b), not fmaxf's. */
static inline float quant_maxf(float a, float b)
{
	return a > b ? a : b;
}

static inline int quant_mini(int a, int b)
{
	return a < b ? a : b;
}

static inline int quant_maxi(int a, int b)
{
	return a > b ? a : b;
}

#endif
