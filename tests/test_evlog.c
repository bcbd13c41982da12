/* The event log: each cause said once, repeats counted and summed up at most once per
 * EVLOG_SUMMARY_S (on a test clock) or at flush, the least recently seen cause forgotten
 * first, and lines to the sink the caller set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "evlog.h"

static double fake_now;
static char lines[2 * EVLOG_KEYS][EVLOG_LINE_MAX + 64];
static int n_lines;

static double fake_clock(void)
{
	return fake_now;
}

/* The sink: every line kept. */
static void keep(void *arg, enum evlog_level level, const char *line)
{
	(void)arg;
	(void)level;
	if (n_lines < 2 * EVLOG_KEYS)
		snprintf(lines[n_lines++], sizeof lines[0], "%s", line);
}

static int setup(void **state)
{
	(void)state;
	evlog_reset();
	evlog_set_clock(fake_clock);
	evlog_set_sink(keep, NULL);
	fake_now = 1000;
	n_lines = 0;
	return 0;
}

static void test_once_then_counted(void **state)
{
	(void)state;
	evlog(EVLOG_ERR, "k", "http://h/m.gguf: bytes 0-9: HTTP %d", 503);
	for (int i = 0; i < 40; i++) {
		fake_now += 1;
		evlog(EVLOG_ERR, "k", "http://h/m.gguf: bytes %d-9: HTTP 503", i);
	}
	assert_int_equal(n_lines, 1);
	assert_string_equal(lines[0], "http://h/m.gguf: bytes 0-9: HTTP 503");
	fake_now += 20;   /* 60 s after it was said: the next repeat sums up */
	evlog(EVLOG_ERR, "k", "again");
	assert_int_equal(n_lines, 2);
	assert_string_equal(lines[1], "http://h/m.gguf: bytes 0-9: HTTP 503 (again 41 times in 60 s)");
	evlog(EVLOG_ERR, "k", "again");   /* within the next minute: counted */
	assert_int_equal(n_lines, 2);
	fake_now += 5;
	evlog_flush();
	assert_int_equal(n_lines, 3);
	assert_string_equal(lines[2], "http://h/m.gguf: bytes 0-9: HTTP 503 (again 1 time in 5 s)");
	evlog_flush();   /* nothing left to say */
	assert_int_equal(n_lines, 3);
}

static void test_keys_apart(void **state)
{
	(void)state;
	evlog(EVLOG_ERR, NULL, "a");
	evlog(EVLOG_WARNING, NULL, "b");
	evlog(EVLOG_ERR, NULL, "a");
	evlog(EVLOG_ERR, "c", "c1");
	evlog(EVLOG_ERR, "c", "c2");
	assert_int_equal(n_lines, 3);
	assert_string_equal(lines[0], "a");
	assert_string_equal(lines[1], "b");
	assert_string_equal(lines[2], "c1");
}

static void test_oldest_cause_forgotten(void **state)
{
	(void)state;
	/* key 0 repeated, then EVLOG_KEYS new keys: key 0, the least recently seen, goes
	 * (its repeat summed up first) and is new again when it comes back */
	evlog(EVLOG_ERR, "key 0", "line 0");
	fake_now += 1;
	evlog(EVLOG_ERR, "key 0", "line 0");
	for (int i = 1; i <= EVLOG_KEYS; i++) {
		fake_now += 1;
		char key[16];
		snprintf(key, sizeof key, "key %d", i);
		evlog(EVLOG_ERR, key, "line %d", i);
	}
	assert_int_equal(n_lines, 1 + 1 + EVLOG_KEYS);
	assert_string_equal(lines[EVLOG_KEYS], "line 0 (again 1 time in 65 s)");
	fake_now += 1;
	evlog(EVLOG_ERR, "key 0", "line 0");
	assert_string_equal(lines[n_lines - 1], "line 0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_once_then_counted, setup),
		cmocka_unit_test_setup(test_keys_apart, setup),
		cmocka_unit_test_setup(test_oldest_cause_forgotten, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
