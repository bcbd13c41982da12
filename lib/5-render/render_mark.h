/* Marks in a rendering: points where a renderer can start again without emitting what
 * comes before them. The sizing pass at mount records one every RENDER_MARK_STRIDE
 * bytes or so; a read at offset off starts rendering at the last mark at or before off.
 * Without them every read of gguf.json or metadata/KEY rendered the file from its first
 * byte, so reading a 12 MB gguf.json through in 1 MiB requests rendered about 6 times
 * its size; with them, a little over its size. */
#ifndef GGUFS_RENDER_MARK_H
#define GGUFS_RENDER_MARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink.h"

#ifndef RENDER_MARK_STRIDE   /* the fuzz target sets a small one */
#define RENDER_MARK_STRIDE (256u << 10)
#endif
#define RENDER_MARK_NO_ELEM UINT64_MAX

/* Where rendering can pick up. A mark inside a value is before its top-level array
 * element elem, which starts byte bytes into the value's data; at a boundary between
 * gguf.json's kvs or tensors elem is RENDER_MARK_NO_ELEM. kv and tensor say which kv
 * (gguf.json: n_kv once in the tensors, and then tensor says which). */
struct render_mark {
	uint64_t pos;      /* output bytes before the mark */
	uint64_t kv;
	uint64_t tensor;
	uint64_t elem;
	uint64_t byte;
};

/* The marks of one rendered file, in increasing pos. */
struct render_marks {
	struct render_mark *v;
	size_t n, cap;
};

/* Makes s record its renderer's marks into ms (empty). */
static inline void render_marks_record(struct sink *s, struct render_marks *ms)
{
	s->marks = ms;
	s->next_mark = RENDER_MARK_STRIDE;
}

/* True when s records marks and has emitted RENDER_MARK_STRIDE bytes since the last
 * (this runs for every array element at mount, so it is two compares). */
static inline bool render_mark_due(const struct sink *s)
{
	return s->marks && s->pos >= s->next_mark;
}

/* Appends m (its pos set to s's) to s's marks. Marks only save time: when memory runs
 * out the mark is dropped, and reads start further back. */
void render_mark_add(struct sink *s, struct render_mark m);

/* The last mark at or before off, or NULL to start at the beginning. */
const struct render_mark *render_mark_find(const struct render_marks *ms, uint64_t off);

void render_marks_free(struct render_marks *ms);

#endif
