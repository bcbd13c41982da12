#include "stats_diff.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "reader.h"
#include "stats.h"

/* Positions summed in lanes of their own before they join the running sums: a block's
 * partial sums keep their digits, and the order of additions is fixed by the values'
 * positions alone. */
enum { DIFF_BLOCK = 4096, DIFF_LANES = 8 };

/* Values per chunk read: whole blocks, 256 KiB of float32 for each tensor, in cache
 * between the dequantizer writing them and the sums reading them. */
enum { CHUNK_VALUES = 16 * DIFF_BLOCK };
_Static_assert(STATS_SEGMENT % CHUNK_VALUES == 0, "segments are whole chunks");

void diff_sums_init(struct diff_sums *s)
{
	memset(s, 0, sizeof *s);
}

/* Sums the lanes of v pairwise, in an order fixed for every target. */
static double lanes_sum(const double *v)
{
	double t[DIFF_LANES];
	memcpy(t, v, sizeof t);
	for (int w = DIFF_LANES / 2; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			t[j] += t[j + w];
	return t[0];
}

/* One block's lane sums. */
struct lanes {
	double d2[DIFF_LANES], a2[DIFF_LANES], b2[DIFF_LANES], ab[DIFF_LANES];
	double mx[DIFF_LANES];
};

/* The lanes of n (at most DIFF_BLOCK) positions, every one taken: a nonfinite value
 * makes Σa² or Σb² nonfinite (a finite float32's square, summed over any block, stays
 * finite in float64), which is how the caller tells. Written for the vectorizer: each
 * lane is its own chain of additions, so vector code adds in the same order. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default")))
#endif
static void block_all(struct lanes *l, const float *a, const float *b, uint64_t n)
{
	memset(l, 0, sizeof *l);
	uint64_t i = 0;
	for (; i + DIFF_LANES <= n; i += DIFF_LANES) {
		for (int j = 0; j < DIFF_LANES; j++) {
			const double x = a[i + j], y = b[i + j], d = y - x, ad = fabs(d);
			l->d2[j] += d * d;
			l->a2[j] += x * x;
			l->b2[j] += y * y;
			l->ab[j] += x * y;
			l->mx[j] = ad > l->mx[j] ? ad : l->mx[j];
		}
	}
	for (int j = 0; i < n; i++, j++) {
		const double x = a[i], y = b[i], d = y - x, ad = fabs(d);
		l->d2[j] += d * d;
		l->a2[j] += x * x;
		l->b2[j] += y * y;
		l->ab[j] += x * y;
		l->mx[j] = ad > l->mx[j] ? ad : l->mx[j];
	}
}

/* The same lanes over the positions where both values are finite, counting the others:
 * for the rare block that has any, in the same lane order. */
static uint64_t block_finite(struct lanes *l, const float *a, const float *b, uint64_t n)
{
	uint64_t nonfinite = 0;
	memset(l, 0, sizeof *l);
	for (uint64_t i = 0; i < n; i++) {
		if (!isfinite(a[i]) || !isfinite(b[i])) {
			nonfinite++;
			continue;
		}
		const int j = (int)(i % DIFF_LANES);
		const double x = a[i], y = b[i], d = y - x, ad = fabs(d);
		l->d2[j] += d * d;
		l->a2[j] += x * x;
		l->b2[j] += y * y;
		l->ab[j] += x * y;
		l->mx[j] = ad > l->mx[j] ? ad : l->mx[j];
	}
	return nonfinite;
}

void diff_sums_add(struct diff_sums *s, const float *a, const float *b, uint64_t n)
{
	for (uint64_t at = 0; at < n; at += DIFF_BLOCK) {
		const uint64_t k = n - at < DIFF_BLOCK ? n - at : DIFF_BLOCK;
		struct lanes l;
		uint64_t nonfinite = 0;
		block_all(&l, a + at, b + at, k);
		if (!isfinite(lanes_sum(l.a2) + lanes_sum(l.b2)))
			nonfinite = block_finite(&l, a + at, b + at, k);
		struct diff_sums blk = { .elements = k, .nonfinite = nonfinite,
		                         .d2 = lanes_sum(l.d2), .a2 = lanes_sum(l.a2),
		                         .b2 = lanes_sum(l.b2), .ab = lanes_sum(l.ab) };
		for (int j = 0; j < DIFF_LANES; j++)
			blk.max_abs = l.mx[j] > blk.max_abs ? l.mx[j] : blk.max_abs;
		diff_sums_merge(s, &blk);
	}
}

void diff_sums_merge(struct diff_sums *into, const struct diff_sums *next)
{
	into->elements += next->elements;
	into->nonfinite += next->nonfinite;
	into->d2 += next->d2;
	into->a2 += next->a2;
	into->b2 += next->b2;
	into->ab += next->ab;
	into->max_abs = next->max_abs > into->max_abs ? next->max_abs : into->max_abs;
}

void diff_figures(const struct diff_sums *s, struct diff_figures *f)
{
	const uint64_t n = s->elements - s->nonfinite;
	f->rmse = f->rel_rmse = f->max_abs_err = f->cosine = NAN;
	if (n == 0)
		return;
	f->rmse = sqrt(s->d2 / (double)n);
	f->max_abs_err = s->max_abs;
	if (s->a2 > 0)
		f->rel_rmse = sqrt(s->d2 / s->a2);
	/* √(Σa²·Σb²), not √Σa²·√Σb²: for b = a it is Σa² itself, so the cosine is 1 */
	if (s->a2 > 0 && s->b2 > 0)
		f->cosine = s->ab / sqrt(s->a2 * s->b2);
}

/* Stored bytes of n values of tensor g from value first on (whole blocks). */
static uint64_t stored_bytes(const struct ggufs_model *m, uint64_t i, uint64_t n)
{
	const struct ggml_type *ty = m->tensors[i].t->ti;
	return (n + ty->block_elems - 1) / ty->block_elems * ty->block_bytes;
}

int diff_segment(const struct ggufs_model *ma, uint64_t ia, const struct ggufs_model *mb,
                 uint64_t ib, uint64_t seg, struct diff_sums *out, int *which,
                 _Atomic uint64_t *progress)
{
	const uint64_t n_elements = ma->tensors[ia].t->n_elements;
	if (!ma->tensors[ia].t->has_f32 || !mb->tensors[ib].t->has_f32 ||
	    mb->tensors[ib].t->n_elements != n_elements)
		return -EINVAL;
	const uint64_t first = seg * STATS_SEGMENT;
	const uint64_t end = n_elements - first < STATS_SEGMENT ? n_elements : first + STATS_SEGMENT;
	float *a = malloc(2 * CHUNK_VALUES * sizeof *a);
	if (!a)
		return -ENOMEM;
	float *b = a + CHUNK_VALUES;
	int ret = 0;
	diff_sums_init(out);
	for (uint64_t done = first; done < end; done += CHUNK_VALUES) {
		const uint64_t n = end - done < CHUNK_VALUES ? end - done : CHUNK_VALUES;
		int r = reader_f32(ma, ia, done * sizeof *a, n * sizeof *a, a);
		if (r < 0) {
			*which = 0;
			ret = r;
			break;
		}
		r = reader_f32(mb, ib, done * sizeof *b, n * sizeof *b, b);
		if (r < 0) {
			*which = 1;
			ret = r;
			break;
		}
		diff_sums_add(out, a, b, n);
		if (progress)
			atomic_fetch_add(progress, stored_bytes(ma, ia, n) + stored_bytes(mb, ib, n));
	}
	free(a);
	return ret;
}
