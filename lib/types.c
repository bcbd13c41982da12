#include "types.h"
#include "dequant.h"

#include <pthread.h>
#ifdef GGUFS_X86_SIMD
#include <cpuid.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Names of every id ggml has assigned, removed ones included, so that xattrs and
 * gguf.json can name a raw-only tensor. */
static const char *const type_names[GGML_TYPE_COUNT] = {
	[0] = "f32", [1] = "f16", [2] = "q4_0", [3] = "q4_1", [4] = "q4_2", [5] = "q4_3",
	[6] = "q5_0", [7] = "q5_1", [8] = "q8_0", [9] = "q8_1", [10] = "q2_K", [11] = "q3_K",
	[12] = "q4_K", [13] = "q5_K", [14] = "q6_K", [15] = "q8_K", [16] = "iq2_xxs",
	[17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s",
	[22] = "iq2_s", [23] = "iq4_xs", [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64",
	[28] = "f64", [29] = "iq1_m", [30] = "bf16", [31] = "q4_0_4_4", [32] = "q4_0_4_8",
	[33] = "q4_0_8_8", [34] = "tq1_0", [35] = "tq2_0", [36] = "iq4_nl_4_4",
	[37] = "iq4_nl_4_8", [38] = "iq4_nl_8_8", [39] = "mxfp4", [40] = "nvfp4",
	[41] = "q1_0", [42] = "q2_0",
};

static struct ggml_type table[GGML_TYPE_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* Every level's function per type (NULL where that level has none), and the level the
 * to_float column now holds. */
static dequant_fn level_fns[GGML_TYPE_COUNT][DEQUANT_LEVELS];
static enum dequant_level active_level;

static const char *const level_names[DEQUANT_LEVELS] = {
	[DEQUANT_SCALAR] = "scalar", [DEQUANT_AVX2] = "avx2", [DEQUANT_AVX512] = "avx512",
};

/* Copies an impl list's functions into one level's column; the scalar level sets the
 * geometry, which every other level must repeat exactly (a mismatch is a bug here, not
 * in the input, so it stops the program rather than decode garbage). */
static void add_impls(const struct dequant_impl *list, enum dequant_level level)
{
	for (const struct dequant_impl *d = list; d->fn; d++) {
		struct ggml_type *t = &table[d->type];
		if (level == DEQUANT_SCALAR) {
			t->block_elems = d->block_elems;
			t->block_bytes = d->block_bytes;
		} else if (d->block_elems != t->block_elems || d->block_bytes != t->block_bytes) {
			fprintf(stderr, "ggufs: %s dequantizer for %s has the wrong block geometry\n",
			        level_names[level], t->name);
			abort();
		}
		level_fns[d->type][level] = d->fn;
	}
}

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
	static const struct dequant_impl *const families[] = {
		dequant_float_impls, dequant_legacy_impls, dequant_k_impls,
		dequant_iq_impls, dequant_misc_impls,
	};
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
		table[id] = (struct ggml_type){ .id = id, .name = type_names[id] };
	for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
		add_impls(families[f], DEQUANT_SCALAR);
#ifdef GGUFS_X86_SIMD
	add_impls(dequant_avx2_impls, DEQUANT_AVX2);
	add_impls(dequant_avx512_impls, DEQUANT_AVX512);
#endif
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
		table[id].to_float_ref = level_fns[id][DEQUANT_SCALAR];
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
		return type_names[id];
	snprintf(buf, 16, "type%u", (unsigned)id);
	return buf;
}
