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

#include "unit.h"

#include "evlog.h"
#include "log_escape.h"

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

/* A line that names what a hostile model chose (a newline and a forged line after it,
 * ESC, OSC, BEL, DEL, a backslash) reaches the sink as one line of printable bytes, with
 * --check's escapes; bytes 0x80 and up (UTF-8) unchanged. */
static void test_line_escaped(void **state)
{
	(void)state;
	evlog(EVLOG_ERR, NULL, "EIO to a read of tensors/%s", "a\n2030-01-01T00:00:00Z ggufs[1]: "
	      "/mnt: forged\r\t\x1b]0;t\x07\x1b[31m\x7f\\x0a \xc3\xa9");
	assert_int_equal(n_lines, 1);
	assert_string_equal(lines[0], "EIO to a read of tensors/a\\n2030-01-01T00:00:00Z "
	                    "ggufs[1]: /mnt: forged\\r\\t\\x1b]0;t\\x07\\x1b[31m\\x7f\\\\x0a "
	                    "\xc3\xa9");
}

/* log_escape: every byte below 0x20 and 0x7f as \xHH or its letter; a cut never splits
 * an escape; NUL bytes inside the given length are escaped too. */
static void test_escape_bytes(void **state)
{
	(void)state;
	char out[64];
	assert_int_equal(log_escape(out, sizeof out, "\0\x01\x1f ~\x7f", 6), 18);
	assert_string_equal(out, "\\x00\\x01\\x1f ~\\x7f");
	assert_int_equal(log_escape(out, 5, "ab\ncd", 5), 4);   /* "ab\\n" and its NUL fill 5 */
	assert_string_equal(out, "ab\\n");
	assert_int_equal(log_escape(out, 5, "ab\x1b", 3), 2);   /* \x1b needs 4 */
	assert_string_equal(out, "ab");
	assert_int_equal(log_escape(out, 1, "a", 1), 0);
	assert_string_equal(out, "");
}

UNIT_TESTS(
	cmocka_unit_test_setup(test_once_then_counted, setup),
	cmocka_unit_test_setup(test_line_escaped, setup),
	cmocka_unit_test(test_escape_bytes),
	cmocka_unit_test_setup(test_keys_apart, setup),
	cmocka_unit_test_setup(test_oldest_cause_forgotten, setup))
