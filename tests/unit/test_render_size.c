/* Byte counts for people (lib/5-render/render_size.h): three significant figures in
 * powers of 1000, and the progress line of --check and --diff made of them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit.h"

#include "render_size.h"

static void test_sizes(void **state)
{
	(void)state;
	char b[RENDER_SIZE_MAX];
	assert_string_equal(render_size(0, b), "0 bytes");
	assert_string_equal(render_size(999, b), "999 bytes");
	assert_string_equal(render_size(14600, b), "14.6 KB");
	assert_string_equal(render_size(3.92e6, b), "3.92 MB");
	assert_string_equal(render_size(638e6, b), "638 MB");
	assert_string_equal(render_size(1.52e9, b), "1.52 GB");
	assert_string_equal(render_size(2e18, b), "2000 PB");
}

static void test_progress(void **state)
{
	(void)state;
	char line[RENDER_PROGRESS_MAX];
	assert_string_equal(render_progress("checking", 1520000000, 3040000000, 2.0, line,
	                                    sizeof line),
	                    "checking: 1.52 GB / 3.04 GB ( 50%), 760 MB/s");
	/* nothing to do is all done; no time yet, no rate */
	assert_string_equal(render_progress("comparing", 0, 0, 0, line, sizeof line),
	                    "comparing: 0 bytes / 0 bytes (100%), 0 bytes/s");
	/* a short buffer is cut, not overrun */
	char small[12];
	assert_string_equal(render_progress("checking", 1, 2, 1, small, sizeof small),
	                    "checking: 1");
}

UNIT_TESTS(cmocka_unit_test(test_sizes), cmocka_unit_test(test_progress))
