/* The report of ggufs --check: one line per tensor that is not healthy and a last line
 * of counts, or one JSON document of every figure (see ggufs(1)). */
#ifndef GGUFS_RENDER_CHECK_H
#define GGUFS_RENDER_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "sink.h"
#include "stats.h"

struct ggufs_model;

/* What the scan found in one tensor: with --json every figure, else only the counts of
 * stats_health (the rest zero). */
struct check_tensor {
	struct tensor_stats s;
	bool all_zero;
};

/* The report's counts, from check_count. */
struct check_counts {
	uint64_t checked;        /* tensors with a dequantizer */
	uint64_t bytes;          /* their stored bytes */
	uint64_t unhealthy, warnings, not_checked;
};

/* The counts of model m's tensors (res: one per tensor, in order). */
void check_count(const struct ggufs_model *m, const struct check_tensor *res,
                 struct check_counts *c);

/* The text report: "unhealthy: NAME (TYPE): ..." for each tensor that is not healthy,
 * then "PATH: N tensors checked (SIZE): ...". */
void render_check_text(struct sink *s, const struct ggufs_model *m,
                       const struct check_tensor *res, const struct check_counts *c);
/* The JSON report. */
void render_check_json(struct sink *s, const struct ggufs_model *m,
                       const struct check_tensor *res, const struct check_counts *c);

#endif
