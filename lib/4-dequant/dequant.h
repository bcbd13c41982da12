/* What the dequantizer files share with the type table beyond their layouts (blocks.h)
 * and the scalar functions (dequant_scalar.h): the SIMD levels' lists and the
 * half-float conversions. */
#ifndef GGUFS_DEQUANT_H
#define GGUFS_DEQUANT_H

#include <stddef.h>

#include "types.h"

/* One SIMD function for a type. Only the function: the block geometry and the scalar
 * reference it must match are the type table's (types.c). */
struct dequant_impl {
	uint32_t type;          /* ggml type id */
	dequant_fn fn;
};

/* The SIMD dequantizers, one list per level (dequant_x86.c, built once per level with
 * that level's compiler flags), each ending with an entry whose fn is NULL. Each covers
 * some of the types with a scalar dequantizer and gives that function's output bit for
 * bit, NaN payloads and signs included. */
#ifdef GGUFS_X86_SIMD
extern const struct dequant_impl dequant_avx2_impls[];
extern const struct dequant_impl dequant_avx512_impls[];
#endif

/* IEEE half and bfloat16 to float, exact for every bit pattern (NaN and inf kept). */
float fp16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

#endif
