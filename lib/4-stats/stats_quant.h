/* Statistics of a quantized tensor taken from its blocks, without writing its float32
 * values: for the types where a sub-block's values are an affine function of small
 * integers (q4_K, q6_K, q8_0), the sums follow from integer sums of those (stats_quant.c
 * says how), which SIMD takes at several times the speed of dequantizing and summing
 * floats.
 *
 * The figures are those of the .f32 values to float64 rounding (counts, min and max
 * exactly), and the same bits at every SIMD level: the integer sums are exact at any
 * width, and the float64 figures are the same IEEE operations, lane for lane, at every
 * level. stats.c decides which blocks come here. */
#ifndef GGUFS_STATS_QUANT_H
#define GGUFS_STATS_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "stats_kernel.h"

/* Whether blocks of this type can be summed here. */
bool stats_quant_has(uint32_t type);

/* The first value of the block of type type at p, whose scales are finite. */
float stats_quant_first(uint32_t type, const uint8_t *p);

/* Accumulates the values of the nblocks consecutive blocks of type type at p (any
 * alignment), every one with finite scale fields (stats_bad_blocks() == 0), into l
 * about shift, as stats_kernel would the values that .f32 holds: s1 and s2 to float64
 * rounding, lo, hi and the zero and subnormal counts exactly. Each sub-block's values go
 * to one lane, the same one at every SIMD level. */
void stats_quant_lanes(uint32_t type, struct stats_lanes *l, const uint8_t *p,
                       uint64_t nblocks, double shift);

#endif
