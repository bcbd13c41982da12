/* Every SIMD dequantizer this CPU runs against the scalar reference on random blocks:
 * the same bytes for every value, NaN sign and payload included (ggufs(1): a .f32
 * hashes the same on every CPU). The vectors test covers ggml's own output; this covers
 * the corners random bytes reach, and blocks whose every fp16 field is a random NaN
 * (signalling or quiet, either sign, any payload), inf, subnormal or zero, so that two
 * scales of one block are NaNs with different bits; plus every f16 and bf16 pattern,
 * unaligned sources, short runs and writing past the end. Skipped (exit 77) on a CPU
 * with no SIMD level. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "dequant.h"
#include "types.h"

/* Values per type: enough blocks that a random fp16 scale is NaN or inf (1 in 32)
 * hundreds of times. */
#define VALUES (1u << 20)
#define CANARY 0x5a

/* xorshift64*: fixed seed, so a failure reproduces. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1du;
}

/* A random fp16 that is not an ordinary number, of either sign: 2 times in 5 a NaN
 * with a random non-zero payload (half of them signalling: bit 9 clear), else inf, a
 * subnormal, zero, or the largest finite value. */
static uint16_t special_half(void)
{
	const uint16_t sign = (uint16_t)(rng() & 0x8000);
	const uint16_t payload = (uint16_t)(rng() & 0x3ff);
	switch (rng() % 10) {
	case 0: case 1: case 2: case 3:
		return sign | 0x7c00 | (payload ? payload : 1);
	case 4: case 5:
		return sign | 0x7c00;
	case 6: case 7:
		return sign | (payload ? payload : 1);
	case 8:
		return sign;
	default:
		return sign | 0x7bff;
	}
}

/* Writes h at every even offset of the block_bytes at p (all fp16 scales sit at even
 * offsets); fixed says whether to write h itself or a fresh special_half each time. */
static void put_halves(uint8_t *p, uint32_t block_bytes, uint16_t h, bool fixed)
{
	for (uint32_t j = 0; j + 1 < block_bytes; j += 2) {
		const uint16_t v = fixed ? h : special_half();
		p[j] = (uint8_t)v;
		p[j + 1] = (uint8_t)(v >> 8);
	}
}

/* Fills blocks with random bytes, except that of every 16 blocks one puts one of a few
 * patterns (+-inf, NaN, zero, the smallest subnormal...) in every aligned fp16, and
 * another a fresh special_half in each, so that a block's two scales are often NaNs with
 * different bits. When a block is one 16-bit element, every 16-bit pattern appears in
 * order instead. */
static void fill(uint8_t *p, uint64_t nblocks, uint32_t block_bytes)
{
	static const uint16_t halves[] = { 0x7c00, 0xfc00, 0x7e00, 0x7d01, 0xffff, 0x0000,
	                                   0x8000, 0x0001, 0x03ff, 0x7bff };
	if (block_bytes == 2) {
		for (uint64_t i = 0; i < nblocks; i++) {
			p[2 * i] = (uint8_t)i;
			p[2 * i + 1] = (uint8_t)(i >> 8);
		}
		return;
	}
	for (uint64_t i = 0; i < nblocks * block_bytes; i++)
		p[i] = (uint8_t)rng();
	for (uint64_t b = 0; b < nblocks; b += 16) {
		put_halves(p + b * block_bytes, block_bytes,
		           halves[(b / 16) % (sizeof halves / sizeof halves[0])], true);
		if (b + 8 < nblocks)
			put_halves(p + (b + 8) * block_bytes, block_bytes, 0, false);
	}
}

/* 0 when got and want hold the same bytes, NaN bit patterns included; else the first
 * bad index + 1. */
static size_t compare_bits(const float *got, const float *want, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
			return i + 1;
	return 0;
}

/* Runs fn and the reference over nblocks blocks at src, checks the results agree and
 * that fn wrote nothing past its output. */
static void check_run(const struct ggml_type *t, const uint8_t *src, uint64_t nblocks,
                      float *got, float *want)
{
	size_t n = nblocks * t->block_elems;
	memset(got, CANARY, (n + 64) * sizeof(float));
	dequant_get(t->id)->to_float(src, got, nblocks);
	dequant_get(t->id)->to_float_ref(src, want, nblocks);
	size_t bad = compare_bits(got, want, n);
	if (bad) {
		uint32_t g, w;
		memcpy(&g, &got[bad - 1], 4);
		memcpy(&w, &want[bad - 1], 4);
		print_error("%s %s: %zu blocks, value %zu is %.9g (%08x), want %.9g (%08x)\n",
		            dequant_level_name(dequant_active()), t->name, (size_t)nblocks,
		            bad - 1, got[bad - 1], g, want[bad - 1], w);
	}
	assert_int_equal(bad, 0);
	const uint8_t *tail = (const uint8_t *)(got + n);
	for (size_t i = 0; i < 64 * sizeof(float); i++)
		assert_int_equal(tail[i], CANARY);
}

static void test_type(void **state)
{
	const struct ggml_type *t = *state;
	uint64_t nblocks = VALUES / t->block_elems;
	uint8_t *src = malloc(nblocks * t->block_bytes + 1);
	float *got = malloc((VALUES + 64) * sizeof(float));
	float *want = malloc((VALUES + 64) * sizeof(float));
	fill(src + 1, nblocks, t->block_bytes);

	for (int l = DEQUANT_SCALAR + 1; l <= (int)dequant_best(); l++) {
		dequant_select((enum dequant_level)l);
		if (dequant_get(t->id)->to_float == dequant_get(t->id)->to_float_ref)
			continue;
		/* aligned and not, everything at once */
		memmove(src, src + 1, nblocks * t->block_bytes);
		check_run(t, src, nblocks, got, want);
		memmove(src + 1, src, nblocks * t->block_bytes);
		check_run(t, src + 1, nblocks, got, want);
		/* short runs from odd places: the tails of the one-value-a-block types */
		for (uint64_t len = 0; len <= 70 && len <= nblocks; len++)
			check_run(t, src + 1 + (len * 7 % 13) * t->block_bytes, len, got, want);
	}
	free(want);
	free(got);
	free(src);
}

/* dequant_select lowers a level this CPU lacks (or no level at all) to the best it has,
 * and makes to_float the reference at the scalar level. */
static void test_select(void **state)
{
	(void)state;
	enum dequant_level best = dequant_best();
	for (int l = 0; l < DEQUANT_LEVELS + 2; l++) {
		enum dequant_level want = l < (int)best ? (enum dequant_level)l : best;
		assert_int_equal(dequant_select((enum dequant_level)l), want);
		assert_int_equal(dequant_active(), want);
	}
	dequant_select(DEQUANT_SCALAR);
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
		assert_ptr_equal(dequant_get(id)->to_float, dequant_get(id)->to_float_ref);
}

int unit_main(UNIT_ARGS)
{
	enum dequant_level best = dequant_best();
	if (best == DEQUANT_SCALAR) {
		printf("skipped: this CPU runs no SIMD dequantizers\n");
		return 77;
	}
	struct CMUnitTest tests[GGML_TYPE_COUNT + 1];
	size_t n = 0;
	tests[n++] = (struct CMUnitTest){ .name = "select", .test_func = test_select };
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		/* only types with a SIMD function at some level */
		dequant_select(best);
		if (!dequant_get(t->id)->to_float ||
		    dequant_get(t->id)->to_float == dequant_get(t->id)->to_float_ref)
			continue;
		tests[n++] = (struct CMUnitTest){ .name = t->name, .test_func = test_type,
		                                  .initial_state = (void *)t };
	}
	int failed = _cmocka_run_group_tests("dequant_random", tests, n, NULL, NULL);
	return failed;
}
