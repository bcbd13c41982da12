/* The report of --diff made whole from two open models (diff_text.h). */
#include "diff_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "diff_scan.h"
#include "model.h"
#include "render_diff.h"

/* 0 when every shard of m still holds its header (the metadata is compared and shown
 * from it), else -EIO with *fail and err saying which file has shrunk. */
static int headers_there(const struct ggufs_model *m, int which, struct diff_text_failure *fail,
                         char err[GGUF_ERR_MAX])
{
	if (model_header_holds(m, err) < 0) {
		*fail = (struct diff_text_failure){ which, UINT64_MAX };
		return -EIO;
	}
	return 0;
}

/* The sink_render_fns of --diff's report (a struct diff_report): JSON, and TSV. */
static void diff_render_json(struct sink *s, const void *rep)
{
	render_diff_json(s, rep);
}

static void diff_render_tsv(struct sink *s, const void *rep)
{
	render_diff_tsv(s, rep);
}

int diff_text_make(const struct ggufs_model *a, const struct ggufs_model *b, bool json,
                   stats_scan_progress_fn progress, void *progress_ctx, uint64_t *total,
                   char **text, size_t *len, struct diff_text_failure *fail,
                   char err[GGUF_ERR_MAX])
{
	*text = NULL;
	*len = 0;
	if (headers_there(a, 0, fail, err) < 0 || headers_there(b, 1, fail, err) < 0)
		return -EIO;
	struct diff_plan plan;
	if (diff_plan_make(a, b, &plan) < 0) {
		gguf_errf(err, "out of memory");
		*fail = (struct diff_text_failure){ 0, UINT64_MAX };
		return -ENOMEM;
	}
	struct diff_sums *sums = calloc(plan.n_same + 1, sizeof *sums);
	bool *compared = calloc(plan.n_same + 1, sizeof *compared);
	int r = -ENOMEM;
	*fail = (struct diff_text_failure){ 0, UINT64_MAX };
	if (!sums || !compared) {
		gguf_errf(err, "out of memory");
		goto out;
	}
	struct diff_scan_failure sf;
	r = diff_scan_run(a, b, &plan, sums, compared, progress, progress_ctx, total, &sf);
	if (r < 0) {
		*fail = (struct diff_text_failure){ sf.which, sf.which ? plan.same[sf.pair].b
		                                                       : plan.same[sf.pair].a };
		const struct ggufs_model *fm = sf.which ? b : a;
		char q[80], cause[GGUF_ERR_MAX];
		model_read_cause(fm, r, cause);
		gguf_errf(err, "%s: tensor '%s': cannot read: %s", model_path(fm),
		          gguf_quote(&model_tensor(fm, fail->tensor)->name, q), cause);
		goto out;
	}
	/* the headers again: the report shows the metadata from them */
	if ((r = headers_there(a, 0, fail, err)) < 0 || (r = headers_there(b, 1, fail, err)) < 0)
		goto out;
	const struct diff_report rep = { a, b, &plan, sums, compared };
	r = sink_render_whole(json ? diff_render_json : diff_render_tsv, &rep, text, len);
	if (r < 0)
		gguf_errf(err, "out of memory");
out:
	free(sums);
	free(compared);
	diff_plan_free(&plan);
	return r;
}
