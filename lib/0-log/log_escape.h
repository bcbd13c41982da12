/* Lines for people: what ggufs says in its event log and on stderr names files, keys,
 * tensors and URLs that a hostile model or server chose. Such a line is escaped as a
 * whole before it goes anywhere, by the rule that --check, stats.tsv and metadata arrays
 * use for strings: \\ for a backslash, \n \r \t, every other byte below 0x20 and 0x7f as
 * \xHH (lowercase hex), every other byte unchanged. A line can then neither end early
 * (a forged log line after a newline) nor reach a terminal as a control sequence (ESC,
 * OSC, BEL). FUSE-free. */
#ifndef GGUFS_LOG_ESCAPE_H
#define GGUFS_LOG_ESCAPE_H

#include <stddef.h>

/* in[0..len) escaped into out (size > 0 bytes, NUL-terminated; cut before the first
 * byte or escape that would not fit, never inside an escape). Returns strlen(out). */
size_t log_escape(char *out, size_t size, const char *in, size_t len);

/* One line on stderr: "ggufs: " and the printf-style line escaped, then a newline. The
 * line is given without its newline and cut at LOG_ERR_LINE_MAX bytes before escaping. */
#define LOG_ERR_LINE_MAX 8192
void log_errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
