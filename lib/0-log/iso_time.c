#include "iso_time.h"

#include <stdbool.h>
#include <stdio.h>

/* n decimal digits of s into *v: false when one is not a digit (or the text ends). */
static bool digits(const char *s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		*v = *v * 10 + (s[i] - '0');
	}
	return true;
}

time_t iso_time_parse(const char *s)
{
	/* fixed places: YYYY-MM-DDTHH:MM:SS (a NUL fails the first check that meets it) */
	static const struct { int at, n; } f[6] = { { 0, 4 }, { 5, 2 }, { 8, 2 },
	                                            { 11, 2 }, { 14, 2 }, { 17, 2 } };
	static const char seps[] = "--T::";
	int v[6];
	if (!s)
		return 0;
	for (int i = 0; i < 6; i++) {
		if (!digits(s + f[i].at, f[i].n, &v[i]))
			return 0;
		if (i < 5 && s[f[i].at + f[i].n] != seps[i] &&
		    !(i == 2 && s[f[i].at + f[i].n] == 't'))
			return 0;
	}
	if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31 || v[3] > 23 ||
	    v[4] > 59 || v[5] > 60)
		return 0;
	struct tm tm = { .tm_year = v[0] - 1900, .tm_mon = v[1] - 1, .tm_mday = v[2],
	                 .tm_hour = v[3], .tm_min = v[4], .tm_sec = v[5] };
	time_t t = timegm(&tm);
	return t < 0 ? 0 : t;
}

const char *iso_time_format(time_t t, char buf[ISO_TIME_BUF])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(buf, ISO_TIME_BUF, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, ISO_TIME_BUF, "%lld", (long long)t);
	return buf;
}
