/* metadata/KEY contents and user.gguf.type strings, one test per row of ggufs(1)'s table.
 * Expected float texts are Python's repr() of the same value (the shortest text that
 * reads back exactly), which %.Ng must match for these values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "render_value.h"
#include "render_util.h"
#include "test_data.h"

static void render_value_fn(struct sink *s, const void *arg)
{
	render_value(s, arg);
}

/* Renders v whole, checks every windowing of it agrees, and compares with want. */
static void expect_render(const struct gguf_value *v, const char *want, size_t want_len)
{
	size_t len;
	char *got = render_all(render_value_fn, v, &len);
	if (len != want_len || memcmp(got, want, len) != 0)
		print_error("got \"%s\" (%zu bytes), want \"%s\" (%zu)\n", got, len, want, want_len);
	assert_int_equal(len, want_len);
	assert_memory_equal(got, want, len);
	if (len)
		assert_true(render_windows_agree(render_value_fn, v, got, len, (unsigned)len));
	free(got);
}
#define EXPECT(v, lit) expect_render((v), (lit), sizeof(lit) - 1)

static void expect_type(const struct gguf_value *v, const char *want)
{
	char buf[RENDER_TYPE_MAX];
	size_t n = render_value_type(v, buf);
	assert_string_equal(buf, want);
	assert_int_equal(n, strlen(want));
}

static void test_integers(void **state)
{
	(void)state;
	static const struct {
		uint32_t type;
		uint64_t bits;
		int size;
		const char *want;
	} rows[] = {
		{ GGUF_TYPE_UINT8, 0, 1, "0\n" },
		{ GGUF_TYPE_UINT8, 255, 1, "255\n" },
		{ GGUF_TYPE_INT8, 0x80, 1, "-128\n" },
		{ GGUF_TYPE_INT8, 0x7f, 1, "127\n" },
		{ GGUF_TYPE_INT8, 0xff, 1, "-1\n" },
		{ GGUF_TYPE_UINT16, 0xffff, 2, "65535\n" },
		{ GGUF_TYPE_INT16, 0x8000, 2, "-32768\n" },
		{ GGUF_TYPE_INT16, 0x7fff, 2, "32767\n" },
		{ GGUF_TYPE_UINT32, 0xffffffff, 4, "4294967295\n" },
		{ GGUF_TYPE_UINT32, 2048, 4, "2048\n" },
		{ GGUF_TYPE_INT32, 0x80000000, 4, "-2147483648\n" },
		{ GGUF_TYPE_INT32, 0x7fffffff, 4, "2147483647\n" },
		{ GGUF_TYPE_UINT64, UINT64_MAX, 8, "18446744073709551615\n" },
		{ GGUF_TYPE_INT64, 0x8000000000000000u, 8, "-9223372036854775808\n" },
		{ GGUF_TYPE_INT64, 0x7fffffffffffffffu, 8, "9223372036854775807\n" },
		{ GGUF_TYPE_INT64, 0xfffffffffffffffeu, 8, "-2\n" },
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct bytes w = { .n = 0 };
		put_le(&w, rows[i].bits, rows[i].size);
		struct gguf_value v = val(rows[i].type, &w);
		expect_render(&v, rows[i].want, strlen(rows[i].want));
	}
	/* little-endian: bytes 01 02 are 0x0201 */
	struct bytes w = { .b = { 1, 2 }, .n = 2 };
	struct gguf_value v = val(GGUF_TYPE_UINT16, &w);
	EXPECT(&v, "513\n");
}

static void test_bools(void **state)
{
	(void)state;
	struct bytes t = { .b = { 1 }, .n = 1 }, f = { .b = { 0 }, .n = 1 };
	struct gguf_value vt = val(GGUF_TYPE_BOOL, &t), vf = val(GGUF_TYPE_BOOL, &f);
	EXPECT(&vt, "true\n");
	EXPECT(&vf, "false\n");
}

/* A value of type stored as the size bytes of bits, little-endian, renders as want and
 * a newline. */
static void check_line(uint32_t type, uint64_t bits, int size, const char *want)
{
	struct bytes w = { .n = 0 };
	put_le(&w, bits, size);
	struct gguf_value v = val(type, &w);
	char line[64];
	snprintf(line, sizeof line, "%s\n", want);
	expect_render(&v, line, strlen(line));
}

static void check_f32(float x, const char *want)
{
	check_line(GGUF_TYPE_FLOAT32, bits_of_float(x), 4, want);
}

static void check_f64(double x, const char *want)
{
	check_line(GGUF_TYPE_FLOAT64, bits_of_double(x), 8, want);
}

static void test_float32(void **state)
{
	(void)state;
	check_f32(1e-05f, "1e-05");
	check_f32(0.5f, "0.5");
	check_f32(10000.0f, "10000");
	check_f32(0.1f, "0.1");                 /* not 0.100000001 */
	check_f32(1.0f / 3.0f, "0.33333334");   /* 8 digits suffice */
	/* the shortest digits that read back, written out in full below 1e16 */
	check_f32(123456789.0f, "123456790");   /* the float is 123456792 */
	check_f32(500000.0f, "500000");         /* as a person writes it, not "5e+05" */
	check_f32(32768.0f, "32768");
	check_f32(-7740.0f, "-7740");           /* not "-7.74e+03" */
	check_f32(1e9f, "1000000000");
	check_f32(1e15f, "1000000000000000");   /* the float is 999999986991104 */
	check_f32(1e16f, "1e+16");
	check_f32(0.0001f, "0.0001");
	check_f32(FLT_MAX, "3.4028235e+38");
	check_f32(16777217.0f, "16777216");     /* rounds to 2^24 on the way in */
	check_f32(float_of_bits(1), "1e-45");        /* smallest denormal */
	check_f32(float_of_bits(0x007fffff), "1.1754942e-38");   /* largest denormal */
	check_f32(-0.0f, "-0");
	check_f32(0.0f, "0");
	check_f32(-2.5f, "-2.5");
	check_f32(NAN, "nan");
	check_f32(float_of_bits(0xffc00000), "nan");   /* negative quiet NaN */
	check_f32(float_of_bits(0x7f800001), "nan");   /* signalling NaN */
	check_f32(INFINITY, "inf");
	check_f32(-INFINITY, "-inf");
}

static void test_float64(void **state)
{
	(void)state;
	check_f64(1e-05, "1e-05");
	check_f64(0.5, "0.5");
	check_f64(10000.0, "10000");
	check_f64(0.1, "0.1");
	check_f64(1.0 / 3.0, "0.3333333333333333");     /* 16 digits read back exactly */
	check_f64(0.1 + 0.2, "0.30000000000000004");    /* this one needs all 17 */
	check_f64((double)0.1f, "0.10000000149011612"); /* a float32 widened */
	check_f64(1e300, "1e+300");
	check_f64(1e16, "1e+16");
	check_f64(10000.0, "10000");
	check_f64(1000000.0, "1000000");
	check_f64(9007199254740993.0, "9007199254740992");
	check_f64(DBL_MAX, "1.7976931348623157e+308");
	check_f64(double_of_bits(1), "5e-324");
	check_f64(-0.0, "-0");
	check_f64(NAN, "nan");
	check_f64(-NAN, "nan");
	check_f64(INFINITY, "inf");
	check_f64(-INFINITY, "-inf");
}

/* The significant digits of a decimal text: no sign, point or exponent, no leading or
 * trailing zeros. */
static void sig_digits(const char *t, char *out)
{
	size_t n = 0;
	for (; *t && *t != 'e'; t++)
		if (*t >= '0' && *t <= '9' && (n || *t != '0'))
			out[n++] = *t;
	while (n && out[n - 1] == '0')
		n--;
	out[n] = 0;
}

/* The rule, checked from its definition: take the smallest N in 1..max whose %.Ng text
 * reads back; where that text has a positive exponent below 16, ours is the same digits
 * written out without an exponent; otherwise it is that text itself. */
static void check_rule(double x, int max, const char *got, bool is_f32)
{
	for (int p = 1; p <= max; p++) {
		char t[64];
		snprintf(t, sizeof t, "%.*g", p, x);
		float fb = strtof(t, NULL), fx = (float)x;
		double db = strtod(t, NULL);
		bool back = is_f32 ? memcmp(&fb, &fx, 4) == 0 : memcmp(&db, &x, 8) == 0;
		if (!back)
			continue;
		const char *e = strchr(t, 'e');
		if (e && e[1] == '+' && atoi(e + 2) < 16) {
			char a[64], b[64];
			assert_null(strchr(got, 'e'));
			sig_digits(t, a);
			sig_digits(got, b);
			assert_string_equal(a, b);
			assert_int_equal(got[0] == '-', t[0] == '-');
		} else {
			assert_string_equal(got, t);
		}
		return;
	}
	fail();
}

static void test_float_text_rule(void **state)
{
	(void)state;
	uint64_t u = 12345;
	for (int i = 0; i < 20000; i++) {
		u = u * 6364136223846793005u + 1442695040888963407u;
		char buf[RENDER_SCALAR_MAX];
		float f = float_of_bits((uint32_t)(u >> 32));
		/* small integers and round numbers too, where the exponent question arises */
		if (i % 4 == 1)
			f = (float)(int32_t)(u >> 40);
		if (i % 4 == 3)
			f = -0.0f;
		if (i % 4 == 2)
			f = (float)((u >> 33) % 1000) * powf(10.0f, (float)((u >> 20) % 12));
		if (isfinite(f)) {
			size_t n = render_f32(f, buf);
			assert_int_equal(n, strlen(buf));
			float back = strtof(buf, NULL);
			assert_memory_equal(&back, &f, 4);
			check_rule((double)f, 9, buf, true);
		}
		double d = double_of_bits(u);
		if (i % 4 == 1)
			d = (double)(int64_t)u / 1024.0;
		if (i % 4 == 2)
			d = (double)((u >> 33) % 1000) * pow(10.0, (double)((u >> 20) % 20));
		if (isfinite(d)) {
			size_t n = render_f64(d, buf);
			assert_int_equal(n, strlen(buf));
			double back = strtod(buf, NULL);
			assert_memory_equal(&back, &d, 8);
			check_rule(d, 17, buf, false);
		}
	}
}

static void test_strings(void **state)
{
	(void)state;
	struct bytes w = { .n = 0 };
	/* a lone string keeps its bytes exactly: newline, backslash, NUL, UTF-8 */
	static const char s[] = "line1\nw\xc3\xb6rld\\ \t\x01\x7f\0end\xff";
	put_str(&w, s, sizeof s - 1);
	struct gguf_value v = val(GGUF_TYPE_STRING, &w);
	EXPECT(&v, "line1\nw\xc3\xb6rld\\ \t\x01\x7f\0end\xff\n");

	struct bytes e = { .n = 0 };
	put_str(&e, "", 0);
	struct gguf_value ve = val(GGUF_TYPE_STRING, &e);
	EXPECT(&ve, "\n");
}

static void test_array_strings(void **state)
{
	(void)state;
	static const char *const elems[] = {
		"plain", "back\\slash", "new\nline", "cr\rlf", "tab\there", "\x01\x1f", "del\x7f",
		"", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\xff raw", "sp ace ",
		"\\n", "\x1b[0m",
	};
	struct bytes w = { .n = 0 };
	for (size_t i = 0; i < sizeof elems / sizeof elems[0]; i++)
		put_str(&w, elems[i], strlen(elems[i]));
	put_str(&w, "nul\0x", 5);
	struct gguf_value v = arr(GGUF_TYPE_STRING, 14, &w);
	EXPECT(&v,
	       "plain\n"
	       "back\\\\slash\n"
	       "new\\nline\n"
	       "cr\\rlf\n"
	       "tab\\there\n"
	       "\\x01\\x1f\n"
	       "del\\x7f\n"
	       "\n"
	       "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\n"
	       "\xff raw\n"
	       "sp ace \n"
	       "\\\\n\n"
	       "\\x1b[0m\n"
	       "nul\\x00x\n");
	expect_type(&v, "array[string]");
}

static void test_array_scalars(void **state)
{
	(void)state;
	struct bytes w = { .n = 0 };
	put_le(&w, 0, 1);
	put_le(&w, 255, 1);
	put_le(&w, 7, 1);
	struct gguf_value v = arr(GGUF_TYPE_UINT8, 3, &w);
	EXPECT(&v, "0\n255\n7\n");
	expect_type(&v, "array[uint8]");

	struct bytes w2 = { .n = 0 };
	put_le(&w2, 0x8000000000000000u, 8);
	put_le(&w2, 42, 8);
	struct gguf_value v2 = arr(GGUF_TYPE_INT64, 2, &w2);
	EXPECT(&v2, "-9223372036854775808\n42\n");

	struct bytes w3 = { .n = 0 };
	put_f32(&w3, 0.1f);
	put_f32(&w3, NAN);
	put_f32(&w3, -INFINITY);
	put_f32(&w3, -7740.0f);
	struct gguf_value v3 = arr(GGUF_TYPE_FLOAT32, 4, &w3);
	EXPECT(&v3, "0.1\nnan\n-inf\n-7740\n");
	expect_type(&v3, "array[float32]");

	struct bytes w4 = { .b = { 1, 0, 1 }, .n = 3 };
	struct gguf_value v4 = arr(GGUF_TYPE_BOOL, 3, &w4);
	EXPECT(&v4, "true\nfalse\ntrue\n");

	struct bytes w5 = { .n = 0 };
	put_f64(&w5, 1.0 / 3.0);
	put_f64(&w5, -0.0);
	struct gguf_value v5 = arr(GGUF_TYPE_FLOAT64, 2, &w5);
	EXPECT(&v5, "0.3333333333333333\n-0\n");

	struct bytes w6 = { .n = 0 };
	put_le(&w6, 0xffff, 2);
	put_le(&w6, 0x8000, 2);
	struct gguf_value v6 = arr(GGUF_TYPE_INT16, 2, &w6);
	EXPECT(&v6, "-1\n-32768\n");
}

static void test_empty_array(void **state)
{
	(void)state;
	struct bytes w = { .n = 0 };
	struct gguf_value v = arr(GGUF_TYPE_STRING, 0, &w);
	EXPECT(&v, "");
	expect_type(&v, "array[string]");
	struct gguf_value v2 = arr(GGUF_TYPE_ARRAY, 0, &w);
	EXPECT(&v2, "");
	expect_type(&v2, "array[array]");
}

static void test_array_of_arrays(void **state)
{
	(void)state;
	/* [[1, 2], [], [3]] of uint8 */
	struct bytes w = { .n = 0 };
	put_arr_hdr(&w, GGUF_TYPE_UINT8, 2);
	put_le(&w, 1, 1);
	put_le(&w, 2, 1);
	put_arr_hdr(&w, GGUF_TYPE_UINT8, 0);
	put_arr_hdr(&w, GGUF_TYPE_UINT8, 1);
	put_le(&w, 3, 1);
	struct gguf_value v = arr(GGUF_TYPE_ARRAY, 3, &w);
	EXPECT(&v, "[1, 2]\n[]\n[3]\n");
	expect_type(&v, "array[array[uint8]]");

	/* strings inside are JSON strings; floats that JSON cannot hold are strings */
	struct bytes w2 = { .n = 0 };
	put_arr_hdr(&w2, GGUF_TYPE_STRING, 3);
	put_str(&w2, "a\"b", 3);
	put_str(&w2, "\xff\n", 2);
	put_str(&w2, "\xc3\xa9", 2);
	put_arr_hdr(&w2, GGUF_TYPE_FLOAT32, 3);
	put_f32(&w2, 1e-05f);
	put_f32(&w2, NAN);
	put_f32(&w2, -INFINITY);
	struct gguf_value v2 = arr(GGUF_TYPE_ARRAY, 2, &w2);
	EXPECT(&v2, "[\"a\\\"b\", \"\xef\xbf\xbd\\n\", \"\xc3\xa9\"]\n"
	            "[1e-05, \"nan\", \"-inf\"]\n");
	expect_type(&v2, "array[array[string]]");

	/* three levels: [[[1], [2, 3]], [[]]] of int32 */
	struct bytes w3 = { .n = 0 };
	put_arr_hdr(&w3, GGUF_TYPE_ARRAY, 2);
	put_arr_hdr(&w3, GGUF_TYPE_INT32, 1);
	put_le(&w3, 1, 4);
	put_arr_hdr(&w3, GGUF_TYPE_INT32, 2);
	put_le(&w3, 2, 4);
	put_le(&w3, 0xfffffffd, 4);
	put_arr_hdr(&w3, GGUF_TYPE_ARRAY, 1);
	put_arr_hdr(&w3, GGUF_TYPE_INT32, 0);
	struct gguf_value v3 = arr(GGUF_TYPE_ARRAY, 2, &w3);
	EXPECT(&v3, "[[1], [2, -3]]\n[[]]\n");
	expect_type(&v3, "array[array[array[int32]]]");

	/* the first inner array is an empty array of arrays: the innermost type is unknown */
	struct bytes w4 = { .n = 0 };
	put_arr_hdr(&w4, GGUF_TYPE_ARRAY, 0);
	struct gguf_value v4 = arr(GGUF_TYPE_ARRAY, 1, &w4);
	EXPECT(&v4, "[]\n");
	expect_type(&v4, "array[array[array]]");
}

static void test_scalar_types(void **state)
{
	(void)state;
	static const struct {
		uint32_t t;
		const char *name;
	} rows[] = {
		{ GGUF_TYPE_UINT8, "uint8" },   { GGUF_TYPE_INT8, "int8" },
		{ GGUF_TYPE_UINT16, "uint16" }, { GGUF_TYPE_INT16, "int16" },
		{ GGUF_TYPE_UINT32, "uint32" }, { GGUF_TYPE_INT32, "int32" },
		{ GGUF_TYPE_FLOAT32, "float32" }, { GGUF_TYPE_BOOL, "bool" },
		{ GGUF_TYPE_STRING, "string" }, { GGUF_TYPE_UINT64, "uint64" },
		{ GGUF_TYPE_INT64, "int64" },   { GGUF_TYPE_FLOAT64, "float64" },
	};
	struct bytes w = { .n = 16 };
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct gguf_value v = val(rows[i].t, &w);
		expect_type(&v, rows[i].name);
		struct gguf_value a = arr(rows[i].t, 0, &w);
		char want[32];
		snprintf(want, sizeof want, "array[%s]", rows[i].name);
		expect_type(&a, want);
	}
}

static void test_stops_early(void **state)
{
	(void)state;
	/* a window at the start of a long array must not walk the whole array */
	static struct bytes w;
	w.n = 0;
	for (int i = 0; i < 1000; i++)
		put_le(&w, (uint64_t)i, 4);
	struct gguf_value v = arr(GGUF_TYPE_UINT32, 1000, &w);
	char buf[8];
	struct window_render r = render_window(render_value_fn, &v, buf, 0, sizeof buf);
	assert_memory_equal(buf, "0\n1\n2\n3\n", 8);
	assert_true(r.walked < 64);
	assert_true(r.whole > 3000);
}

UNIT_TESTS(cmocka_unit_test(test_integers),
           cmocka_unit_test(test_bools),
           cmocka_unit_test(test_float32),
           cmocka_unit_test(test_float64),
           cmocka_unit_test(test_float_text_rule),
           cmocka_unit_test(test_strings),
           cmocka_unit_test(test_array_strings),
           cmocka_unit_test(test_array_scalars),
           cmocka_unit_test(test_empty_array),
           cmocka_unit_test(test_array_of_arrays),
           cmocka_unit_test(test_scalar_types),
           cmocka_unit_test(test_stops_early))
