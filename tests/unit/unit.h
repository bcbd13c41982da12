/* What every unit test shares: one main (unit_main.c) that takes the test filter and
 * then calls the test's own unit_main. Run one case alone by its name (a glob, as
 * cmocka_set_test_filter matches it):
 *     meson test -C build unit-gguf_values --test-args=--filter=test_bad_magic
 *     GGUFS_TEST_FILTER='test_*prefix*' meson test -C build unit-gguf_prefix */
#ifndef GGUFS_TEST_UNIT_H
#define GGUFS_TEST_UNIT_H

/* The test's own main: its cmocka group(s), run with the filter set. argv holds the
 * test's arguments without --filter=. Returns the exit status (77: skipped). */
int unit_main(int argc, char **argv);
/* unit_main's parameters, for a test that takes no arguments. */
#define UNIT_ARGS int argc __attribute__((unused)), char **argv __attribute__((unused))
/* The unit_main of a test that is one group of cases (cmocka_unit_test(...), ...) with
 * no group setup and no arguments. */
#define UNIT_TESTS(...) \
	int unit_main(UNIT_ARGS) \
	{ \
		const struct CMUnitTest tests[] = { __VA_ARGS__ }; \
		return cmocka_run_group_tests(tests, NULL, NULL); \
	}
/* The same for a group whose cases write into scratch_dir (scratch_dir.h), made before
 * the first case and removed after the last. */
#define UNIT_TESTS_IN_SCRATCH(...) \
	int unit_main(UNIT_ARGS) \
	{ \
		const struct CMUnitTest tests[] = { __VA_ARGS__ }; \
		return cmocka_run_group_tests(tests, scratch_dir_make, scratch_dir_remove); \
	}

#endif
