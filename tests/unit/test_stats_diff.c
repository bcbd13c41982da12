/* The sums and figures of --diff (lib/4-stats/stats_diff.h): against a long double
 * reference over random values, the same bits as a plain scalar loop in the same lane
 * order (whatever SIMD the library was built with), exactly 0 and 1 for b = a, a NaN
 * or an infinity counted and left out, and the undefined figures NaN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "diff_plan.h"
#include "diff_scan.h"
#include "gguf_writer.h"
#include "guard.h"
#include "model.h"
#include "stats_diff.h"
#include "test_data.h"

static uint64_t rng = 0x2545f4914f6cdd1du;

/* The sequence of this test (test_data.h). */
static uint64_t next_u64(void)
{
	return xorshift64(&rng);
}

static float uniform(void)
{
	return (float)((double)(next_u64() >> 11) * 0x1p-53 * 2.0 - 1.0);
}

enum { N = 3 * 4096 + 123 };

/* The lanes the library promises, written plainly: 8 lanes per block of 4096, summed
 * pairwise, blocks added in order. */
static void scalar_sums(const float *a, const float *b, uint64_t n, double out[5])
{
	memset(out, 0, 5 * sizeof *out);
	for (uint64_t at = 0; at < n; at += 4096) {
		double l[4][8] = { { 0 } }, mx = 0;
		for (uint64_t i = at; i < n && i < at + 4096; i++) {
			const double x = a[i], y = b[i], d = y - x;
			const int j = (int)((i - at) % 8);
			l[0][j] += d * d;
			l[1][j] += x * x;
			l[2][j] += y * y;
			l[3][j] += x * y;
			mx = fabs(d) > mx ? fabs(d) : mx;
		}
		for (int k = 0; k < 4; k++) {
			for (int w = 4; w >= 1; w /= 2)
				for (int j = 0; j < w; j++)
					l[k][j] += l[k][j + w];
			out[k] += l[k][0];
		}
		out[4] = mx > out[4] ? mx : out[4];
	}
}

/* s's sums of a and b (N values each) are the scalar loop's, bit for bit. */
static void expect_scalar_sums(const struct diff_sums *s, const float *a, const float *b)
{
	double want[5];
	scalar_sums(a, b, N, want);
	assert_memory_equal(&s->d2, &want[0], sizeof(double));
	assert_memory_equal(&s->a2, &want[1], sizeof(double));
	assert_memory_equal(&s->b2, &want[2], sizeof(double));
	assert_memory_equal(&s->ab, &want[3], sizeof(double));
	assert_memory_equal(&s->max_abs, &want[4], sizeof(double));
}

static void test_against_references(void **state)
{
	(void)state;
	static float a[N], b[N];
	for (int i = 0; i < N; i++) {
		a[i] = uniform();
		b[i] = a[i] + uniform() * 0.01f;
	}
	struct diff_sums s;
	diff_sums_init(&s);
	diff_sums_add(&s, a, b, N);
	expect_scalar_sums(&s, a, b);
	long double d2 = 0, a2 = 0, b2 = 0, ab = 0;
	for (int i = 0; i < N; i++) {
		const long double x = a[i], y = b[i];
		d2 += (y - x) * (y - x);
		a2 += x * x;
		b2 += y * y;
		ab += x * y;
	}
	struct diff_figures f;
	diff_figures(&s, &f);
	assert_true(fabs(f.rmse - (double)sqrtl(d2 / N)) <= 1e-12 * f.rmse);
	assert_true(fabs(f.rel_rmse - (double)sqrtl(d2 / a2)) <= 1e-12 * f.rel_rmse);
	assert_true(fabs(f.cosine - (double)(ab / sqrtl(a2 * b2))) <= 1e-12);
	assert_int_equal(s.elements, N);
	assert_int_equal(s.nonfinite, 0);
}

/* Blocks of every float32 magnitude, subnormals included, each block's values of one
 * magnitude (so that no term is lost in its block's sums) and b below a by 1 to 28
 * binary orders (so that b - a has 25 to 52 bits and its square is rounded): the same
 * bits as the scalar loop still. The AVX2 path fuses x·x + Σ, right only because a
 * product of two float32 values is exact in float64; a fused (b - a)² + Σ fails here. */
static void test_every_magnitude(void **state)
{
	(void)state;
	static float a[N], b[N];
	for (int i = 0; i < N; i++) {
		const int scale = (int)((unsigned)(i / 4096) * 97 % 250) - 145;
		a[i] = ldexpf(uniform(), scale);
		b[i] = ldexpf(uniform(), scale - 1 - (int)(next_u64() % 28));
	}
	struct diff_sums s;
	diff_sums_init(&s);
	diff_sums_add(&s, a, b, N);
	assert_int_equal(s.nonfinite, 0);
	expect_scalar_sums(&s, a, b);
}

static void test_identical(void **state)
{
	(void)state;
	static float a[N];
	for (int i = 0; i < N; i++)
		a[i] = uniform() * 1e30f;
	struct diff_sums s;
	diff_sums_init(&s);
	diff_sums_add(&s, a, a, N);
	struct diff_figures f;
	diff_figures(&s, &f);
	assert_true(f.rmse == 0.0 && f.rel_rmse == 0.0 && f.max_abs_err == 0.0);
	assert_true(f.cosine == 1.0);
}

static void test_nonfinite(void **state)
{
	(void)state;
	float a[100], b[100];
	for (int i = 0; i < 100; i++)
		a[i] = b[i] = (float)i;
	b[99] = 101.0f;          /* the one difference: 2 */
	a[3] = NAN;
	b[5] = INFINITY;
	a[7] = -INFINITY;
	b[7] = -INFINITY;        /* equal infinities are still left out */
	struct diff_sums s;
	diff_sums_init(&s);
	diff_sums_add(&s, a, b, 100);
	assert_int_equal(s.nonfinite, 3);
	struct diff_figures f;
	diff_figures(&s, &f);
	assert_true(f.max_abs_err == 2.0);
	assert_true(f.rmse == sqrt(4.0 / 97.0));
	assert_false(isnan(f.cosine));
}

static void test_undefined(void **state)
{
	(void)state;
	float zero[16] = { 0 }, one[16];
	for (int i = 0; i < 16; i++)
		one[i] = 1.0f;
	struct diff_sums s;
	struct diff_figures f;
	diff_sums_init(&s);
	diff_sums_add(&s, zero, one, 16);       /* all-zero a */
	diff_figures(&s, &f);
	assert_true(f.rmse == 1.0 && f.max_abs_err == 1.0);
	assert_true(isnan(f.rel_rmse) && isnan(f.cosine));
	diff_sums_init(&s);
	diff_sums_add(&s, one, zero, 16);       /* all-zero b */
	diff_figures(&s, &f);
	assert_true(f.rel_rmse == 1.0 && isnan(f.cosine));
	float nan[4] = { NAN, NAN, NAN, NAN };
	diff_sums_init(&s);
	diff_sums_add(&s, nan, one, 4);         /* nothing compared */
	diff_figures(&s, &f);
	assert_true(isnan(f.rmse) && isnan(f.max_abs_err) && isnan(f.rel_rmse) && isnan(f.cosine));
	diff_sums_init(&s);                     /* no positions at all */
	diff_figures(&s, &f);
	assert_true(isnan(f.rmse));
}

/* ---- the scan ---- */

/* Two tensors per model, several chunks each: f32 and q8_0 (scale 2^-6). */
static const struct { const char *name; uint32_t type; uint64_t n; } tensors[] = {
	{ "w.f32", GGML_TYPE_F32, 20 * DIFF_CHUNK + 1000 },
	{ "w.q8_0", GGML_TYPE_Q8_0, 9 * DIFF_CHUNK + 64 },
};

/* gw_flat_model's tensor k: tensors[k], random values of the sequence. */
static void flat_tensor(void *ctx, int k, const char **name, uint32_t *type, uint64_t *n,
                        struct gw *data)
{
	(void)ctx;
	*name = tensors[k].name;
	*type = tensors[k].type;
	*n = tensors[k].n;
	if (tensors[k].type == GGML_TYPE_F32) {
		for (uint64_t i = 0; i < tensors[k].n; i++)
			gw_f32(data, uniform());
	} else {
		for (uint64_t b = 0; b < tensors[k].n / 32; b++) {
			gw_u16(data, 0x2400);
			for (int i = 0; i < 32; i++)
				gw_u8(data, (uint8_t)next_u64());
		}
	}
}

/* A model of those tensors, from seed (the same seed, the same values). */
static void write_model(const char *path, uint64_t seed)
{
	struct gw w;
	gw_init(&w);
	rng = seed;
	gw_flat_model(&w, 2, flat_tensor, NULL);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

static struct ggufs_model *open_path(const char *path)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		fail_msg("%s", err);
	return m;
}

static void test_scan_in_order(void **state)
{
	(void)state;
	guard_install();
	char pa[] = "/tmp/ggufs-diff-a-XXXXXX", pb[] = "/tmp/ggufs-diff-b-XXXXXX";
	close(mkstemp(pa));
	close(mkstemp(pb));
	write_model(pa, 1);
	write_model(pb, 2);
	struct ggufs_model *a = open_path(pa), *b = open_path(pb);
	struct diff_plan plan;
	assert_int_equal(diff_plan_make(a, b, &plan), 0);
	assert_int_equal(plan.n_same, 2);
	struct diff_sums sums[2];
	bool compared[2];
	uint64_t total = 0;
	struct diff_scan_failure fail;
	for (int round = 0; round < 3; round++) {
		assert_int_equal(diff_scan_run(a, b, &plan, sums, compared, NULL, NULL, &total, &fail), 0);
		for (int k = 0; k < 2; k++) {
			/* one thread: the chunks in order, each from zero, merged */
			struct diff_sums want, piece;
			diff_sums_init(&want);
			for (uint64_t at = 0; at < tensors[k].n; at += DIFF_CHUNK) {
				int which;
				assert_int_equal(diff_range(a, plan.same[k].a, b, plan.same[k].b, at,
				                            DIFF_CHUNK, &piece, &which, NULL), 0);
				diff_sums_merge(&want, &piece);
			}
			assert_true(compared[k]);
			assert_memory_equal(&sums[k], &want, sizeof want);
			assert_int_equal(sums[k].elements, tensors[k].n);
			assert_true(sums[k].d2 > 0);
		}
	}
	assert_int_equal(total, model_tensor(a, 0)->size + model_tensor(a, 1)->size +
	                        model_tensor(b, 0)->size + model_tensor(b, 1)->size);
	/* b shrinks to its first tensor and half its second: the second pair fails, in b */
	assert_int_equal(truncate(pb, (off_t)(model_tensor(b, 1)->offset + model_tensor(b, 1)->size / 2)), 0);
	assert_int_equal(diff_scan_run(a, b, &plan, sums, compared, NULL, NULL, &total, &fail), -EIO);
	assert_int_equal(fail.which, 1);
	assert_int_equal(fail.pair, 1);
	diff_plan_free(&plan);
	model_close(a);
	model_close(b);
	unlink(pa);
	unlink(pb);
}

UNIT_TESTS(cmocka_unit_test(test_against_references),
           cmocka_unit_test(test_every_magnitude),
           cmocka_unit_test(test_identical),
           cmocka_unit_test(test_nonfinite),
           cmocka_unit_test(test_undefined),
           cmocka_unit_test(test_scan_in_order))
