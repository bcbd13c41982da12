/* The report of ggufs --diff A B (see ggufs(1), DIFF): a header line, one tab-separated
 * line per tensor compared, the lines of what does not pair, and a last line for the
 * whole model; or the same as one JSON document. Names and values are escaped as
 * metadata/ escapes strings in arrays, so each stays in its field; a figure that is not
 * defined is empty (JSON null), never NaN. */
#ifndef GGUFS_RENDER_DIFF_H
#define GGUFS_RENDER_DIFF_H

#include <stdbool.h>

#include "diff_plan.h"
#include "sink.h"
#include "stats_diff.h"

struct ggufs_model;

/* Metadata values are shown cut at this many bytes of their metadata/ text. */
#define RENDER_DIFF_VALUE_CUT 200

struct diff_report {
	const struct ggufs_model *a, *b;
	const struct diff_plan *plan;
	const struct diff_sums *sums;   /* per plan->same pair */
	const bool *compared;           /* per pair: both types have a dequantizer (else the
	                                 * figures are empty and sums unused) */
};

void render_diff_tsv(struct sink *s, const struct diff_report *r);
void render_diff_json(struct sink *s, const struct diff_report *r);

#endif
