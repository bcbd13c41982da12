/* Statistics taken from q4_K blocks (lib/stats/stats_quant.h) against the same figures
 * taken from the float32 values that ggml's reference dequantizer gives: counts, min
 * and max exactly, mean and std to float64 rounding; the same bits at every SIMD level;
 * and blocks built to take each of its paths (sub-blocks whose values do not fit their
 * grid, zeros at a whole quant, d or dmin zero, negative d, fp16 subnormal scales). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blocks.h"
#include "stats.h"
#include "stats_quant.h"
#include "types.h"

enum { BYTES = sizeof(struct block_q4_K), GROUP = STATS_BLOCK / QK_K };

static uint64_t rng = 0x243f6a8885a308d3u;

static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* Sets sub-block j's 6-bit scale and min in q4_K's 12 scale bytes (blocks.h). */
static void set_scale_min(uint8_t *s, int j, int sc, int m)
{
	if (j < 4) {
		s[j] = (uint8_t)((s[j] & 0xc0) | sc);
		s[j + 4] = (uint8_t)((s[j + 4] & 0xc0) | m);
	} else {
		s[j + 4] = (uint8_t)((sc & 0x0f) | (m & 0x0f) << 4);
		s[j - 4] = (uint8_t)((s[j - 4] & 0x3f) | (sc >> 4) << 6);
		s[j] = (uint8_t)((s[j] & 0x3f) | (m >> 4) << 6);
	}
}

/* A finite fp16 with any sign and exponent (zero and subnormals included). */
static uint16_t finite_f16(void)
{
	uint16_t h;
	do
		h = (uint16_t)next_u64();
	while ((h & 0x7c00) == 0x7c00);
	return h;
}

/* The kinds of blocks, each a path of stats_quant.c. */
enum kind {
	REALISTIC,     /* as llama.cpp writes them: dmin 4 to 16 times d */
	ANY_FINITE,    /* any finite d and dmin: negative, zero, subnormal, far apart */
	ZEROS,         /* m1 = 2 d1 exactly: a zero wherever q = 2 */
	MISFIT,        /* d1 * q - m1 needs more than 24 bits: rounded, summed one by one */
	D_ZERO,        /* d = 0: every value is -m1 (zero when m is) */
	FLAT,          /* every quant of a sub-block the same */
	KINDS
};

static void make_block(uint8_t *b, enum kind k)
{
	for (int i = 0; i < BYTES; i++)
		b[i] = (uint8_t)next_u64();
	uint8_t *scales = b + offsetof(struct block_q4_K, scales);
	uint8_t *qs = b + offsetof(struct block_q4_K, qs);
	const int e = (int)(next_u64() % 5);
	switch (k) {
	case REALISTIC:
		put16(b, (uint16_t)((3 + e) << 10 | (next_u64() & 0x3ff)));
		put16(b + 2, (uint16_t)((5 + e + (int)(next_u64() % 3)) << 10 | (next_u64() & 0x3ff)));
		break;
	case ANY_FINITE:
		put16(b, finite_f16());
		put16(b + 2, finite_f16());
		break;
	case ZEROS:
		put16(b, 0x3000);      /* 1/8: d1 = 1/4 */
		put16(b + 2, 0x3800);  /* 1/2: m1 = 1/2 */
		for (int j = 0; j < 8; j++)
			set_scale_min(scales, j, 2, 1);
		break;
	case MISFIT:
		put16(b, 0x3c00);      /* 1: d1 = 63 */
		put16(b + 2, 0x07ff);  /* 2^-14 * 2047/1024: m1's last bit is 2^-24 */
		for (int j = 0; j < 8; j++)
			set_scale_min(scales, j, 63, 1 + (int)(next_u64() % 63));
		break;
	case D_ZERO:
		put16(b, next_u64() & 1 ? 0x0000 : 0x8000);
		put16(b + 2, next_u64() & 1 ? 0x2e66 : 0);
		break;
	case FLAT:
		put16(b, (uint16_t)((3 + e) << 10 | (next_u64() & 0x3ff)));
		put16(b + 2, (uint16_t)((5 + e) << 10 | (next_u64() & 0x3ff)));
		for (int c = 0; c < 4; c++)
			memset(qs + 32 * c, (int)(next_u64() & 0xff), 32);
		break;
	default:
		break;
	}
}

/* nblocks blocks, kind k for all or (k == KINDS) mixed. */
static uint8_t *make_blocks(uint64_t nblocks, int k)
{
	uint8_t *p = malloc(nblocks * BYTES);
	assert_non_null(p);
	for (uint64_t b = 0; b < nblocks; b++)
		make_block(p + b * BYTES, k == KINDS ? (enum kind)(next_u64() % KINDS) : (enum kind)k);
	return p;
}

/* From the blocks, a group of STATS_BLOCK values at a time as stats.c gives them. */
static void from_blocks(const uint8_t *p, uint64_t nblocks, struct tensor_stats *out)
{
	static struct stats_acc a;
	stats_acc_init(&a);
	for (uint64_t b = 0; b < nblocks; b += GROUP)
		stats_acc_add_blocks(&a, GGML_TYPE_Q4_K, p + b * BYTES,
		                     nblocks - b < GROUP ? nblocks - b : GROUP);
	stats_acc_finish(&a, out);
}

/* From the float32 values of ggml's reference dequantizer. */
static void from_floats(const uint8_t *p, uint64_t nblocks, struct tensor_stats *out)
{
	static struct stats_acc a;
	float *x = malloc(nblocks * QK_K * sizeof *x);
	assert_non_null(x);
	ggml_type_get(GGML_TYPE_Q4_K)->to_float_ref(p, x, nblocks);
	stats_acc_init(&a);
	stats_acc_add(&a, x, nblocks * QK_K);
	stats_acc_finish(&a, out);
	free(x);
}

static bool same_float(float a, float b)
{
	return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static void assert_agree(const struct tensor_stats *q, const struct tensor_stats *f)
{
	assert_int_equal(q->elements, f->elements);
	assert_int_equal(q->finite, f->finite);
	assert_int_equal(q->nan + q->pos_inf + q->neg_inf, 0);
	assert_int_equal(q->zeros, f->zeros);
	assert_int_equal(q->subnormals, f->subnormals);
	assert_true(same_float(q->min, f->min));
	assert_true(same_float(q->max, f->max));
	assert_true(same_float(q->absmax, f->absmax));
	/* float64 rounding: relative to the spread of the values as well as to the mean,
	 * as a mean near 0 is the difference of large sums */
	const double scale = fabs(f->mean) + f->std;
	assert_true(fabs(q->mean - f->mean) <= 1e-12 * scale);
	assert_true(fabs(q->std - f->std) <= 1e-12 * scale);
}

/* Each kind alone, and all mixed, over whole groups and a ragged last one. */
static void test_agrees(void **state)
{
	(void)state;
	static const uint64_t sizes[] = { 1, GROUP, 7 * GROUP + 5 };
	for (int k = 0; k <= KINDS; k++) {
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			uint8_t *p = make_blocks(sizes[i], k);
			struct tensor_stats q, f;
			from_blocks(p, sizes[i], &q);
			from_floats(p, sizes[i], &f);
			assert_agree(&q, &f);
			free(p);
		}
	}
}

/* The built blocks really have what they were built for. */
static void test_kinds(void **state)
{
	(void)state;
	struct tensor_stats q, f;
	uint8_t *p = make_blocks(GROUP, ZEROS);
	from_blocks(p, GROUP, &q);
	from_floats(p, GROUP, &f);
	assert_true(q.zeros > GROUP * QK_K / 32);   /* about 1 in 16 */
	assert_int_equal(q.zeros, f.zeros);
	free(p);

	p = make_blocks(GROUP, MISFIT);
	from_blocks(p, GROUP, &q);
	from_floats(p, GROUP, &f);
	assert_agree(&q, &f);
	/* the values rounded: their mean is not that of the reals d1 q - m1 */
	double real = 0;
	for (uint64_t b = 0; b < GROUP; b++)
		for (int j = 0; j < 8; j++) {
			const uint8_t *blk = p + b * BYTES;
			const uint8_t *s = blk + offsetof(struct block_q4_K, scales);
			const int m = j < 4 ? s[j + 4] & 0x3f : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
			for (int l = 0; l < 32; l++) {
				const int qv = blk[offsetof(struct block_q4_K, qs) + 32 * (j / 2) + l] >>
				               (4 * (j % 2)) & 0x0f;
				real += 63.0 * qv - 0x1.ffcp-14 * m;
			}
		}
	real /= GROUP * QK_K;
	assert_true(real != f.mean);
	free(p);

	p = make_blocks(GROUP, D_ZERO);
	from_blocks(p, GROUP, &q);
	assert_true(q.zeros > 0 && q.zeros < GROUP * QK_K);
	free(p);
}

/* The same bits at every SIMD level. */
static void test_same_bits(void **state)
{
	(void)state;
	const uint64_t n = 5 * GROUP + 3;
	uint8_t *p = make_blocks(n, KINDS);
	struct tensor_stats first;
	for (int l = DEQUANT_SCALAR; l <= (int)dequant_best(); l++) {
		dequant_select((enum dequant_level)l);
		struct tensor_stats s;
		from_blocks(p, n, &s);
		if (l == DEQUANT_SCALAR)
			first = s;
		assert_memory_equal(&s, &first, sizeof s);
	}
	dequant_select(dequant_best());
	free(p);
}

/* The first value, the shift of a tensor's first group, is the first .f32 value. */
static void test_first(void **state)
{
	(void)state;
	for (int k = 0; k < KINDS; k++) {
		uint8_t *p = make_blocks(1, k);
		float x[QK_K];
		ggml_type_get(GGML_TYPE_Q4_K)->to_float_ref(p, x, 1);
		assert_true(same_float(stats_quant_first(GGML_TYPE_Q4_K, p), x[0]));
		free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agrees),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_same_bits),
		cmocka_unit_test(test_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
