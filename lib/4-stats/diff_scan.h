/* The scan of ggufs --diff: the pairs of a plan (diff_plan.h) that can be compared, read
 * from both models side by side on every core (stats_scan.h) in pieces of DIFF_CHUNK
 * values, their sums (stats_diff.h) merged into each pair's in order as the pieces come
 * in. Small pieces keep every thread's reads of a file within a megabyte or two of each
 * other, so that a remote file sees one sequential reader and its read-ahead fetches
 * each byte once; merging in order keeps the figures independent of the threads and
 * the memory independent of the models' size. */
#ifndef GGUFS_DIFF_SCAN_H
#define GGUFS_DIFF_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "diff_plan.h"
#include "stats_diff.h"
#include "stats_scan.h"

struct ggufs_model;

/* Where the scan failed. */
struct diff_scan_failure {
	int which;          /* the model whose read failed: 0 (a) or 1 (b) */
	uint64_t pair;      /* the plan->same pair */
};

/* Scans every pair of plan->same whose types both have a dequantizer (compared[k] says
 * which; the others' sums stay empty) into sums[k], one per pair. progress (NULL: none)
 * is told the stored bytes of both models done of *total (set before the first call:
 * the stored bytes of the compared tensors). 0, or -errno of the first read in order
 * that failed, said in *fail. */
int diff_scan_run(const struct ggufs_model *a, const struct ggufs_model *b,
                  const struct diff_plan *plan, struct diff_sums *sums, bool *compared,
                  stats_scan_progress_fn progress, void *progress_ctx, uint64_t *total,
                  struct diff_scan_failure *fail);

#endif
