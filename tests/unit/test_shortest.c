/* The fast float32 path of the shortest-text rendering against the reference search
 * (snprintf and strtof), on random bit patterns and on the values where the fast path's
 * decisions are closest: integers, powers of ten and their neighbours, round decimals,
 * the ends of its range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "shortest.h"
#include "test_data.h"

static unsigned long checked;

static void check(float f)
{
	char fast[SHORTEST_MAX], ref[SHORTEST_MAX];
	size_t n = shortest_f32(f, fast);
	size_t m = shortest_f32_reference(f, ref);
	checked++;
	if (n != m || strcmp(fast, ref) != 0) {
		uint32_t bits;
		memcpy(&bits, &f, 4);
		print_error("0x%08x: fast \"%s\", reference \"%s\"\n", bits, fast, ref);
		fail();
	}
}

static void test_random(void **state)
{
	(void)state;
	uint64_t u = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 300000; i++) {
		u = u * 6364136223846793005ull + 1442695040888963407ull;
		check(float_of_bits((uint32_t)(u >> 32)));
	}
}

static void test_integers_and_decimals(void **state)
{
	(void)state;
	for (int i = -20000; i <= 20000; i++)
		check((float)i);
	for (int i = 1; i < 1000; i++)
		for (int k = -30; k <= 30; k += 3)
			check((float)i * powf(10.0f, (float)k));
	for (int i = 0; i < 24; i++)
		check((float)(1u << i) - 1), check((float)(1u << i) + 1);
	check(16777216.0f);
	check(16777217.0f);
	check(0.1f), check(0.2f), check(0.3f), check(1e-05f), check(10000.0f), check(500000.0f);
}

/* Either side of every power of ten in range, 64 floats each way. */
static void test_powers_of_ten(void **state)
{
	(void)state;
	for (int k = -45; k <= 38; k++) {
		float p = (float)pow(10.0, k);
		float lo = p, hi = p;
		check(p);
		for (int i = 0; i < 64; i++) {
			lo = nextafterf(lo, 0.0f);
			hi = nextafterf(hi, INFINITY);
			check(lo);
			if (isfinite(hi))
				check(hi);
		}
	}
}

/* Denormals, the largest floats, the fast path's range ends, both signs. */
static void test_edges(void **state)
{
	(void)state;
	for (uint32_t b = 1; b < 5000; b++)
		check(float_of_bits(b)), check(float_of_bits(b | 0x80000000u));
	for (uint32_t b = 0x7f7fffffu; b > 0x7f7fffffu - 5000; b--)
		check(float_of_bits(b)), check(float_of_bits(b | 0x80000000u));
	float edges[] = { 1e-30f, 1e30f };
	for (int e = 0; e < 2; e++) {
		float lo = edges[e], hi = edges[e];
		for (int i = 0; i < 1000; i++) {
			lo = nextafterf(lo, 0.0f);
			hi = nextafterf(hi, INFINITY);
			check(lo), check(hi), check(-lo), check(-hi);
		}
	}
	check(0.0f), check(-0.0f), check(INFINITY), check(-INFINITY), check(NAN);
	print_message("%lu floats agree\n", checked);
}

UNIT_TESTS(cmocka_unit_test(test_random),
           cmocka_unit_test(test_integers_and_decimals),
           cmocka_unit_test(test_powers_of_ten),
           cmocka_unit_test(test_edges))
