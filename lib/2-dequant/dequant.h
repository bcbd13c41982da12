/* The dequantizers: which function decodes each ggml type, at which SIMD level. The
 * type table (types.h) says what a type is; this says how its blocks become floats:
 * a portable scalar reference for every type whose block layout is known, and AVX2 and
 * AVX-512 functions for most, chosen once at start-up. Also what the dequantizer files
 * share beyond their layouts (blocks.h) and scalar functions (dequant_scalar.h): the
 * SIMD levels' lists. */
#ifndef GGUFS_DEQUANT_H
#define GGUFS_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "types.h"

/* Decodes nblocks consecutive blocks at src into nblocks * block_elems floats at dst.
 * src need not be aligned; dst is float-aligned. Never reads past nblocks blocks. */
typedef void (*dequant_fn)(const void *src, float *dst, uint64_t nblocks);

/* How a type decodes. */
struct dequant_type {
	dequant_fn to_float;    /* the active (fastest selected) dequantizer; NULL: raw only */
	dequant_fn to_float_ref;/* the portable scalar reference, exact to ggml; NULL iff
	                         * to_float is */
};

/* The dequantizer of type id: to_float is NULL exactly when the type table knows no
 * block layout for it (and NULL is returned for an id it has never heard of). */
const struct dequant_type *dequant_get(uint32_t id);

/* Dequantizer implementations, from the portable reference up. A level is only ever
 * active on a CPU (and OS) that runs it. */
enum dequant_level {
	DEQUANT_SCALAR = 0,     /* portable C, the reference */
	DEQUANT_AVX2 = 1,       /* x86-64 AVX2 + F16C */
	DEQUANT_AVX512 = 2,     /* x86-64 AVX-512 F/BW/VL + the above */
	DEQUANT_LEVELS
};

/* The dequantizer level is chosen once, at the first call of any function below: the
 * best this CPU runs, or the one the environment variable GGUFS_DEQUANT names (scalar,
 * avx2, avx512), lowered to the best the CPU runs when it lacks that one. An unknown
 * value is ignored. */

/* The best level this CPU runs, whatever GGUFS_DEQUANT says. */
enum dequant_level dequant_best(void);

/* Makes to_float of every type the fastest implementation at or below level, lowered
 * to dequant_best(); returns the level now active. For tests and benchmarks: it rewrites
 * the table, so no other thread may be dequantizing while it runs. */
enum dequant_level dequant_select(enum dequant_level level);

/* The level now active. */
enum dequant_level dequant_active(void);

/* "scalar", "avx2", "avx512"; NULL for a value out of range. */
const char *dequant_level_name(enum dequant_level level);

/* One SIMD function for a type. Only the function: the block geometry is the type
 * table's, and the scalar reference it must match is dequant.c's. */
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

#endif
