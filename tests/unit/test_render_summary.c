/* summary.txt: the figures for the test model (computed independently from
 * tinyllama-q4km.expected.json: 21 tensors, 5604608 values, 3739904 bytes), llama.cpp's
 * names and number style, and a hand-built model with odd types and missing keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"
#include "tiny_model.h"

#include "model.h"
#include "model_source.h"
#include "render_summary.h"
#include "render_util.h"

static void summary_fn(struct sink *s, const void *arg)
{
	render_summary(s, arg);
}

/* The line of text that starts with label, or fails. */
static void expect_line(const char *text, const char *line)
{
	const char *p = text;
	size_t n = strlen(line);
	while (p && *p) {
		if (strncmp(p, line, n) == 0 && (p[n] == '\n'))
			return;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	print_error("no line \"%s\" in:\n%s\n", line, text);
	fail();
}

static void test_tinyllama(void **state)
{
	(void)state;
	struct ggufs_model *m = tiny_model_open();
	size_t len;
	char *txt = render_all(summary_fn, m, &len);
	expect_line(txt, "file:             tinyllama-q4km.gguf");
	expect_line(txt, "GGUF version:     3");
	expect_line(txt, "architecture:     llama");
	expect_line(txt, "name:             tinyllama-test");
	expect_line(txt, "file type:        Q4_K - Medium");          /* general.file_type 15 */
	expect_line(txt, "parameters:       5.60 M");                 /* 5604608 */
	/* 3739904 bytes = 3.74 MB, as --check says them (issue 38 item 13: not 3.57 MiB);
	 * 3739904 * 8 / 5604608 = 5.338 bits */
	expect_line(txt, "tensor data:      3.74 MB (5.34 bits per weight)");
	expect_line(txt, "tensors:          21");
	expect_line(txt, "context length:   2048");
	expect_line(txt, "embedding length: 256");
	expect_line(txt, "layers:           2");
	expect_line(txt, "heads:            8");
	expect_line(txt, "kv heads:         2");
	/* 2 layers x 2 KV heads x (32 + 32) dims (256 / 8 heads) x 2 bytes; x 2048 = 1 MiB,
	 * 1.05 MB */
	expect_line(txt, "kv cache (f16):   512 bytes per token, 1.05 MB at the context length (2048)");
	expect_line(txt, "vocabulary size:  8000");
	expect_line(txt, "chat template:    yes");
	/* the type table: counts and bytes per type, in type id order */
	const char *f32 = strstr(txt, "\nf32 ");
	const char *q4k = strstr(txt, "\nq4_K ");
	const char *q6k = strstr(txt, "\nq6_K ");
	assert_true(f32 && q4k && q6k && f32 < q4k && q4k < q6k);
	unsigned long long c, b;
	assert_int_equal(sscanf(f32, "\nf32 %llu %llu", &c, &b), 2);
	assert_true(c == 5 && b == 5120);
	assert_int_equal(sscanf(q4k, "\nq4_K %llu %llu", &c, &b), 2);
	assert_true(c == 13 && b == 1880064);
	assert_int_equal(sscanf(q6k, "\nq6_K %llu %llu", &c, &b), 2);
	assert_true(c == 3 && b == 1854720);
	assert_true(render_windows_agree(summary_fn, m, txt, len, 3));
	free(txt);
	model_close(m);
}

static void test_count_text(void **state)
{
	(void)state;
	static const struct {
		uint64_t n;
		const char *want;
	} rows[] = {
		{ 0, "0.00 K" },
		{ 123, "0.12 K" },
		{ 999999, "1000.00 K" },
		{ 1000000, "1.00 M" },
		{ 6740000, "6.74 M" },
		{ 1100048384, "1.10 B" },          /* TinyLlama 1.1B */
		{ 6738415616, "6.74 B" },          /* Llama 2 7B */
		{ 1000000000000ull, "1.00 T" },
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		char buf[32];
		size_t n = summary_count_text(rows[i].n, buf);
		assert_string_equal(buf, rows[i].want);
		assert_int_equal(n, strlen(rows[i].want));
	}
}

static void test_ftype_names(void **state)
{
	(void)state;
	/* llama.h's enum llama_ftype against llama_ftype_name() */
	assert_string_equal(summary_ftype_name(0), "all F32");
	assert_string_equal(summary_ftype_name(1), "F16");
	assert_string_equal(summary_ftype_name(2), "Q4_0");
	assert_string_equal(summary_ftype_name(7), "Q8_0");
	assert_string_equal(summary_ftype_name(8), "Q5_0");
	assert_string_equal(summary_ftype_name(10), "Q2_K - Medium");
	assert_string_equal(summary_ftype_name(15), "Q4_K - Medium");
	assert_string_equal(summary_ftype_name(18), "Q6_K");
	assert_string_equal(summary_ftype_name(21), "Q2_K - Small");
	assert_string_equal(summary_ftype_name(32), "BF16");
	assert_string_equal(summary_ftype_name(38), "MXFP4 MoE");
	assert_null(summary_ftype_name(4));     /* removed */
	assert_null(summary_ftype_name(33));    /* removed */
	assert_null(summary_ftype_name(1024));  /* LLAMA_FTYPE_GUESSED is never stored */
}

static void test_hand_built(void **state)
{
	(void)state;
	/* no architecture, an unknown file type, a per-layer head count, and tensors of
	 * more unknown type ids than the table has rows for */
	static struct bytes ft, heads, arch;
	ft.n = heads.n = arch.n = 0;
	put_le(&ft, 99, 4);
	put_str(&arch, "x", 1);
	put_le(&heads, 4, 4);
	put_le(&heads, 8, 4);
	struct gguf_kv kv[3] = {
		{ { "general.file_type", 17 }, val(GGUF_TYPE_UINT32, &ft) },
		{ { "general.architecture", 20 }, val(GGUF_TYPE_STRING, &arch) },
		{ { "x.attention.head_count", 22 }, arr(GGUF_TYPE_INT32, 2, &heads) },
	};
	static struct gguf_tensor t[12];
	static struct model_tensor mt[12];
	for (uint32_t i = 0; i < 12; i++) {
		/* ids 100..110 unknown (11 distinct), and one f16 */
		t[i] = (struct gguf_tensor){ .n_dims = 1, .ne = { 10, 1, 1, 1 }, .n_elements = 10,
		                             .type = i == 11 ? 1 : 100 + i, .size = 20 };
		mt[i] = (struct model_tensor){ &t[i], 0 };
	}
	/* a model made by hand (model_source.h): its file name is its file's */
	const struct gguf_file g = { .version = 2, .n_kv = 3, .kv = kv, .n_tensors = 12,
	                             .tensors = t };
	const struct model_file file = { .path = "h\n.gguf", .gguf = &g };
	const struct model_desc d = { .path = "h.gguf", .meta = &g, .tensors = mt,
	                              .n_tensors = 12, .files = &file, .n_files = 1 };
	struct ggufs_model *m = model_new(&d);
	assert_non_null(m);
	size_t len;
	char *txt = render_all(summary_fn, m, &len);
	expect_line(txt, "file:             h\\n.gguf");
	expect_line(txt, "name:             n/a");
	expect_line(txt, "file type:        unknown (99)");
	expect_line(txt, "parameters:       0.12 K");
	expect_line(txt, "heads:            [4, 8]");
	expect_line(txt, "kv heads:         n/a");
	expect_line(txt, "kv cache (f16):   n/a");   /* no x.block_count */
	expect_line(txt, "vocabulary size:  n/a");
	expect_line(txt, "chat template:    no");
	/* f16 first, then 8 unknown ids by first appearance, then the other 3 together */
	assert_non_null(strstr(txt, "\nf16 "));
	for (int i = 0; i < 8; i++) {
		char row[16];
		snprintf(row, sizeof row, "\ntype%d ", 100 + i);
		assert_non_null(strstr(txt, row));
	}
	assert_null(strstr(txt, "\ntype108 "));
	const char *other = strstr(txt, "\nother ");
	assert_non_null(other);
	unsigned long long c, b;
	assert_int_equal(sscanf(other, "\nother %llu %llu", &c, &b), 2);
	assert_true(c == 3 && b == 60);
	free(txt);
	model_close(m);
}

/* The KV figure from per-layer KV head counts and key and value lengths of their own,
 * and nothing when a count does not match the layers or a product overflows. */
static void test_kv_bytes(void **state)
{
	(void)state;
	static struct bytes arch, layers, heads, kdim, vdim;
	arch.n = layers.n = heads.n = kdim.n = vdim.n = 0;
	put_str(&arch, "q", 1);
	put_le(&layers, 3, 4);
	put_le(&heads, 1, 4);
	put_le(&heads, 4, 4);
	put_le(&heads, 0, 4);
	put_le(&kdim, 128, 4);
	put_le(&vdim, 64, 8);
	struct gguf_kv kv[5] = {
		{ { "general.architecture", 20 }, val(GGUF_TYPE_STRING, &arch) },
		{ { "q.block_count", 13 }, val(GGUF_TYPE_UINT32, &layers) },
		{ { "q.attention.head_count_kv", 25 }, arr(GGUF_TYPE_INT32, 3, &heads) },
		{ { "q.attention.key_length", 22 }, val(GGUF_TYPE_UINT32, &kdim) },
		{ { "q.attention.value_length", 24 }, val(GGUF_TYPE_UINT64, &vdim) },
	};
	struct gguf_file f = { .version = 3, .n_kv = 5, .kv = kv };
	uint64_t per_token = 0;
	assert_true(summary_kv_bytes(&f, &per_token));
	assert_int_equal(per_token, (1 + 4 + 0) * (128 + 64) * 2);
	kv[2].value.count = 2;   /* two counts for three layers */
	assert_false(summary_kv_bytes(&f, &per_token));
	kv[2].value.count = 3;
	vdim.n = 0;
	put_le(&vdim, UINT64_MAX / 2, 8);   /* the sum of the dims overflows in the product */
	kv[4] = (struct gguf_kv){ { "q.attention.value_length", 24 }, val(GGUF_TYPE_UINT64, &vdim) };
	assert_false(summary_kv_bytes(&f, &per_token));
}

UNIT_TESTS(cmocka_unit_test(test_tinyllama),
           cmocka_unit_test(test_count_text),
           cmocka_unit_test(test_ftype_names),
           cmocka_unit_test(test_hand_built),
           cmocka_unit_test(test_kv_bytes))
