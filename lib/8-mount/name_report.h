/* The reports of --check and --diff of the names on the command line: each model opened
 * as its mount opens it (open_name.h, name_list.h), scanned and reported whole by the
 * render layer (check_text.h, diff_text.h), with a line of progress to show while it
 * scans. The front end prints what these make. */
#ifndef GGUFS_NAME_REPORT_H
#define GGUFS_NAME_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "name_list.h"
#include "open_name.h"

/* How a report is made. */
struct name_report_opts {
	bool json;   /* JSON, else text (--check) or TSV (--diff) */
	/* NULL, or told the progress of the scan as a line to show ("checking: 1.52 GB /
	 * 3.04 GB ( 50%), 638 MB/s"), then line NULL once the scan is over */
	void (*progress)(void *arg, const char *line);
	void *progress_arg;
};

/* --check of item i of l, opened with o as the mount of its name opens it (its tree
 * built, so that a model a mount refuses is refused here): the report malloc'ed into
 * *text (*len bytes, then a NUL), *unhealthy the tensors found unhealthy. True; or false
 * with one line in err (the item's error, or why the model cannot be opened or read). */
bool name_report_check(const struct name_list *l, size_t i, const struct open_name_opts *o,
                       const struct name_report_opts *r, char **text, size_t *len,
                       uint64_t *unhealthy, char err[GGUF_ERR_MAX]);

/* --diff of the model b names against the model a names (the reference), each opened
 * with o, a remote one with a quarter of a mount's memory cache unless o gives one (the
 * scan reads each byte once: the cache holds the read-ahead only). The report as for
 * name_report_check. True; or false with one line in err (naming the model, and the
 * tensor that could not be read with its cause). */
bool name_report_diff(const char *a, const char *b, const struct open_name_opts *o,
                      const struct name_report_opts *r, char **text, size_t *len,
                      char err[GGUF_ERR_MAX]);

#endif
