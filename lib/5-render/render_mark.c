#include "render_mark.h"

#include <stdlib.h>

void render_mark_add(struct sink *s, struct render_mark m)
{
	struct render_marks *ms = s->marks;
	if (ms->n == ms->cap) {
		size_t cap = ms->cap ? 2 * ms->cap : 16;
		struct render_mark *v = realloc(ms->v, cap * sizeof *v);
		if (!v) {
			s->next_mark = s->pos + RENDER_MARK_STRIDE;
			return;
		}
		ms->v = v;
		ms->cap = cap;
	}
	m.pos = s->pos;
	ms->v[ms->n++] = m;
	s->next_mark = s->pos + RENDER_MARK_STRIDE;
}

const struct render_mark *render_mark_find(const struct render_marks *ms, uint64_t off)
{
	if (!ms || ms->n == 0 || ms->v[0].pos > off)
		return NULL;
	size_t lo = 0, hi = ms->n;   /* v[lo].pos <= off; v[hi].pos > off, or hi == n */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (ms->v[mid].pos <= off)
			lo = mid;
		else
			hi = mid;
	}
	return &ms->v[lo];
}

void render_marks_free(struct render_marks *ms)
{
	free(ms->v);
	ms->v = NULL;
	ms->n = ms->cap = 0;
}
