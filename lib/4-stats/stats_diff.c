#include "stats_diff.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "reader.h"
#include "stats.h"
#include "stats_kernel.h"

/* Positions summed in lanes of their own before they join the running sums: a block's
 * partial sums keep their digits, and the order of additions is fixed by the values'
 * positions alone. */
enum { DIFF_BLOCK = 4096, DIFF_LANES = 8 };
_Static_assert((int)DIFF_LANES <= (int)STATS_LANES, "stats_lanes_sum sums at most STATS_LANES");

_Static_assert(DIFF_CHUNK % DIFF_BLOCK == 0, "chunks are whole blocks");

void diff_sums_init(struct diff_sums *s)
{
	memset(s, 0, sizeof *s);
}

/* One block's lane sums. */
struct lanes {
	double d2[DIFF_LANES], a2[DIFF_LANES], b2[DIFF_LANES], ab[DIFF_LANES];
	double mx[DIFF_LANES];
};

/* Four float64 lanes, and their bits; four float32 values. GCC's and clang's vector
 * types: each operation is the scalar one lane by lane, in the same order, so the sums
 * are those of a plain loop over 8 lanes, bit for bit, on every target. */
typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4i __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* Four of block_all's lanes. */
struct half_lanes {
	v4d d2, a2, b2, ab, mx;
};

static inline void step(struct half_lanes *h, const v4d *xp, const v4d *yp)
{
	const v4d x = *xp, y = *yp;
	const v4i sign = { INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN };
	const v4d d = y - x;
	const v4d ad = (v4d)((v4i)d & ~sign);
	const v4i more = ad > h->mx;   /* ad > mx ? ad : mx, lane by lane (a NaN keeps mx) */
	h->d2 += d * d;
	h->a2 += x * x;
	h->b2 += y * y;
	h->ab += x * y;
	h->mx = (v4d)(((v4i)ad & more) | ((v4i)h->mx & ~more));
}

/* The pair (x, y) into lane j of l, in float64. */
static inline __attribute__((always_inline)) void lane_add(struct lanes *l, int j, double x,
                                                            double y)
{
	const double d = y - x, ad = fabs(d);
	l->d2[j] += d * d;
	l->a2[j] += x * x;
	l->b2[j] += y * y;
	l->ab[j] += x * y;
	l->mx[j] = ad > l->mx[j] ? ad : l->mx[j];
}

/* Positions i to n (fewer than DIFF_LANES) into lanes 0.. of l, one by one: the tail
 * of a block, whichever way the rest of it was summed. */
static inline __attribute__((always_inline)) void block_tail(struct lanes *l, const float *a,
                                                              const float *b, uint64_t i,
                                                              uint64_t n)
{
	for (int j = 0; i < n; i++, j++)
		lane_add(l, j, a[i], b[i]);
}

/* The lanes of n (at most DIFF_BLOCK) positions, every one taken: a nonfinite value
 * makes Σa² or Σb² nonfinite (a finite float32's square, summed over any block, stays
 * finite in float64), which is how the caller tells. Lane j takes the positions i with
 * i % 8 == j, each lane its own chain of additions. */
static inline __attribute__((always_inline)) void block_body(struct lanes *l, const float *a,
                                                              const float *b, uint64_t n)
{
	struct half_lanes lo, hi;
	memset(&lo, 0, sizeof lo);
	memset(&hi, 0, sizeof hi);
	uint64_t i = 0;
	for (; i + DIFF_LANES <= n; i += DIFF_LANES) {
		v4f fa0, fa1, fb0, fb1;
		memcpy(&fa0, a + i, sizeof fa0);
		memcpy(&fa1, a + i + 4, sizeof fa1);
		memcpy(&fb0, b + i, sizeof fb0);
		memcpy(&fb1, b + i + 4, sizeof fb1);
		const v4d x0 = __builtin_convertvector(fa0, v4d), y0 = __builtin_convertvector(fb0, v4d);
		const v4d x1 = __builtin_convertvector(fa1, v4d), y1 = __builtin_convertvector(fb1, v4d);
		step(&lo, &x0, &y0);
		step(&hi, &x1, &y1);
	}
	for (int j = 0; j < 4; j++) {
		l->d2[j] = lo.d2[j], l->d2[j + 4] = hi.d2[j];
		l->a2[j] = lo.a2[j], l->a2[j + 4] = hi.a2[j];
		l->b2[j] = lo.b2[j], l->b2[j + 4] = hi.b2[j];
		l->ab[j] = lo.ab[j], l->ab[j + 4] = hi.ab[j];
		l->mx[j] = lo.mx[j], l->mx[j + 4] = hi.mx[j];
	}
	block_tail(l, a, b, i, n);
}

static void block_portable(struct lanes *l, const float *a, const float *b, uint64_t n)
{
	block_body(l, a, b, n);
}

/* The same lanes with AVX2 and FMA, chosen at run time: a check of the CPU per block
 * costs nothing beside 4096 values, and unlike an ifunc resolver it runs after the
 * sanitizers have started. Bit for bit block_body's: the product of two float32 values
 * is exact in float64, so a fused x·x + Σ rounds once where block_body's multiply
 * (exact) then add rounds once too, at the same value; (b - a)² is not exact, so it
 * stays a multiply and an add. maxpd(d, mx) is `d > mx ? d : mx`, NaN keeping mx, as
 * step's select. On 2 x 1 GB of q8_0 from the page cache, block_body (18 operations for
 * 8 values after the conversions) took 59% of --diff's 0.73 s of CPU; this takes 47%
 * of 0.36 s (the rest: the reader's fewer wakes, stats_scan.c). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static void block_avx2(struct lanes *l, const float *a,
                                                           const float *b, uint64_t n)
{
	const __m256d sign = _mm256_set1_pd(-0.0);
	__m256d d2[2], a2[2], b2[2], ab[2], mx[2];
	for (int h = 0; h < 2; h++)
		d2[h] = a2[h] = b2[h] = ab[h] = mx[h] = _mm256_setzero_pd();
	uint64_t i = 0;
	for (; i + DIFF_LANES <= n; i += DIFF_LANES) {
		for (int h = 0; h < 2; h++) {
			const __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(a + i + 4 * h));
			const __m256d y = _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4 * h));
			const __m256d d = _mm256_sub_pd(y, x);
			d2[h] = _mm256_add_pd(d2[h], _mm256_mul_pd(d, d));
			a2[h] = _mm256_fmadd_pd(x, x, a2[h]);
			b2[h] = _mm256_fmadd_pd(y, y, b2[h]);
			ab[h] = _mm256_fmadd_pd(x, y, ab[h]);
			mx[h] = _mm256_max_pd(_mm256_andnot_pd(sign, d), mx[h]);
		}
	}
	for (int h = 0; h < 2; h++) {
		_mm256_storeu_pd(l->d2 + 4 * h, d2[h]);
		_mm256_storeu_pd(l->a2 + 4 * h, a2[h]);
		_mm256_storeu_pd(l->b2 + 4 * h, b2[h]);
		_mm256_storeu_pd(l->ab + 4 * h, ab[h]);
		_mm256_storeu_pd(l->mx + 4 * h, mx[h]);
	}
	block_tail(l, a, b, i, n);
}

static void block_all(struct lanes *l, const float *a, const float *b, uint64_t n)
{
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		block_avx2(l, a, b, n);
	else
		block_portable(l, a, b, n);
}
#else
#define block_all block_portable
#endif

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
		lane_add(l, (int)(i % DIFF_LANES), a[i], b[i]);
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
		if (!isfinite(stats_lanes_sum(l.a2, DIFF_LANES) + stats_lanes_sum(l.b2, DIFF_LANES)))
			nonfinite = block_finite(&l, a + at, b + at, k);   /* l anew, finite pairs only */
		struct diff_sums blk = { .elements = k, .nonfinite = nonfinite,
		                         .d2 = stats_lanes_sum(l.d2, DIFF_LANES),
		                         .a2 = stats_lanes_sum(l.a2, DIFF_LANES),
		                         .b2 = stats_lanes_sum(l.b2, DIFF_LANES),
		                         .ab = stats_lanes_sum(l.ab, DIFF_LANES) };
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

/* Stored bytes of n values of tensor i (whole blocks). */
static uint64_t stored_bytes(const struct ggufs_model *m, uint64_t i, uint64_t n)
{
	const struct ggml_type *ty = model_tensor(m, i)->ti;
	return (n + ty->block_elems - 1) / ty->block_elems * ty->block_bytes;
}

static pthread_key_t chunk_key;
static pthread_once_t chunk_once = PTHREAD_ONCE_INIT;

/* The key of the threads' chunk buffers, freed with their threads. */
static void chunk_key_init(void)
{
	if (pthread_key_create(&chunk_key, free) != 0)
		abort();
}

/* This thread's buffer of two chunks of values, kept for its life: a scan calls
 * diff_range for every 64 Ki values, and a buffer of 512 KiB per call would be mapped
 * and faulted in each time. NULL when out of memory. */
static float *chunk_buffer(void)
{
	pthread_once(&chunk_once, chunk_key_init);
	float *buf = pthread_getspecific(chunk_key);
	if (!buf) {
		buf = malloc(2 * DIFF_CHUNK * sizeof *buf);
		if (buf && pthread_setspecific(chunk_key, buf) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

int diff_range(const struct ggufs_model *ma, uint64_t ia, const struct ggufs_model *mb,
               uint64_t ib, uint64_t first, uint64_t count, struct diff_sums *out, int *which,
               _Atomic uint64_t *progress)
{
	const uint64_t n_elements = model_tensor(ma, ia)->n_elements;
	if (!model_tensor(ma, ia)->has_f32 || !model_tensor(mb, ib)->has_f32 ||
	    model_tensor(mb, ib)->n_elements != n_elements || first > n_elements)
		return -EINVAL;
	const uint64_t end = n_elements - first < count ? n_elements : first + count;
	float *a = chunk_buffer();
	if (!a)
		return -ENOMEM;
	float *b = a + DIFF_CHUNK;
	diff_sums_init(out);
	for (uint64_t done = first; done < end; done += DIFF_CHUNK) {
		const uint64_t n = end - done < DIFF_CHUNK ? end - done : DIFF_CHUNK;
		int r = reader_f32(ma, ia, done * sizeof *a, n * sizeof *a, a, NULL);
		if (r < 0) {
			*which = 0;
			return r;
		}
		r = reader_f32(mb, ib, done * sizeof *b, n * sizeof *b, b, NULL);
		if (r < 0) {
			*which = 1;
			return r;
		}
		diff_sums_add(out, a, b, n);
		if (progress)
			atomic_fetch_add(progress, stored_bytes(ma, ia, n) + stored_bytes(mb, ib, n));
	}
	return 0;
}
