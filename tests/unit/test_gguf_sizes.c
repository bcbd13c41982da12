/* The GGUF parser (gguf.c) against counts and lengths that lie: a file cut at every
 * byte, and key, tensor, string and array counts and lengths far past what the file
 * holds, each refused with one line before anything that large is allocated. */
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
	one_key(&w, "k", GGUF_TYPE_STRING);
	gw_u64(&w, big);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "metadata key 'k' claims 1152921504606846976 bytes", NULL);
	gw_free(&w);

	/* UINT64_MAX: position + length would wrap */
	one_key(&w, "k", GGUF_TYPE_STRING);
	gw_u64(&w, UINT64_MAX);
	gw_fill(&w, 'x', 64);
	expect_fail(&w, "metadata key 'k' claims 18446744073709551615 bytes", NULL);
	gw_free(&w);

	/* a string in an array */
	one_key(&w, "k", GGUF_TYPE_ARRAY);
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
			one_key(&w, "k", GGUF_TYPE_ARRAY);
			gw_array(&w, elem_types[e], counts[i]);
			gw_fill(&w, 0, 64);
			expect_fail(&w, want, NULL);
			gw_free(&w);
			/* inside an array of arrays */
			one_key(&w, "k", GGUF_TYPE_ARRAY);
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

UNIT_TESTS(cmocka_unit_test(test_truncation_everywhere),
           cmocka_unit_test(test_huge_counts),
           cmocka_unit_test(test_huge_strings),
           cmocka_unit_test(test_huge_arrays))
