/* Sizes on the command line (ggufs/size_arg.h): digits with K, M, G or T (powers of
 * 1024, any case, an optional B or iB), and everything else refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit.h"

#include "size_arg.h"

static void expect_size(const char *s, uint64_t want)
{
	uint64_t v = 0;
	assert_true(size_arg_parse(s, &v));
	assert_int_equal(v, want);
}

static void test_sizes(void **state)
{
	(void)state;
	expect_size("0", 0);
	expect_size("268435456", 268435456);
	expect_size("4K", 4096);
	expect_size("4k", 4096);
	expect_size("256M", 256ull << 20);
	expect_size("256MiB", 256ull << 20);
	expect_size("1G", 1ull << 30);
	expect_size("2gb", 2ull << 30);
	expect_size("3T", 3ull << 40);
	expect_size("18446744073709551615", UINT64_MAX);
	uint64_t v;
	static const char *const bad[] = { "", "M", "-1", "1.5G", "12X", "1 G", "1GG", "0x10",
	                                   "18446744073709551616", "17179869184G", "1Gi" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_false(size_arg_parse(bad[i], &v));
}

UNIT_TESTS(cmocka_unit_test(test_sizes))
