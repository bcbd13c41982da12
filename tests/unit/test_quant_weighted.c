/* lib/2-quant under an importance matrix (quant.h's quant_row_weighted,
 * quant_row_prepare, quant_blocks_weighted): which types it makes and which need a
 * matrix; its refusals, which write nothing; the types that ignore the matrix give
 * quant_row's bytes; a part of a row gives the whole row's bytes, and for the legacy
 * types only with the row's own sum (a part's sum gives other bytes); a matrix counts
 * only relatively (times 4 gives the same bytes: every sum and distance scales
 * exactly); blocks of zeros; and two threads at once. tests/quant_ref_imatrix.py
 * compares the same code with llama.cpp itself on millions of values. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "quant.h"
#include "types.h"

#define ROW 1024                /* values a test row: 4 super-blocks, 32 legacy blocks */
#define OUT (ROW * 4)           /* room for any type's bytes of a row */

/* The types whose bytes a matrix changes or that need one. */
static const enum ggml_type_id weighted[] = {
	GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K,
	GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL,
	GGML_TYPE_IQ4_XS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
	GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M,
};
#define N_WEIGHTED (sizeof weighted / sizeof weighted[0])

/* The types whose ggml quantizer ignores the matrix. */
static const enum ggml_type_id ignoring[] = {
	GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_MXFP4,
	GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0,
};

/* Bytes of n values of type. */
static size_t bytes_of(enum ggml_type_id type, int64_t n)
{
	const struct ggml_type *t = ggml_type_get(type);
	return (size_t)(n / t->block_elems) * t->block_bytes;
}

/* xorshift32 */
static uint32_t next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* A gaussian-ish value (a sum of four uniforms, centred) times scale. */
static float gauss(uint32_t *s, float scale)
{
	float sum = 0;
	for (int k = 0; k < 4; k++)
		sum += (float)(next(s) >> 8) / 16777216.0f;
	return (sum - 2.0f) * scale;
}

/* A row of weights-like values, the first half small and the second large (so that a
 * sum over half the row is far from the row's), and a log-spread matrix. */
static void make_row(uint32_t seed, float *x, float *w)
{
	uint32_t s = seed;
	for (int i = 0; i < ROW; i++) {
		x[i] = gauss(&s, i < ROW / 2 ? 0.002f : 0.2f);
		w[i] = expf(gauss(&s, 3.0f));
	}
}

static void test_which_types(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_WEIGHTED; i++)
		assert_true(quant_can_make_weighted(weighted[i]));
	for (size_t i = 0; i < sizeof ignoring / sizeof ignoring[0]; i++)
		assert_true(quant_can_make_weighted(ignoring[i]));
	assert_false(quant_can_make_weighted(GGML_TYPE_NVFP4));
	assert_false(quant_can_make_weighted(GGML_TYPE_COUNT));
	assert_false(quant_can_make_weighted((enum ggml_type_id)-1));
	assert_true(quant_requires_weights(GGML_TYPE_IQ2_XXS));
	assert_true(quant_requires_weights(GGML_TYPE_IQ2_XS));
	assert_true(quant_requires_weights(GGML_TYPE_IQ1_S));
	assert_false(quant_requires_weights(GGML_TYPE_IQ1_M));
	assert_false(quant_requires_weights(GGML_TYPE_IQ2_S));
	assert_false(quant_requires_weights(GGML_TYPE_IQ3_XXS));
	assert_false(quant_requires_weights(GGML_TYPE_Q4_K));
	assert_true(quant_row_needs_values(GGML_TYPE_Q4_0, true));
	assert_true(quant_row_needs_values(GGML_TYPE_Q5_1, true));
	assert_false(quant_row_needs_values(GGML_TYPE_Q4_0, false));
	assert_false(quant_row_needs_values(GGML_TYPE_Q8_0, true));
	assert_false(quant_row_needs_values(GGML_TYPE_Q4_K, true));
}

/* Every refusal returns -EINVAL and writes nothing. */
static void test_refusals(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static uint8_t y[OUT];
	struct quant_row_ctx ctx, q4k;

	make_row(1, x, w);
	memset(y, 0xa5, sizeof y);
	/* a type it cannot make, a type that needs a matrix without one */
	assert_int_equal(quant_row_weighted(GGML_TYPE_NVFP4, x, y, ROW, w), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_COUNT, x, y, ROW, w), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_IQ2_XXS, x, y, ROW, NULL), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_IQ2_XS, x, y, ROW, NULL), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_IQ1_S, x, y, ROW, NULL), -EINVAL);
	/* counts that are not whole blocks, or negative */
	assert_int_equal(quant_row_weighted(GGML_TYPE_Q4_K, x, y, 128, w), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_Q4_0, x, y, 48, w), -EINVAL);
	assert_int_equal(quant_row_weighted(GGML_TYPE_IQ1_M, x, y, -256, w), -EINVAL);
	/* prepare: the row's values where they are needed; a row of whole blocks */
	assert_int_equal(quant_row_prepare(GGML_TYPE_Q4_0, NULL, ROW, w, &ctx), -EINVAL);
	assert_int_equal(quant_row_prepare(GGML_TYPE_Q4_K, NULL, 896, w, &ctx), -EINVAL);
	assert_int_equal(quant_row_prepare(GGML_TYPE_IQ1_S, NULL, ROW, NULL, &ctx), -EINVAL);
	assert_int_equal(quant_row_prepare(GGML_TYPE_Q4_0, NULL, ROW, NULL, &ctx), 0);
	assert_int_equal(quant_row_prepare(GGML_TYPE_Q4_K, NULL, ROW, w, &q4k), 0);
	/* blocks: another type than prepared, weights against how it was prepared, longer
	 * than the row, not whole blocks */
	assert_int_equal(quant_blocks_weighted(GGML_TYPE_Q5_K, x, y, 256, w, &q4k), -EINVAL);
	assert_int_equal(quant_blocks_weighted(GGML_TYPE_Q4_K, x, y, 256, NULL, &q4k), -EINVAL);
	assert_int_equal(quant_blocks_weighted(GGML_TYPE_Q4_0, x, y, 32, w, &ctx), -EINVAL);
	assert_int_equal(quant_blocks_weighted(GGML_TYPE_Q4_K, x, y, ROW + 256, w, &q4k), -EINVAL);
	assert_int_equal(quant_blocks_weighted(GGML_TYPE_Q4_K, x, y, 100, w, &q4k), -EINVAL);
	for (size_t i = 0; i < sizeof y; i++)
		assert_int_equal(y[i], 0xa5);
}

/* Where ggml ignores the matrix, so does this: quant_row's bytes. */
static void test_ignored(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static uint8_t a[OUT], b[OUT];

	make_row(2, x, w);
	for (size_t i = 0; i < sizeof ignoring / sizeof ignoring[0]; i++) {
		const enum ggml_type_id type = ignoring[i];
		assert_int_equal(quant_row(type, x, a, ROW), 0);
		assert_int_equal(quant_row_weighted(type, x, b, ROW, w), 0);
		assert_memory_equal(a, b, bytes_of(type, ROW));
		assert_int_equal(quant_row_weighted(type, x, b, ROW, NULL), 0);
		assert_memory_equal(a, b, bytes_of(type, ROW));
	}
}

/* Any part of a row, its blocks one run at a time in any order, gives the whole row's
 * bytes; and the matrix changes them (all but the types ignoring it). */
static void test_parts(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static uint8_t whole[OUT], parts[OUT], plain[OUT];

	make_row(3, x, w);
	for (size_t i = 0; i < N_WEIGHTED; i++) {
		const enum ggml_type_id type = weighted[i];
		const struct ggml_type *t = ggml_type_get(type);
		const int64_t be = t->block_elems, nb = ROW / be;
		struct quant_row_ctx ctx;

		assert_int_equal(quant_row_weighted(type, x, whole, ROW, w), 0);
		assert_int_equal(quant_row_prepare(type, quant_row_needs_values(type, true) ? x : NULL,
		                                   ROW, w, &ctx), 0);
		memset(parts, 0, sizeof parts);
		/* the last block first, then runs of 1, 2, 3 ... blocks from the start */
		assert_int_equal(quant_blocks_weighted(type, x + (nb - 1) * be,
		                                       parts + (nb - 1) * t->block_bytes, be,
		                                       w + (nb - 1) * be, &ctx), 0);
		for (int64_t b = 0, run = 1; b < nb - 1; b += run, run++) {
			const int64_t len = b + run < nb - 1 ? run : nb - 1 - b;
			assert_int_equal(quant_blocks_weighted(type, x + b * be,
			                                       parts + b * t->block_bytes, len * be,
			                                       w + b * be, &ctx), 0);
		}
		assert_memory_equal(whole, parts, bytes_of(type, ROW));
		if (quant_requires_weights(type))
			continue;
		assert_int_equal(quant_row_weighted(type, x, plain, ROW, NULL), 0);
		assert_memory_not_equal(whole, plain, bytes_of(type, ROW));
	}
}

/* The legacy types under a matrix take one value from the whole row: a part prepared
 * as a row of its own (the second half alone, whose sum is far from the row's) gives
 * other bytes than the same part of the row. */
static void test_row_sum(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static uint8_t whole[OUT], alone[OUT];
	const enum ggml_type_id legacy[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
	                                     GGML_TYPE_Q5_1 };

	make_row(4, x, w);
	for (size_t i = 0; i < 4; i++) {
		const size_t half = bytes_of(legacy[i], ROW / 2);
		assert_int_equal(quant_row_weighted(legacy[i], x, whole, ROW, w), 0);
		assert_int_equal(quant_row_weighted(legacy[i], x + ROW / 2, alone, ROW / 2,
		                                    w + ROW / 2), 0);
		assert_memory_not_equal(whole + half, alone, half);
	}
}

/* Only the matrix's ratios count: times 4 (a power of two, exact) scales every sum and
 * distance of every search by 4 or 16 or 2, so every comparison and every scale is the
 * same, and so are the bytes. */
static void test_relative(void **state)
{
	(void)state;
	static float x[ROW], w[ROW], w4[ROW];
	static uint8_t a[OUT], b[OUT];

	make_row(5, x, w);
	for (int i = 0; i < ROW; i++)
		w4[i] = 4 * w[i];
	for (size_t i = 0; i < N_WEIGHTED; i++) {
		assert_int_equal(quant_row_weighted(weighted[i], x, a, ROW, w), 0);
		assert_int_equal(quant_row_weighted(weighted[i], x, b, ROW, w4), 0);
		assert_memory_equal(a, b, bytes_of(weighted[i], ROW));
	}
}

/* A row of zeros is all zero bytes in the i-quants that need a matrix (ggml's fp16 d is
 * 0 and no sub-block is quantized). */
static void test_zeros(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static uint8_t y[OUT];
	const enum ggml_type_id types[] = { GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
	                                    GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_IQ3_XXS,
	                                    GGML_TYPE_IQ2_S };

	for (int i = 0; i < ROW; i++)
		w[i] = 1.0f;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		memset(y, 0xa5, sizeof y);
		assert_int_equal(quant_row_weighted(types[i], x, y, ROW, w), 0);
		for (size_t k = 0; k < bytes_of(types[i], ROW); k++)
			assert_int_equal(y[k], 0);
	}
}

/* What two threads share: the row, the matrix, and each one's output. */
struct twin {
	const float *x, *w;
	uint8_t y[N_WEIGHTED][OUT];
};

static void *quantize_all(void *arg)
{
	struct twin *t = arg;
	for (size_t i = 0; i < N_WEIGHTED; i++)
		if (quant_row_weighted(weighted[N_WEIGHTED - 1 - i], t->x, t->y[i], ROW, t->w) != 0)
			return t;
	return NULL;
}

/* Two threads quantizing every type at once, each the first to ask for the grids in a
 * fresh process (run this case alone to see it under TSan), get the same bytes as one
 * thread alone. */
static void test_two_threads(void **state)
{
	(void)state;
	static float x[ROW], w[ROW];
	static struct twin a, b;
	static uint8_t y[OUT];
	pthread_t ta, tb;
	void *ra, *rb;

	make_row(6, x, w);
	a.x = b.x = x;
	a.w = b.w = w;
	assert_int_equal(pthread_create(&ta, NULL, quantize_all, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, quantize_all, &b), 0);
	pthread_join(ta, &ra);
	pthread_join(tb, &rb);
	assert_null(ra);
	assert_null(rb);
	for (size_t i = 0; i < N_WEIGHTED; i++) {
		const enum ggml_type_id type = weighted[N_WEIGHTED - 1 - i];
		assert_int_equal(quant_row_weighted(type, x, y, ROW, w), 0);
		assert_memory_equal(a.y[i], y, bytes_of(type, ROW));
		assert_memory_equal(b.y[i], y, bytes_of(type, ROW));
	}
}

UNIT_TESTS(
	cmocka_unit_test(test_two_threads),
	cmocka_unit_test(test_which_types),
	cmocka_unit_test(test_refusals),
	cmocka_unit_test(test_ignored),
	cmocka_unit_test(test_parts),
	cmocka_unit_test(test_row_sum),
	cmocka_unit_test(test_relative),
	cmocka_unit_test(test_zeros),
)
