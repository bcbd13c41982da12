/* A listing sorted, each name once: a listing that pages (a page may repeat what the one
 * before it held, when the store changed between them) or that names a folder once per
 * file under it holds a name more than once, and a directory shows it once. */
#ifndef GGUFS_SORT_UNIQUE_H
#define GGUFS_SORT_UNIQUE_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Sorts the n entries of size bytes at base by cmp (which orders by name first) and
 * keeps the first of each run of one name, freeing the others' names: the entries hold
 * a malloc'ed name at byte name_at (offsetof) and own nothing else. The new count. */
static inline size_t sort_unique(void *base, size_t n, size_t size, size_t name_at,
                                 int (*cmp)(const void *, const void *))
{
	if (!n)
		return 0;
	qsort(base, n, size, cmp);
	char *e = base;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char **name = (char **)(e + i * size + name_at);
		if (k && strcmp(*(char **)(e + (k - 1) * size + name_at), *name) == 0) {
			free(*name);
			continue;
		}
		if (k != i)
			memcpy(e + k * size, e + i * size, size);
		k++;
	}
	return k;
}

#endif
