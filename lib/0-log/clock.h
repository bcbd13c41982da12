/* The one clock for intervals: seconds on CLOCK_MONOTONIC, which no change of the
 * wall clock moves (timeouts, back-off, rates, the log's summaries). */
#ifndef GGUFS_CLOCK_H
#define GGUFS_CLOCK_H

/* Seconds since an arbitrary start, never going back. */
double clock_now_s(void);

#endif
