/* gguf.json: JSON string escaping and UTF-8 repair, values, the whole document of a
 * hand-built model, and windowed rendering. Expected U+FFFD placements are those of
 * Python's bytes.decode("utf-8", "replace"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "model_source.h"
#include "render_json.h"
#include "render_value.h"
#include "render_util.h"

struct strarg {
	const char *p;
	size_t len;
};

static void json_string_fn(struct sink *s, const void *arg)
{
	const struct strarg *a = arg;
	render_json_string(s, a->p, a->len);
}

static void expect_json_string(const char *in, size_t in_len, const char *want,
                               size_t want_len)
{
	struct strarg a = { in, in_len };
	size_t len;
	char *got = render_all(json_string_fn, &a, &len);
	if (len != want_len || memcmp(got, want, len) != 0)
		print_error("got %s, want %s\n", got, want);
	assert_int_equal(len, want_len);
	assert_memory_equal(got, want, len);
	assert_true(render_windows_agree(json_string_fn, &a, got, len, (unsigned)in_len));
	free(got);
}
#define JS(in, want) expect_json_string((in), sizeof(in) - 1, (want), sizeof(want) - 1)

#define FFFD "\xef\xbf\xbd"

static void test_escapes(void **state)
{
	(void)state;
	JS("", "\"\"");
	JS("plain text", "\"plain text\"");
	JS("q\"b\\s/", "\"q\\\"b\\\\s/\"");
	JS("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"");
	JS("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
	JS("a\0b", "\"a\\u0000b\"");
	JS("\x1b[0m", "\"\\u001b[0m\"");
}

static void test_utf8_valid(void **state)
{
	(void)state;
	JS("\xc3\xa9", "\"\xc3\xa9\"");
	JS("\xc2\x80\xdf\xbf", "\"\xc2\x80\xdf\xbf\"");
	JS("\xe2\x82\xac\xe1\x80\x80\xef\xbf\xbf", "\"\xe2\x82\xac\xe1\x80\x80\xef\xbf\xbf\"");
	JS("\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", "\"\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"");
	JS("\xed\x9f\xbf\xee\x80\x80", "\"\xed\x9f\xbf\xee\x80\x80\"");   /* around surrogates */
}

static void test_utf8_invalid(void **state)
{
	(void)state;
	JS("\x80", "\"" FFFD "\"");                          /* stray continuation */
	JS("\xc0\xaf", "\"" FFFD FFFD "\"");                 /* overlong '/' */
	JS("\xc1\xbf", "\"" FFFD FFFD "\"");
	JS("\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\"");        /* overlong, 3 bytes */
	JS("\xf0\x80\x80\xaf", "\"" FFFD FFFD FFFD FFFD "\"");
	JS("\xed\xa0\x80", "\"" FFFD FFFD FFFD "\"");        /* surrogate U+D800 */
	JS("\xed\xbf\xbf", "\"" FFFD FFFD FFFD "\"");        /* surrogate U+DFFF */
	JS("\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""); /* U+110000 */
	JS("\xf5\x80", "\"" FFFD FFFD "\"");
	JS("\xff\xfe", "\"" FFFD FFFD "\"");
	JS("\xe2\x82", "\"" FFFD "\"");                      /* truncated at the end */
	JS("\xe2\x82x", "\"" FFFD "x\"");                    /* one U+FFFD for the prefix */
	JS("\xf0\x9f\x98", "\"" FFFD "\"");
	JS("\xf0\x9f\x98x", "\"" FFFD "x\"");
	JS("a\xc3", "\"a" FFFD "\"");
	JS("\xc3\"", "\"" FFFD "\\\"\"");                    /* the quote is still escaped */
	JS("ok\xc3\xa9\x80ok\n", "\"ok\xc3\xa9" FFFD "ok\\n\"");
}

static void json_value_fn(struct sink *s, const void *arg)
{
	render_value_json(s, arg);
}

static void expect_json_value(const struct gguf_value *v, const char *want)
{
	size_t len;
	char *got = render_all(json_value_fn, v, &len);
	if (strcmp(got, want) != 0)
		print_error("got %s, want %s\n", got, want);
	assert_string_equal(got, want);
	assert_true(render_windows_agree(json_value_fn, v, got, len, 7));
	free(got);
}

static void test_values(void **state)
{
	(void)state;
	struct bytes w = { .n = 0 };
	put_le(&w, 0x8000000000000000u, 8);
	struct gguf_value v = val(GGUF_TYPE_INT64, &w);
	expect_json_value(&v, "-9223372036854775808");

	struct bytes b = { .b = { 1 }, .n = 1 };
	struct gguf_value vb = val(GGUF_TYPE_BOOL, &b);
	expect_json_value(&vb, "true");

	struct bytes f = { .n = 0 };
	put_f32(&f, 9.999999747378752e-06f);
	struct gguf_value vf = val(GGUF_TYPE_FLOAT32, &f);
	expect_json_value(&vf, "1e-05");

	/* JSON has no nan or infinities: they are strings */
	struct bytes nf = { .n = 0 };
	put_f64(&nf, NAN);
	struct gguf_value vn = val(GGUF_TYPE_FLOAT64, &nf);
	expect_json_value(&vn, "\"nan\"");
	struct bytes inf = { .n = 0 };
	put_f32(&inf, -INFINITY);
	struct gguf_value vi = val(GGUF_TYPE_FLOAT32, &inf);
	expect_json_value(&vi, "\"-inf\"");

	struct bytes s = { .n = 0 };
	put_str(&s, "{% if x %}\n\"", 12);
	struct gguf_value vs = val(GGUF_TYPE_STRING, &s);
	expect_json_value(&vs, "\"{% if x %}\\n\\\"\"");

	struct bytes a = { .n = 0 };
	put_str(&a, "<unk>", 5);
	put_str(&a, "\xe2\x96\x81the", 6);
	put_str(&a, "\xff", 1);
	struct gguf_value va = arr(GGUF_TYPE_STRING, 3, &a);
	expect_json_value(&va, "[\"<unk>\", \"\xe2\x96\x81the\", \"" FFFD "\"]");

	struct bytes e = { .n = 0 };
	struct gguf_value ve = arr(GGUF_TYPE_INT32, 0, &e);
	expect_json_value(&ve, "[]");

	struct bytes aa = { .n = 0 };
	put_arr_hdr(&aa, GGUF_TYPE_UINT8, 2);
	put_le(&aa, 1, 1);
	put_le(&aa, 2, 1);
	put_arr_hdr(&aa, GGUF_TYPE_UINT8, 0);
	struct gguf_value vaa = arr(GGUF_TYPE_ARRAY, 2, &aa);
	expect_json_value(&vaa, "[[1, 2], []]");

	struct bytes fa = { .n = 0 };
	put_f32(&fa, 0.0f);
	put_f32(&fa, -7740.0f);
	put_f32(&fa, NAN);
	struct gguf_value vfa = arr(GGUF_TYPE_FLOAT32, 3, &fa);
	expect_json_value(&vfa, "[0, -7740, \"nan\"]");
}

/* A small model built by hand: three kvs, two tensors in one or two shards. */
struct fixture {
	struct bytes arch, toks, eps;
	struct gguf_kv kv[3];
	struct gguf_tensor t[2];
	struct gguf_file gf;
	struct model_file files[2];
	struct model_tensor mt[2];
	struct ggufs_model *m;   /* made by hand (model_source.h): closed by fixture_done */
};

static void fixture_init(struct fixture *fx, uint32_t n_shards)
{
	memset(fx, 0, sizeof *fx);
	put_str(&fx->arch, "llama", 5);
	put_str(&fx->toks, "<s>", 3);
	put_str(&fx->toks, "a\"b", 3);
	put_f32(&fx->eps, 1e-05f);
	fx->kv[0] = (struct gguf_kv){ { "general.architecture", 20 }, val(GGUF_TYPE_STRING, &fx->arch) };
	fx->kv[1] = (struct gguf_kv){ { "tokenizer.ggml.tokens", 21 }, arr(GGUF_TYPE_STRING, 2, &fx->toks) };
	fx->kv[2] = (struct gguf_kv){ { "odd\nkey\xff", 8 }, val(GGUF_TYPE_FLOAT32, &fx->eps) };
	fx->t[0] = (struct gguf_tensor){ .name = { "output.weight", 13 }, .n_dims = 2,
		.ne = { 256, 8000, 1, 1 }, .type = 14, .n_elements = 2048000, .offset = 175808,
		.size = 1680000, .has_f32 = true };
	fx->t[1] = (struct gguf_tensor){ .name = { "new.type\tx", 10 }, .n_dims = 1,
		.ne = { 64, 1, 1, 1 }, .type = 99, .n_elements = 64, .offset = 1855808,
		.size = 96 };
	fx->files[0].path = "/models/m-00001-of-00002.gguf";
	fx->files[1].path = "/models/m-00002-of-00002.gguf";
	fx->gf = (struct gguf_file){ .version = 3, .alignment = 32,
		.data_offset = 175808, .n_kv = 3, .kv = fx->kv, .n_tensors = n_shards == 1 ? 2 : 1,
		.tensors = fx->t };
	fx->mt[0] = (struct model_tensor){ &fx->t[0], 0 };
	fx->mt[1] = (struct model_tensor){ &fx->t[1], n_shards == 1 ? 0 : 1 };
	const struct model_desc d = { .path = "m.gguf", .meta = &fx->gf, .tensors = fx->mt,
	                              .n_tensors = 2, .files = fx->files, .n_files = n_shards };
	fx->m = model_new(&d);
	assert_non_null(fx->m);
}

static void fixture_done(struct fixture *fx)
{
	model_close(fx->m);
}

/* A model of one file made by hand (model_source.h) of metadata g, its n tensors
 * (into mt, which stays the model's, as g and path do). */
static struct ggufs_model *one_file(const char *path, const struct gguf_file *g,
                                    const struct gguf_tensor *t, uint64_t n,
                                    struct model_tensor *mt)
{
	static struct model_file file;   /* the model's until it closes */
	file = (struct model_file){ .path = path, .gguf = g };
	for (uint64_t i = 0; i < n; i++)
		mt[i] = (struct model_tensor){ &t[i], 0 };
	const struct model_desc d = { .path = path, .meta = g, .tensors = mt, .n_tensors = n,
	                              .files = &file, .n_files = 1 };
	struct ggufs_model *m = model_new(&d);
	assert_non_null(m);
	return m;
}

static void json_doc_fn(struct sink *s, const void *arg)
{
	render_json(s, arg, NULL);
}

static void test_document(void **state)
{
	(void)state;
	static struct fixture fx;
	fixture_init(&fx, 1);
	size_t len;
	char *got = render_all(json_doc_fn, fx.m, &len);
	static const char want[] =
		"{\"file\": \"m-00001-of-00002.gguf\", \"model\": \"model.gguf\", \"version\": 3, "
		"\"alignment\": 32, \"data_offset\": 175808,\n"
		" \"metadata\": {\n"
		"  \"general.architecture\": {\"type\": \"string\", \"value\": \"llama\", "
		"\"file\": \"metadata/general.architecture\"},\n"
		"  \"tokenizer.ggml.tokens\": {\"type\": \"array[string]\", \"value\": "
		"[\"<s>\", \"a\\\"b\"], \"file\": \"metadata/tokenizer.ggml.tokens\"},\n"
		"  \"odd\\nkey" FFFD "\": {\"type\": \"float32\", \"value\": 1e-05, "
		"\"file\": \"metadata/odd\\nkey" FFFD "\"}\n"
		" },\n"
		" \"tensors\": [\n"
		"  {\"name\": \"output.weight\", \"type\": \"q6_K\", \"dims\": [256, 8000], "
		"\"offset\": 175808, \"size\": 1680000, \"file\": \"tensors/output.weight\", "
		"\"f32\": \"tensors/output.weight.f32\", \"npy\": \"tensors/output.weight.npy\"},\n"
		"  {\"name\": \"new.type\\tx\", \"type\": \"type99\", \"dims\": [64], "
		"\"offset\": 1855808, \"size\": 96, \"file\": \"tensors/new.type\\tx\", "
		"\"f32\": null, \"npy\": null}\n"
		" ]}\n";
	if (strcmp(got, want) != 0)
		print_error("got:\n%s\nwant:\n%s\n", got, want);
	assert_string_equal(got, want);
	for (unsigned seed = 1; seed <= 20; seed++)
		assert_true(render_windows_agree(json_doc_fn, fx.m, got, len, seed));
	free(got);
	fixture_done(&fx);
}

static void test_document_shards(void **state)
{
	(void)state;
	static struct fixture fx;
	fixture_init(&fx, 2);
	size_t len;
	char *got = render_all(json_doc_fn, fx.m, &len);
	assert_non_null(strstr(got, "\"npy\": \"tensors/output.weight.npy\", "
	                            "\"shard\": \"m-00001-of-00002.gguf\"}"));
	assert_non_null(strstr(got, "\"npy\": null, \"shard\": \"m-00002-of-00002.gguf\"}"));
	free(got);
	fixture_done(&fx);
}

/* Names that must be escaped: each kv and tensor names the file that the tree has for
 * it (the expected paths written out here, by ggufs(1)'s rules, not by names.c). */
static void test_document_paths(void **state)
{
	(void)state;
	static char long_t[250], long_k[300];
	memset(long_t, 'L', sizeof long_t);
	memset(long_k, 'k', sizeof long_k);
	static const struct { const char *name; size_t len; const char *path; } tensors[] = {
		{ "a/b", 3, "tensors/a%2Fb" },
		{ "100%", 4, "tensors/100%25" },
		{ "x\0y", 3, "tensors/x%00y" },
		{ "w.f32", 5, "tensors/w%2Ef32" },
		{ "v.npy", 5, "tensors/v%2Enpy" },
		{ "x.f32.npy", 9, "tensors/x.f32%2Enpy" },
		{ ".", 1, "tensors/%2E" },
		{ "..", 2, "tensors/%2E%2E" },
		{ "...", 3, "tensors/..." },
		{ "", 0, "tensors/%" },
		{ "caf\xc3\xa9", 5, "tensors/caf\xc3\xa9" },
	};
	static const struct { const char *name; size_t len; const char *path; } keys[] = {
		{ "k/ey", 4, "metadata/k%2Fey" },
		{ "p%", 2, "metadata/p%25" },
		{ "n\0ul", 4, "metadata/n%00ul" },
		{ "x.f32", 5, "metadata/x.f32" },   /* rule 2 is for tensors only */
		{ ".", 1, "metadata/%2E" },
		{ "..", 2, "metadata/%2E%2E" },
		{ "", 0, "metadata/%" },
	};
	enum { NT = sizeof tensors / sizeof tensors[0], NK = sizeof keys / sizeof keys[0] };
	static struct bytes v;
	static struct gguf_kv kv[NK + 1];
	static struct gguf_tensor t[NT + 1];
	static struct model_tensor mt[NT + 1];
	v.n = 0;
	put_le(&v, 7, 4);
	for (size_t i = 0; i <= NK; i++)
		kv[i] = (struct gguf_kv){ i < NK ? (struct gguf_str){ keys[i].name, keys[i].len }
		                                 : (struct gguf_str){ long_k, sizeof long_k },
		                          val(GGUF_TYPE_UINT32, &v) };
	for (size_t i = 0; i <= NT; i++) {
		t[i] = (struct gguf_tensor){ .name = i < NT ? (struct gguf_str){ tensors[i].name,
		                                                                tensors[i].len }
		                                            : (struct gguf_str){ long_t, sizeof long_t },
		                             .n_dims = 1, .ne = { 2, 1, 1, 1 }, .type = 0,
		                             .n_elements = 2, .size = 8, .has_f32 = i != 1 };
	}
	static const struct gguf_file g = { .version = 3, .alignment = 32, .n_kv = NK + 1,
	                                    .kv = kv, .n_tensors = NT + 1, .tensors = t };
	struct ggufs_model *m = one_file("n.gguf", &g, t, NT + 1, mt);
	size_t len;
	char *got = render_all(json_doc_fn, m, &len);
	char want[1024];
	for (size_t i = 0; i < NK; i++) {
		snprintf(want, sizeof want, "\"value\": 7, \"file\": \"%s\"}", keys[i].path);
		if (!strstr(got, want))
			print_error("no %s in gguf.json\n", want);
		assert_non_null(strstr(got, want));
	}
	for (size_t i = 0; i < NT; i++) {
		if (i == 1)   /* no dequantizer */
			snprintf(want, sizeof want, "\"file\": \"%s\", \"f32\": null, \"npy\": null}",
			         tensors[i].path);
		else
			snprintf(want, sizeof want, "\"file\": \"%s\", \"f32\": \"%s.f32\", "
			         "\"npy\": \"%s.npy\"}", tensors[i].path, tensors[i].path, tensors[i].path);
		if (!strstr(got, want))
			print_error("no %s in gguf.json\n", want);
		assert_non_null(strstr(got, want));
	}
	/* rule 4: 200 bytes, '~', FNV-1a of the whole name (computed apart from ggufs) */
	snprintf(want, sizeof want, "\"file\": \"metadata/%.200s~1f2d4d02dcfcfcf1\"}", long_k);
	assert_non_null(strstr(got, want));
	snprintf(want, sizeof want, "\"file\": \"tensors/%.200s~0f91a5d6f33c56c5\", "
	         "\"f32\": \"tensors/%.200s~0f91a5d6f33c56c5.f32\"", long_t, long_t);
	assert_non_null(strstr(got, want));
	for (unsigned seed = 1; seed <= 5; seed++)
		assert_true(render_windows_agree(json_doc_fn, m, got, len, seed));
	free(got);
	model_close(m);
}

static void test_empty_model(void **state)
{
	(void)state;
	const struct gguf_file f = { .version = 2, .alignment = 64, .data_offset = 32 };
	struct ggufs_model *m = one_file("e.gguf", &f, NULL, 0, NULL);
	size_t len;
	char *got = render_all(json_doc_fn, m, &len);
	assert_string_equal(got, "{\"file\": \"e.gguf\", \"model\": \"model.gguf\", \"version\": 2, "
	                         "\"alignment\": 64, \"data_offset\": 32,\n \"metadata\": {},\n "
	                         "\"tensors\": []}\n");
	free(got);
	model_close(m);
}

static void test_window_stops_early(void **state)
{
	(void)state;
	/* a big token list: a read of the first bytes must not render all of it */
	static uint8_t big[200000];
	struct gguf_value v = { .type = GGUF_TYPE_ARRAY, .elem_type = GGUF_TYPE_STRING,
	                        .data = big };
	size_t n = 0;
	for (; n + 13 <= sizeof big; v.count++) {
		for (int i = 0; i < 8; i++)
			big[n + i] = (uint8_t)(i == 0 ? 5 : 0);
		memcpy(big + n + 8, "tok\"x", 5);
		n += 13;
	}
	v.size = n;
	struct gguf_kv kv = { { "tokenizer.ggml.tokens", 21 }, v };
	const struct gguf_file f = { .version = 3, .alignment = 32, .n_kv = 1, .kv = &kv };
	struct ggufs_model *m = one_file("b.gguf", &f, NULL, 0, NULL);
	char buf[100];
	struct window_render r = render_window(json_doc_fn, m, buf, 50, sizeof buf);
	assert_int_equal(r.filled, sizeof buf);
	assert_true(r.walked < 1000);
	assert_true(r.whole > 100000);
	model_close(m);
}

UNIT_TESTS(cmocka_unit_test(test_escapes),
           cmocka_unit_test(test_utf8_valid),
           cmocka_unit_test(test_utf8_invalid),
           cmocka_unit_test(test_values),
           cmocka_unit_test(test_document),
           cmocka_unit_test(test_document_shards),
           cmocka_unit_test(test_document_paths),
           cmocka_unit_test(test_empty_model),
           cmocka_unit_test(test_window_stops_early))
