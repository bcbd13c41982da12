/* The GGUF parser against files built by gguf_writer: every value type read back
 * right, and one test per kind of corruption, each failing with a message that names
 * the thing at fault. Every image is parsed from an exact-size heap copy, so that ASan
 * sees a read one byte past the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "dequant.h"
#include "gguf.h"
#include "gguf_writer.h"

/* A parsed image: the copy must outlive the gguf_file, whose names point into it. */
struct parsed {
	uint8_t *img;
	size_t len;
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	int rc;
};

static void check_err_line(const char *err)
{
	size_t n = strnlen(err, GGUF_ERR_MAX);
	assert_true(n > 0);
	assert_true(n < GGUF_ERR_MAX);
	assert_null(strchr(err, '\n'));
}

/* Parses the first len bytes of w. */
static void parse_n(const struct gw *w, size_t len, struct parsed *p)
{
	p->len = len;
	p->img = malloc(len ? len : 1);
	assert_non_null(p->img);
	if (len)
		memcpy(p->img, w->buf, len);
	memset(p->err, 'x', sizeof p->err);
	p->rc = gguf_parse(p->img, len, &p->f, p->err);
	if (p->rc == 0)
		assert_int_equal(p->err[0], 0);
	else
		check_err_line(p->err);
}

static void parsed_free(struct parsed *p)
{
	gguf_file_free(&p->f);
	free(p->img);
}

#define assert_contains(hay, needle) do { \
	if (!strstr((hay), (needle))) \
		fail_msg("error '%s' does not contain '%s'", (hay), (needle)); \
} while (0)

/* The whole of w must parse; the result stays in *p (parsed_free it). */
static void expect_ok(const struct gw *w, struct parsed *p)
{
	parse_n(w, w->len, p);
	if (p->rc != 0)
		fail_msg("parse failed: %s", p->err);
}

/* The whole of w must fail, with an error containing each of the NULL-terminated
 * substrings. */
static void expect_fail(const struct gw *w, ...)
{
	struct parsed p;
	parse_n(w, w->len, &p);
	if (p.rc == 0)
		fail_msg("parse succeeded, expected a failure");
	va_list ap;
	va_start(ap, w);
	for (const char *s; (s = va_arg(ap, const char *));)
		assert_contains(p.err, s);
	va_end(ap);
	/* a failed parse leaves nothing to free, and freeing twice is harmless */
	assert_null(p.f.kv);
	assert_null(p.f.tensors);
	parsed_free(&p);
}

/* A file of one tensor info and its data section: n_dims dims ne, type, offset, then
 * data_bytes zero bytes of data after the aligned header. */
static void one_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                       uint32_t type, uint64_t offset, size_t data_bytes)
{
	gw_init(w);
	gw_header(w, 3, 1, 0);
	gw_tensor(w, name, n_dims, ne, type, offset);
	gw_align(w, GGUF_DEFAULT_ALIGNMENT);
	gw_fill(w, 0, data_bytes);
}

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

/* Two f32 tensors of 4 values (16 bytes): the first at 0, the second at `second`. */
static void two_tensors(struct gw *w, int64_t alignment_kv, uint64_t second)
{
	gw_init(w);
	gw_header(w, 3, 2, alignment_kv >= 0 ? 1 : 0);
	if (alignment_kv >= 0)
		gw_kv_u32(w, "general.alignment", (uint32_t)alignment_kv);
	uint64_t ne[1] = { 4 };
	gw_tensor(w, "a", 1, ne, GGML_TYPE_F32, 0);
	gw_tensor(w, "b", 1, ne, GGML_TYPE_F32, second);
}

static void test_alignment(void **state)
{
	(void)state;
	struct gw w;
	struct parsed p;

	/* the default is 32: the data section starts at the next multiple of 32 */
	two_tensors(&w, -1, 32);
	size_t header_end = w.len;
	gw_align(&w, 32);
	gw_fill(&w, 0x11, 48);
	expect_ok(&w, &p);
	assert_int_equal(p.f.alignment, 32);
	assert_true(header_end % 32 != 0);
	assert_int_equal(p.f.data_offset, header_end + (32 - header_end % 32));
	assert_int_equal(p.f.tensors[0].offset, p.f.data_offset);
	assert_int_equal(p.f.tensors[1].offset, p.f.data_offset + 32);
	assert_int_equal(p.f.tensors[1].size, 16);
	parsed_free(&p);
	gw_free(&w);

	/* general.alignment = 256 is honoured, for the data section and the offsets */
	two_tensors(&w, 256, 256);
	gw_align(&w, 256);
	gw_fill(&w, 0, 256 + 16);
	expect_ok(&w, &p);
	assert_int_equal(p.f.alignment, 256);
	assert_int_equal(p.f.data_offset % 256, 0);
	assert_int_equal(p.f.tensors[1].offset, p.f.data_offset + 256);
	parsed_free(&p);
	gw_free(&w);

	/* ... so an offset that would do for 32 does not do for 256 */
	two_tensors(&w, 256, 32);
	gw_align(&w, 256);
	gw_fill(&w, 0, 64);
	expect_fail(&w, "tensor 'b' has offset 32, not a multiple of the alignment 256", NULL);
	gw_free(&w);

	/* alignment 1: no padding at all */
	two_tensors(&w, 1, 16);
	header_end = w.len;
	gw_fill(&w, 0, 32);
	expect_ok(&w, &p);
	assert_int_equal(p.f.data_offset, header_end);
	parsed_free(&p);
	gw_free(&w);
}

static void test_alignment_bad(void **state)
{
	(void)state;
	struct gw w;
	static const struct { uint32_t a; const char *msg; } cases[] = {
		{ 0, "general.alignment is 0, not a power of two" },
		{ 3, "general.alignment is 3, not a power of two" },
		{ 96, "general.alignment is 96, not a power of two" },
		{ 0xffffffff, "general.alignment is 4294967295, not a power of two" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		two_tensors(&w, cases[i].a, 32);
		gw_align(&w, 32);
		gw_fill(&w, 0, 64);
		expect_fail(&w, cases[i].msg, NULL);
		gw_free(&w);
	}

	/* 2^31 is a power of two: fine for a file without tensors, but the data section of
	 * a small file with tensors would start 2 GiB in */
	struct parsed p;
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_kv_u32(&w, "general.alignment", 1u << 31);
	expect_ok(&w, &p);
	assert_int_equal(p.f.alignment, 1u << 31);
	assert_int_equal(p.f.data_offset, w.len);
	parsed_free(&p);
	gw_free(&w);
	two_tensors(&w, 1u << 31, 0);
	gw_fill(&w, 0, 64);
	expect_fail(&w, "the data section starts at byte 2147483648 (alignment 2147483648), "
	            "past the end of the file", NULL);
	gw_free(&w);

	/* the wrong type, even with a good value */
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_kv_u64(&w, "general.alignment", 32);
	expect_fail(&w, "general.alignment has type uint64, not uint32", NULL);
	gw_free(&w);
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_kv_str(&w, "general.alignment", "32");
	expect_fail(&w, "general.alignment has type string, not uint32", NULL);
	gw_free(&w);
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "general.alignment", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_UINT32, 1);
	gw_u32(&w, 32);
	expect_fail(&w, "general.alignment has type array, not uint32", NULL);
	gw_free(&w);
}

/* A small valid file: keys of several kinds, two tensors, their data. */
static void small_file(struct gw *w)
{
	gw_init(w);
	gw_header(w, 3, 2, 3);
	gw_kv_str(w, "general.architecture", "llama");
	gw_kv_u32(w, "general.alignment", 32);
	gw_key(w, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_STRING, 3);
	gw_str(w, "<s>");
	gw_str(w, "</s>");
	gw_str(w, "hello");
	uint64_t ne_a[2] = { 4, 2 }, ne_b[1] = { 3 };
	gw_tensor(w, "blk.0.attn_q.weight", 2, ne_a, GGML_TYPE_F32, 0);
	gw_tensor(w, "output_norm.weight", 1, ne_b, GGML_TYPE_F32, 32);
	gw_align(w, 32);
	for (int i = 0; i < 8; i++)
		gw_f32(w, (float)i);
	for (int i = 0; i < 3; i++)
		gw_f32(w, 1.0f);
}

static void test_truncation_everywhere(void **state)
{
	(void)state;
	struct gw w;
	struct parsed p;
	small_file(&w);
	expect_ok(&w, &p);
	uint64_t data_offset = p.f.data_offset;
	assert_int_equal(p.f.tensors[0].size, 32);
	assert_int_equal(p.f.tensors[1].size, 12);
	assert_int_equal(p.f.tensors[1].offset + p.f.tensors[1].size, w.len);
	parsed_free(&p);

	/* every shorter image fails, with a message about what is missing */
	for (size_t n = 0; n < w.len; n++) {
		parse_n(&w, n, &p);
		if (p.rc == 0)
			fail_msg("parse of the first %zu of %zu bytes succeeded", n, w.len);
		if (!strstr(p.err, "truncated") && !strstr(p.err, "past the end") &&
		    !strstr(p.err, "more than the file") && !strstr(p.err, "not a GGUF file"))
			fail_msg("at %zu bytes: unexpected error '%s'", n, p.err);
		if (n >= data_offset)
			assert_contains(p.err, "tensor '");
		parsed_free(&p);
	}
	gw_free(&w);
}

static void test_huge_counts(void **state)
{
	(void)state;
	static const uint64_t counts[] = { 1ull << 40, 1ull << 62, UINT64_MAX, 1000 };
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		char want[128];
		struct gw w;
		small_file(&w);
		gw_put_u64(&w, GW_OFF_N_KV, counts[i]);
		snprintf(want, sizeof want, "the header claims %llu metadata keys, more than the file",
		         (unsigned long long)counts[i]);
		expect_fail(&w, want, NULL);
		gw_put_u64(&w, GW_OFF_N_KV, 3);
		gw_put_u64(&w, GW_OFF_N_TENSORS, counts[i]);
		snprintf(want, sizeof want, "the header claims %llu tensors, more than the file",
		         (unsigned long long)counts[i]);
		expect_fail(&w, want, NULL);
		gw_free(&w);
	}
	/* counts that the file could hold, but that are still lies: running out of bytes */
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 3);
	for (int i = 0; i < 3; i++)
		gw_kv_str(&w, i == 0 ? "a" : i == 1 ? "b" : "c", "a value long enough");
	gw_put_u64(&w, GW_OFF_N_KV, 4);
	expect_fail(&w, "truncated: the key of metadata entry 3 needs 8 bytes", NULL);
	gw_free(&w);
	gw_init(&w);
	gw_header(&w, 3, 3, 0);
	uint64_t ne[4] = { 1, 2, 3, 4 };
	gw_tensor(&w, "tensor.number.one", 4, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "tensor.number.two", 4, ne, GGML_TYPE_F32, 0);
	expect_fail(&w, "truncated: the name of tensor 2 needs 8 bytes", NULL);
	gw_free(&w);
}

static void test_huge_strings(void **state)
{
	(void)state;
	const uint64_t big = 1ull << 60;
	struct gw w;

	/* a key */
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_u64(&w, big);
	gw_raw(&w, "key", 3);
	gw_fill(&w, 0, 64);
	expect_fail(&w, "the key of metadata entry 0 claims 1152921504606846976 bytes at byte 32",
	            "past the end of the file", NULL);
	gw_free(&w);

	/* a string value */
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "k", GGUF_TYPE_STRING);
	gw_u64(&w, big);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "metadata key 'k' claims 1152921504606846976 bytes", NULL);
	gw_free(&w);

	/* UINT64_MAX: position + length would wrap */
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "k", GGUF_TYPE_STRING);
	gw_u64(&w, UINT64_MAX);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "metadata key 'k' claims 18446744073709551615 bytes", NULL);
	gw_free(&w);

	/* a string in an array */
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "k", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_STRING, 2);
	gw_str(&w, "ok");
	gw_u64(&w, big);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "metadata key 'k' claims 1152921504606846976 bytes", NULL);
	gw_free(&w);

	/* a tensor name */
	gw_init(&w);
	gw_header(&w, 3, 1, 0);
	gw_u64(&w, big);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "the name of tensor 0 claims 1152921504606846976 bytes", NULL);
	gw_free(&w);
}

static void test_huge_arrays(void **state)
{
	(void)state;
	static const uint32_t elem_types[] = {
		GGUF_TYPE_UINT8, GGUF_TYPE_UINT64, GGUF_TYPE_STRING, GGUF_TYPE_ARRAY,
	};
	static const uint64_t counts[] = { 1ull << 60, 1ull << 61, UINT64_MAX, 100 };
	for (size_t e = 0; e < sizeof elem_types / sizeof elem_types[0]; e++) {
		for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
			char want[128];
			struct gw w;
			snprintf(want, sizeof want, "metadata key 'k' claims %llu elements",
			         (unsigned long long)counts[i]);
			/* at the top level */
			gw_init(&w);
			gw_header(&w, 3, 0, 1);
			gw_key(&w, "k", GGUF_TYPE_ARRAY);
			gw_array(&w, elem_types[e], counts[i]);
			gw_fill(&w, 0, 64);
			expect_fail(&w, want, NULL);
			gw_free(&w);
			/* inside an array of arrays */
			gw_init(&w);
			gw_header(&w, 3, 0, 1);
			gw_key(&w, "k", GGUF_TYPE_ARRAY);
			gw_array(&w, GGUF_TYPE_ARRAY, 2);
			gw_array(&w, GGUF_TYPE_UINT8, 1);
			gw_u8(&w, 1);
			gw_array(&w, elem_types[e], counts[i]);
			gw_fill(&w, 0, 64);
			expect_fail(&w, want, NULL);
			gw_free(&w);
		}
	}
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
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "k", GGUF_TYPE_ARRAY);
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
		gw_init(&w);
		gw_header(&w, 3, 0, 1);
		gw_key(&w, "k", bad[i]);
		gw_fill(&w, 0, 64);
		expect_fail(&w, want, NULL);
		gw_free(&w);

		snprintf(want, sizeof want, "metadata key 'k' is an array of unknown value type %u",
		         bad[i]);
		for (uint64_t count = 0; count <= 2; count += 2) {
			gw_init(&w);
			gw_header(&w, 3, 0, 1);
			gw_key(&w, "k", GGUF_TYPE_ARRAY);
			gw_array(&w, bad[i], count);
			gw_fill(&w, 0, 64);
			expect_fail(&w, want, NULL);
			gw_free(&w);
		}

		gw_init(&w);
		gw_header(&w, 3, 0, 1);
		gw_key(&w, "k", GGUF_TYPE_ARRAY);
		gw_array(&w, GGUF_TYPE_ARRAY, 2);
		gw_array(&w, GGUF_TYPE_STRING, 0);
		gw_array(&w, bad[i], 0);
		gw_fill(&w, 0, 64);
		expect_fail(&w, want, NULL);
		gw_free(&w);
	}
}

static void test_too_many_dims(void **state)
{
	(void)state;
	static const uint32_t dims[] = { 5, 100, UINT32_MAX };
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
		char want[128];
		struct gw w;
		snprintf(want, sizeof want, "tensor 'w' has %u dimensions (at most 4)", dims[i]);
		gw_init(&w);
		gw_header(&w, 3, 1, 0);
		gw_tensor(&w, "w", dims[i] > 100 ? 0 : dims[i], NULL, GGML_TYPE_F32, 0);
		if (dims[i] > 100)
			gw_put_u32(&w, w.len - 16, dims[i]);   /* n_dims, type, offset end the info */
		gw_align(&w, 32);
		gw_fill(&w, 0, 1024);
		expect_fail(&w, want, NULL);
		gw_free(&w);
	}
	/* 0 to 4 dimensions are fine; the ones past n_dims read as 1 */
	for (uint32_t n = 0; n <= 4; n++) {
		uint64_t ne[4] = { 2, 3, 4, 5 };
		uint64_t count = 1;
		for (uint32_t d = 0; d < n; d++)
			count *= ne[d];
		struct gw w;
		struct parsed p;
		one_tensor(&w, "w", n, ne, GGML_TYPE_F32, 0, count * 4);
		expect_ok(&w, &p);
		assert_int_equal(p.f.tensors[0].n_dims, n);
		assert_int_equal(p.f.tensors[0].n_elements, count);
		for (uint32_t d = 0; d < 4; d++)
			assert_int_equal(p.f.tensors[0].ne[d], d < n ? ne[d] : 1);
		parsed_free(&p);
		gw_free(&w);
	}
}

static void test_dims_overflow(void **state)
{
	(void)state;
	static const uint64_t cases[][4] = {
		{ 1ull << 32, 1ull << 32, 1, 1 },
		{ 1ull << 62, 2, 1, 1 },           /* exactly 2^63: past INT64_MAX */
		{ 1ull << 31, 1ull << 31, 2, 1 },
		{ 3, 1ull << 21, 1ull << 21, 1ull << 21 },
		{ INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gw w;
		one_tensor(&w, "w", 4, cases[i], GGML_TYPE_F32, 0, 64);
		expect_fail(&w, "tensor 'w' has dimensions", "whose product overflows 64 bits", NULL);
		gw_free(&w);
	}
	/* the largest product that does not overflow still has to fit in the file */
	uint64_t ne[4] = { INT64_MAX, 1, 1, 1 };
	struct gw w;
	one_tensor(&w, "w", 4, ne, GGML_TYPE_F32, 0, 64);
	expect_fail(&w, "tensor 'w'", NULL);
	gw_free(&w);
	ne[0] = 1ull << 62;   /* f32: 2^64 bytes, one past what u64 holds */
	one_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 0, 64);
	expect_fail(&w, "tensor 'w'", NULL);
	gw_free(&w);
}

static void test_dims_too_large(void **state)
{
	(void)state;
	static const struct { uint64_t ne[2]; const char *msg; } cases[] = {
		{ { 1ull << 63, 1 }, "tensor 'w' has dimension 0 of 9223372036854775808" },
		{ { 1, UINT64_MAX }, "tensor 'w' has dimension 1 of 18446744073709551615" },
		{ { 0, 1ull << 63 }, "tensor 'w' has dimension 1 of 9223372036854775808" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct gw w;
		one_tensor(&w, "w", 2, cases[i].ne, GGML_TYPE_F32, 0, 64);
		expect_fail(&w, cases[i].msg, NULL);
		gw_free(&w);
	}
}

static void test_zero_dims(void **state)
{
	(void)state;
	uint64_t ne[3] = { 0, 4096, 0 };
	struct gw w;
	struct parsed p;
	for (uint32_t n = 1; n <= 3; n++) {
		one_tensor(&w, "empty", n, ne, GGML_TYPE_F32, 0, 0);
		expect_ok(&w, &p);
		assert_int_equal(p.f.tensors[0].n_elements, 0);
		assert_int_equal(p.f.tensors[0].size, 0);
		assert_int_equal(p.f.tensors[0].offset, w.len);
		parsed_free(&p);
		gw_free(&w);
	}
	/* zero elements, however large the other dims, is still zero bytes */
	uint64_t big[4] = { INT64_MAX, 0, INT64_MAX, INT64_MAX };
	one_tensor(&w, "empty", 4, big, GGML_TYPE_F32, 0, 0);
	expect_ok(&w, &p);
	assert_int_equal(p.f.tensors[0].n_elements, 0);
	assert_int_equal(p.f.tensors[0].size, 0);
	parsed_free(&p);
	gw_free(&w);
}

/* Two tensors: "u" of type id at offset 0 and "f" (f32, 8 values) at 64, or the other
 * way round when u_last. Data section: 96 bytes, or 64 + 40 when u_last. */
static void unknown_and_f32(struct gw *w, uint32_t id, bool u_last)
{
	uint64_t ne_u[2] = { 32, 1 }, ne_f[1] = { 8 };
	gw_init(w);
	gw_header(w, 3, 2, 0);
	gw_tensor(w, "u", 2, ne_u, id, u_last ? 64 : 0);
	gw_tensor(w, "f", 1, ne_f, GGML_TYPE_F32, u_last ? 0 : 64);
	gw_align(w, 32);
	gw_fill(w, 0xab, u_last ? 64 + 40 : 96);
}

static void test_unknown_type_ids(void **state)
{
	(void)state;
	/* removed ids (4, 31) and ids ggml never assigned: raw files only, sized up to the
	 * next tensor or the end of the file */
	static const uint32_t ids[] = { 4, 5, 31, 36, 99, GGML_TYPE_COUNT, 1u << 31, UINT32_MAX };
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		const struct ggml_type *ti = ggml_type_get(ids[i]);
		assert_true(!ti || !ti->block_elems);
		for (int u_last = 0; u_last <= 1; u_last++) {
			struct gw w;
			struct parsed p;
			unknown_and_f32(&w, ids[i], u_last);
			expect_ok(&w, &p);
			const struct gguf_tensor *u = &p.f.tensors[0], *f = &p.f.tensors[1];
			assert_int_equal(u->type, ids[i]);
			assert_false(u->has_f32);
			assert_true(u->ti == ti);
			assert_int_equal(p.f.n_unknown, 1);
			assert_int_equal(u->size, u_last ? 40 : 64);
			assert_int_equal(u->offset + u->size, u_last ? w.len : f->offset);
			assert_int_equal(f->size, 32);
			assert_true(f->has_f32);
			parsed_free(&p);
			gw_free(&w);
		}
	}
}

static void test_type_q5_1(void **state)
{
	(void)state;
	const struct ggml_type *ti = ggml_type_get(GGML_TYPE_Q5_1);
	assert_non_null(ti);
	uint64_t ne[2] = { 33, 2 };
	struct gw w;
	struct parsed p;
	one_tensor(&w, "w", 2, ne, GGML_TYPE_Q5_1, 0, 256);
	parse_n(&w, w.len, &p);
	if (ti->block_elems) {
		/* once the layout is known, a row must hold whole blocks */
		assert_int_equal(p.rc, -1);
		assert_contains(p.err, "tensor 'w' has 33 columns, not a multiple of the q5_1 block size 32");
	} else {
		assert_int_equal(p.rc, 0);
		assert_false(p.f.tensors[0].has_f32);
	}
	parsed_free(&p);
	gw_free(&w);

	ne[0] = 64;
	one_tensor(&w, "w", 2, ne, GGML_TYPE_Q5_1, 0, 4 * 24);
	expect_ok(&w, &p);
	assert_int_equal(p.f.tensors[0].size, 4 * 24);   /* known or not: up to the end */
	assert_int_equal(p.f.tensors[0].has_f32,
	                 ti->block_elems && dequant_get(ti->id)->to_float);
	parsed_free(&p);
	gw_free(&w);
	if (ti->block_elems) {
		/* one byte short of four blocks */
		one_tensor(&w, "w", 2, ne, GGML_TYPE_Q5_1, 0, 4 * 24 - 1);
		expect_fail(&w, "tensor 'w' ends at byte", "past the end of the file", NULL);
		gw_free(&w);
	}
}

static void test_offset_misaligned(void **state)
{
	(void)state;
	static const uint64_t offsets[] = { 4, 1, 31, 33, UINT64_MAX };
	for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
		char want[128];
		uint64_t ne[1] = { 4 };
		struct gw w;
		snprintf(want, sizeof want, "tensor 'w' has offset %llu, not a multiple of the "
		         "alignment 32", (unsigned long long)offsets[i]);
		one_tensor(&w, "w", 1, ne, GGML_TYPE_F32, offsets[i], 128);
		expect_fail(&w, want, NULL);
		gw_free(&w);
	}
}

static void test_offset_past_end(void **state)
{
	(void)state;
	uint64_t ne[1] = { 4 };
	char want[160];
	struct gw w;

	/* a known type: its end is past the end */
	one_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 1u << 20, 64);
	snprintf(want, sizeof want, "tensor 'w' ends at byte %zu, past the end of the file (%zu bytes)",
	         (w.len - 64) + (1u << 20) + 16, w.len);
	expect_fail(&w, want, NULL);
	gw_free(&w);

	/* an unknown type: its start is */
	one_tensor(&w, "w", 1, ne, 99, 1u << 20, 64);
	snprintf(want, sizeof want, "tensor 'w' starts at byte %zu, past the end of the file (%zu bytes)",
	         (w.len - 64) + (1u << 20), w.len);
	expect_fail(&w, want, NULL);
	gw_free(&w);

	/* offsets that wrap when the data section's offset is added */
	static const uint64_t wrapping[] = { UINT64_MAX - 31, 1ull << 63, UINT64_MAX - 1023 };
	for (size_t i = 0; i < sizeof wrapping / sizeof wrapping[0]; i++) {
		for (uint32_t type = 0; type <= 99; type += 99) {
			snprintf(want, sizeof want, "tensor 'w' has offset %llu, past the end of the file",
			         (unsigned long long)wrapping[i]);
			one_tensor(&w, "w", 1, ne, type, wrapping[i], 64);
			if (wrapping[i] + w.len - 64 < wrapping[i])
				expect_fail(&w, want, NULL);
			else
				expect_fail(&w, "tensor 'w'", "past the end of the file", NULL);
			gw_free(&w);
		}
	}
}

static void test_data_past_end(void **state)
{
	(void)state;
	uint64_t ne[1] = { 100 };
	char want[160];
	struct gw w;
	struct parsed p;

	/* 100 f32 need 400 bytes; there are 399 */
	one_tensor(&w, "blk.3.ffn_up.weight", 1, ne, GGML_TYPE_F32, 0, 399);
	snprintf(want, sizeof want, "tensor 'blk.3.ffn_up.weight' ends at byte %zu, past the end "
	         "of the file (%zu bytes)", w.len + 1, w.len);
	expect_fail(&w, want, NULL);
	gw_fill(&w, 0, 1);
	expect_ok(&w, &p);
	assert_int_equal(p.f.tensors[0].offset + p.f.tensors[0].size, w.len);
	parsed_free(&p);
	gw_free(&w);

	/* a second tensor that fits does not hide the first that does not */
	gw_init(&w);
	gw_header(&w, 3, 2, 0);
	gw_tensor(&w, "small", 1, ne, GGML_TYPE_F32, 0);
	ne[0] = 1000;
	gw_tensor(&w, "big", 1, ne, GGML_TYPE_F32, 512);
	gw_align(&w, 32);
	gw_fill(&w, 0, 1024);
	expect_fail(&w, "tensor 'big' ends at byte", NULL);
	gw_free(&w);
}

static void test_overlap(void **state)
{
	(void)state;
	uint64_t ne[1] = { 16 };   /* 64 bytes of f32 */
	static const uint64_t second[] = { 32, 0 };
	for (size_t i = 0; i < sizeof second / sizeof second[0]; i++) {
		for (int swap = 0; swap <= 1; swap++) {
			struct gw w;
			gw_init(&w);
			gw_header(&w, 3, 2, 0);
			gw_tensor(&w, swap ? "b" : "a", 1, ne, GGML_TYPE_F32, swap ? second[i] : 0);
			gw_tensor(&w, swap ? "a" : "b", 1, ne, GGML_TYPE_F32, swap ? 0 : second[i]);
			gw_align(&w, 32);
			gw_fill(&w, 0, 256);
			expect_fail(&w, "tensors '", "overlap", NULL);
			gw_free(&w);
		}
	}
	/* touching is not overlapping */
	struct gw w;
	struct parsed p;
	gw_init(&w);
	gw_header(&w, 3, 3, 0);
	gw_tensor(&w, "c", 1, ne, GGML_TYPE_F32, 128);
	gw_tensor(&w, "a", 1, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "b", 1, ne, GGML_TYPE_F32, 64);
	gw_align(&w, 32);
	gw_fill(&w, 0, 192);
	expect_ok(&w, &p);
	parsed_free(&p);
	/* a big one spanning two later ones */
	gw_free(&w);
	gw_init(&w);
	gw_header(&w, 3, 3, 0);
	gw_tensor(&w, "a", 1, ne, GGML_TYPE_F32, 64);
	gw_tensor(&w, "b", 1, ne, GGML_TYPE_F32, 128);
	ne[0] = 64;
	gw_tensor(&w, "big", 1, ne, GGML_TYPE_F32, 0);
	gw_align(&w, 32);
	gw_fill(&w, 0, 256);
	expect_fail(&w, "tensors 'big' (bytes", "and 'a' (from byte", "overlap", NULL);
	gw_free(&w);
}

/* Whether two tensors overlap cannot depend on the order of their infos in the file. */
static void test_overlap_order(void **state)
{
	(void)state;
	uint64_t ne16[1] = { 16 }, ne0[1] = { 0 };
	static const struct { uint64_t empty_at; bool ok; } cases[] = {
		{ 0, true },    /* an empty tensor where another starts: nothing shared */
		{ 64, true },   /* ... or where it ends */
		{ 32, false },  /* inside it: ggml never writes that */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		for (int swap = 0; swap <= 1; swap++) {
			struct gw w;
			struct parsed p;
			gw_init(&w);
			gw_header(&w, 3, 2, 0);
			if (swap)
				gw_tensor(&w, "z", 1, ne0, GGML_TYPE_F32, cases[i].empty_at);
			gw_tensor(&w, "a", 1, ne16, GGML_TYPE_F32, 0);
			if (!swap)
				gw_tensor(&w, "z", 1, ne0, GGML_TYPE_F32, cases[i].empty_at);
			gw_align(&w, 32);
			gw_fill(&w, 0, 64);
			parse_n(&w, w.len, &p);
			if (cases[i].ok && p.rc != 0)
				fail_msg("empty tensor at %llu, swap %d: %s",
				         (unsigned long long)cases[i].empty_at, swap, p.err);
			if (!cases[i].ok) {
				assert_int_equal(p.rc, -1);
				assert_contains(p.err, "tensors 'a' (bytes");
				assert_contains(p.err, "and 'z' (from byte");
			} else {
				assert_int_equal(p.f.tensors[swap ? 0 : 1].size, 0);
			}
			parsed_free(&p);
			gw_free(&w);
		}
	}
}

static void test_duplicates(void **state)
{
	(void)state;
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 3);
	gw_kv_u32(&w, "a", 1);
	gw_kv_str(&w, "b", "x");
	gw_kv_u32(&w, "a", 2);
	expect_fail(&w, "duplicate metadata key 'a'", NULL);
	gw_free(&w);

	/* a duplicate with a different type is still a duplicate */
	gw_init(&w);
	gw_header(&w, 3, 0, 2);
	gw_kv_str(&w, "general.name", "x");
	gw_kv_u64(&w, "general.name", 2);
	expect_fail(&w, "duplicate metadata key 'general.name'", NULL);
	gw_free(&w);

	/* a name with a newline is quoted on one line */
	gw_init(&w);
	gw_header(&w, 3, 0, 2);
	gw_kv_u32(&w, "a\nb", 1);
	gw_kv_u32(&w, "a\nb", 1);
	expect_fail(&w, "duplicate metadata key 'a?b'", NULL);
	gw_free(&w);

	/* prefixes are different names, two empty names are not */
	struct parsed p;
	gw_init(&w);
	gw_header(&w, 3, 0, 3);
	gw_kv_u32(&w, "ab", 1);
	gw_kv_u32(&w, "a", 1);
	gw_kv_u32(&w, "", 1);
	expect_ok(&w, &p);
	parsed_free(&p);
	gw_kv_u32(&w, "", 1);
	gw_put_u64(&w, GW_OFF_N_KV, 4);
	expect_fail(&w, "duplicate metadata key ''", NULL);
	gw_free(&w);

	uint64_t ne[1] = { 4 };
	gw_init(&w);
	gw_header(&w, 3, 3, 0);
	gw_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "v", 1, ne, GGML_TYPE_F32, 32);
	gw_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 64);
	gw_align(&w, 32);
	gw_fill(&w, 0, 96);
	expect_fail(&w, "duplicate tensor name 'w'", NULL);
	gw_free(&w);

	gw_init(&w);
	gw_header(&w, 3, 2, 0);
	gw_tensor(&w, "", 1, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "", 1, ne, GGML_TYPE_F32, 32);
	gw_align(&w, 32);
	gw_fill(&w, 0, 64);
	expect_fail(&w, "duplicate tensor name ''", NULL);
	gw_free(&w);
}

static void test_name_lengths(void **state)
{
	(void)state;
	static const size_t lens[] = { 0, 1, 255, 256, 70000 };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		char *name = malloc(lens[i] + 1);
		memset(name, 'n', lens[i]);
		name[lens[i]] = 0;
		uint64_t ne[1] = { 4 };
		struct gw w;
		struct parsed p;
		gw_init(&w);
		gw_header(&w, 3, 1, 1);
		gw_kv_u32(&w, name, 5);
		gw_tensor(&w, name, 1, ne, GGML_TYPE_F32, 0);
		gw_align(&w, 32);
		gw_fill(&w, 0, 16);
		expect_ok(&w, &p);
		assert_int_equal(p.f.kv[0].key.len, lens[i]);
		assert_int_equal(p.f.tensors[0].name.len, lens[i]);
		assert_memory_equal(p.f.tensors[0].name.ptr, name, lens[i]);
		assert_non_null(gguf_find_kv(&p.f, name));
		parsed_free(&p);
		gw_free(&w);

		/* an error about a long name stays one short line */
		one_tensor(&w, name, 1, ne, GGML_TYPE_F32, 4, 16);
		parse_n(&w, w.len, &p);
		assert_int_equal(p.rc, -1);
		assert_contains(p.err, "not a multiple of the alignment");
		assert_true(strlen(p.err) < 200);
		if (lens[i] > 64)
			assert_contains(p.err, "...");
		parsed_free(&p);
		gw_free(&w);
		free(name);
	}
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_value_types),
		cmocka_unit_test(test_versions_refused),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_alignment_bad),
		cmocka_unit_test(test_truncation_everywhere),
		cmocka_unit_test(test_huge_counts),
		cmocka_unit_test(test_huge_strings),
		cmocka_unit_test(test_huge_arrays),
		cmocka_unit_test(test_array_depth),
		cmocka_unit_test(test_bad_value_types),
		cmocka_unit_test(test_too_many_dims),
		cmocka_unit_test(test_dims_overflow),
		cmocka_unit_test(test_dims_too_large),
		cmocka_unit_test(test_zero_dims),
		cmocka_unit_test(test_unknown_type_ids),
		cmocka_unit_test(test_type_q5_1),
		cmocka_unit_test(test_offset_misaligned),
		cmocka_unit_test(test_offset_past_end),
		cmocka_unit_test(test_data_past_end),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_overlap_order),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_name_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
