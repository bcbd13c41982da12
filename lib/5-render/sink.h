/* A window onto a rendered byte stream. Renderers emit their whole output in order;
 * the sink keeps the bytes that fall in [off, off + len) and counts everything, so one
 * renderer serves both sizing (buf NULL, len UINT64_MAX) and any read slice. */
#ifndef GGUFS_SINK_H
#define GGUFS_SINK_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct render_marks;

struct sink {
	char *buf;      /* receives bytes [off, off + len) of the stream; NULL to count */
	uint64_t off;
	uint64_t len;
	uint64_t pos;   /* bytes emitted so far (or, started at a mark, as if emitted) */
	struct render_marks *marks;   /* where renderers record restart points, or NULL
	                               * (render_mark.h) */
	uint64_t next_mark;           /* the pos from which the next one is due */
};

static inline struct sink sink_counter(void)
{
	return (struct sink){ .buf = NULL, .off = 0, .len = UINT64_MAX, .pos = 0 };
}

static inline struct sink sink_window(char *buf, uint64_t off, uint64_t len)
{
	return (struct sink){ .buf = buf, .off = off, .len = len, .pos = 0 };
}

/* True once nothing more that is emitted can land in the window: renderers may stop. */
static inline bool sink_done(const struct sink *s)
{
	return s->buf && s->pos >= s->off + s->len;
}

/* Bytes of the window filled so far. */
static inline uint64_t sink_filled(const struct sink *s)
{
	if (s->pos <= s->off)
		return 0;
	uint64_t n = s->pos - s->off;
	return n < s->len ? n : s->len;
}

static inline void sink_put(struct sink *s, const void *p, uint64_t n)
{
	uint64_t start = s->pos, end = s->pos + n;
	s->pos = end;
	if (!s->buf)
		return;
	uint64_t wlo = s->off, whi = s->off + s->len;
	if (end <= wlo || start >= whi)
		return;
	uint64_t lo = start > wlo ? start : wlo;
	uint64_t hi = end < whi ? end : whi;
	memcpy(s->buf + (lo - wlo), (const char *)p + (lo - start), hi - lo);
}

static inline void sink_puts(struct sink *s, const char *str)
{
	sink_put(s, str, strlen(str));
}

static inline void sink_putc(struct sink *s, char c)
{
	sink_put(s, &c, 1);
}

/* printf into the sink, for reports' short lines: the text is cut at 255 bytes. */
__attribute__((format(printf, 2, 3)))
static inline void sink_printf(struct sink *s, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > 0)
		sink_put(s, buf, (uint64_t)n < sizeof buf ? (uint64_t)n : sizeof buf - 1);
}

/* A renderer of a whole report from ctx, for sink_render_whole. */
typedef void (*sink_render_fn)(struct sink *s, const void *ctx);

/* The whole of render's stream for ctx, rendered twice (counted, then written) into a
 * buffer of its size: malloc'ed into *text (*len bytes, then a NUL). 0, or -ENOMEM. */
static inline int sink_render_whole(sink_render_fn render, const void *ctx, char **text,
                                    size_t *len)
{
	struct sink s = sink_counter();
	render(&s, ctx);
	if (s.pos >= SIZE_MAX)
		return -ENOMEM;
	char *buf = malloc((size_t)s.pos + 1);
	if (!buf)
		return -ENOMEM;
	const uint64_t n = s.pos;
	s = sink_window(buf, 0, n);
	render(&s, ctx);
	buf[n] = '\0';
	*text = buf;
	*len = (size_t)n;
	return 0;
}

#endif
