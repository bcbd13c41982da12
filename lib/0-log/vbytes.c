#include "vbytes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Room for end bytes in all, grown by doubling: false (and failed) when there is none. */
static bool reserve(struct vbytes *b, uint64_t end)
{
	if (b->failed || end > SIZE_MAX / 2) {
		b->failed = true;
		return false;
	}
	if (end > b->cap) {
		uint64_t cap = b->cap ? b->cap : 64;
		while (cap < end)
			cap *= 2;
		uint8_t *q = realloc(b->p, (size_t)cap);
		if (!q) {
			b->failed = true;
			return false;
		}
		b->p = q;
		b->cap = cap;
	}
	return true;
}

void vbytes_put(struct vbytes *b, const void *p, uint64_t n)
{
	uint64_t end;
	if (__builtin_add_overflow(b->len, n, &end)) {
		b->failed = true;
		return;
	}
	if (!reserve(b, end))
		return;
	if (n)
		memcpy(b->p + b->len, p, (size_t)n);
	b->len = end;
}

void vbytes_resize(struct vbytes *b, uint64_t len)
{
	if (len > b->len) {
		if (!reserve(b, len))
			return;
		memset(b->p + b->len, 0, (size_t)(len - b->len));
	} else if (b->failed) {
		return;
	}
	b->len = len;
}

void vbytes_le(struct vbytes *b, uint64_t v, int n)
{
	uint8_t x[8];
	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	vbytes_put(b, x, (uint64_t)n);
}

void vbytes_patch(struct vbytes *b, uint64_t at, uint64_t v, int n)
{
	if (b->failed)
		return;
	for (int i = 0; i < n; i++)
		b->p[at + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}
