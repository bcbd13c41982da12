/* Dates as web APIs write them: ISO 8601 in UTC (S3's LastModified
 * "2024-04-18T09:54:19.000Z", the hub's lastModified and lastCommit dates). The text is
 * a server's: nothing past its end is read, and a date that is not one is "none". And
 * the same form written, for the log file's lines and user.ggufs.last_error. */
#ifndef GGUFS_ISO_TIME_H
#define GGUFS_ISO_TIME_H

#include <time.h>

/* The seconds since 1970 of s ("YYYY-MM-DDTHH:MM:SS", then anything: fractions, 'Z'),
 * read as UTC; 0 when s is NULL or does not start so, a field is out of its range, or
 * the date is before 1970. */
time_t iso_time_parse(const char *s);

/* Bytes iso_time_format writes at the most, NUL included. */
#define ISO_TIME_BUF 24

/* "2026-12-01T15:30:00Z": t in UTC, into buf, which it returns. A t gmtime cannot break
 * down (a year past 2^31) is written as its decimal seconds instead: never an error. */
const char *iso_time_format(time_t t, char buf[ISO_TIME_BUF]);

#endif
