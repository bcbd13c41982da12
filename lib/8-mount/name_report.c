/* The reports of --check and --diff of names (name_report.h). */
#include "name_report.h"

#include <stdlib.h>

#include "check_text.h"
#include "diff_text.h"
#include "model.h"
#include "render_size.h"
#include "tree.h"

/* Each remote model's memory cache in --diff when -o cache_size is not given: a quarter
 * of a mount's 256 MiB, so that two stay well under the 256 MB the scan may use. */
#define NAME_REPORT_DIFF_CACHE (UINT64_C(64) << 20)

/* A scan's progress, for its stats_scan_progress_fn. */
struct name_report_progress {
	const struct name_report_opts *r;
	const char *doing;
	uint64_t total;   /* set by the scan before it starts */
};

/* The stats_scan_progress_fn of both reports: the line, rendered, told r->progress. */
static void name_report_show(void *ctx, uint64_t done, double elapsed)
{
	const struct name_report_progress *p = ctx;
	char line[RENDER_PROGRESS_MAX];
	p->r->progress(p->r->progress_arg,
	               render_progress(p->doing, done, p->total, elapsed, line, sizeof line));
}

bool name_report_check(const struct name_list *l, size_t i, const struct open_name_opts *o,
                       const struct name_report_opts *r, char **text, size_t *len,
                       uint64_t *unhealthy, char err[GGUF_ERR_MAX])
{
	if (l->items[i].error) {
		gguf_errf(err, "%s", l->items[i].error);
		return false;
	}
	char *shown;
	struct ggufs_model *m = name_list_open(l, i, o, &shown, err);
	if (!m)
		return false;
	free(shown);
	/* the tree is built as a mount would, so that a model it refuses is refused here */
	struct tree_kit *kit = tree_kit_new(err);
	struct tree *t = kit ? tree_build(m, kit, err) : NULL;
	struct name_report_progress p = { r, "checking", 0 };
	int rc = t ? check_text_make(m, r->json, r->progress ? name_report_show : NULL, &p,
	                             &p.total, text, len, unhealthy, err) : -1;
	if (t && r->progress)   /* the progress line goes */
		r->progress(r->progress_arg, NULL);
	tree_free(t);
	tree_kit_free(kit);
	model_close(m);
	return rc == 0;
}

/* The model name names, opened with o for --diff; NULL with one line in err. */
static struct ggufs_model *name_report_open(const char *name, const struct open_name_opts *o,
                                            char err[GGUF_ERR_MAX])
{
	struct open_name_opts one = *o;
	if (!one.cache_size)
		one.cache_size = NAME_REPORT_DIFF_CACHE;
	char *shown;
	struct ggufs_model *m = open_name_model(name, &one, &shown, err);
	free(shown);
	return m;
}

bool name_report_diff(const char *a, const char *b, const struct open_name_opts *o,
                      const struct name_report_opts *r, char **text, size_t *len,
                      char err[GGUF_ERR_MAX])
{
	struct ggufs_model *m[2] = { name_report_open(a, o, err), NULL };
	if (m[0])
		m[1] = name_report_open(b, o, err);
	int rc = -1;
	if (m[1]) {
		struct name_report_progress p = { r, "comparing", 0 };
		struct diff_text_failure fail;
		rc = diff_text_make(m[0], m[1], r->json, r->progress ? name_report_show : NULL, &p,
		                    &p.total, text, len, &fail, err);
		if (r->progress)   /* the progress line goes */
			r->progress(r->progress_arg, NULL);
	}
	model_close(m[0]);
	model_close(m[1]);
	return rc == 0;
}
