/* Dates as web APIs write them (lib/0-log/iso_time.h): read from a server's text, with
 * what is not a date read as "none" (0), and written for the log file and
 * user.ggufs.last_error, which read back as the same second. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "unit.h"

#include "iso_time.h"

static void test_parse(void **state)
{
	(void)state;
	assert_true(iso_time_parse("1970-01-01T00:00:00Z") == 0);
	assert_true(iso_time_parse("2024-04-18T09:54:19.000Z") == 1713434059);
	assert_true(iso_time_parse("2024-04-18t09:54:19") == 1713434059);
	assert_true(iso_time_parse("2000-02-29T23:59:59+00:00") == 951868799);
	static const char *const none[] = {
		NULL, "", "2024-04-18", "2024-04-18T09:54", "2024-04-18 09:54:19",
		"1969-12-31T23:59:59Z", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z",
		"2024-01-32T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z",
		"2024-01-01T00:00:61Z", "2024-1-01T00:00:00Z", "x024-01-01T00:00:00Z",
	};
	for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
		assert_true(iso_time_parse(none[i]) == 0);
}

static void test_format(void **state)
{
	(void)state;
	char buf[ISO_TIME_BUF];
	assert_string_equal(iso_time_format(0, buf), "1970-01-01T00:00:00Z");
	assert_ptr_equal(iso_time_format(1713434059, buf), buf);
	assert_string_equal(buf, "2024-04-18T09:54:19Z");
	assert_string_equal(iso_time_format(951868799, buf), "2000-02-29T23:59:59Z");
	/* what is written reads back as the same second, up to the last second of 9999 */
	for (time_t t = 1; t < 253402300800; t = t * 3 + 7)
		assert_true(iso_time_parse(iso_time_format(t, buf)) == t);
	assert_true(iso_time_parse(iso_time_format(253402300799, buf)) == 253402300799);
	/* a time gmtime cannot break down is written as its seconds, within the buffer */
	memset(buf, 0x55, sizeof buf);
	iso_time_format((time_t)INT64_MAX, buf);
	assert_true(memchr(buf, '\0', sizeof buf) != NULL);
	assert_string_equal(buf, "9223372036854775807");
}

UNIT_TESTS(cmocka_unit_test(test_parse),
           cmocka_unit_test(test_format))
