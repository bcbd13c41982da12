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
 * a group setup and teardown (cmocka's, run before the first case and after the last;
 * NULL: none) and no arguments. */
#define UNIT_TESTS_IN_GROUP(setup, teardown, ...) \
	int unit_main(UNIT_ARGS) \
	{ \
		const struct CMUnitTest tests[] = { __VA_ARGS__ }; \
		return cmocka_run_group_tests(tests, setup, teardown); \
	}
/* The same with no group setup or teardown. */
#define UNIT_TESTS(...) UNIT_TESTS_IN_GROUP(NULL, NULL, __VA_ARGS__)
/* The same for a group whose cases write into scratch_dir (scratch_dir.h), made before
 * the first case and removed after the last. */
#define UNIT_TESTS_IN_SCRATCH(...) \
	UNIT_TESTS_IN_GROUP(scratch_dir_make, scratch_dir_remove, __VA_ARGS__)

#endif
