/* The portable scalar dequantizers: one dequant_fn per type whose layout ggufs knows,
 * each the reference its type's SIMD functions must match bit for bit (ggml's own
 * dequantize_row_*, operation for operation). dequant.c names one per type; the
 * family files define them. dequant_x86.c does not include this header: its functions
 * of the same names are its own, static. */
#ifndef GGUFS_DEQUANT_SCALAR_H
#define GGUFS_DEQUANT_SCALAR_H

#include <stdint.h>

/* dequant_float.c: the plain element types, a block being one element. */
void dequant_f32(const void *src, float *dst, uint64_t nblocks);
void dequant_f16(const void *src, float *dst, uint64_t nblocks);
void dequant_bf16(const void *src, float *dst, uint64_t nblocks);
void dequant_f64(const void *src, float *dst, uint64_t nblocks);
void dequant_i8(const void *src, float *dst, uint64_t nblocks);
void dequant_i16(const void *src, float *dst, uint64_t nblocks);
void dequant_i32(const void *src, float *dst, uint64_t nblocks);
void dequant_i64(const void *src, float *dst, uint64_t nblocks);

/* dequant_legacy.c: blocks of QK. */
void dequant_q4_0(const void *src, float *dst, uint64_t nblocks);
void dequant_q4_1(const void *src, float *dst, uint64_t nblocks);
void dequant_q5_0(const void *src, float *dst, uint64_t nblocks);
void dequant_q5_1(const void *src, float *dst, uint64_t nblocks);
void dequant_q8_0(const void *src, float *dst, uint64_t nblocks);

/* dequant_k.c: super-blocks of QK_K. */
void dequant_q2_K(const void *src, float *dst, uint64_t nblocks);
void dequant_q3_K(const void *src, float *dst, uint64_t nblocks);
void dequant_q4_K(const void *src, float *dst, uint64_t nblocks);
void dequant_q5_K(const void *src, float *dst, uint64_t nblocks);
void dequant_q6_K(const void *src, float *dst, uint64_t nblocks);

/* dequant_iq.c: the i-quants. */
void dequant_iq2_xxs(const void *src, float *dst, uint64_t nblocks);
void dequant_iq2_xs(const void *src, float *dst, uint64_t nblocks);
void dequant_iq2_s(const void *src, float *dst, uint64_t nblocks);
void dequant_iq3_xxs(const void *src, float *dst, uint64_t nblocks);
void dequant_iq3_s(const void *src, float *dst, uint64_t nblocks);
void dequant_iq1_s(const void *src, float *dst, uint64_t nblocks);
void dequant_iq1_m(const void *src, float *dst, uint64_t nblocks);
void dequant_iq4_nl(const void *src, float *dst, uint64_t nblocks);
void dequant_iq4_xs(const void *src, float *dst, uint64_t nblocks);

/* dequant_misc.c: ternary, FP4 and plain 1- and 2-bit types. */
void dequant_tq1_0(const void *src, float *dst, uint64_t nblocks);
void dequant_tq2_0(const void *src, float *dst, uint64_t nblocks);
void dequant_mxfp4(const void *src, float *dst, uint64_t nblocks);
void dequant_nvfp4(const void *src, float *dst, uint64_t nblocks);
void dequant_q1_0(const void *src, float *dst, uint64_t nblocks);
void dequant_q2_0(const void *src, float *dst, uint64_t nblocks);

#endif
