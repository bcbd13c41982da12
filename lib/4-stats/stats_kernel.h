/* The inner loop of the statistics (stats.c): one pass over a block of float32 values
 * into 16 independent lanes, value i going to lane i % 16. Branch-free per value, with
 * one accumulator per figure and lane and classification by bit tests: a portable body
 * in the compiler's vector extensions, and AVX2 and AVX-512 bodies in intrinsics (mask
 * registers, blends, minps), all doing lane_add's operations in lane_add's order, so
 * that the results are the same bit for bit at every SIMD level (test_stats checks). */
#ifndef GGUFS_STATS_KERNEL_H
#define GGUFS_STATS_KERNEL_H

#include <stddef.h>
#include <stdint.h>

enum { STATS_LANES = 16 };

struct stats_lanes {
	double s1[STATS_LANES];   /* sum of (x - shift) over finite x */
	double s2[STATS_LANES];   /* sum of (x - shift)^2 over finite x */
	float lo[STATS_LANES];    /* min over finite x; +inf when none */
	float hi[STATS_LANES];    /* max over finite x; -inf when none */
	uint32_t nonfinite[STATS_LANES];
	uint32_t zero[STATS_LANES];
	uint32_t sub[STATS_LANES];
};

/* The sum of the n lanes of v (n a power of two, at most STATS_LANES), pairwise in an
 * order fixed for every target and SIMD level, so that a figure is the same bit for bit
 * everywhere: for the statistics' lanes and the diff's alike. */
double stats_lanes_sum(const double *v, int n);

/* Clears l for a new block. */
void stats_lanes_init(struct stats_lanes *l);

/* Accumulates x[0..n) into l, value i into lane i % 16 (n < 2^32). */
typedef void (*stats_kernel_fn)(struct stats_lanes *l, const float *x, size_t n, double shift);

/* The kernel for the active dequantizer level (types.h): the same results at each. */
stats_kernel_fn stats_kernel(void);

#endif
