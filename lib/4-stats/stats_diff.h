/* The error of one tensor against another of the same element count (ggufs --diff):
 * float64 sums over the two tensors' float32 values, exactly as their .f32 files hold
 * them, read through the tensor reader a bounded chunk at a time. A position where
 * either value is NaN or infinite is counted and left out of every sum. */
#ifndef GGUFS_STATS_DIFF_H
#define GGUFS_STATS_DIFF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ggufs_model;

/* The sums over a run of positions, a the reference and b the other. */
struct diff_sums {
	uint64_t elements;    /* positions */
	uint64_t nonfinite;   /* positions where a or b is NaN or infinite */
	double d2;            /* Σ (b - a)² over the others, the compared positions */
	double a2, b2, ab;    /* Σ a², Σ b², Σ a·b */
	double max_abs;       /* max |b - a| (float64 differences of the float32 values) */
};

/* The sums of no positions. */
void diff_sums_init(struct diff_sums *s);
/* Adds the n positions of a[] and b[], the next ones in order. The float64 results
 * depend only on the values and how they are cut into calls (whole blocks of 4096 are
 * summed in lanes of their own), never on the SIMD level. */
void diff_sums_add(struct diff_sums *s, const float *a, const float *b, uint64_t n);
/* Merges the sums of the positions right after into's into into. */
void diff_sums_merge(struct diff_sums *into, const struct diff_sums *next);

/* The figures of the sums; NaN where a figure is undefined: all four with no compared
 * position, rel_rmse and cosine with an all-zero a, cosine with an all-zero b. rmse is
 * √(Σ(b-a)²/n), rel_rmse √(Σ(b-a)²/Σa²), cosine Σab/√(Σa²·Σb²) (so exactly 0, 0 and 1
 * for b = a). */
struct diff_figures {
	double rmse, rel_rmse, max_abs_err, cosine;
};
void diff_figures(const struct diff_sums *s, struct diff_figures *f);

/* Values read at a time from each tensor: whole blocks, 256 KiB of float32 for each, in
 * cache between the dequantizer writing them and the sums reading them. */
#define DIFF_CHUNK (UINT64_C(1) << 16)

/* The sums of values [first, first + count) (clipped to the tensors) of tensor ia of ma
 * against tensor ib of mb, which have the same element count and dequantizers
 * (has_f32), read a chunk at a time into this thread's buffer: 0, or -errno of the read
 * that failed with *which 0 (ma) or 1 (mb). progress, when not NULL, is advanced by the
 * stored bytes of both read so far. */
int diff_range(const struct ggufs_model *ma, uint64_t ia, const struct ggufs_model *mb,
               uint64_t ib, uint64_t first, uint64_t count, struct diff_sums *out, int *which,
               _Atomic uint64_t *progress);

#endif
