/* Every type's dequantizer against ggml's reference output (shared/vectors): one cmocka
 * test per tensor of the manifest, quant.* and bytes.* alike. ggml's output is matched
 * as ggufs(1) asks (within 1e-6, NaN for NaN); the portable scalar code's output, which
 * defines the bytes, byte for byte, NaN bit patterns included, at every level.
 *
 * Usage: test_dequant [LEVEL]. With a level (scalar, avx2, avx512) the active
 * dequantizers are forced to it, and the run is skipped (exit 77) on a CPU without it;
 * without one, whatever GGUFS_DEQUANT or the CPU chose is tested. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "dequant.h"
#include "types.h"
#include "vectors.h"

static const struct ggml_type *type_by_name(const char *name)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (t && t->name && strcmp(t->name, name) == 0)
			return t;
	}
	return NULL;
}

/* Fails the test unless got and want hold the same bytes, naming the first value
 * that differs by its bits. */
static void assert_same_bytes(const char *tensor, const float *got, const float *want,
                              size_t count)
{
	for (size_t i = 0; i < count; i++) {
		uint32_t g, w;
		memcpy(&g, &got[i], sizeof g);
		memcpy(&w, &want[i], sizeof w);
		if (g != w) {
			print_error("%s at %s: value %zu is %08x, the portable code's %08x\n", tensor,
			            dequant_level_name(dequant_active()), i, (unsigned)g, (unsigned)w);
			fail();
		}
	}
}

static void test_vector(void **state)
{
	const struct vector_row *row = *state;
	const struct ggml_type *t = type_by_name(row->type);
	assert_non_null(t);
	assert_non_null(dequant_get(t->id)->to_float);
	assert_true(t->block_elems > 0 && t->block_bytes > 0);

	size_t raw_size, count;
	uint8_t *raw = vectors_raw(row->tensor, &raw_size);
	float *want = vectors_f32(row->tensor, &count);
	assert_int_equal(count, row->ne0 * row->ne1);
	assert_int_equal(count % t->block_elems, 0);
	uint64_t nblocks = count / t->block_elems;
	assert_int_equal(raw_size, nblocks * t->block_bytes);

	/* whole tensor in one call */
	float *got = malloc(count * sizeof *got);
	dequant_get(t->id)->to_float(raw, got, nblocks);
	size_t bad = vectors_compare(got, want, count);
	if (bad)
		print_error("%s: element %zu is %.9g, want %.9g\n", row->tensor, bad - 1,
		            got[bad - 1], want[bad - 1]);
	assert_int_equal(bad, 0);

	/* the portable code's bytes */
	float *ref = malloc(count * sizeof *ref);
	dequant_get(t->id)->to_float_ref(raw, ref, nblocks);
	assert_same_bytes(row->tensor, got, ref, count);

	/* block by block from an unaligned source: the same bytes */
	uint8_t *shifted = malloc(t->block_bytes + 1);
	for (uint64_t b = 0; b < nblocks; b++) {
		memcpy(shifted + 1, raw + b * t->block_bytes, t->block_bytes);
		dequant_get(t->id)->to_float(shifted + 1, got + b * t->block_elems, 1);
	}
	assert_same_bytes(row->tensor, got, ref, count);

	free(shifted);
	free(ref);
	free(got);
	free(want);
	free(raw);
}

/* Forces the level named by arg; false when this CPU cannot run it. */
static bool force_level(const char *arg)
{
	for (int l = 0; l < DEQUANT_LEVELS; l++) {
		if (strcmp(arg, dequant_level_name((enum dequant_level)l)) == 0)
			return dequant_select((enum dequant_level)l) == (enum dequant_level)l;
	}
	fprintf(stderr, "test_dequant: unknown level '%s'\n", arg);
	exit(2);
}

/* Without a level argument: GGUFS_DEQUANT, when it names a level, must be active, or
 * the best this CPU runs when it asks for more; unset, the best must be. */
static bool env_level_ok(void)
{
	const char *want = getenv("GGUFS_DEQUANT");
	enum dequant_level expect = dequant_best();
	for (int l = 0; want && l < DEQUANT_LEVELS; l++)
		if (strcmp(want, dequant_level_name((enum dequant_level)l)) == 0 && l < (int)expect)
			expect = (enum dequant_level)l;
	if (dequant_active() != expect) {
		fprintf(stderr, "GGUFS_DEQUANT=%s: active %s, want %s\n", want ? want : "(unset)",
		        dequant_level_name(dequant_active()), dequant_level_name(expect));
		return false;
	}
	return true;
}

int unit_main(int argc, char **argv)
{
	if (argc > 1 && !force_level(argv[1])) {
		printf("skipped: this CPU does not run the %s dequantizers\n", argv[1]);
		return 77;
	}
	printf("dequantizers: %s\n", dequant_level_name(dequant_active()));
	if (argc == 1 && !env_level_ok())
		return 1;

	struct vector_row *rows;
	size_t n = vectors_manifest(&rows);
	struct CMUnitTest *tests = calloc(n, sizeof *tests);
	for (size_t i = 0; i < n; i++) {
		tests[i].name = rows[i].tensor;
		tests[i].test_func = test_vector;
		tests[i].initial_state = &rows[i];
	}
	int failed = _cmocka_run_group_tests("dequant", tests, n, NULL, NULL);
	free(tests);
	free(rows);
	return failed;
}
