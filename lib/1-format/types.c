#include "types.h"
#include "blocks.h"
#include "dequant.h"
#include "dequant_scalar.h"

#include <pthread.h>
#ifdef GGUFS_X86_SIMD
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One row per ggml type id, removed ones included (so that xattrs and gguf.json can
 * name a raw-only tensor): the single place that knows each type's name, block geometry
 * and scalar dequantizer. A row with a name only (a removed id, q8_1, q8_K: types ggufs
 * has no dequantizer for) has no geometry either, and its tensors get a raw file only. */
static const struct type_row {
	const char *name;       /* ggml's name */
	uint32_t block_elems;   /* values per block */
	uint32_t block_bytes;   /* bytes per block: sizeof the struct in blocks.h */
	dequant_fn scalar;      /* the portable reference, dequant_scalar.h */
} rows[GGML_TYPE_COUNT] = {
	[GGML_TYPE_F32]     = { "f32", 1, sizeof(float), dequant_f32 },
	[GGML_TYPE_F16]     = { "f16", 1, sizeof(uint16_t), dequant_f16 },
	[GGML_TYPE_Q4_0]    = { "q4_0", QK, sizeof(struct block_q4_0), dequant_q4_0 },
	[GGML_TYPE_Q4_1]    = { "q4_1", QK, sizeof(struct block_q4_1), dequant_q4_1 },
	[4]                 = { .name = "q4_2" },
	[5]                 = { .name = "q4_3" },
	[GGML_TYPE_Q5_0]    = { "q5_0", QK, sizeof(struct block_q5_0), dequant_q5_0 },
	[GGML_TYPE_Q5_1]    = { "q5_1", QK, sizeof(struct block_q5_1), dequant_q5_1 },
	[GGML_TYPE_Q8_0]    = { "q8_0", QK, sizeof(struct block_q8_0), dequant_q8_0 },
	[GGML_TYPE_Q8_1]    = { .name = "q8_1" },
	[GGML_TYPE_Q2_K]    = { "q2_K", QK_K, sizeof(struct block_q2_K), dequant_q2_K },
	[GGML_TYPE_Q3_K]    = { "q3_K", QK_K, sizeof(struct block_q3_K), dequant_q3_K },
	[GGML_TYPE_Q4_K]    = { "q4_K", QK_K, sizeof(struct block_q4_K), dequant_q4_K },
	[GGML_TYPE_Q5_K]    = { "q5_K", QK_K, sizeof(struct block_q5_K), dequant_q5_K },
	[GGML_TYPE_Q6_K]    = { "q6_K", QK_K, sizeof(struct block_q6_K), dequant_q6_K },
	[GGML_TYPE_Q8_K]    = { .name = "q8_K" },
	[GGML_TYPE_IQ2_XXS] = { "iq2_xxs", QK_K, sizeof(struct block_iq2_xxs), dequant_iq2_xxs },
	[GGML_TYPE_IQ2_XS]  = { "iq2_xs", QK_K, sizeof(struct block_iq2_xs), dequant_iq2_xs },
	[GGML_TYPE_IQ3_XXS] = { "iq3_xxs", QK_K, sizeof(struct block_iq3_xxs), dequant_iq3_xxs },
	[GGML_TYPE_IQ1_S]   = { "iq1_s", QK_K, sizeof(struct block_iq1_s), dequant_iq1_s },
	[GGML_TYPE_IQ4_NL]  = { "iq4_nl", QK4_NL, sizeof(struct block_iq4_nl), dequant_iq4_nl },
	[GGML_TYPE_IQ3_S]   = { "iq3_s", QK_K, sizeof(struct block_iq3_s), dequant_iq3_s },
	[GGML_TYPE_IQ2_S]   = { "iq2_s", QK_K, sizeof(struct block_iq2_s), dequant_iq2_s },
	[GGML_TYPE_IQ4_XS]  = { "iq4_xs", QK_K, sizeof(struct block_iq4_xs), dequant_iq4_xs },
	[GGML_TYPE_I8]      = { "i8", 1, sizeof(int8_t), dequant_i8 },
	[GGML_TYPE_I16]     = { "i16", 1, sizeof(int16_t), dequant_i16 },
	[GGML_TYPE_I32]     = { "i32", 1, sizeof(int32_t), dequant_i32 },
	[GGML_TYPE_I64]     = { "i64", 1, sizeof(int64_t), dequant_i64 },
	[GGML_TYPE_F64]     = { "f64", 1, sizeof(double), dequant_f64 },
	[GGML_TYPE_IQ1_M]   = { "iq1_m", QK_K, sizeof(struct block_iq1_m), dequant_iq1_m },
	[GGML_TYPE_BF16]    = { "bf16", 1, sizeof(uint16_t), dequant_bf16 },
	[31]                = { .name = "q4_0_4_4" },
	[32]                = { .name = "q4_0_4_8" },
	[33]                = { .name = "q4_0_8_8" },
	[GGML_TYPE_TQ1_0]   = { "tq1_0", QK_K, sizeof(struct block_tq1_0), dequant_tq1_0 },
	[GGML_TYPE_TQ2_0]   = { "tq2_0", QK_K, sizeof(struct block_tq2_0), dequant_tq2_0 },
	[36]                = { .name = "iq4_nl_4_4" },
	[37]                = { .name = "iq4_nl_4_8" },
	[38]                = { .name = "iq4_nl_8_8" },
	[GGML_TYPE_MXFP4]   = { "mxfp4", QK_MXFP4, sizeof(struct block_mxfp4), dequant_mxfp4 },
	[GGML_TYPE_NVFP4]   = { "nvfp4", QK_NVFP4, sizeof(struct block_nvfp4), dequant_nvfp4 },
	[GGML_TYPE_Q1_0]    = { "q1_0", QK1_0, sizeof(struct block_q1_0), dequant_q1_0 },
	[GGML_TYPE_Q2_0]    = { "q2_0", QK2_0, sizeof(struct block_q2_0), dequant_q2_0 },
};

/* What ggml_type_get hands out: a row with its id and the to_float of the active level,
 * the one column that changes (dequant_select rewrites it). Filled once from rows. */
static struct ggml_type table[GGML_TYPE_COUNT];
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
		if (!rows[d->type].scalar) {
			fprintf(stderr, "ggufs: %s dequantizer for %s, which has no scalar one\n",
			        level_names[level], rows[d->type].name);
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

/* dequant_select without the pthread_once, which table_init cannot re-enter. */
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

static void table_init(void)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct type_row *r = &rows[id];
		table[id] = (struct ggml_type){
			.id = id, .name = r->name, .block_elems = r->block_elems,
			.block_bytes = r->block_bytes, .to_float_ref = r->scalar,
		};
		level_fns[id][DEQUANT_SCALAR] = r->scalar;
	}
#ifdef GGUFS_X86_SIMD
	add_level(dequant_avx2_impls, DEQUANT_AVX2);
	add_level(dequant_avx512_impls, DEQUANT_AVX512);
#endif
	select_level(env_level());
}

enum dequant_level dequant_select(enum dequant_level level)
{
	pthread_once(&table_once, table_init);
	return select_level(level);
}

enum dequant_level dequant_active(void)
{
	pthread_once(&table_once, table_init);
	return active_level;
}

const char *dequant_level_name(enum dequant_level level)
{
	return (unsigned)level < DEQUANT_LEVELS ? level_names[level] : NULL;
}

const struct ggml_type *ggml_type_get(uint32_t id)
{
	if (id >= GGML_TYPE_COUNT)
		return NULL;
	pthread_once(&table_once, table_init);
	return &table[id];
}

const char *ggml_type_name(uint32_t id, char buf[16])
{
	if (id < GGML_TYPE_COUNT)
		return rows[id].name;
	snprintf(buf, 16, "type%u", (unsigned)id);
	return buf;
}
