/* Helpers for the renderer tests: GGUF value payloads built by hand in byte buffers,
 * and rendering a whole stream or a window of it into memory. */
#ifndef GGUFS_TESTS_RENDER_UTIL_H
#define GGUFS_TESTS_RENDER_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "sink.h"

struct bytes {
	uint8_t b[4096];
	size_t n;
};

static inline void put_le(struct bytes *w, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		w->b[w->n++] = (uint8_t)(v >> (8 * i));
}
static inline void put_f32(struct bytes *w, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	put_le(w, u, 4);
}
static inline void put_f64(struct bytes *w, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	put_le(w, u, 8);
}
static inline void put_str(struct bytes *w, const char *s, size_t len)
{
	put_le(w, len, 8);
	memcpy(w->b + w->n, s, len);
	w->n += len;
}
/* The header of an array element inside an array: elem_type, count. */
static inline void put_arr_hdr(struct bytes *w, uint32_t et, uint64_t count)
{
	put_le(w, et, 4);
	put_le(w, count, 8);
}

/* A value over w's bytes: a scalar or string of type t, ... */
static inline struct gguf_value val(uint32_t t, const struct bytes *w)
{
	return (struct gguf_value){ .type = t, .data = w->b, .size = w->n };
}
/* ... or an array of count elements of type et. */
static inline struct gguf_value arr(uint32_t et, uint64_t count, const struct bytes *w)
{
	return (struct gguf_value){ .type = GGUF_TYPE_ARRAY, .elem_type = et, .count = count,
	                            .data = w->b, .size = w->n };
}

typedef void (*render_fn)(struct sink *s, const void *arg);

/* The whole stream, NUL-terminated (malloc'd), its length in *len. */
static inline char *render_all(render_fn fn, const void *arg, size_t *len)
{
	struct sink c = sink_counter();
	fn(&c, arg);
	char *buf = malloc(c.pos + 1);
	struct sink s = sink_window(buf, 0, c.pos);
	fn(&s, arg);
	buf[c.pos] = '\0';
	*len = (size_t)c.pos;
	return buf;
}

/* What rendering a window of a stream came to: the whole stream's length, how far the
 * window's pass walked (a renderer that stops early keeps it small) and the bytes it
 * put in the window. */
struct window_render {
	uint64_t whole, walked, filled;
};

/* Renders the stream once counting and once into the window [off, off + cap) of buf. */
static inline struct window_render render_window(render_fn fn, const void *arg, char *buf,
                                                 uint64_t off, size_t cap)
{
	struct sink c = sink_counter();
	fn(&c, arg);
	struct sink s = sink_window(buf, off, cap);
	fn(&s, arg);
	return (struct window_render){ .whole = c.pos, .walked = s.pos, .filled = sink_filled(&s) };
}

/* Renders the stream as many random windows and checks that they tile the whole: 1 when
 * every window agrees with whole[0..len), else 0. */
static inline int render_windows_agree(render_fn fn, const void *arg, const char *whole,
                                       size_t len, unsigned seed)
{
	srand(seed);
	char *buf = malloc(len + 1);
	size_t off = 0;
	while (off < len) {
		size_t want = 1 + (size_t)rand() % (len / 7 + 3);
		memset(buf, 0x55, len + 1);
		struct sink s = sink_window(buf, off, want);
		fn(&s, arg);
		size_t got = (size_t)sink_filled(&s);
		size_t expect = off + want <= len ? want : len - off;
		if (got != expect || memcmp(buf, whole + off, got) != 0 ||
		    (got <= len && buf[got] != 0x55)) {
			free(buf);
			return 0;
		}
		off += got;
	}
	free(buf);
	return 1;
}

#endif
