/* Paths as text (lib/0-log/path.h): made absolute against the working directory (the
 * edits file, which a daemon that moves to "/" still writes), and one within another
 * (a mount point in a library's folder, an edits file in the mount point). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "path.h"

static void test_absolute(void **state)
{
	(void)state;
	char *p = path_absolute("/etc/edits.txt");
	assert_string_equal(p, "/etc/edits.txt");
	free(p);
	char *cwd = getcwd(NULL, 0), want[4096];
	assert_non_null(cwd);
	snprintf(want, sizeof want, "%s/sub/edits.txt", cwd);
	p = path_absolute("sub/edits.txt");
	assert_string_equal(p, want);
	free(p);
	/* "." stays as given: nothing is resolved */
	snprintf(want, sizeof want, "%s/./e", cwd);
	p = path_absolute("./e");
	assert_string_equal(p, want);
	free(p);
	free(cwd);
}

static void test_within(void **state)
{
	(void)state;
	assert_true(path_within("/a/b", "/a/b"));
	assert_true(path_within("/a/b/c", "/a/b"));
	assert_true(path_within("/a/b/c", "/"));
	assert_true(path_within("/", "/"));
	assert_true(path_within("/a/b/c", "/a/b/"));
	assert_false(path_within("/a/bc", "/a/b"));
	assert_false(path_within("/a", "/a/b"));
	assert_false(path_within("/x/b", "/a/b"));
}

UNIT_TESTS(cmocka_unit_test(test_absolute), cmocka_unit_test(test_within))
