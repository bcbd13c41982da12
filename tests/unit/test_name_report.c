/* The reports of --check and --diff of names (lib/8-mount/name_report.h): a model's
 * report as text and JSON with its unhealthy count, a list's item that could not be had,
 * a model compared with itself, a missing one named, and the progress told as lines then
 * ended. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "name_report.h"

#define TINY TEST_DATA "/tinyllama-q4km.gguf"

/* The progress told: lines, and ends (line NULL) after the last of them. */
static unsigned n_lines, n_ends;
static char last_line[256];

static void keep_progress(void *arg, const char *line)
{
	(void)arg;
	if (!line) {
		n_ends++;
		return;
	}
	n_lines++;
	snprintf(last_line, sizeof last_line, "%s", line);
}

static const struct open_name_opts names = { .timeout = 1, .cache_dir = "none" };

static void test_check(void **state)
{
	(void)state;
	const char *const operands[] = { TINY, TEST_DATA "/no-such.gguf" };
	char err[GGUF_ERR_MAX], *text;
	size_t len;
	uint64_t unhealthy = 99;
	struct name_list l;
	assert_true(name_list_make(&l, operands, 2, &names, err));
	assert_int_equal(l.n, 2);
	n_ends = 0;
	struct name_report_opts r = { .progress = keep_progress };
	assert_true(name_report_check(&l, 0, &names, &r, &text, &len, &unhealthy, err));
	assert_int_equal(unhealthy, 0);
	assert_int_equal(strlen(text), len);
	assert_non_null(strstr(text, "healthy"));
	free(text);
	assert_int_equal(n_ends, 1);
	r.json = true;
	r.progress = NULL;
	assert_true(name_report_check(&l, 0, &names, &r, &text, &len, &unhealthy, err));
	assert_int_equal(text[0], '{');
	assert_non_null(strstr(text, "\"tensors\""));
	free(text);
	assert_false(name_report_check(&l, 1, &names, &r, &text, &len, &unhealthy, err));
	assert_non_null(strstr(err, "no-such.gguf"));
	name_list_free(&l);
}

static void test_diff(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], *text;
	size_t len;
	n_lines = n_ends = 0;
	const struct name_report_opts r = { .progress = keep_progress };
	assert_true(name_report_diff(TINY, TINY, &names, &r, &text, &len, err));
	assert_int_equal(strlen(text), len);
	assert_true(len > 0);
	free(text);
	assert_int_equal(n_ends, 1);
	if (n_lines)
		assert_memory_equal(last_line, "comparing: ", 11);
	assert_false(name_report_diff(TINY, TEST_DATA "/no-such.gguf", &names, &r, &text, &len,
	                              err));
	assert_non_null(strstr(err, "no-such.gguf"));
	assert_false(name_report_diff(TEST_DATA "/gone.gguf", TINY, &names, &r, &text, &len, err));
	assert_non_null(strstr(err, "gone.gguf"));
	assert_int_equal(n_ends, 1);   /* no scan, no end */
}

UNIT_TESTS(cmocka_unit_test(test_check), cmocka_unit_test(test_diff))
