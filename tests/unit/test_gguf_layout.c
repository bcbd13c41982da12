/* The GGUF parser (gguf.c) on where the data lies: general.alignment taken and
 * refused, tensor offsets misaligned or past the end, data cut short, and tensors that
 * overlap (whatever the order of their infos). */
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
	one_key(&w, "general.alignment", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_UINT32, 1);
	gw_u32(&w, 32);
	expect_fail(&w, "general.alignment has type array, not uint32", NULL);
	gw_free(&w);
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

UNIT_TESTS(cmocka_unit_test(test_alignment),
           cmocka_unit_test(test_alignment_bad),
           cmocka_unit_test(test_offset_misaligned),
           cmocka_unit_test(test_offset_past_end),
           cmocka_unit_test(test_data_past_end),
           cmocka_unit_test(test_overlap),
           cmocka_unit_test(test_overlap_order))
