/* The report of ggufs --diff A B made whole, from two open models to its text: the
 * headers checked, the tensors and keys paired (diff_plan.h), the pairs scanned
 * (diff_scan.h) and the report rendered (render_diff.h). --diff prints it; a library's
 * compare/OTHER is it, kept. */
#ifndef GGUFS_DIFF_TEXT_H
#define GGUFS_DIFF_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "stats_scan.h"

struct ggufs_model;

/* Where a failed report failed. */
struct diff_text_failure {
	int which;          /* the model: 0 (a) or 1 (b) */
	uint64_t tensor;    /* a tensor of it whose read failed, or UINT64_MAX (err says) */
};

/* The report of b against a (the reference), TSV or JSON, malloc'ed into *text (*len
 * bytes, then a NUL). progress as diff_scan_run's (NULL: none). 0; or -errno with
 * *fail and one line in err: a tensor whose read failed ("PATH: tensor 'NAME': cannot
 * read: CAUSE", the cause model_read_cause's), or else (fail->tensor UINT64_MAX) a
 * header gone from a file that shrank, out of memory. */
int diff_text_make(const struct ggufs_model *a, const struct ggufs_model *b, bool json,
                   stats_scan_progress_fn progress, void *progress_ctx, uint64_t *total,
                   char **text, size_t *len, struct diff_text_failure *fail,
                   char err[GGUF_ERR_MAX]);

#endif
