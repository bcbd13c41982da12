/* lib/2-quant's i-quants, ternary, FP4 and 1- and 2-bit types (iq4_nl, iq4_xs, iq3_s,
 * tq1_0, tq2_0, mxfp4, q1_0, q2_0) on crafted blocks whose bytes follow by hand from
 * ggml's rules: zeros, values exactly on the levels, rounding ties, one huge value,
 * NaN and inf, the exponent wrap of mxfp4, iq3_s's all-zero sub-block quirk (its
 * neighbour lists: test_quant_grid.c). tests/quant_ref.py compares the same code with
 * llama.cpp itself on millions of values; this says why the bytes are right. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "blocks.h"
#include "ggml_tables.h"
#include "half.h"
#include "quant.h"
#include "types.h"

/* One or more blocks of type from n values, checked to succeed. */
static void quant(enum ggml_type_id type, const float *x, int64_t n, uint8_t *y)
{
	assert_int_equal(quant_row(type, x, y, n), 0);
}

static void test_can_make(void **state)
{
	(void)state;
	const enum ggml_type_id made[] = {
		GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_IQ3_S, GGML_TYPE_TQ1_0,
		GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0,
	};
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
		assert_true(quant_can_make(made[i]));
	/* the types that need an importance matrix, and nvfp4, which no ftype makes */
	assert_false(quant_can_make(GGML_TYPE_IQ2_XXS));
	assert_false(quant_can_make(GGML_TYPE_IQ2_XS));
	assert_false(quant_can_make(GGML_TYPE_IQ2_S));
	assert_false(quant_can_make(GGML_TYPE_IQ3_XXS));
	assert_false(quant_can_make(GGML_TYPE_IQ1_S));
	assert_false(quant_can_make(GGML_TYPE_IQ1_M));
	assert_false(quant_can_make(GGML_TYPE_NVFP4));
}

/* Each type refuses a count that is not whole blocks, and writes nothing then. */
static void test_refusals(void **state)
{
	(void)state;
	static float x[512];
	uint8_t y[1024];
	const struct { enum ggml_type_id type; int64_t bad; } cases[] = {
		{ GGML_TYPE_IQ4_NL, 48 }, { GGML_TYPE_IQ4_XS, 128 }, { GGML_TYPE_IQ3_S, 32 },
		{ GGML_TYPE_TQ1_0, 255 }, { GGML_TYPE_TQ2_0, 257 }, { GGML_TYPE_MXFP4, 16 },
		{ GGML_TYPE_Q1_0, 64 }, { GGML_TYPE_Q2_0, 32 },
	};
	memset(y, 0xa5, sizeof y);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		assert_int_equal(quant_row(cases[i].type, x, y, cases[i].bad), -EINVAL);
	for (size_t i = 0; i < sizeof y; i++)
		assert_int_equal(y[i], 0xa5);
}

/* tq2_0: d = the largest magnitude; q = lroundf(v / d) + 1, ties away from zero. */
static void test_tq2_0(void **state)
{
	(void)state;
	float x[QK_K];
	uint8_t y[sizeof(struct block_tq2_0)];
	/* value i of a run of 128: 32n + m; make each byte's four values one pattern */
	const float pattern[4] = { 2.0f, -1.0f, 1.0f, 0.9f }; /* q: 2, 0 (-0.5 away), 2 (0.5 away), 1 */
	for (int i = 0; i < QK_K; i++)
		x[i] = pattern[(i % 128) / 32];
	x[200] = -2.0f;                                     /* run 1, n = 2, m = 8: q = 0 */
	quant(GGML_TYPE_TQ2_0, x, QK_K, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_tq2_0, d)), 0x4000); /* 2.0 */
	for (int m = 0; m < 64; m++) {
		uint8_t want = 2 | 0 << 2 | 2 << 4 | 1 << 6;
		if (m == 32 + 8)
			want = 2 | 0 << 2 | 0 << 4 | 1 << 6;
		assert_int_equal(y[m], want);
	}
}

/* tq1_0: five trits t0..t4 a byte as ceil(t * 256 / 243); a block of zeros has d = 0
 * and every trit 1 (11111 in base 3 = 121: byte 128; qh 1111 then a 0 = 120: 127); a
 * block of ones every trit 2 (242: 255; qh 2222 then 0 = 240: 253). */
static void test_tq1_0(void **state)
{
	(void)state;
	float x[QK_K];
	uint8_t y[sizeof(struct block_tq1_0)];

	memset(x, 0, sizeof x);
	quant(GGML_TYPE_TQ1_0, x, QK_K, y);
	for (int m = 0; m < 48; m++)
		assert_int_equal(y[m], 128);
	for (int m = 48; m < 52; m++)
		assert_int_equal(y[m], 127);
	assert_int_equal(gguf_le16(y + offsetof(struct block_tq1_0, d)), 0);

	for (int i = 0; i < QK_K; i++)
		x[i] = 0.5f;
	quant(GGML_TYPE_TQ1_0, x, QK_K, y);
	for (int m = 0; m < 48; m++)
		assert_int_equal(y[m], 255);
	for (int m = 48; m < 52; m++)
		assert_int_equal(y[m], 253);
	assert_int_equal(gguf_le16(y + offsetof(struct block_tq1_0, d)), 0x3800); /* 0.5 */

	/* value m + 32n of the first 160 is trit n of byte m: one -1 at value 64 + 3 makes
	 * byte 3 (2 2 0 2 2)_3 = 224, ceil(224 * 256 / 243) = 236; decoding it back gives
	 * the trits (multiply by 3^n mod 256, then * 3 >> 8) */
	x[64 + 3] = -0.5f;
	quant(GGML_TYPE_TQ1_0, x, QK_K, y);
	assert_int_equal(y[3], 236);
	const int want[5] = { 2, 2, 0, 2, 2 };
	uint8_t b = y[3];
	for (int n = 0; n < 5; n++) {
		assert_int_equal(((unsigned)b * 3) >> 8, want[n]);
		b = (uint8_t)(b * 3);
	}
}

/* mxfp4: e = floor(log2 amax) + 125; the codes are the nearest of kvalues_fp4 * 2^(e -
 * 128), the first on a tie. */
static void test_mxfp4(void **state)
{
	(void)state;
	float x[QK_MXFP4];
	uint8_t y[sizeof(struct block_mxfp4)];

	/* amax 6: e = 127, half-scale 0.5, so the codes' values are 0 .5 1 1.5 2 3 4 6
	 * (8.. the same negated); 2.5, 3.5, 5, 0.25 and -0.75 are ties, to the first code */
	const float v[16] = { 6, -6, 0, -0.0f, 2.5f, -2.5f, 0.25f, 1.5f,
	                      5, 3.5f, -0.75f, 4, 1, 0.5f, -1, 0.1f };
	const uint8_t code[16] = { 7, 15, 0, 0, 4, 12, 0, 3, 6, 5, 9, 6, 2, 1, 10, 0 };
	for (int j = 0; j < 16; j++) {
		x[j] = v[j];
		x[j + 16] = v[15 - j];
	}
	quant(GGML_TYPE_MXFP4, x, QK_MXFP4, y);
	assert_int_equal(y[0], 127);
	for (int j = 0; j < 16; j++)
		assert_int_equal(y[1 + j], code[j] | code[15 - j] << 4);

	/* a block of zeros: e = 0, every code 0 */
	memset(x, 0, sizeof x);
	quant(GGML_TYPE_MXFP4, x, QK_MXFP4, y);
	for (size_t j = 0; j < sizeof y; j++)
		assert_int_equal(y[j], 0);

	/* amax 2^-130: floor(log2) + 125 = -5, and ggml's cast keeps the low byte, 251;
	 * at that enormous scale every value is nearest to 0 */
	x[7] = ldexpf(1.0f, -130);
	quant(GGML_TYPE_MXFP4, x, QK_MXFP4, y);
	assert_int_equal(y[0], 251);
	for (int j = 1; j < 17; j++)
		assert_int_equal(y[j], 0);

	/* amax inf: log2 is inf, the cast gives INT32_MIN, whose low byte is 0 */
	x[7] = INFINITY;
	quant(GGML_TYPE_MXFP4, x, QK_MXFP4, y);
	assert_int_equal(y[0], 0);
}

/* q1_0: d = the mean magnitude; a bit per value, set for >= 0 (+0 and -0 alike),
 * clear for negatives and NaN. */
static void test_q1_0(void **state)
{
	(void)state;
	float x[QK1_0];
	uint8_t y[sizeof(struct block_q1_0)];

	for (int j = 0; j < QK1_0; j++)
		x[j] = (j % 3 == 0) ? -1.5f : 1.5f;
	x[1] = -0.0f;                       /* magnitude 0, bit set */
	x[2] = NAN;                         /* the sum becomes NaN, bit clear */
	quant(GGML_TYPE_Q1_0, x, QK1_0, y);
	assert_int_equal(gguf_le16(y), 0x7e00);      /* NaN d */
	for (int j = 0; j < QK1_0; j++) {
		int bit = (y[2 + j / 8] >> (j % 8)) & 1;
		assert_int_equal(bit, j == 2 ? 0 : j == 1 ? 1 : j % 3 != 0);
	}

	for (int j = 0; j < QK1_0; j++)
		x[j] = (j % 2) ? -0.25f : 0.75f;    /* mean magnitude 0.5 */
	quant(GGML_TYPE_Q1_0, x, QK1_0, y);
	assert_int_equal(gguf_le16(y), 0x3800);
	for (int j = 0; j < QK1_0 / 8; j++)
		assert_int_equal(y[2 + j], 0x55);
}

/* q2_0: d = the largest magnitude; q = roundf(v / d) + 1 clamped to 0..3 (ties away
 * from zero, NaN to 0). */
static void test_q2_0(void **state)
{
	(void)state;
	float x[QK2_0];
	uint8_t y[sizeof(struct block_q2_0)];
	const float v[8] = { 2, -2, 1, -1, 0.9f, NAN, 0, -0.0f };
	const int q[8] = { 2, 0, 2, 0, 1, 0, 1, 1 };

	for (int j = 0; j < QK2_0; j++)
		x[j] = v[j % 8];
	quant(GGML_TYPE_Q2_0, x, QK2_0, y);
	assert_int_equal(gguf_le16(y), 0x4000);
	for (int j = 0; j < QK2_0; j++)
		assert_int_equal((y[2 + j / 4] >> (2 * (j % 4))) & 3, q[j % 8]);
}

/* iq4_nl: values exactly on the levels of kvalues_iq4nl fit scale 1 exactly (the
 * search finds the perfect fit at trial 0), so d = 1 and each value's nibble is its
 * level's index. A block of zeros has d = 0 and every nibble 8 (level 1, nearer to 0
 * than level -10). */
static void test_iq4_nl(void **state)
{
	(void)state;
	float x[QK4_NL];
	uint8_t y[sizeof(struct block_iq4_nl)];

	for (int j = 0; j < QK4_NL; j++)
		x[j] = kvalues_iq4nl[j % 16];
	quant(GGML_TYPE_IQ4_NL, x, QK4_NL, y);
	assert_int_equal(gguf_le16(y), 0x3c00);
	for (int j = 0; j < 16; j++)
		assert_int_equal(y[2 + j], j | j << 4);

	memset(x, 0, sizeof x);
	quant(GGML_TYPE_IQ4_NL, x, QK4_NL, y);
	assert_int_equal(gguf_le16(y), 0);
	for (int j = 0; j < 16; j++)
		assert_int_equal(y[2 + j], 0x88);

	/* one huge value among zeros: it decodes back to within fp16's precision, the
	 * zeros to the level nearest 0 */
	x[5] = 1e6f;
	quant(GGML_TYPE_IQ4_NL, x, QK4_NL, y);
	float d = fp16_to_f32(gguf_le16(y));
	float back = d * kvalues_iq4nl[y[2 + 5] & 0xf];
	assert_true(fabsf(back - 1e6f) <= 1e6f * 1e-3f);
	for (int j = 0; j < 16; j++) {
		if (j != 5)
			assert_true(fabsf(d * kvalues_iq4nl[y[2 + j] & 0xf]) <= fabsf(d) * 10);
	}
}

/* iq4_xs: sub-block k holds the levels times k + 1; its scale is k + 1, the super-block
 * d = -8 / 32 = -0.25, and ls - 32 = round((k + 1) / -0.25) = -4(k + 1): ls = 28, 24,
 * .., 0; each nibble is still its level's index. A block of zeros has d = -0 (0x8000,
 * ggml's -max_scale / 32) with every ls 32 and every nibble 8. */
static void test_iq4_xs(void **state)
{
	(void)state;
	float x[QK_K];
	uint8_t y[sizeof(struct block_iq4_xs)];

	for (int i = 0; i < QK_K; i++)
		x[i] = (float)(i / 32 + 1) * kvalues_iq4nl[i % 16];
	quant(GGML_TYPE_IQ4_XS, x, QK_K, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_iq4_xs, d)), 0xb400);
	assert_int_equal(gguf_le16(y + offsetof(struct block_iq4_xs, scales_h)), 0x0055);
	const uint8_t scales_l[4] = { 0x8c, 0x04, 0x8c, 0x04 };
	assert_memory_equal(y + offsetof(struct block_iq4_xs, scales_l), scales_l, 4);
	for (int ib = 0; ib < 8; ib++)
		for (int j = 0; j < 16; j++)
			assert_int_equal(y[offsetof(struct block_iq4_xs, qs) + 16 * ib + j], j | j << 4);

	memset(x, 0, sizeof x);
	quant(GGML_TYPE_IQ4_XS, x, QK_K, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_iq4_xs, d)), 0x8000);
	assert_int_equal(gguf_le16(y + offsetof(struct block_iq4_xs, scales_h)), 0xaaaa);
	for (int k = 0; k < 4; k++)
		assert_int_equal(y[offsetof(struct block_iq4_xs, scales_l) + k], 0);
	for (int j = 0; j < 128; j++)
		assert_int_equal(y[offsetof(struct block_iq4_xs, qs) + j], 0x88);
}

/* iq3_s: a block of zeros is all zero bytes. A sub-block after an all-zero one writes
 * its grid rows and signs where the zero one's would have gone (ggml's pointers advance
 * only past sub-blocks it quantized), while qh and the scale nibble follow its own
 * index: so a block [0, S, 0 ..] is [S, 0, ..]'s bytes with the qh byte and the nibble
 * moved. */
static void test_iq3_s_zero_sub_block(void **state)
{
	(void)state;
	float a[QK_K], b[QK_K];
	uint8_t ya[sizeof(struct block_iq3_s)], yb[sizeof(struct block_iq3_s)];

	memset(a, 0, sizeof a);
	quant(GGML_TYPE_IQ3_S, a, QK_K, ya);
	for (size_t j = 0; j < sizeof ya; j++)
		assert_int_equal(ya[j], 0);

	memset(b, 0, sizeof b);
	for (int i = 0; i < 32; i++) {
		a[32 + i] = b[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 5));
	}
	quant(GGML_TYPE_IQ3_S, a, QK_K, ya);
	quant(GGML_TYPE_IQ3_S, b, QK_K, yb);
	const size_t qs = offsetof(struct block_iq3_s, qs), qh = offsetof(struct block_iq3_s, qh);
	const size_t signs = offsetof(struct block_iq3_s, signs);
	const size_t scales = offsetof(struct block_iq3_s, scales);
	assert_memory_equal(ya, yb, 2);                          /* d */
	assert_memory_equal(ya + qs, yb + qs, 64);               /* rows at qs[0..7] in both */
	assert_memory_equal(ya + signs, yb + signs, 32);
	assert_int_equal(ya[qh + 0], 0);
	assert_int_equal(ya[qh + 1], yb[qh + 0]);
	assert_int_equal(yb[qh + 1], 0);
	assert_int_equal(ya[scales], (uint8_t)(yb[scales] << 4));   /* nibble of 0 is 0 */
	assert_int_equal(yb[scales] >> 4, 0);
	/* the sub-block's bytes are not all zero, so the test says something */
	int nonzero = 0;
	for (int j = 0; j < 8; j++)
		nonzero |= yb[qs + j];
	for (int j = 0; j < 4; j++)
		nonzero |= yb[signs + j];
	assert_true(nonzero != 0);
}

/* Scaling a block by a power of two scales every float operation of the quantizers
 * exactly, so the bytes are the same but for d (itself exact in fp16 here). */
static void test_power_of_two_scaling(void **state)
{
	(void)state;
	float x[QK_K], x4[QK_K];
	uint8_t y[sizeof(struct block_iq4_xs)], y4[sizeof(struct block_iq4_xs)]; /* the largest */
	const struct { enum ggml_type_id type; size_t d_at; size_t bytes; } cases[] = {
		{ GGML_TYPE_IQ3_S, offsetof(struct block_iq3_s, d), sizeof(struct block_iq3_s) },
		{ GGML_TYPE_IQ4_XS, offsetof(struct block_iq4_xs, d), sizeof(struct block_iq4_xs) },
		{ GGML_TYPE_TQ2_0, offsetof(struct block_tq2_0, d), sizeof(struct block_tq2_0) },
	};
	for (int i = 0; i < QK_K; i++) {
		x[i] = sinf(0.91f * (float)i) * (0.5f + (float)(i % 7));
		x4[i] = x[i] * 4;
	}
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		quant(cases[c].type, x, QK_K, y);
		quant(cases[c].type, x4, QK_K, y4);
		const size_t d = cases[c].d_at;
		assert_true(fp16_to_f32(gguf_le16(y4 + d)) == 4 * fp16_to_f32(gguf_le16(y + d)));
		assert_memory_equal(y, y4, d);
		assert_memory_equal(y + d + 2, y4 + d + 2, cases[c].bytes - d - 2);
	}
}

/* Blocks are independent: a row quantized whole equals its blocks one by one, at any
 * alignment of the output. */
static void test_blocks_independent(void **state)
{
	(void)state;
	enum { N = 4 * QK_K };
	static float x[N];
	/* iq4_nl takes the most: 8 blocks of 18 bytes per 256 values */
	static uint8_t whole[4 * 144], part[4 * 144 + 1];
	const enum ggml_type_id types[] = {
		GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_IQ3_S, GGML_TYPE_TQ1_0,
		GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0,
	};
	for (int i = 0; i < N; i++)
		x[i] = sinf((float)i * 0.7f) * (float)(i % 13) - (i % 64 == 0 ? 0 : 0.3f);
	for (int i = QK_K + 32; i < QK_K + 64; i++)
		x[i] = 0;                               /* an all-zero sub-block in block 1 */
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		const struct ggml_type *g = ggml_type_get(types[t]);
		const uint32_t per = QK_K / g->block_elems;
		quant(types[t], x, N, whole);
		for (int b = 0; b < 4; b++)
			quant(types[t], x + b * QK_K, QK_K, part + 1 + (size_t)b * per * g->block_bytes);
		assert_memory_equal(whole, part + 1, 4 * per * g->block_bytes);
	}
}

UNIT_TESTS(
	cmocka_unit_test(test_can_make),
	cmocka_unit_test(test_refusals),
	cmocka_unit_test(test_tq2_0),
	cmocka_unit_test(test_tq1_0),
	cmocka_unit_test(test_mxfp4),
	cmocka_unit_test(test_q1_0),
	cmocka_unit_test(test_q2_0),
	cmocka_unit_test(test_iq4_nl),
	cmocka_unit_test(test_iq4_xs),
	cmocka_unit_test(test_iq3_s_zero_sub_block),
	cmocka_unit_test(test_power_of_two_scaling),
	cmocka_unit_test(test_blocks_independent),
)
