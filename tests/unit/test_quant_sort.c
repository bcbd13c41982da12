/* lib/2-quant's sort of iq1's searches (quant_sort.h) against what it stands for,
 * glibc 2.36's qsort of (value, index) pairs under ggml's comparator of values: equal
 * values keep their index order (stable: ggml's bytes depend on it, unit-quant_ref_
 * imatrix shows it for iq1_m); finite values come out ascending; around NaN (equal to
 * everything) the order is glibc's merges', one case of it written down here, and, on
 * a glibc 2.36, thousands of random ones compared with qsort itself; more than
 * QUANT_SORT_MAX pairs are left as they are. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <gnu/libc-version.h>

#include "unit.h"

#include "quant_sort.h"

/* The pairs (v[i], i) for the n values v. */
static void pairs_of(const float *v, int n, struct quant_pair *p)
{
	for (int i = 0; i < n; i++)
		p[i] = (struct quant_pair){ v[i], i };
}

/* Equal values keep their order: the indexes come out ascending among equals. */
static void test_stable(void **state)
{
	(void)state;
	const float v[] = { 1, 0, 1, 0, -0.0f, 1, 0, 2, 1, 0, 0, 2, -1, 1, 0, 1 };
	const int want[] = { 12, 1, 3, 4, 6, 9, 10, 14, 0, 2, 5, 8, 13, 15, 7, 11 };
	struct quant_pair p[16];

	pairs_of(v, 16, p);
	quant_sort_pairs(p, 16);
	for (int j = 0; j < 16; j++)
		assert_int_equal(p[j].index, want[j]);
}

/* A stable insertion sort of finite values: the order quant_sort_pairs must give. */
static void insertion_sort(struct quant_pair *p, int n)
{
	for (int i = 1; i < n; i++) {
		struct quant_pair t = p[i];
		int j = i;
		while (j > 0 && p[j - 1].value > t.value) {
			p[j] = p[j - 1];
			j--;
		}
		p[j] = t;
	}
}

/* xorshift32, for the random cases. */
static uint32_t next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Random finite values with many ties, every n up to 32: the stable order. */
static void test_random_finite(void **state)
{
	(void)state;
	uint32_t s = 46;

	for (int round = 0; round < 2000; round++) {
		const int n = 1 + round % QUANT_SORT_MAX;
		struct quant_pair p[QUANT_SORT_MAX], want[QUANT_SORT_MAX];
		for (int i = 0; i < n; i++)
			p[i] = (struct quant_pair){ (float)((int)(next(&s) % 9) - 4) * 0.25f, i };
		memcpy(want, p, sizeof p);
		insertion_sort(want, n);
		quant_sort_pairs(p, n);
		for (int i = 0; i < n; i++) {
			assert_int_equal(p[i].index, want[i].index);
			assert_true(p[i].value == want[i].value);
		}
	}
}

/* Around NaN, glibc 2.36's order, as its qsort gave it for these values. */
static void test_nan_case(void **state)
{
	(void)state;
	const float v[] = { 3, NAN, 1, 2, NAN, 0, 1, -1, 5, NAN, 2, 0.5f };
	const int want[] = { 7, 6, 3, 0, 1, 2, 4, 5, 8, 9, 11, 10 };
	struct quant_pair p[12];

	pairs_of(v, 12, p);
	quant_sort_pairs(p, 12);
	for (int j = 0; j < 12; j++)
		assert_int_equal(p[j].index, want[j]);
}

/* ggml's iq1_sort_helper, for qsort. */
static int ggml_order(const void *a, const void *b)
{
	const float *l = a, *r = b;
	return *l < *r ? -1 : *l > *r ? 1 : 0;
}

/* On glibc 2.36 (the reference's), random values with ties and NaN, every n up to
 * 32, in the same order as its qsort; skipped elsewhere. */
static void test_glibc_qsort(void **state)
{
	(void)state;
	if (strcmp(gnu_get_libc_version(), "2.36") != 0)
		skip();
	uint32_t s = 2036;
	for (int round = 0; round < 5000; round++) {
		const int n = 1 + round % QUANT_SORT_MAX;
		struct quant_pair p[QUANT_SORT_MAX], q[QUANT_SORT_MAX];
		for (int i = 0; i < n; i++) {
			const uint32_t r = next(&s) % 12;
			p[i] = (struct quant_pair){ r == 0 ? NAN : (float)((int)r - 6), i };
		}
		memcpy(q, p, sizeof p);
		quant_sort_pairs(p, n);
		qsort(q, (size_t)n, sizeof q[0], ggml_order);
		for (int i = 0; i < n; i++)
			assert_int_equal(p[i].index, q[i].index);
	}
}

/* More pairs than QUANT_SORT_MAX are not touched. */
static void test_too_many(void **state)
{
	(void)state;
	struct quant_pair p[QUANT_SORT_MAX + 1];

	for (int i = 0; i <= QUANT_SORT_MAX; i++)
		p[i] = (struct quant_pair){ (float)(QUANT_SORT_MAX - i), i };
	quant_sort_pairs(p, QUANT_SORT_MAX + 1);
	for (int i = 0; i <= QUANT_SORT_MAX; i++)
		assert_int_equal(p[i].index, i);
}

UNIT_TESTS(
	cmocka_unit_test(test_stable),
	cmocka_unit_test(test_random_finite),
	cmocka_unit_test(test_nan_case),
	cmocka_unit_test(test_glibc_qsort),
	cmocka_unit_test(test_too_many),
)
