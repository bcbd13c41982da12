/* Copying options that may be absent: a builder copies many such strings in a row and
 * checks once that memory sufficed, as vbytes's sticky flag does for bytes. */
#ifndef GGUFS_COPY_OR_NULL_H
#define GGUFS_COPY_OR_NULL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'ed copy of s, or NULL for NULL; out of memory, NULL and *ok false (*ok is
 * never set true, so one flag serves a whole run of copies). */
static inline char *copy_or_null(const char *s, bool *ok)
{
	char *d = s ? strdup(s) : NULL;
	if (s && !d)
		*ok = false;
	return d;
}

#endif
