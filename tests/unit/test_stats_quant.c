/* Statistics taken from q4_K, q6_K and q8_0 blocks (lib/4-stats/stats_quant.h) against
 * the same figures taken from the float32 values that ggml's reference dequantizer gives:
 * counts, min and max exactly, mean and std to float64 rounding; the same bits at every
 * SIMD level; and blocks built to take each of its paths (q4_K sub-blocks whose values do
 * not fit their grid, zeros at a whole quant, zero, negative and fp16 subnormal scales,
 * flat quants, ragged ends of q8_0's runs of 16 blocks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "blocks.h"
#include "dequant.h"
#include "stats.h"
#include "stats_quant.h"
#include "test_data.h"
#include "types.h"

static uint64_t rng = 0x243f6a8885a308d3u;

/* The sequence of this test (test_data.h). */
static uint64_t next_u64(void)
{
	return xorshift64(&rng);
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
	REALISTIC,     /* as llama.cpp writes them (q4_K: dmin 4 to 16 times d) */
	ANY_FINITE,    /* any finite scales: negative, zero, subnormal, far apart */
	ZEROS,         /* many values zero (q4_K: m1 = 2 d1 exactly, zero where q = 2) */
	D_ZERO,        /* d = 0 (q4_K: every value is -m1, zero when m is) */
	FLAT,          /* every quant of a sub-block the same */
	POSITIVE,      /* every value above zero: a stray 0 of an unused lane would be the min */
	MISFIT,        /* q4_K only: d1 * q - m1 needs more than 24 bits, rounded */
	KINDS
};

/* An fp16 of 2^e times a random significand, for e in -14..15. */
static uint16_t f16_random(int e)
{
	return (uint16_t)((e + 15) << 10 | (next_u64() & 0x3ff));
}

static void make_q4_K(uint8_t *b, enum kind k)
{
	uint8_t *scales = b + offsetof(struct block_q4_K, scales);
	uint8_t *qs = b + offsetof(struct block_q4_K, qs);
	const int e = (int)(next_u64() % 5);
	switch (k) {
	case REALISTIC:
		put16(b, f16_random(e - 12));
		put16(b + 2, f16_random(e - 10 + (int)(next_u64() % 3)));
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
		put16(b, f16_random(e - 12));
		put16(b + 2, f16_random(e - 10));
		for (int c = 0; c < 4; c++)
			memset(qs + 32 * c, (int)(next_u64() & 0xff), 32);
		break;
	case POSITIVE:         /* d1 > 0, m1 = 0, q > 0 */
		put16(b, f16_random(e - 12));
		put16(b + 2, f16_random(e - 10));
		for (int j = 0; j < 8; j++)
			set_scale_min(scales, j, 1 + (int)(next_u64() % 63), 0);
		for (int i = 0; i < 128; i++)
			qs[i] |= 0x11;
		break;
	default:
		break;
	}
}

/* Sets the scale d of a q8_0 or q6_K block by kind, true for the kinds that keep the
 * random quants. */
static bool set_d(uint8_t *d, enum kind k)
{
	switch (k) {
	case ANY_FINITE:
		put16(d, finite_f16());
		return true;
	case D_ZERO:
		put16(d, next_u64() & 1 ? 0x0000 : 0x8000);
		return true;
	default:
		put16(d, f16_random((int)(next_u64() % 5) - 12));
		return k == REALISTIC;
	}
}

static void make_q8_0(uint8_t *b, enum kind k)
{
	int8_t *qs = (int8_t *)(b + offsetof(struct block_q8_0, qs));
	if (set_d(b + offsetof(struct block_q8_0, d), k))
		return;
	const int flat = (int8_t)next_u64();
	for (int i = 0; i < QK; i++) {
		if (k == POSITIVE)
			qs[i] = (int8_t)(1 + (qs[i] & 0x7e));
		else
			qs[i] = (int8_t)(k == FLAT ? flat : next_u64() & 1 ? 0 : qs[i]);
	}
}

/* Sets quant n (0..255, 0..63) of the q6_K block at b (blocks.h). */
static void set_q6_K(uint8_t *b, int n, int q)
{
	const int h = n / 128, k = n % 128 / 32, l = n % 32;
	uint8_t *ql = b + offsetof(struct block_q6_K, ql) + 64 * h + 32 * (k % 2) + l;
	uint8_t *qh = b + offsetof(struct block_q6_K, qh) + 32 * h + l;
	*ql = (uint8_t)((*ql & ~(0x0f << 4 * (k / 2))) | (q & 0x0f) << 4 * (k / 2));
	*qh = (uint8_t)((*qh & ~(3 << 2 * k)) | (q >> 4) << 2 * k);
}

static void make_q6_K(uint8_t *b, enum kind k)
{
	int8_t *sc = (int8_t *)(b + offsetof(struct block_q6_K, scales));
	if (set_d(b + offsetof(struct block_q6_K, d), k))
		return;
	/* ZEROS: the value zero is the quant 32, and all 16 of a sub-block whose scale is 0 */
	for (int j = 0; j < 16; j++) {
		const int flat = (int)(next_u64() & 63);
		if (k == ZEROS && next_u64() % 4 == 0)
			sc[j] = 0;
		if (k == POSITIVE)
			sc[j] = (int8_t)(1 + (next_u64() & 0x7e));
		for (int i = 0; i < 16; i++) {
			if (k == POSITIVE)
				set_q6_K(b, 16 * j + i, 33 + (int)(next_u64() % 31));
			else if (k == FLAT || next_u64() & 1)
				set_q6_K(b, 16 * j + i, k == FLAT ? flat : 32);
		}
	}
}

/* A quantized type under test: its blocks, and its builder of a block of each kind
 * below kinds (random bytes on entry). */
struct qtype {
	uint32_t id;
	size_t bytes, elems;
	void (*make)(uint8_t *b, enum kind k);
	int kinds;
};

static const struct qtype qtypes[] = {
	{ GGML_TYPE_Q4_K, sizeof(struct block_q4_K), QK_K, make_q4_K, KINDS },
	{ GGML_TYPE_Q6_K, sizeof(struct block_q6_K), QK_K, make_q6_K, MISFIT },
	{ GGML_TYPE_Q8_0, sizeof(struct block_q8_0), QK, make_q8_0, MISFIT },
};
#define FOR_TYPES(t) for (const struct qtype *t = qtypes; t < qtypes + 3; t++)

/* Blocks per group of STATS_BLOCK values. */
static uint64_t group(const struct qtype *t)
{
	return STATS_BLOCK / t->elems;
}

/* nblocks blocks, kind k for all or (k == t->kinds) mixed. */
static uint8_t *make_blocks(const struct qtype *t, uint64_t nblocks, int k)
{
	uint8_t *p = malloc(nblocks * t->bytes);
	assert_non_null(p);
	for (uint64_t b = 0; b < nblocks; b++) {
		uint8_t *blk = p + b * t->bytes;
		for (size_t i = 0; i < t->bytes; i++)
			blk[i] = (uint8_t)next_u64();
		t->make(blk, (enum kind)(k == t->kinds ? (int)(next_u64() % (uint64_t)k) : k));
	}
	return p;
}

/* From the blocks, a group of STATS_BLOCK values at a time as stats.c gives them. */
static void from_blocks(const struct qtype *t, const uint8_t *p, uint64_t nblocks,
                        struct tensor_stats *out)
{
	static struct stats_acc a;
	const uint64_t g = group(t);
	stats_acc_init(&a);
	for (uint64_t b = 0; b < nblocks; b += g)
		stats_acc_add_blocks(&a, t->id, p + b * t->bytes, nblocks - b < g ? nblocks - b : g);
	stats_acc_finish(&a, out);
}

/* From the float32 values of ggml's reference dequantizer. */
static void from_floats(const struct qtype *t, const uint8_t *p, uint64_t nblocks,
                        struct tensor_stats *out)
{
	static struct stats_acc a;
	float *x = malloc(nblocks * t->elems * sizeof *x);
	assert_non_null(x);
	dequant_get(t->id)->to_float_ref(p, x, nblocks);
	stats_acc_init(&a);
	stats_acc_add(&a, x, nblocks * t->elems);
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

/* Each kind alone, and all mixed, over whole groups and ragged last ones (q8_0: runs
 * of 16 blocks and of 8 cut short). */
static void test_agrees(void **state)
{
	(void)state;
	FOR_TYPES(t) {
		const uint64_t sizes[] = { 1, 13, 29, group(t), 7 * group(t) + 5 };
		for (int k = 0; k <= t->kinds; k++) {
			for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
				uint8_t *p = make_blocks(t, sizes[i], k);
				struct tensor_stats q, f;
				from_blocks(t, p, sizes[i], &q);
				from_floats(t, p, sizes[i], &f);
				assert_agree(&q, &f);
				free(p);
			}
		}
	}
}

/* The zeros of n blocks of kind k from the blocks, checked against the float path. */
static uint64_t zeros_of(const struct qtype *t, uint64_t n, enum kind k)
{
	struct tensor_stats q, f;
	uint8_t *p = make_blocks(t, n, k);
	from_blocks(t, p, n, &q);
	from_floats(t, p, n, &f);
	assert_int_equal(q.zeros, f.zeros);
	free(p);
	return q.zeros;
}

/* The built blocks really have what they were built for. */
static void test_kinds(void **state)
{
	(void)state;
	FOR_TYPES(t) {
		const uint64_t n = group(t), values = n * t->elems;
		/* q4_K: about 1 in 16; q6_K, q8_0: about half */
		assert_true(zeros_of(t, n, ZEROS) > values / 32);
		const uint64_t dz = zeros_of(t, n, D_ZERO);
		if (t->id == GGML_TYPE_Q4_K)
			assert_true(dz > 0 && dz < values);
		else
			assert_int_equal(dz, values);
		/* random quants: some at the value zero (1 in 256, 1 in 64), not all */
		const uint64_t rz = zeros_of(t, n, REALISTIC);
		assert_true(t->id == GGML_TYPE_Q4_K || (rz > 0 && rz < values / 16));
	}

	const struct qtype *t = &qtypes[0];
	const uint64_t n = group(t);
	struct tensor_stats q, f;
	uint8_t *p = make_blocks(t, n, MISFIT);
	from_blocks(t, p, n, &q);
	from_floats(t, p, n, &f);
	assert_agree(&q, &f);
	/* the values rounded: their mean is not that of the reals d1 q - m1 */
	double real = 0;
	for (uint64_t b = 0; b < n; b++)
		for (int j = 0; j < 8; j++) {
			const uint8_t *blk = p + b * t->bytes;
			const uint8_t *s = blk + offsetof(struct block_q4_K, scales);
			const int m = j < 4 ? s[j + 4] & 0x3f : (s[j + 4] >> 4) | (s[j] >> 6) << 4;
			for (int l = 0; l < 32; l++) {
				const int qv = blk[offsetof(struct block_q4_K, qs) + 32 * (j / 2) + l] >>
				               (4 * (j % 2)) & 0x0f;
				real += 63.0 * qv - 0x1.ffcp-14 * m;
			}
		}
	real /= (double)(n * QK_K);
	assert_true(real != f.mean);
	free(p);
}

/* The same bits at every SIMD level. */
static void test_same_bits(void **state)
{
	(void)state;
	FOR_TYPES(t) {
		const uint64_t n = 5 * group(t) + 13;
		uint8_t *p = make_blocks(t, n, t->kinds);
		struct tensor_stats first;
		for (int l = DEQUANT_SCALAR; l <= (int)dequant_best(); l++) {
			dequant_select((enum dequant_level)l);
			struct tensor_stats s;
			from_blocks(t, p, n, &s);
			if (l == DEQUANT_SCALAR)
				first = s;
			assert_memory_equal(&s, &first, sizeof s);
		}
		dequant_select(dequant_best());
		free(p);
	}
}

/* The first value, the shift of a tensor's first group, is the first .f32 value. */
static void test_first(void **state)
{
	(void)state;
	FOR_TYPES(t) {
		for (int k = 0; k < t->kinds; k++) {
			uint8_t *p = make_blocks(t, 1, k);
			float x[QK_K];
			dequant_get(t->id)->to_float_ref(p, x, 1);
			assert_true(same_float(stats_quant_first(t->id, p), x[0]));
			free(p);
		}
	}
}

UNIT_TESTS(cmocka_unit_test(test_agrees),
           cmocka_unit_test(test_kinds),
           cmocka_unit_test(test_same_bits),
           cmocka_unit_test(test_first))
