/* The GGUF parser (gguf.c) against tensor infos: dimension counts and sizes that
 * overflow or exceed their bounds, empty tensors, type ids it does not know (kept, raw
 * only) and a block type's size rule. */
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
#include "gguf_expect.h"
#include "gguf_writer.h"

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

UNIT_TESTS(cmocka_unit_test(test_too_many_dims),
           cmocka_unit_test(test_dims_overflow),
           cmocka_unit_test(test_dims_too_large),
           cmocka_unit_test(test_zero_dims),
           cmocka_unit_test(test_unknown_type_ids),
           cmocka_unit_test(test_type_q5_1))
