/* glibc 2.36's merge sort of a few pairs (quant_sort.h), as its msort_with_tmp runs:
 * the same splits, the same merges, the same comparisons. */
#include "quant_sort.h"

#include <string.h>

/* Whether a must follow b: glibc's cmp(a, b) > 0 with ggml's comparator. */
static int after(const struct quant_pair *a, const struct quant_pair *b)
{
	return a->value > b->value;
}

/* Sorts the n pairs at b, with room for n pairs at tmp. */
static void msort(struct quant_pair *b, int n, struct quant_pair *tmp)
{
	if (n <= 1)
		return;
	int n1 = n / 2, n2 = n - n1;
	struct quant_pair *b1 = b, *b2 = b + n1, *t = tmp;

	msort(b1, n1, tmp);
	msort(b2, n2, tmp);
	while (n1 > 0 && n2 > 0) {
		if (!after(b1, b2)) {
			*t++ = *b1++;
			n1--;
		} else {
			*t++ = *b2++;
			n2--;
		}
	}
	if (n1 > 0)
		memcpy(t, b1, (size_t)n1 * sizeof *t);
	memcpy(b, tmp, (size_t)(n - n2) * sizeof *b);
}

void quant_sort_pairs(struct quant_pair *p, int n)
{
	struct quant_pair tmp[QUANT_SORT_MAX];

	if (n > QUANT_SORT_MAX)
		return;
	msort(p, n, tmp);
}
