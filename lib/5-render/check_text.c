/* The report of --check of one model, from the scan to its text (check_text.h). */
#include "check_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "model.h"
#include "render_check.h"
#include "stats.h"

/* What the visitor fills: per item, the part or the health of its segment. */
struct check_scan {
	const struct ggufs_model *m;
	bool health_only;            /* text: stats_segment_health, not the figures */
	struct stats_part *parts;    /* per item, for JSON */
	struct stats_health *health; /* per item, for text */
};

/* The stats_scan_visit_fn of --check. */
static int check_visit(void *ctx, const struct stats_scan_job *job, uint64_t seg,
                       uint64_t item, _Atomic uint64_t *progress)
{
	struct check_scan *cs = ctx;
	if (cs->health_only)
		return stats_segment_health(cs->m, job->tensor[0], seg, &cs->health[item],
		                            progress);
	return stats_segment(cs->m, job->tensor[0], seg, &cs->parts[item], progress);
}

/* A job's tensor and where its bytes start in the file, to sort jobs by. */
struct check_offset {
	uint64_t offset;
	uint64_t tensor;
};

static int check_by_offset(const void *a, const void *b)
{
	const uint64_t oa = ((const struct check_offset *)a)->offset;
	const uint64_t ob = ((const struct check_offset *)b)->offset;
	return oa < ob ? -1 : oa > ob;
}

/* Puts the jobs of sc (one tensor each, of m) in the order of their bytes in the file.
 * False out of memory. */
static bool check_sort_by_offset(struct stats_scan *sc, const struct ggufs_model *m)
{
	struct check_offset *keys = calloc(sc->n_jobs + 1, sizeof *keys);
	if (!keys)
		return false;
	for (uint64_t j = 0; j < sc->n_jobs; j++)
		keys[j] = (struct check_offset){ model_tensor(m, sc->jobs[j].tensor[0])->offset,
		                                 sc->jobs[j].tensor[0] };
	qsort(keys, sc->n_jobs, sizeof *keys, check_by_offset);
	for (uint64_t j = 0; j < sc->n_jobs; j++)
		sc->jobs[j].tensor[0] = keys[j].tensor;
	free(keys);
	return true;
}

/* Each job's figures from its items, merged in order into res (of its tensor). */
static void check_merge(const struct check_scan *cs, const struct stats_scan *sc,
                        struct check_tensor *res)
{
	for (uint64_t j = 0; j < sc->n_jobs; j++) {
		const struct stats_scan_job *job = &sc->jobs[j];
		const uint64_t i = job->tensor[0], k = job->first_item, end = k + job->segments;
		if (cs->health_only) {
			struct stats_health h = cs->health[k];
			for (uint64_t e = k + 1; e < end; e++)
				stats_health_merge(&h, &cs->health[e]);
			res[i].s = (struct tensor_stats){
				.elements = h.elements, .nan = h.nan, .pos_inf = h.pos_inf,
				.neg_inf = h.neg_inf, .subnormals = h.subnormals,
				.bad_blocks = h.bad_blocks,
			};
			res[i].all_zero = h.all_zero;
			continue;
		}
		struct stats_part all = cs->parts[k];
		for (uint64_t e = k + 1; e < end; e++)
			stats_merge(&all, &cs->parts[e]);
		stats_finish(&all, &res[i].s);
		res[i].all_zero = res[i].s.elements && res[i].s.zeros == res[i].s.elements;
	}
}

/* What the report is rendered from. */
struct check_report {
	const struct ggufs_model *m;
	const struct check_tensor *res;
	const struct check_counts *counts;
	bool json;
};

/* The sink_render_fn of a struct check_report: JSON or text. */
static void check_render(struct sink *s, const void *ctx)
{
	const struct check_report *r = ctx;
	r->json ? render_check_json(s, r->m, r->res, r->counts)
	        : render_check_text(s, r->m, r->res, r->counts);
}

int check_text_make(const struct ggufs_model *m, bool json, stats_scan_progress_fn progress,
                    void *progress_ctx, uint64_t *total, char **text, size_t *len,
                    uint64_t *unhealthy, char err[GGUF_ERR_MAX])
{
	*text = NULL;
	*len = 0;
	*unhealthy = 0;
	*total = 0;
	int r = -ENOMEM;
	struct check_scan cs = { .m = m, .health_only = !json };
	struct stats_scan sc = { .model = { m, NULL }, .visit = check_visit, .ctx = &cs,
	                         .progress = progress, .progress_ctx = progress_ctx };
	struct check_tensor *res = calloc(model_n_tensors(m) + 1, sizeof *res);
	sc.jobs = calloc(model_n_tensors(m) + 1, sizeof *sc.jobs);
	if (!res || !sc.jobs)
		goto oom;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		if (!model_tensor(m, i)->has_f32)
			continue;
		sc.jobs[sc.n_jobs++].tensor[0] = i;
		*total += model_tensor(m, i)->size;
	}
	if (model_streamed(m)) {
		/* one reader, front to back: the stream lets go of what it has passed */
		if (!check_sort_by_offset(&sc, m))
			goto oom;
		sc.threads = 1;
	}
	const uint64_t n_items = stats_scan_plan(&sc);
	if (json)
		cs.parts = calloc(n_items + 1, sizeof *cs.parts);
	else
		cs.health = calloc(n_items + 1, sizeof *cs.health);
	if (!cs.parts && !cs.health)
		goto oom;
	uint64_t failed;
	r = stats_scan_run(&sc, &failed);
	if (r < 0) {
		char q[80], cause[GGUF_ERR_MAX];
		model_read_cause(m, r, cause);
		gguf_errf(err, "%s: tensor '%s': cannot read: %s", model_path(m),
		          gguf_quote(&model_tensor(m, sc.jobs[failed].tensor[0])->name, q), cause);
		goto out;
	}
	check_merge(&cs, &sc, res);
	struct check_counts counts;
	check_count(m, res, &counts);
	*unhealthy = counts.unhealthy;
	const struct check_report rep = { m, res, &counts, json };
	r = sink_render_whole(check_render, &rep, text, len);
	if (r < 0)
		goto oom;
	goto out;
oom:
	r = -ENOMEM;
	gguf_errf(err, "%s: out of memory", model_path(m));
out:
	free(res);
	free(sc.jobs);
	free(cs.parts);
	free(cs.health);
	return r;
}
