/* Dequantizer families. Each family file defines the block layouts it decodes and a
 * list of the types it implements; types.c merges the lists into the type table. */
#ifndef GGUFS_DEQUANT_H
#define GGUFS_DEQUANT_H

#include <stddef.h>

#include "types.h"

struct dequant_impl {
	uint32_t type;          /* ggml type id */
	uint32_t block_elems;
	uint32_t block_bytes;   /* sizeof the block struct, which _Static_asserts its size */
	dequant_fn fn;
};

/* Each list ends with an entry whose fn is NULL. */
extern const struct dequant_impl dequant_float_impls[];  /* f32 f16 bf16 f64 i8..i64 */
extern const struct dequant_impl dequant_legacy_impls[]; /* q4_0 q4_1 q5_0 q5_1 q8_0 */
extern const struct dequant_impl dequant_k_impls[];      /* q2_K .. q6_K */
extern const struct dequant_impl dequant_iq_impls[];     /* iq1_s .. iq4_xs */
extern const struct dequant_impl dequant_misc_impls[];   /* tq1_0 tq2_0 mxfp4 nvfp4 q1_0 q2_0 */

/* The SIMD dequantizers, one list per level (dequant_x86.c, built once per level with
 * that level's compiler flags). Each covers some of the types above, with the same
 * geometry, and gives the scalar functions' output bit for bit (NaN payloads aside). */
#ifdef GGUFS_X86_SIMD
extern const struct dequant_impl dequant_avx2_impls[];
extern const struct dequant_impl dequant_avx512_impls[];
#endif

/* IEEE half and bfloat16 to float, exact for every bit pattern (NaN and inf kept). */
float fp16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

#endif
