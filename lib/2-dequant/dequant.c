#include "dequant.h"
#include "dequant_scalar.h"

#include <pthread.h>
#ifdef GGUFS_X86_SIMD
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The portable reference of every type whose block layout the type table knows (and
 * of no other), by type id. */
static const dequant_fn scalar[GGML_TYPE_COUNT] = {
	[GGML_TYPE_F32]     = dequant_f32,
	[GGML_TYPE_F16]     = dequant_f16,
	[GGML_TYPE_Q4_0]    = dequant_q4_0,
	[GGML_TYPE_Q4_1]    = dequant_q4_1,
	[GGML_TYPE_Q5_0]    = dequant_q5_0,
	[GGML_TYPE_Q5_1]    = dequant_q5_1,
	[GGML_TYPE_Q8_0]    = dequant_q8_0,
	[GGML_TYPE_Q2_K]    = dequant_q2_K,
	[GGML_TYPE_Q3_K]    = dequant_q3_K,
	[GGML_TYPE_Q4_K]    = dequant_q4_K,
	[GGML_TYPE_Q5_K]    = dequant_q5_K,
	[GGML_TYPE_Q6_K]    = dequant_q6_K,
	[GGML_TYPE_IQ2_XXS] = dequant_iq2_xxs,
	[GGML_TYPE_IQ2_XS]  = dequant_iq2_xs,
	[GGML_TYPE_IQ3_XXS] = dequant_iq3_xxs,
	[GGML_TYPE_IQ1_S]   = dequant_iq1_s,
	[GGML_TYPE_IQ4_NL]  = dequant_iq4_nl,
	[GGML_TYPE_IQ3_S]   = dequant_iq3_s,
	[GGML_TYPE_IQ2_S]   = dequant_iq2_s,
	[GGML_TYPE_IQ4_XS]  = dequant_iq4_xs,
	[GGML_TYPE_I8]      = dequant_i8,
	[GGML_TYPE_I16]     = dequant_i16,
	[GGML_TYPE_I32]     = dequant_i32,
	[GGML_TYPE_I64]     = dequant_i64,
	[GGML_TYPE_F64]     = dequant_f64,
	[GGML_TYPE_IQ1_M]   = dequant_iq1_m,
	[GGML_TYPE_BF16]    = dequant_bf16,
	[GGML_TYPE_TQ1_0]   = dequant_tq1_0,
	[GGML_TYPE_TQ2_0]   = dequant_tq2_0,
	[GGML_TYPE_MXFP4]   = dequant_mxfp4,
	[GGML_TYPE_NVFP4]   = dequant_nvfp4,
	[GGML_TYPE_Q1_0]    = dequant_q1_0,
	[GGML_TYPE_Q2_0]    = dequant_q2_0,
};

/* What dequant_get hands out: the scalar reference and the to_float of the active
 * level, the one column that changes (dequant_select rewrites it). Filled once. */
static struct dequant_type table[GGML_TYPE_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Every level's function per type (NULL where that level has none), and the level the
 * to_float column now holds. */
static dequant_fn level_fns[GGML_TYPE_COUNT][DEQUANT_LEVELS];
static enum dequant_level active_level;

static const char *const level_names[DEQUANT_LEVELS] = {
	[DEQUANT_SCALAR] = "scalar", [DEQUANT_AVX2] = "avx2", [DEQUANT_AVX512] = "avx512",
};

#ifdef GGUFS_X86_SIMD
/* Copies a SIMD level's functions into its column. A SIMD function for a type without a
 * scalar one would have no block geometry to be called with: a bug here, not in the
 * input, so it stops the program rather than decode garbage. */
static void add_level(const struct dequant_impl *list, enum dequant_level level)
{
	for (const struct dequant_impl *d = list; d->fn; d++) {
		if (!scalar[d->type]) {
			fprintf(stderr, "ggufs: %s dequantizer for %s, which has no scalar one\n",
			        level_names[level], ggml_type_get(d->type)->name);
			abort();
		}
		level_fns[d->type][level] = d->fn;
	}
}
#endif

enum dequant_level dequant_best(void)
{
#ifdef GGUFS_X86_SIMD
	/* __builtin_cpu_supports also checks that the OS saves the ymm/zmm state. clang 14
	 * has no "f16c" for it, so that bit comes from cpuid leaf 1 itself. */
	unsigned eax, ebx, ecx = 0, edx;
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx) ||
	    !(ecx & bit_F16C))
		return DEQUANT_SCALAR;
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
	    !__builtin_cpu_supports("avx512vl"))
		return DEQUANT_AVX2;
	return DEQUANT_AVX512;
#else
	return DEQUANT_SCALAR;
#endif
}

/* The level GGUFS_DEQUANT asks for, or the best one when it is unset or unknown. */
static enum dequant_level env_level(void)
{
	const char *want = getenv("GGUFS_DEQUANT");
	for (int l = 0; want && l < DEQUANT_LEVELS; l++)
		if (strcmp(want, level_names[l]) == 0)
			return (enum dequant_level)l;
	return dequant_best();
}

/* dequant_select without the pthread_once, which dequant_table_init cannot re-enter. */
static enum dequant_level select_level(enum dequant_level level)
{
	enum dequant_level best = dequant_best();
	if ((unsigned)level >= DEQUANT_LEVELS || level > best)
		level = best;
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		/* a level without its own function for a type uses the next one down */
		int l = level;
		while (l > DEQUANT_SCALAR && !level_fns[id][l])
			l--;
		table[id].to_float = level_fns[id][l];
	}
	active_level = level;
	return level;
}

/* The reference column, then the SIMD ones. A type whose layout the type table knows
 * must have a scalar function and the other way round (the parser gives .f32 files to
 * exactly the types with a layout): anything else is a bug here, so it stops the
 * program. */
static void dequant_table_init(void)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		if (!ggml_type_get(id)->block_elems != !scalar[id]) {
			fprintf(stderr, "ggufs: type %s has %s\n", ggml_type_get(id)->name,
			        scalar[id] ? "a dequantizer but no block layout"
			                   : "a block layout but no dequantizer");
			abort();
		}
		table[id].to_float_ref = scalar[id];
		level_fns[id][DEQUANT_SCALAR] = scalar[id];
	}
#ifdef GGUFS_X86_SIMD
	add_level(dequant_avx2_impls, DEQUANT_AVX2);
	add_level(dequant_avx512_impls, DEQUANT_AVX512);
#endif
	select_level(env_level());
}

enum dequant_level dequant_select(enum dequant_level level)
{
	pthread_once(&table_once, dequant_table_init);
	return select_level(level);
}

enum dequant_level dequant_active(void)
{
	pthread_once(&table_once, dequant_table_init);
	return active_level;
}

const char *dequant_level_name(enum dequant_level level)
{
	return (unsigned)level < DEQUANT_LEVELS ? level_names[level] : NULL;
}

const struct dequant_type *dequant_get(uint32_t id)
{
	if (id >= GGML_TYPE_COUNT)
		return NULL;
	pthread_once(&table_once, dequant_table_init);
	return &table[id];
}
