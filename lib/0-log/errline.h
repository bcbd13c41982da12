/* The error line: how every layer says what went wrong. A function that can fail for a
 * reason worth telling takes a char err[GGUF_ERR_MAX] and, on failure, writes one line
 * into it (no "ggufs: PATH: " prefix, no newline); the caller that owns the context
 * prefixes it and says it once. lib/README.md (Errors) says when a function returns an
 * error line, a negative errno or sets a sticky flag instead. */
#ifndef GGUFS_ERRLINE_H
#define GGUFS_ERRLINE_H

#define GGUF_ERR_MAX 512

/* Writes one error line into err from a printf format: a long path may cut it short,
 * never overflow it. */
void gguf_errf(char err[GGUF_ERR_MAX], const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
