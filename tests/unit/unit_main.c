/* The one main of every unit test: a test filter from --filter=PATTERN (any argument)
 * or $GGUFS_TEST_FILTER (the argument wins), handed to cmocka, so that one case runs
 * alone; the other arguments go to the test's unit_main. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

int main(int argc, char **argv)
{
	const char *filter = getenv("GGUFS_TEST_FILTER");
	int n = 0;
	for (int i = 0; i < argc; i++) {
		if (i > 0 && strncmp(argv[i], "--filter=", 9) == 0)
			filter = argv[i] + 9;
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return unit_main(n, argv);
}
