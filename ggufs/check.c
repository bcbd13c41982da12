/* ggufs --check MODEL...: the health of every tensor without mounting anything, one line
 * per tensor that is not healthy (stats_segment_health: the counts alone), or with
 * --json one report of every figure (the statistics of stats/NAME, by the same code and
 * through the same tensor reader). Each report is made whole by the render layer
 * (check_text.h: the scan, its order, the merge, the text); the operands are listed
 * and opened by lib/8-mount (name_list.h: a library's models as its mount opens them);
 * this file says progress and prints. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "open.h"
#include "library.h"
#include "model.h"
#include "tree.h"
#include "log_escape.h"
#include "name_list.h"
#include "check_text.h"

/* "bytes done / total (rate)" over the last progress line on a terminal. */
static void show_progress(void *ctx, uint64_t done, double elapsed)
{
	print_progress("checking", done, *(const uint64_t *)ctx, elapsed);
}

/* Checks model m (taken: closed here) and prints its report, with before in front of
 * it (the separator from the report before); *printed is set when it was printed. The
 * exit status for this model alone. */
static int check_model(const struct options *o, struct ggufs_model *m, const char *before,
                       bool *printed)
{
	static uint64_t total;   /* show_progress's: set before the scan starts */
	char err[GGUF_ERR_MAX], *text = NULL;
	size_t len;
	uint64_t unhealthy;
	/* the tree is built as a mount would, so that a model it refuses is refused here */
	struct tree *t = tree_build(m, err);
	const bool progress = isatty(STDERR_FILENO);
	int r = t ? check_text_make(m, o->json, progress ? show_progress : NULL, &total, &total,
	                            &text, &len, &unhealthy, err) : -EINVAL;
	if (t && progress)   /* the progress line goes */
		print_progress_end();
	tree_free(t);
	model_close(m);
	if (r < 0) {
		log_errf("%s", err);
		return 3;
	}
	fputs(before, stdout);
	*printed = true;
	const size_t n = fwrite(text, 1, len, stdout);
	free(text);
	if (n != len || fflush(stdout) != 0)
		log_errf("cannot write the report: %s", strerror(errno));
	return unhealthy ? 1 : 0;
}

int check_models(const struct options *o)
{
	char err[GGUF_ERR_MAX];
	const struct open_name_opts oo = open_opts(o);
	struct name_list l;
	if (!name_list_make(&l, o->operands, (size_t)o->n_operands, &oo, err)) {
		log_errf("%s", err);
		return 3;
	}
	/* several reports: text blocks apart by an empty line, JSON reports in an array */
	const bool array = o->json && (o->n_operands > 1 || l.n_libs);
	bool printed = false;
	int worst = 0;
	for (size_t k = 0; k < l.n; k++) {
		const char *before = !printed ? (array ? "[\n" : "") : (array ? ",\n" : "\n");
		char *shown;
		struct ggufs_model *m = l.items[k].error ? NULL : name_list_open(&l, k, &oo, &shown, err);
		if (m)
			free(shown);
		else
			log_errf("%s", l.items[k].error ? l.items[k].error : err);
		const int r = m ? check_model(o, m, before, &printed) : 3;
		if (r > worst)
			worst = r;
	}
	name_list_free(&l);
	if (array)
		fputs(printed ? "]\n" : "[]\n", stdout);
	if (fflush(stdout) != 0 && worst < 3) {
		log_errf("cannot write the report: %s", strerror(errno));
		worst = 3;
	}
	return worst;
}
