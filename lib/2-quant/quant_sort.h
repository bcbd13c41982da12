/* The sort of iq1_s's and iq1_m's searches: ggml sorts a sub-block's values with
 * qsort and a comparator that looks at the value only (iq1_sort_helper: -1, 1, or 0
 * for equal values and for NaN), so which of equal values comes first is the C
 * library's choice. The reference is glibc 2.36, whose qsort of so few elements is a
 * top-down merge sort: stable (equal values keep their index order) and, for NaN,
 * decided by its merges. This is that merge sort, written out, never the C library's
 * qsort (whose order another libc, or a later glibc, does not keep). Private to this
 * layer and the unit test. */
#ifndef GGUFS_QUANT_SORT_H
#define GGUFS_QUANT_SORT_H

#include <stdint.h>

/* A value and where it was. */
struct quant_pair {
	float value;
	int32_t index;
};

/* The most pairs quant_sort_pairs sorts (iq1_s's sub-block). */
#define QUANT_SORT_MAX 32

/* Sorts the n pairs p (n <= QUANT_SORT_MAX; more are left as they are) by value,
 * ascending, as glibc 2.36's qsort(p, n, sizeof *p, cmp) does with cmp returning
 * a < b ? -1 : a > b ? 1 : 0 on the values: halves of n / 2 and n - n / 2 sorted in
 * turn, then merged taking the left one unless it is greater. So equal values keep
 * their order, and the order around a NaN (equal to everything) is glibc's. */
void quant_sort_pairs(struct quant_pair *p, int n);

#endif
