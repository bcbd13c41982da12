/* llama.cpp's check of a tensor's bytes (lib/1-format/block_check.h), one block at a
 * time: the float types refused at a NaN or infinity only (not at the largest finite
 * value, a subnormal or a negative zero), each at its own width and byte order; the
 * first refused block found among many; quantized blocks by their scales; integer
 * types never. The scale rules of every type are also tested through stats_bad_blocks
 * (test_stats.c), which counts with them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "block_check.h"
#include "blocks.h"
#include "test_data.h"
#include "types.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int k = 0; k < 4; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

/* f32: each of the bad patterns alone, at several places among good values. */
static void test_f32(void **state)
{
	(void)state;
	const uint32_t good[] = { 0x7f7fffff, 0xff7fffff, 0x00000001, 0x80000000, 0x3f800000 };
	const uint32_t bad[] = { 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff };
	uint8_t b[4 * 40];
	for (size_t k = 0; k < 40; k++)
		put32(b + 4 * k, good[k % 5]);
	assert_int_equal(block_check_first_bad(GGML_TYPE_F32, b, 40), 40);
	for (size_t k = 0; k < 5; k++) {
		for (size_t at = 0; at < 40; at += 13) {
			uint8_t c[sizeof b];
			memcpy(c, b, sizeof b);
			put32(c + 4 * at, bad[k]);
			assert_int_equal(block_check_first_bad(GGML_TYPE_F32, c, 40), at);
			/* one fewer value checked than where it is: not seen */
			assert_int_equal(block_check_first_bad(GGML_TYPE_F32, c, at), at);
		}
	}
	assert_true(block_check_looks(GGML_TYPE_F32));
}

/* f16, bf16 and f64: their own exponents. */
static void test_other_floats(void **state)
{
	(void)state;
	uint8_t b[64];
	memset(b, 0, sizeof b);
	put16(b + 2, 0x7bff);   /* f16's largest finite */
	put16(b + 4, 0x8000);
	assert_int_equal(block_check_first_bad(GGML_TYPE_F16, b, 32), 32);
	put16(b + 10, 0xfc00);  /* -inf */
	assert_int_equal(block_check_first_bad(GGML_TYPE_F16, b, 32), 5);
	put16(b + 6, 0x7e00);   /* NaN */
	assert_int_equal(block_check_first_bad(GGML_TYPE_F16, b, 32), 3);

	memset(b, 0, sizeof b);
	put16(b + 2, 0x7f7f);   /* bf16's largest finite */
	put16(b + 4, 0x7c00);   /* an f16 infinity's bits: a finite bf16 */
	assert_int_equal(block_check_first_bad(GGML_TYPE_BF16, b, 32), 32);
	put16(b + 20, 0xff80);  /* -inf */
	assert_int_equal(block_check_first_bad(GGML_TYPE_BF16, b, 32), 10);
	put16(b + 8, 0x7fc1);   /* NaN */
	assert_int_equal(block_check_first_bad(GGML_TYPE_BF16, b, 32), 4);

	memset(b, 0, sizeof b);
	put64(b + 8, UINT64_C(0x7fefffffffffffff));
	assert_int_equal(block_check_first_bad(GGML_TYPE_F64, b, 8), 8);
	put64(b + 48, UINT64_C(0x7ff0000000000000));
	assert_int_equal(block_check_first_bad(GGML_TYPE_F64, b, 8), 6);
}

/* Quantized blocks by their scales; integers never; a type the check does not know
 * looks at nothing. */
static void test_quantized(void **state)
{
	(void)state;
	uint8_t b[8 * sizeof(struct block_q4_K)];
	memset(b, 0x11, sizeof b);
	const size_t q8 = sizeof(struct block_q8_0), q4 = sizeof(struct block_q4_K);
	assert_int_equal(block_check_first_bad(GGML_TYPE_Q8_0, b, 8), 8);
	put16(b + 6 * q8 + offsetof(struct block_q8_0, d), 0x7c00);
	assert_int_equal(block_check_first_bad(GGML_TYPE_Q8_0, b, 8), 6);
	assert_int_equal(block_check_first_bad(GGML_TYPE_Q8_0, b, 6), 6);

	memset(b, 0x11, sizeof b);
	put16(b + 2 * q4 + offsetof(struct block_q4_K, dmin), 0xfe00);
	put16(b + 5 * q4 + offsetof(struct block_q4_K, d), 0x7c00);
	assert_int_equal(block_check_first_bad(GGML_TYPE_Q4_K, b, 8), 2);
	assert_int_equal(block_check_bad_scales(GGML_TYPE_Q4_K, b, 8), 2);

	memset(b, 0xff, sizeof b);
	assert_int_equal(block_check_first_bad(GGML_TYPE_I32, b, 8), 8);
	assert_false(block_check_looks(GGML_TYPE_I32));
	assert_int_equal(block_check_first_bad(GGML_TYPE_NVFP4, b, 8), 8);
	assert_int_equal(block_check_first_bad(GGML_TYPE_MXFP4, b, 8), 0);
	assert_false(block_check_looks(GGML_TYPE_COUNT + 5));
}

UNIT_TESTS(
	cmocka_unit_test(test_f32),
	cmocka_unit_test(test_other_floats),
	cmocka_unit_test(test_quantized),
)
