#include "log_escape.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t log_escape(char *out, size_t size, const char *in, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		char esc[5];
		size_t n = 1;
		esc[0] = (char)c;
		if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
			esc[0] = '\\';
			esc[1] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
			n = 2;
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof esc, "\\x%02x", c);
			n = 4;
		}
		if (o + n >= size)
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o] = 0;
	return o;
}

void log_errf(const char *fmt, ...)
{
	/* on the heap: the daemon's threads may call this, and 5 * 8 KiB is a lot of stack */
	char *raw = malloc(LOG_ERR_LINE_MAX), *line = malloc(4 * LOG_ERR_LINE_MAX + 1);
	if (!raw || !line) {
		free(raw);
		free(line);
		fputs("ggufs: out of memory\n", stderr);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(raw, LOG_ERR_LINE_MAX, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (n >= LOG_ERR_LINE_MAX)
		n = LOG_ERR_LINE_MAX - 1;
	log_escape(line, 4 * LOG_ERR_LINE_MAX + 1, raw, (size_t)n);
	fprintf(stderr, "ggufs: %s\n", line);
	free(raw);
	free(line);
}
