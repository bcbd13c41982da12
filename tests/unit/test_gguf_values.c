/* The GGUF parser (gguf.c) reads values back right: a key of every value type and
 * arrays of every kind, walked; the versions and magic it takes and refuses; value types
 * it does not know; arrays nested to the depth it allows and one deeper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf.h"
#include "gguf_expect.h"
#include "gguf_writer.h"

/* ---- walking ---- */

/* Records walk events as text: "u8:200 s'hi' [u16#2 ... ]". */
struct rec {
	char buf[1024];
	size_t len;
	int stop_after;   /* return false at this event (counting from 1); 0: never */
	int events;
};

static bool rec_put(struct rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool rec_put(struct rec *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (r->len && r->len < sizeof r->buf - 1)
		r->buf[r->len++] = ' ';
	int n = vsnprintf(r->buf + r->len, sizeof r->buf - r->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->len += (size_t)n < sizeof r->buf - r->len ? (size_t)n : sizeof r->buf - r->len - 1;
	return ++r->events != r->stop_after;
}

static bool rec_scalar(void *ctx, uint32_t type, const uint8_t *b)
{
	struct rec *r = ctx;
	switch (type) {
	case GGUF_TYPE_UINT8: return rec_put(r, "u8:%u", b[0]);
	case GGUF_TYPE_INT8: return rec_put(r, "i8:%d", (int8_t)b[0]);
	case GGUF_TYPE_UINT16: return rec_put(r, "u16:%u", gguf_le16(b));
	case GGUF_TYPE_INT16: return rec_put(r, "i16:%d", (int16_t)gguf_le16(b));
	case GGUF_TYPE_UINT32: return rec_put(r, "u32:%u", gguf_le32(b));
	case GGUF_TYPE_INT32: return rec_put(r, "i32:%d", (int32_t)gguf_le32(b));
	case GGUF_TYPE_BOOL: return rec_put(r, "bool:%u", b[0]);
	case GGUF_TYPE_UINT64: return rec_put(r, "u64:%llu", (unsigned long long)gguf_le64(b));
	case GGUF_TYPE_INT64: return rec_put(r, "i64:%lld", (long long)(int64_t)gguf_le64(b));
	case GGUF_TYPE_FLOAT32: {
		float f;
		uint32_t u = gguf_le32(b);
		memcpy(&f, &u, 4);
		return rec_put(r, "f32:%g", (double)f);
	}
	case GGUF_TYPE_FLOAT64: {
		double d;
		uint64_t u = gguf_le64(b);
		memcpy(&d, &u, 8);
		return rec_put(r, "f64:%g", d);
	}
	}
	return rec_put(r, "?%u", type);
}

static bool rec_string(void *ctx, const char *s, uint64_t len)
{
	return rec_put(ctx, "s'%.*s'", (int)len, s);
}

static bool rec_begin(void *ctx, uint32_t elem_type, uint64_t count)
{
	return rec_put(ctx, "[%s#%llu", gguf_vtype_name(elem_type), (unsigned long long)count);
}

static bool rec_end(void *ctx)
{
	return rec_put(ctx, "]");
}

/* The walk of key in f as text. */
static const char *walk_text(const struct gguf_file *f, const char *key, struct rec *r)
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);
	if (!kv)
		fail_msg("no key '%s'", key);
	int stop = r->stop_after;
	*r = (struct rec){ .stop_after = stop };
	struct gguf_walk w = { .scalar = rec_scalar, .string = rec_string, .array_begin = rec_begin,
	                       .array_end = rec_end, .ctx = r };
	bool done = gguf_value_walk(&kv->value, &w);
	assert_int_equal(done, stop == 0 || r->events < stop);
	return r->buf;
}

/* ---- valid files ---- */

/* One key of every value type, and arrays of several kinds. */
static void all_types_file(struct gw *w, uint32_t version)
{
	gw_init(w);
	gw_header(w, version, 0, 19);
	gw_key(w, "u8", GGUF_TYPE_UINT8); gw_u8(w, 200);
	gw_key(w, "i8", GGUF_TYPE_INT8); gw_u8(w, (uint8_t)-5);
	gw_key(w, "u16", GGUF_TYPE_UINT16); gw_u16(w, 65535);
	gw_key(w, "i16", GGUF_TYPE_INT16); gw_u16(w, (uint16_t)-300);
	gw_key(w, "u32", GGUF_TYPE_UINT32); gw_u32(w, 4000000000u);
	gw_key(w, "i32", GGUF_TYPE_INT32); gw_u32(w, (uint32_t)-2000000000);
	gw_key(w, "f32", GGUF_TYPE_FLOAT32); gw_f32(w, 0.5f);
	gw_key(w, "bool", GGUF_TYPE_BOOL); gw_u8(w, 1);
	gw_kv_str(w, "str", "hello");
	gw_key(w, "u64", GGUF_TYPE_UINT64); gw_u64(w, (1ull << 63) + 1);
	gw_key(w, "i64", GGUF_TYPE_INT64); gw_u64(w, (uint64_t)-(1ll << 62));
	gw_key(w, "f64", GGUF_TYPE_FLOAT64); gw_f64(w, 1e-300);
	gw_key(w, "arr.u8", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_UINT8, 3);
	gw_u8(w, 1); gw_u8(w, 2); gw_u8(w, 3);
	gw_key(w, "arr.str", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_STRING, 3);
	gw_str(w, "a"); gw_str(w, ""); gw_str(w, "x y");
	gw_key(w, "arr.arr", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_ARRAY, 2);
	gw_array(w, GGUF_TYPE_UINT16, 2); gw_u16(w, 1); gw_u16(w, 2);
	gw_array(w, GGUF_TYPE_UINT16, 1); gw_u16(w, 3);
	gw_key(w, "arr.empty", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_FLOAT32, 0);
	gw_key(w, "arr.nested", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_ARRAY, 1);
	gw_array(w, GGUF_TYPE_ARRAY, 2);
	gw_array(w, GGUF_TYPE_STRING, 1); gw_str(w, "deep");
	gw_array(w, GGUF_TYPE_STRING, 0);
	gw_key(w, "arr.i64", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_INT64, 2);
	gw_u64(w, (uint64_t)-1); gw_u64(w, 7);
	gw_key(w, "arr.bool", GGUF_TYPE_ARRAY); gw_array(w, GGUF_TYPE_BOOL, 2);
	gw_u8(w, 1); gw_u8(w, 0);
}

static void check_value(const struct gguf_file *f, const char *key, uint32_t type,
                        uint64_t size)
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);
	if (!kv)
		fail_msg("no key '%s'", key);
	assert_int_equal(kv->value.type, type);
	assert_int_equal(kv->value.size, size);
	assert_non_null(kv->value.data);
}

static void test_all_value_types(void **state)
{
	(void)state;
	for (uint32_t version = 2; version <= 3; version++) {
		struct gw w;
		struct parsed p;
		all_types_file(&w, version);
		expect_ok(&w, &p);
		const struct gguf_file *f = &p.f;
		assert_int_equal(f->version, version);
		assert_int_equal(f->n_kv, 19);
		assert_int_equal(f->n_tensors, 0);
		assert_int_equal(f->alignment, GGUF_DEFAULT_ALIGNMENT);
		assert_int_equal(f->data_offset, w.len);   /* no tensors: the data section is empty */

		static const struct { const char *key; uint32_t type; uint64_t size; } scalars[] = {
			{ "u8", GGUF_TYPE_UINT8, 1 }, { "i8", GGUF_TYPE_INT8, 1 },
			{ "u16", GGUF_TYPE_UINT16, 2 }, { "i16", GGUF_TYPE_INT16, 2 },
			{ "u32", GGUF_TYPE_UINT32, 4 }, { "i32", GGUF_TYPE_INT32, 4 },
			{ "f32", GGUF_TYPE_FLOAT32, 4 }, { "bool", GGUF_TYPE_BOOL, 1 },
			{ "str", GGUF_TYPE_STRING, 8 + 5 }, { "u64", GGUF_TYPE_UINT64, 8 },
			{ "i64", GGUF_TYPE_INT64, 8 }, { "f64", GGUF_TYPE_FLOAT64, 8 },
		};
		for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
			check_value(f, scalars[i].key, scalars[i].type, scalars[i].size);
		/* file order is kept */
		assert_int_equal(f->kv[0].key.len, 2);
		assert_memory_equal(f->kv[0].key.ptr, "u8", 2);
		assert_int_equal(f->kv[18].key.len, 8);
		assert_memory_equal(f->kv[18].key.ptr, "arr.bool", 8);

		const struct gguf_kv *kv = gguf_find_kv(f, "str");
		assert_int_equal(gguf_le64(kv->value.data), 5);
		assert_memory_equal(kv->value.data + 8, "hello", 5);
		kv = gguf_find_kv(f, "u32");
		assert_int_equal(gguf_le32(kv->value.data), 4000000000u);

		kv = gguf_find_kv(f, "arr.u8");
		assert_int_equal(kv->value.type, GGUF_TYPE_ARRAY);
		assert_int_equal(kv->value.elem_type, GGUF_TYPE_UINT8);
		assert_int_equal(kv->value.count, 3);
		assert_int_equal(kv->value.size, 3);
		assert_memory_equal(kv->value.data, "\1\2\3", 3);
		check_value(f, "arr.str", GGUF_TYPE_ARRAY, 3 * 8 + 1 + 0 + 3);
		check_value(f, "arr.arr", GGUF_TYPE_ARRAY, (12 + 4) + (12 + 2));
		check_value(f, "arr.empty", GGUF_TYPE_ARRAY, 0);
		assert_int_equal(gguf_find_kv(f, "arr.empty")->value.count, 0);
		check_value(f, "arr.nested", GGUF_TYPE_ARRAY, 12 + 12 + 8 + 4 + 12);
		assert_int_equal(gguf_find_kv(f, "arr.nested")->value.elem_type, GGUF_TYPE_ARRAY);
		check_value(f, "arr.i64", GGUF_TYPE_ARRAY, 16);
		assert_null(gguf_find_kv(f, "nope"));
		assert_null(gguf_find_kv(f, "u"));

		struct rec r = { 0 };
		assert_string_equal(walk_text(f, "u8", &r), "u8:200");
		assert_string_equal(walk_text(f, "i8", &r), "i8:-5");
		assert_string_equal(walk_text(f, "u16", &r), "u16:65535");
		assert_string_equal(walk_text(f, "i16", &r), "i16:-300");
		assert_string_equal(walk_text(f, "u32", &r), "u32:4000000000");
		assert_string_equal(walk_text(f, "i32", &r), "i32:-2000000000");
		assert_string_equal(walk_text(f, "f32", &r), "f32:0.5");
		assert_string_equal(walk_text(f, "bool", &r), "bool:1");
		assert_string_equal(walk_text(f, "str", &r), "s'hello'");
		assert_string_equal(walk_text(f, "u64", &r), "u64:9223372036854775809");
		assert_string_equal(walk_text(f, "i64", &r), "i64:-4611686018427387904");
		assert_string_equal(walk_text(f, "f64", &r), "f64:1e-300");
		assert_string_equal(walk_text(f, "arr.u8", &r), "u8:1 u8:2 u8:3");
		assert_string_equal(walk_text(f, "arr.str", &r), "s'a' s'' s'x y'");
		assert_string_equal(walk_text(f, "arr.arr", &r),
		                    "[uint16#2 u16:1 u16:2 ] [uint16#1 u16:3 ]");
		assert_string_equal(walk_text(f, "arr.empty", &r), "");
		assert_string_equal(walk_text(f, "arr.nested", &r),
		                    "[array#2 [string#1 s'deep' ] [string#0 ] ]");
		assert_string_equal(walk_text(f, "arr.i64", &r), "i64:-1 i64:7");
		assert_string_equal(walk_text(f, "arr.bool", &r), "bool:1 bool:0");

		/* a callback returning false stops the walk at once */
		r.stop_after = 2;
		assert_string_equal(walk_text(f, "arr.str", &r), "s'a' s''");
		assert_string_equal(walk_text(f, "arr.arr", &r), "[uint16#2 u16:1");
		r.stop_after = 4;
		assert_string_equal(walk_text(f, "arr.arr", &r), "[uint16#2 u16:1 u16:2 ]");
		/* NULL callbacks are skipped */
		struct gguf_walk none = { 0 };
		assert_true(gguf_value_walk(&gguf_find_kv(f, "arr.nested")->value, &none));

		parsed_free(&p);
		gw_free(&w);
	}
}

static void test_versions_refused(void **state)
{
	(void)state;
	static const struct { uint32_t version; const char *msg; } cases[] = {
		{ 1, "version 1 is not supported" },
		{ 0, "unsupported GGUF version 0" },
		{ 4, "unsupported GGUF version 4" },
		{ 0x03000000, "big-endian" },
		{ 0x02000000, "big-endian" },
		{ 0xffffffff, "unsupported GGUF version 4294967295" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gw w;
		all_types_file(&w, cases[i].version);
		expect_fail(&w, cases[i].msg, NULL);
		gw_free(&w);
	}
}

static void test_bad_magic(void **state)
{
	(void)state;
	struct gw w;
	gw_init(&w);
	expect_fail(&w, "not a GGUF file: only 0 bytes", NULL);
	gw_raw(&w, "GGU", 3);
	expect_fail(&w, "not a GGUF file: only 3 bytes", NULL);
	gw_free(&w);
	gw_init(&w);
	gw_raw(&w, "FUGG", 4);
	gw_u32(&w, 3);
	gw_fill(&w, 0, 16);
	expect_fail(&w, "not a GGUF file", "46 55 47 47", NULL);
	gw_free(&w);
}

/* A key "k" holding levels arrays, each inside the last; the innermost holds one u8. */
static void nested(struct gw *w, unsigned levels)
{
	gw_init(w);
	gw_header(w, 3, 0, 1);
	gw_key(w, "k", GGUF_TYPE_ARRAY);
	for (unsigned i = 1; i < levels; i++)
		gw_array(w, GGUF_TYPE_ARRAY, 1);
	gw_array(w, GGUF_TYPE_UINT8, 1);
	gw_u8(w, 7);
}

static void test_array_depth(void **state)
{
	(void)state;
	struct gw w;
	struct parsed p;

	/* exactly at the cap: accepted, and walked to the bottom */
	nested(&w, GGUF_MAX_ARRAY_DEPTH);
	expect_ok(&w, &p);
	struct rec r = { 0 };
	char want[512] = "";
	for (int i = 1; i < GGUF_MAX_ARRAY_DEPTH; i++)
		strcat(want, i + 1 < GGUF_MAX_ARRAY_DEPTH ? "[array#1 " : "[uint8#1 ");
	strcat(want, "u8:7");
	for (int i = 1; i < GGUF_MAX_ARRAY_DEPTH; i++)
		strcat(want, " ]");
	assert_string_equal(walk_text(&p.f, "k", &r), want);
	parsed_free(&p);
	gw_free(&w);

	/* one deeper, and far deeper (which must not exhaust the stack) */
	static const unsigned deeper[] = { GGUF_MAX_ARRAY_DEPTH + 1, 1000, 100000 };
	for (size_t i = 0; i < sizeof deeper / sizeof deeper[0]; i++) {
		nested(&w, deeper[i]);
		expect_fail(&w, "metadata key 'k' nests arrays deeper than 8 levels", NULL);
		gw_free(&w);
	}

	/* an empty array of arrays at the cap still names a type one level too deep */
	one_key(&w, "k", GGUF_TYPE_ARRAY);
	for (unsigned i = 1; i < GGUF_MAX_ARRAY_DEPTH; i++)
		gw_array(&w, GGUF_TYPE_ARRAY, 1);
	gw_array(&w, GGUF_TYPE_ARRAY, 0);
	expect_fail(&w, "nests arrays deeper than 8 levels", NULL);
	gw_free(&w);
}

static void test_bad_value_types(void **state)
{
	(void)state;
	static const uint32_t bad[] = { GGUF_TYPE_COUNT, 99, 0x80000000u, UINT32_MAX };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char want[128];
		struct gw w;

		snprintf(want, sizeof want, "metadata key 'k' has unknown value type %u", bad[i]);
		one_key(&w, "k", bad[i]);
		gw_fill(&w, 0, 64);
		expect_fail(&w, want, NULL);
		gw_free(&w);

		snprintf(want, sizeof want, "metadata key 'k' is an array of unknown value type %u",
		         bad[i]);
		for (uint64_t count = 0; count <= 2; count += 2) {
			one_key(&w, "k", GGUF_TYPE_ARRAY);
			gw_array(&w, bad[i], count);
			gw_fill(&w, 0, 64);
			expect_fail(&w, want, NULL);
			gw_free(&w);
		}

		one_key(&w, "k", GGUF_TYPE_ARRAY);
		gw_array(&w, GGUF_TYPE_ARRAY, 2);
		gw_array(&w, GGUF_TYPE_STRING, 0);
		gw_array(&w, bad[i], 0);
		gw_fill(&w, 0, 64);
		expect_fail(&w, want, NULL);
		gw_free(&w);
	}
}

UNIT_TESTS(cmocka_unit_test(test_all_value_types),
           cmocka_unit_test(test_versions_refused),
           cmocka_unit_test(test_bad_magic),
           cmocka_unit_test(test_array_depth),
           cmocka_unit_test(test_bad_value_types))
