/* The sums and figures of --diff (lib/4-stats/stats_diff.h): against a long double
 * reference over random values, the same bits as a plain scalar loop in the same lane
 * order (whatever SIMD the library was built with), exactly 0 and 1 for b = a, a NaN
 * or an infinity counted and left out, and the undefined figures NaN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "stats_diff.h"

static uint64_t rng = 0x2545f4914f6cdd1du;

/* xorshift64: a fixed sequence, so a failure reproduces. */
static uint64_t next_u64(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
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
	double want[5];
	scalar_sums(a, b, N, want);
	assert_memory_equal(&s.d2, &want[0], sizeof(double));
	assert_memory_equal(&s.a2, &want[1], sizeof(double));
	assert_memory_equal(&s.b2, &want[2], sizeof(double));
	assert_memory_equal(&s.ab, &want[3], sizeof(double));
	assert_memory_equal(&s.max_abs, &want[4], sizeof(double));
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

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_against_references),
		cmocka_unit_test(test_identical),
		cmocka_unit_test(test_nonfinite),
		cmocka_unit_test(test_undefined),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
