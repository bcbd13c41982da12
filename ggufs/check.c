/* ggufs --check MODEL...: the health of every tensor without mounting anything, one line
 * per tensor that is not healthy (stats_segment_health: the counts alone), or with
 * --json one report of every figure (the statistics of stats/NAME, by the same code and
 * through the same tensor reader). Each report is made whole by the render layer
 * (check_text.h: the scan, its order, the merge, the text); the names are opened by
 * lib/8-mount (a library's models as the mount opens them); this file lists the
 * operands, says progress and prints. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"
#include "name_kind.h"
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

/* What --check checks, in order: an operand that names one model, or a model of an
 * operand that names a library (its path in the library's source). */
struct check_item {
	const char *name;          /* the operand naming one model, or NULL */
	struct library *lib;       /* else the library (owned by the list) */
	char *path;                /* and the model's first file in it (owned) */
};

/* Every operand of o into *items (n of them; a library's models each an item of their
 * own, in the library's order), *libs the libraries opened (n_libs of them, to free
 * after the items): the worst exit status so far, 0 or 3 (a library that cannot be
 * listed, said, left out); -1 out of memory (said). */
static int list_items(const struct options *o, struct check_item **items, size_t *n,
                      struct library ***libs, size_t *n_libs)
{
	*items = NULL;
	*n = 0;
	*libs = calloc((size_t)o->n_operands + 1, sizeof **libs);
	*n_libs = 0;
	if (!*libs)
		goto oom;
	int worst = 0;
	for (int k = 0; k < o->n_operands; k++) {
		const enum name_kind kind = name_kind_of(o->operands[k]);
		char **paths = NULL;
		size_t add = 1;
		struct library *lib = NULL;
		if (name_kind_is_library(kind)) {
			char err[GGUF_ERR_MAX];
			const struct open_name_opts oo = open_opts(o);
			lib = open_name_library(o->operands[k], kind, &oo, NULL, err);
			if (!lib) {
				log_errf("%s", err);
				worst = 3;
				continue;
			}
			(*libs)[(*n_libs)++] = lib;
			if (library_model_paths(lib, &paths, &add) < 0)
				goto oom;
		}
		struct check_item *grown = realloc(*items, (*n + add + 1) * sizeof *grown);
		if (!grown) {
			for (size_t i = 0; i < add && paths; i++)
				free(paths[i]);
			free(paths);
			goto oom;
		}
		*items = grown;
		for (size_t i = 0; i < add; i++)
			(*items)[(*n)++] = lib ? (struct check_item){ NULL, lib, paths[i] }
			                       : (struct check_item){ o->operands[k], NULL, NULL };
		free(paths);
	}
	return worst;
oom:
	log_errf("out of memory");
	return -1;
}

int check_models(const struct options *o)
{
	struct check_item *items;
	struct library **libs;
	size_t n_items, n_libs;
	int worst = list_items(o, &items, &n_items, &libs, &n_libs);
	/* several reports: text blocks apart by an empty line, JSON reports in an array */
	const bool array = o->json && (o->n_operands > 1 || n_libs);
	bool printed = false;
	for (size_t k = 0; worst >= 0 && k < n_items; k++) {
		const char *before = !printed ? (array ? "[\n" : "") : (array ? ",\n" : "\n");
		char err[GGUF_ERR_MAX], *shown = NULL;
		struct options one = *o;
		one.model = items[k].name;
		struct ggufs_model *m = items[k].lib ? library_model_open(items[k].lib, items[k].path, err)
		                                     : open_model(&one, &shown);
		free(shown);
		if (!m && items[k].lib)
			log_errf("%s", err);
		int r = m ? check_model(o, m, before, &printed) : 3;
		if (r > worst)
			worst = r;
	}
	for (size_t k = 0; k < n_items; k++)
		free(items[k].path);
	free(items);
	for (size_t k = 0; k < n_libs; k++)
		library_free(libs[k]);
	free(libs);
	if (worst < 0)
		return 3;
	if (array)
		fputs(printed ? "]\n" : "[]\n", stdout);
	if (fflush(stdout) != 0 && worst < 3) {
		log_errf("cannot write the report: %s", strerror(errno));
		worst = 3;
	}
	return worst;
}
