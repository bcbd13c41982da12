/* The GGUF parser (gguf.c) on names: duplicate keys and tensor names refused (whatever
 * the type, empty names too, prefixes not), and names of any length read whole, an
 * error about a long one kept to one short line. */
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

UNIT_TESTS(cmocka_unit_test(test_duplicates),
           cmocka_unit_test(test_name_lengths))
