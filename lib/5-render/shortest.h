/* The shortest text that reads back as the same float: ggufs(1)'s rendering of float32 and
 * float64 metadata. The digits are those of the smallest N for which "%.Ng" reads back
 * bit for bit; below 1e16 the text is written out without an exponent, as Python's
 * repr does ("10000", "500000", "0.0001", "1e-05", "3.4028235e+38"). */
#ifndef GGUFS_SHORTEST_H
#define GGUFS_SHORTEST_H

#include <stddef.h>

/* Room for any text here: "-1.7976931348623157e+308" and "-1000000000000000". */
#define SHORTEST_MAX 32

/* The text of a finite f; NaN as "nan", "inf", "-inf", negative zero "-0". Returns the
 * length. float32 takes a fast exact path with double arithmetic and falls back to the
 * reference search when a decision is too close to call. */
size_t shortest_f32(float f, char buf[SHORTEST_MAX]);
size_t shortest_f64(double d, char buf[SHORTEST_MAX]);

/* The reference: scanning N upwards with snprintf and strtof; for tests. */
size_t shortest_f32_reference(float f, char buf[SHORTEST_MAX]);

#endif
