/* Paths as text (lib/0-log/path.h): made absolute against the working directory (the
 * edits file, which a daemon that moves to "/" still writes), and one within another
 * (a mount point in a library's folder, an edits file in the mount point). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
	static const struct { const char *path, *dir; bool within; } cases[] = {
		{ "/a/b", "/a/b", true },    { "/a/b/c", "/a/b", true }, { "/a/b/c", "/", true },
		{ "/", "/", true },          { "/a/b/c", "/a/b/", true },
		{ "/a/bc", "/a/b", false },  { "/a", "/a/b", false },    { "/x/b", "/a/b", false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (path_within(cases[i].path, cases[i].dir) != cases[i].within)
			fail_msg("'%s' in '%s': not %d", cases[i].path, cases[i].dir, cases[i].within);
}

UNIT_TESTS(cmocka_unit_test(test_absolute), cmocka_unit_test(test_within))
