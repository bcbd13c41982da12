/* The report of ggufs --check of one model made whole, from an open model to its text:
 * the tensors with a dequantizer scanned (stats_scan.h: in the order of their bytes in
 * the file for a model read as one stream), each tensor's segments merged, the report
 * rendered (render_check.h). --check prints it, as --diff prints diff_text_make's. */
#ifndef GGUFS_CHECK_TEXT_H
#define GGUFS_CHECK_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "stats_scan.h"

struct ggufs_model;

/* The report of m, text (the counts of stats_segment_health only) or JSON (every
 * figure), malloc'ed into *text (*len bytes, then a NUL), *unhealthy the tensors found
 * unhealthy. progress as stats_scan_run's (NULL: none), told the stored bytes to scan
 * in *total before the scan starts. 0; or -errno with one line in err: a tensor whose
 * read failed ("PATH: tensor 'NAME': cannot read: CAUSE", model_read_cause's), or out
 * of memory. */
int check_text_make(const struct ggufs_model *m, bool json, stats_scan_progress_fn progress,
                    void *progress_ctx, uint64_t *total, char **text, size_t *len,
                    uint64_t *unhealthy, char err[GGUF_ERR_MAX]);

#endif
