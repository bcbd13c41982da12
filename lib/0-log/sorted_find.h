/* Looking an entry up by a number in a table sorted by it, as the metadata states keep
 * their keys by id and the tree its overrides and marks by position. */
#ifndef GGUFS_SORTED_FIND_H
#define GGUFS_SORTED_FIND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The index of the entry whose uint64_t at byte key_at (offsetof) is key, among the n
 * entries of size bytes at base, sorted by that number, each number once; n when none.
 * A binary search: inlined, it costs what a hand-written one for the table does. */
static inline uint64_t sorted_find_u64(const void *base, uint64_t n, size_t size,
                                       size_t key_at, uint64_t key)
{
	const char *e = base;
	uint64_t lo = 0, hi = n, v = 0;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		memcpy(&v, e + mid * size + key_at, sizeof v);
		if (v < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n)
		memcpy(&v, e + lo * size + key_at, sizeof v);
	return lo < n && v == key ? lo : n;
}

#endif
