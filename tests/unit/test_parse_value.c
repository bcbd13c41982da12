/* Parsing metadata/KEY text back into values (parse_value.h): the exact inverse of the
 * rendering. Every key of every test model goes out as text and back to the same bytes;
 * then each rule of ggufs(1)'s METADATA EDITS, and each refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "model.h"
#include "parse_value.h"
#include "render_value.h"
#include "render_util.h"
#include "test_data.h"

static void render_value_fn(struct sink *s, const void *arg)
{
	render_value(s, arg);
}

/* The text of v, parsed back as v's type, is v: same type, element type, count and
 * payload bytes. */
static void round_trip(const struct gguf_value *v, const char *what)
{
	size_t len;
	char *text = render_all(render_value_fn, v, &len);
	struct value_type t;
	assert_int_equal(parse_value_type_of(v, &t), 0);
	struct value_buf b;
	char err[GGUF_ERR_MAX];
	int rc = parse_value(text, len, &t, &b, err);
	if (rc)
		print_error("%s: %s\n", what, err);
	assert_int_equal(rc, 0);
	if (b.v.type != v->type || b.v.size != v->size ||
	    (v->type == GGUF_TYPE_ARRAY && (b.v.elem_type != v->elem_type || b.v.count != v->count)) ||
	    (v->size && memcmp(b.v.data, v->data, v->size) != 0))
		print_error("%s: the round trip changed the value\n", what);
	assert_int_equal(b.v.type, v->type);
	assert_int_equal(b.v.size, v->size);
	if (v->type == GGUF_TYPE_ARRAY) {
		assert_int_equal(b.v.elem_type, v->elem_type);
		assert_int_equal(b.v.count, v->count);
	}
	if (v->size)
		assert_memory_equal(b.v.data, v->data, v->size);
	value_buf_free(&b);
	free(text);
}

static void round_trip_model(const char *path)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		print_error("%s\n", err);
	assert_non_null(m);
	for (uint64_t i = 0; i < model_meta(m)->n_kv; i++) {
		char name[80];
		round_trip(&model_meta(m)->kv[i].value, gguf_quote(&model_meta(m)->kv[i].key, name));
	}
	model_close(m);
}

static void test_models(void **state)
{
	(void)state;
	round_trip_model(TEST_DATA "/tinyllama-q4km.gguf");
	round_trip_model(TEST_DATA "/vectors/alltypes.gguf");
}

/* Parses text as the type named tname: 0 or -1, the value in b. */
static int parse(const char *tname, const char *text, size_t len, struct value_buf *b)
{
	struct value_type t;
	assert_int_equal(value_type_parse(tname, strlen(tname), &t), 0);
	char err[GGUF_ERR_MAX];
	return parse_value(text, len, &t, b, err);
}
#define PARSE(t, lit, b) parse((t), (lit), sizeof(lit) - 1, (b))

/* The scalar parsed from text as type t has these little-endian bytes. */
static void expect_scalar(const char *t, const char *text, uint64_t bits, size_t size)
{
	struct value_buf b;
	assert_int_equal(parse(t, text, strlen(text), &b), 0);
	assert_int_equal(b.v.size, size);
	uint64_t got = 0;
	for (size_t i = 0; i < size; i++)
		got |= (uint64_t)b.v.data[i] << (8 * i);
	assert_int_equal(got, bits);
	value_buf_free(&b);
}

static void expect_refused(const char *t, const char *text)
{
	struct value_buf b;
	if (parse(t, text, strlen(text), &b) == 0)
		print_error("%s '%s' was accepted\n", t, text);
	assert_null(b.buf);
}

/* Every edge of every integer type, whitespace and the final newline ignored; one past
 * each edge refused. */
static void test_integers(void **state)
{
	(void)state;
	expect_scalar("uint8", "255\n", 255, 1);
	expect_scalar("uint8", "  0  \n", 0, 1);
	expect_scalar("int8", "-128", 0x80, 1);
	expect_scalar("int8", "\t127\n", 0x7f, 1);
	expect_scalar("uint16", "65535", 0xffff, 2);
	expect_scalar("int16", "-32768", 0x8000, 2);
	expect_scalar("uint32", "4294967295\n", 0xffffffff, 4);
	expect_scalar("int32", "-2147483648\n", 0x80000000, 4);
	expect_scalar("uint64", "18446744073709551615\n", UINT64_MAX, 8);
	expect_scalar("int64", "-9223372036854775808\n", 0x8000000000000000u, 8);
	expect_scalar("int64", "9223372036854775807", 0x7fffffffffffffffu, 8);
	expect_scalar("int32", "-0", 0, 4);
	expect_scalar("uint32", "+7", 7, 4);
	expect_refused("uint8", "256");
	expect_refused("int8", "-129");
	expect_refused("int8", "128");
	expect_refused("uint16", "65536");
	expect_refused("int16", "32768");
	expect_refused("uint32", "4294967296");
	expect_refused("uint32", "-1");
	expect_refused("int32", "2147483648");
	expect_refused("uint64", "18446744073709551616");
	expect_refused("int64", "9223372036854775808");
	expect_refused("int64", "-9223372036854775809");
	expect_refused("uint32", "");
	expect_refused("uint32", "\n");
	expect_refused("uint32", "1 2");
	expect_refused("uint32", "0x10");
	expect_refused("uint32", "1.0");
	expect_refused("uint32", "1\n\n2");
	expect_refused("uint32", "-");
	expect_refused("uint32", "99999999999999999999999999");
}

/* Any decimal text, as the nearest float; nan and infinities; no hex. */
static void test_floats(void **state)
{
	(void)state;
	expect_scalar("float32", "1e-05\n", bits_of_float(1e-05f), 4);
	expect_scalar("float32", "0.1", bits_of_float(0.1f), 4);
	expect_scalar("float32", "0.100000001490116119384765625", bits_of_float(0.1f), 4);
	expect_scalar("float32", "-0\n", 0x80000000u, 4);
	expect_scalar("float32", "3e+38", bits_of_float(3e38f), 4);
	expect_scalar("float32", "1e39", bits_of_float(INFINITY), 4);   /* nearest is inf */
	expect_scalar("float32", "inf\n", bits_of_float(INFINITY), 4);
	expect_scalar("float32", "-inf\n", bits_of_float(-INFINITY), 4);
	expect_scalar("float64", "0.1\n", bits_of_double(0.1), 8);
	expect_scalar("float64", "-2.2250738585072014e-308", bits_of_double(-2.2250738585072014e-308), 8);
	expect_scalar("float64", "10000", bits_of_double(10000.0), 8);
	expect_scalar("float64", ".5", bits_of_double(0.5), 8);
	struct value_buf b;
	assert_int_equal(PARSE("float32", "nan\n", &b), 0);
	float f;
	memcpy(&f, b.v.data, 4);
	assert_true(isnan(f));
	value_buf_free(&b);
	expect_refused("float32", "0x1p3");
	expect_refused("float32", "1e");
	expect_refused("float32", "e5");
	expect_refused("float32", ".");
	expect_refused("float64", "nan(123)");
	expect_refused("float64", "1.5x");
	expect_refused("float64", "");
}

static void test_bools(void **state)
{
	(void)state;
	expect_scalar("bool", "true\n", 1, 1);
	expect_scalar("bool", " false ", 0, 1);
	expect_refused("bool", "1");
	expect_refused("bool", "True");
	expect_refused("bool", "yes");
}

/* A scalar string is its text less one final newline; nothing else changes. */
static void test_strings(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		size_t len;
		const char *want;
		size_t want_len;
	} rows[] = {
		{ "x\n", 2, "x", 1 },
		{ "x", 1, "x", 1 },
		{ "x\n\n", 3, "x\n", 2 },
		{ "", 0, "", 0 },
		{ "\n", 1, "", 0 },
		{ " a\r\n", 4, " a\r", 3 },
		{ "a\0b\xff\n", 5, "a\0b\xff", 4 },
		{ "\\n\\x00", 6, "\\n\\x00", 6 },   /* no escapes in a scalar string */
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct value_buf b;
		assert_int_equal(parse("string", rows[i].text, rows[i].len, &b), 0);
		assert_int_equal(b.v.type, GGUF_TYPE_STRING);
		assert_int_equal(b.v.size, 8 + rows[i].want_len);
		assert_int_equal(gguf_le64(b.v.data), rows[i].want_len);
		assert_memory_equal(b.v.data + 8, rows[i].want, rows[i].want_len);
		value_buf_free(&b);
	}
}

/* One element per line, escapes decoded, the count free to change. */
static void test_arrays(void **state)
{
	(void)state;
	struct value_buf b;
	assert_int_equal(PARSE("array[string]", "a\\nb\n\\\\\n\\x01\\t\\r\n\n", &b), 0);
	assert_int_equal(b.v.elem_type, GGUF_TYPE_STRING);
	assert_int_equal(b.v.count, 4);
	static const uint8_t want[] = { 3, 0, 0, 0, 0, 0, 0, 0, 'a', '\n', 'b',
	                                1, 0, 0, 0, 0, 0, 0, 0, '\\',
	                                3, 0, 0, 0, 0, 0, 0, 0, 1, '\t', '\r',
	                                0, 0, 0, 0, 0, 0, 0, 0 };
	assert_int_equal(b.v.size, sizeof want);
	assert_memory_equal(b.v.data, want, sizeof want);
	value_buf_free(&b);

	assert_int_equal(PARSE("array[int32]", "1\n-2\n 3 \n4", &b), 0);   /* no final newline */
	assert_int_equal(b.v.count, 4);
	assert_int_equal(b.v.size, 16);
	assert_int_equal(gguf_le32(b.v.data + 4), (uint32_t)-2);
	value_buf_free(&b);

	assert_int_equal(PARSE("array[float32]", "", &b), 0);   /* empty file: empty array */
	assert_int_equal(b.v.count, 0);
	assert_int_equal(b.v.size, 0);
	value_buf_free(&b);

	assert_int_equal(PARSE("array[array[uint8]]", "[1, 2]\n[]\n[255]\n", &b), 0);
	assert_int_equal(b.v.elem_type, GGUF_TYPE_ARRAY);
	assert_int_equal(b.v.count, 3);
	assert_int_equal(b.v.size, 3 * 12 + 3);
	value_buf_free(&b);

	assert_int_equal(PARSE("array[array[string]]", "[\"a\\u00e9\", \"\\ud83d\\ude00\"]\n", &b), 0);
	assert_int_equal(b.v.count, 1);
	value_buf_free(&b);

	expect_refused("array[int32]", "1\n\n2\n");          /* an empty line is no number */
	expect_refused("array[uint8]", "1\n256\n");
	expect_refused("array[string]", "a\\q\n");
	expect_refused("array[string]", "a\\x4\n");
	expect_refused("array[string]", "a\\\n");
	expect_refused("array[array[uint8]]", "[1, 2\n");
	expect_refused("array[array[uint8]]", "[1] x\n");
	expect_refused("array[array[uint8]]", "[[1]]\n");
	expect_refused("array[array]", "[1]\n");
}

/* A 150,000-element array: parsed, and replaced by a shorter one. */
static void test_long_array(void **state)
{
	(void)state;
	size_t n = 150000, cap = n * 12;
	char *text = malloc(cap);
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len, "tok%zu\n", i);
	struct value_buf b;
	assert_int_equal(parse("array[string]", text, len, &b), 0);
	assert_int_equal(b.v.count, n);
	value_buf_free(&b);
	assert_int_equal(parse("array[string]", text, 20, &b), 0);
	assert_int_equal(b.v.count, 4);   /* "tok0\ntok1\ntok2\ntok3\n" */
	value_buf_free(&b);
	free(text);
}

static void test_type_names(void **state)
{
	(void)state;
	/* each name, whether it parses and what it names: depth arrays around leaf */
	static const struct {
		const char *name;
		int r;
		uint32_t depth;
		uint32_t leaf;
	} names[] = {
		{ "array[array[uint8]]", 0, 2, GGUF_TYPE_UINT8 },
		{ "bool", 0, 0, GGUF_TYPE_BOOL },
		{ "array[array]", 0, 1, GGUF_TYPE_ARRAY },
		{ "array", -1, 0, 0 },
		{ "array[]", -1, 0, 0 },
		{ "uint", -1, 0, 0 },
		{ "array[uint8", -1, 0, 0 },
		{ "u32", 0, 0, GGUF_TYPE_UINT32 },   /* the short names */
		{ "array[f64]", 0, 1, GGUF_TYPE_FLOAT64 },
		{ "i64", 0, 0, GGUF_TYPE_INT64 },
		{ "u33", -1, 0, 0 },
		{ "f16", -1, 0, 0 },
		{ "str", -1, 0, 0 },
	};
	struct value_type t;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		int r = value_type_parse(names[i].name, strlen(names[i].name), &t);
		if (r != names[i].r || (r == 0 && (t.depth != names[i].depth || t.leaf != names[i].leaf)))
			print_error("type name %s\n", names[i].name);
		assert_int_equal(r, names[i].r);
		if (r == 0) {
			assert_int_equal(t.depth, names[i].depth);
			assert_int_equal(t.leaf, names[i].leaf);
		}
	}
	char deep[128] = "";
	for (int i = 0; i < GGUF_MAX_ARRAY_DEPTH + 1; i++)
		strcat(deep, "array[");
	strcat(deep, "uint8");
	for (int i = 0; i < GGUF_MAX_ARRAY_DEPTH + 1; i++)
		strcat(deep, "]");
	assert_int_equal(value_type_parse(deep, strlen(deep), &t), -1);
}

UNIT_TESTS(cmocka_unit_test(test_models),
           cmocka_unit_test(test_integers),
           cmocka_unit_test(test_floats),
           cmocka_unit_test(test_bools),
           cmocka_unit_test(test_strings),
           cmocka_unit_test(test_arrays),
           cmocka_unit_test(test_long_array),
           cmocka_unit_test(test_type_names))
