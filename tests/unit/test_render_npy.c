/* NAME.npy headers: NumPy format 1.0, parsed back byte by byte as numpy would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "render_npy.h"

static struct gguf_tensor tensor(uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                                 uint64_t ne3)
{
	return (struct gguf_tensor){ .n_dims = n_dims, .ne = { ne0, ne1, ne2, ne3 } };
}

/* Checks the header's framing (magic, version, length field, alignment, padding, final
 * newline) and that the dict is exactly numpy's for '<f4', C order and this shape. */
static void expect_header(const struct gguf_tensor *t, const char *shape)
{
	char buf[NPY_HEADER_MAX];
	memset(buf, 0x55, sizeof buf);
	size_t n = npy_header(t, buf);
	assert_true(n >= 64 && n <= NPY_HEADER_MAX);
	assert_int_equal(n % 64, 0);
	assert_memory_equal(buf, "\x93NUMPY\x01\x00", 8);
	size_t hlen = (unsigned char)buf[8] | (size_t)(unsigned char)buf[9] << 8;
	assert_int_equal(10 + hlen, n);
	assert_int_equal(buf[n - 1], '\n');

	char dict[256];
	snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }",
	         shape);
	size_t dl = strlen(dict);
	assert_true(10 + dl + 1 <= n);
	assert_memory_equal(buf + 10, dict, dl);
	for (size_t i = 10 + dl; i < n - 1; i++)
		assert_int_equal(buf[i], ' ');
	/* as little padding as 64-byte alignment allows */
	assert_true(n - (10 + dl + 1) < 64);
}

static void test_shapes(void **state)
{
	(void)state;
	static const struct {
		uint32_t n_dims;
		uint64_t ne[4];
		const char *shape;
	} rows[] = {
		{ 1, { 256, 1, 1, 1 }, "(256,)" },
		{ 2, { 256, 8000, 1, 1 }, "(8000, 256)" },
		{ 3, { 64, 32, 8, 1 }, "(8, 32, 64)" },
		{ 4, { 2, 3, 4, 5 }, "(5, 4, 3, 2)" },
		/* trailing 1 dims within n_dims are kept: they are part of the tensor's shape */
		{ 2, { 7, 1, 1, 1 }, "(1, 7)" },
		{ 1, { 0, 1, 1, 1 }, "(0,)" },
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct gguf_tensor t = tensor(rows[i].n_dims, rows[i].ne[0], rows[i].ne[1],
		                              rows[i].ne[2], rows[i].ne[3]);
		expect_header(&t, rows[i].shape);
	}
}

static void test_longest(void **state)
{
	(void)state;
	/* four 20-digit dims: the largest header there is */
	struct gguf_tensor t = tensor(4, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX);
	expect_header(&t, "(18446744073709551615, 18446744073709551615, "
	                  "18446744073709551615, 18446744073709551615)");
}

static void test_length_boundaries(void **state)
{
	(void)state;
	/* dims whose digit counts move the dict across a 64-byte boundary: the total stays
	 * a multiple of 64 and the padding below 64 */
	uint64_t v = 1;
	for (int digits = 1; digits <= 20; digits++) {
		struct gguf_tensor t = tensor(2, v, v, 1, 1);
		char shape[64];
		snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)v,
		         (unsigned long long)v);
		expect_header(&t, shape);
		if (digits < 20)
			v = v * 10 + 9;
	}
}

UNIT_TESTS(cmocka_unit_test(test_shapes),
           cmocka_unit_test(test_longest),
           cmocka_unit_test(test_length_boundaries))
