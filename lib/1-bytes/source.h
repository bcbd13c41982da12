/* Bytes of a file at an offset: the one interface through which the layers above read
 * a shard's bytes, without asking where they come from. Two implementations:
 *   - a local file (local.c): mapped, read in place (zero-copy) under the SIGBUS guard,
 *     after checking that the file still holds the bytes (it may shrink while mounted);
 *   - a remote file (remote/remote.c): fetched by range requests through its caches.
 * Callers keep every range inside the file's size at open; the file's own checks
 * (gone, changed) are the source's. A read that fails says why where it fails: into
 * why (char[GGUF_ERR_MAX]; NULL when the caller does not want it), one line that names
 * the file and what went wrong ("PATH: the file shrank from A to B bytes ...", "URL:
 * HTTP 503"), or "" when the errno says it all. */
#ifndef GGUFS_SOURCE_H
#define GGUFS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"

struct source;

/* Bytes [off, off + len) of a file. */
struct source_range {
	uint64_t off, len;
};

/* Called on bytes [off, off + len) of a source where they lie: in a local file's
 * mapping with the SIGBUS guard armed (so it must neither lock nor allocate: a page that
 * has gone jumps out of it), else in the caller's buffer once read into it. */
typedef void (*source_visit_fn)(void *ctx, const uint8_t *p, uint64_t len);

struct source_ops {
	/* Copies bytes [off, off + len) of the file (inside its size) into buf: 0, or
	 * -errno (-EIO when they cannot be had, or the file changed since it was opened)
	 * with why (see above). */
	int (*read)(struct source *src, uint64_t off, uint64_t len, void *buf,
	            char why[GGUF_ERR_MAX]);
	void (*close)(struct source *src);
	/* The rest only for a mapped file (NULL otherwise: a fetched file never shrinks,
	 * and a changed one fails its reads). visit: fn on [off, off + len) in place, 0 or
	 * -EIO when those bytes have gone. holds: 0 when the file still holds its first end
	 * bytes, else -EIO. Both with why. span: the fd, and how many of the len bytes at
	 * off the file holds now. */
	int (*visit)(struct source *src, uint64_t off, uint64_t len, source_visit_fn fn,
	             void *ctx, char why[GGUF_ERR_MAX]);
	int (*holds)(struct source *src, uint64_t end, char why[GGUF_ERR_MAX]);
	void (*span)(struct source *src, uint64_t off, uint64_t len, int *fd, uint64_t *count);
	/* Optional, for a fetched file: a sequential reader of prev (a source of the same
	 * kind) goes on at byte off of this one, as a merged model.gguf runs from one shard
	 * into the next; the first read there is then taken as that reader's next, and
	 * read-ahead goes on at prev's pace instead of starting small. */
	void (*expect)(struct source *src, uint64_t off, struct source *prev);
	/* Optional, for a fetched file: from now on its reader reads only bytes inside the
	 * n ranges (sorted, not overlapping), in order; read-ahead fetches nothing outside
	 * them and goes from the end of one to the start of the next as one sequential run.
	 * false (nothing changed) when out of memory. */
	bool (*want)(struct source *src, const struct source_range *ranges, size_t n);
};

struct source {
	const struct source_ops *ops;
};

/* Copies bytes [off, off + len) into buf: 0 or -errno with why (see source_ops.read). */
static inline int source_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                              char why[GGUF_ERR_MAX])
{
	if (why)
		why[0] = 0;
	return src->ops->read(src, off, len, buf, why);
}

/* Closes the file and frees the source with what it holds (a local file's mapping, a
 * remote file's header prefix); NULL is ignored. */
static inline void source_close(struct source *src)
{
	if (src)
		src->ops->close(src);
}

/* True when the source is a mapping that source_visit reads in place: no buffer needed,
 * and a visit of any length costs no memory. */
static inline bool source_mapped(const struct source *src)
{
	return src->ops->visit != NULL;
}

/* Calls fn once on bytes [off, off + len) (inside the file): in place where the source
 * is mapped, else on buf (len bytes) once they are read into it. For a scan that needs
 * no copy of a local file's bytes. 0, or -errno with why, fn perhaps part way through. */
static inline int source_visit(struct source *src, uint64_t off, uint64_t len, void *buf,
                               source_visit_fn fn, void *ctx, char why[GGUF_ERR_MAX])
{
	if (why)
		why[0] = 0;
	if (src->ops->visit)
		return src->ops->visit(src, off, len, fn, ctx, why);
	int r = src->ops->read(src, off, len, buf, why);
	if (r < 0)
		return r;
	fn(ctx, (const uint8_t *)buf, len);
	return 0;
}

/* 0 when the file still holds its first end bytes, else -EIO with why: before bytes
 * of the mapping are touched other than through read or visit (a header being
 * rendered). */
static inline int source_holds(struct source *src, uint64_t end, char why[GGUF_ERR_MAX])
{
	if (why)
		why[0] = 0;
	return src->ops->holds ? src->ops->holds(src, end, why) : 0;
}

/* Tells src that the sequential reader of prev goes on at its byte off (source_ops.
 * expect); nothing for a source without read-ahead. */
static inline void source_expect(struct source *src, uint64_t off, struct source *prev)
{
	if (src->ops->expect && prev->ops == src->ops)
		src->ops->expect(src, off, prev);
}

/* Tells src that its reader reads only inside ranges (source_ops.want), so that a scan
 * of some tensors fetches no byte of the others: true, or false out of memory (the
 * read-ahead then goes on as before). Nothing for a source without read-ahead. */
static inline bool source_want(struct source *src, const struct source_range *ranges, size_t n)
{
	return src->ops->want ? src->ops->want(src, ranges, n) : true;
}

/* Where bytes [off, off + len) lie for a zero-copy reply: the fd, and how many of them
 * the file holds now (fewer when it shrank). False for a source that is not a local
 * file (read it with source_read). */
static inline bool source_span(struct source *src, uint64_t off, uint64_t len, int *fd,
                               uint64_t *count)
{
	if (!src->ops->span)
		return false;
	src->ops->span(src, off, len, fd, count);
	return true;
}

#endif
