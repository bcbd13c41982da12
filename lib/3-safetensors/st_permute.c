/* The converter's q/k permute as a map of rows (st_permute.h). */
#include "st_permute.h"

uint32_t st_permute_heads(bool is_k, uint32_t n_head, uint32_t n_head_kv)
{
	return is_k && n_head_kv != n_head ? n_head_kv : n_head;
}

bool st_permute_fits(uint64_t rows, uint32_t n_head)
{
	return n_head > 0 && rows % n_head == 0 && (rows / n_head) % 2 == 0;
}

uint64_t st_permute_row(uint64_t rows, uint32_t n_head, uint64_t r)
{
	/* converted (head h, pair i, half j) is checkpoint (head h, half j, pair i) */
	const uint64_t head_dim = rows / n_head, half = head_dim / 2;
	const uint64_t h = r / head_dim, i = r % head_dim / 2, j = r % 2;
	return h * head_dim + j * half + i;
}
