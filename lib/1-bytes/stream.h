/* A file read once, front to back, from a server that ignores Range requests: one plain
 * GET whose body flows through a window of STREAM_WINDOW bytes, behind source.h. It is
 * for a reader that goes through the file in order (`ggufs --check URL`): a read waits
 * for its bytes to arrive; the body is held back (no byte more is taken from the
 * connection) while the window is full of bytes at or after the reader's last read, so
 * memory stays bounded whatever the file's size, and only a read of bytes the window has
 * already let go fails (-EIO). The first STREAM_PREFIX_MAX bytes can be kept apart for
 * the header (stream_prefix). */
#ifndef GGUFS_STREAM_H
#define GGUFS_STREAM_H

#include <stdint.h>

#include "errline.h"
#include "source.h"

#define STREAM_WINDOW (64u << 20)
#define STREAM_PREFIX_MAX (64u << 20)   /* the header can be no larger than the window */

struct stream_opts {
	const char *token;    /* a bearer token for the URL's own host, or NULL */
	const char *cafile;   /* an extra CA file, or NULL */
	unsigned timeout;     /* seconds without a byte before giving up; 0: 30 */
};

/* Sends the GET for url (http or https; redirects followed, to http or https only, a
 * token never sent to another host) and waits for the answer's headers: a 200 with a
 * Content-Length and no Content-Encoding. Returns the source with *size, or NULL with
 * err ("HTTP 404", "no Content-Length: ...", the connection's failure). */
struct source *stream_open(const char *url, const struct stream_opts *o, uint64_t *size,
                           char err[GGUF_ERR_MAX]);

/* The file's first n bytes (n <= STREAM_PREFIX_MAX and within the size), kept until the
 * source is closed: a pointer to them, or NULL with err when they cannot be had (the
 * transfer failed, or a read went past them first). */
const uint8_t *stream_prefix(struct source *src, uint64_t n, char err[GGUF_ERR_MAX]);

/* Why the stream failed, once it has (a read then gave -EIO): "HTTP 503", "the
 * connection ended at byte N of M", ...; NULL while it has not. */
const char *stream_error(struct source *src);

#endif
