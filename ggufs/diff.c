/* ggufs --diff [--json] A B: the error of every tensor of B against its namesake in A,
 * without mounting anything. The pairing is the stats layer's (diff_plan.h), the sums
 * too (stats_diff.h), run over both models side by side by the scan --check uses
 * (stats_scan.h); the report is render's (render_diff.h). This file opens the two
 * models, says progress and prints. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "diff_plan.h"
#include "evlog.h"
#include "log_escape.h"
#include "remote.h"
#include "render_diff.h"
#include "render_size.h"
#include "stats.h"
#include "stats_diff.h"
#include "stats_scan.h"

/* Each remote model's memory cache when -o cache_size is not given: a quarter of a
 * mount's, so that two stay well under the 256 MB the scan may use. A scan reads each
 * byte once, so the cache only holds the read-ahead. */
#define DIFF_CACHE_DEFAULT (REMOTE_CACHE_DEFAULT / 4)

/* The first error the event log said during the comparison (a fetch that failed for
 * good, a file that changed), kept to be the cause in the one line that names the
 * tensor which could not be read, instead of a line of its own before it. */
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_event[EVLOG_LINE_MAX];

/* The evlog_sink_fn of --diff: warnings said at once, the first error kept (lines come
 * escaped already). */
static void keep_event(void *arg, enum evlog_level level, const char *line)
{
	(void)arg;
	if (level == EVLOG_WARNING) {
		fprintf(stderr, "ggufs: warning: %s\n", line);
		return;
	}
	pthread_mutex_lock(&event_lock);
	if (!first_event[0])
		snprintf(first_event, sizeof first_event, "%s", line);
	pthread_mutex_unlock(&event_lock);
}

/* The cause of a failed read of model m, escaped: the kept event without its "PATH: "
 * (the line names the file already) when it is about one of m's files, else
 * strerror(-err). */
static const char *read_cause(const struct ggufs_model *m, int err, char *buf, size_t size)
{
	pthread_mutex_lock(&event_lock);
	snprintf(buf, size, "%s", first_event);
	pthread_mutex_unlock(&event_lock);
	for (uint32_t s = 0; buf[0] && s < m->n_shards; s++) {
		const size_t n = strlen(m->shards[s].path);
		if (strncmp(buf, m->shards[s].path, n) == 0 && strncmp(buf + n, ": ", 2) == 0)
			return buf + n + 2;
	}
	return err == -ENOMEM ? "out of memory" : strerror(-err);
}

/* What the visitor fills: per item, its sums, and which model failed a read. */
struct diff_scan {
	const struct ggufs_model *m[2];
	struct diff_sums *sums;   /* per item */
	int *which;               /* per item: 0 (A) or 1 (B) after a failed read, else -1 */
};

/* The stats_scan_visit_fn of --diff. */
static int visit_pair(void *ctx, const struct stats_scan_job *job, uint64_t seg,
                      uint64_t item, _Atomic uint64_t *progress)
{
	struct diff_scan *ds = ctx;
	return diff_segment(ds->m[0], job->tensor[0], ds->m[1], job->tensor[1], seg,
	                    &ds->sums[item], &ds->which[item], progress);
}

/* "bytes done / total (rate)" over the last progress line on a terminal. */
static void show_progress(void *ctx, uint64_t done, double elapsed)
{
	const uint64_t total = *(const uint64_t *)ctx;
	char a[RENDER_SIZE_MAX], b[RENDER_SIZE_MAX], c[RENDER_SIZE_MAX];
	double rate = elapsed > 0 ? (double)done / elapsed : 0;
	fprintf(stderr, "\rggufs: comparing: %s / %s (%3.0f%%), %s/s ",
	        render_size((double)done, a), render_size((double)total, b),
	        total ? 100.0 * (double)done / (double)total : 100.0, render_size(rate, c));
	fflush(stderr);
}

/* The report to print: print_rendered's ctx. */
struct report {
	struct diff_report r;
	bool json;
};

static void render_report(struct sink *s, const void *ctx)
{
	const struct report *rep = ctx;
	if (rep->json)
		render_diff_json(s, &rep->r);
	else
		render_diff_tsv(s, &rep->r);
}

/* Opens the model named by path with o's remote options; NULL after one line. */
static struct ggufs_model *open_one(const struct options *o, const char *path)
{
	struct options one = *o;
	one.model = path;
	if (!one.cache_size)
		one.cache_size = DIFF_CACHE_DEFAULT;
	char *shown;
	struct ggufs_model *m = open_model(&one, &shown);
	free(shown);
	return m;
}

/* 0 when every shard of m still holds its header (the metadata is compared and shown
 * from it), else -EIO after one line. */
static int headers_there(const struct ggufs_model *m)
{
	for (uint32_t s = 0; s < m->n_shards; s++) {
		if (source_holds(m->shards[s].src, m->shards[s].gf.data_offset) < 0) {
			log_errf("%s: the file has shrunk: its header is gone", m->shards[s].path);
			return -EIO;
		}
	}
	return 0;
}

/* Scans the pairs of the plan that can be compared into per-pair sums (*sums, one per
 * plan->same pair, merged from the items in order), compared[k] saying which. 0, or 3
 * after one line on stderr. */
static int scan_pairs(struct ggufs_model *m[2], const struct diff_plan *plan,
                      struct diff_sums *sums, bool *compared)
{
	struct diff_scan ds = { .m = { m[0], m[1] } };
	struct stats_scan sc = { .model = { m[0], m[1] }, .visit = visit_pair, .ctx = &ds };
	uint64_t total = 0, *pair_of = NULL;
	int ret = 3;
	sc.jobs = calloc(plan->n_same + 1, sizeof *sc.jobs);
	pair_of = calloc(plan->n_same + 1, sizeof *pair_of);
	if (!sc.jobs || !pair_of)
		goto oom;
	for (uint64_t k = 0; k < plan->n_same; k++) {
		const struct gguf_tensor *ga = m[0]->tensors[plan->same[k].a].t;
		const struct gguf_tensor *gb = m[1]->tensors[plan->same[k].b].t;
		compared[k] = ga->has_f32 && gb->has_f32;
		diff_sums_init(&sums[k]);
		if (!compared[k])
			continue;
		pair_of[sc.n_jobs] = k;
		sc.jobs[sc.n_jobs++] = (struct stats_scan_job){ .tensor = { plan->same[k].a,
		                                                            plan->same[k].b } };
		total += ga->size + gb->size;
	}
	const uint64_t n_items = stats_scan_plan(&sc);
	ds.sums = calloc(n_items + 1, sizeof *ds.sums);
	ds.which = calloc(n_items + 1, sizeof *ds.which);
	if (!ds.sums || !ds.which)
		goto oom;
	for (uint64_t k = 0; k < n_items; k++)
		ds.which[k] = -1;
	const bool progress = isatty(STDERR_FILENO);
	if (progress) {
		sc.progress = show_progress;
		sc.progress_ctx = &total;
	}
	uint64_t failed;
	int r = stats_scan_run(&sc, &failed);
	if (progress)   /* the progress line goes */
		fprintf(stderr, "\r%*s\r", 72, "");
	if (r < 0 && failed == UINT64_MAX)
		goto oom;
	if (r < 0) {
		const struct stats_scan_job *job = &sc.jobs[failed];
		/* the model of the job's first item that failed */
		int which = 0;
		for (uint64_t e = 0; e < job->segments; e++) {
			if (ds.which[job->first_item + e] >= 0) {
				which = ds.which[job->first_item + e];
				break;
			}
		}
		const struct ggufs_model *fm = m[which];
		char q[80], cause[EVLOG_LINE_MAX], raw[GGUF_ERR_MAX + 128], line[4 * sizeof raw];
		snprintf(raw, sizeof raw, "%s: tensor '%s': cannot read: ", fm->path,
		         gguf_quote(&fm->tensors[job->tensor[which]].t->name, q));
		log_escape(line, sizeof line, raw, strlen(raw));
		fprintf(stderr, "ggufs: %s%s\n", line, read_cause(fm, r, cause, sizeof cause));
		goto out;
	}
	for (uint64_t j = 0; j < sc.n_jobs; j++)
		for (uint64_t e = 0; e < sc.jobs[j].segments; e++)
			diff_sums_merge(&sums[pair_of[j]], &ds.sums[sc.jobs[j].first_item + e]);
	ret = 0;
	goto out;
oom:
	log_errf("out of memory");
out:
	free(sc.jobs);
	free(pair_of);
	free(ds.sums);
	free(ds.which);
	return ret;
}

int diff_models(const struct options *o)
{
	/* before any fetch: a failed one is said in the tensor's line (keep_event) */
	evlog_set_sink(keep_event, NULL);
	struct ggufs_model *m[2] = { open_one(o, o->model), NULL };
	if (!m[0])
		return 3;
	m[1] = open_one(o, o->model_b);
	if (!m[1]) {
		model_close(m[0]);
		return 3;
	}
	int ret = 3;
	struct diff_plan plan;
	struct diff_sums *sums = NULL;
	bool *compared = NULL;
	if (headers_there(m[0]) < 0 || headers_there(m[1]) < 0)
		goto close;
	if (diff_plan_make(m[0], m[1], &plan) < 0) {
		log_errf("out of memory");
		goto close;
	}
	sums = calloc(plan.n_same + 1, sizeof *sums);
	compared = calloc(plan.n_same + 1, sizeof *compared);
	if (!sums || !compared) {
		log_errf("out of memory");
		goto out;
	}
	if (scan_pairs(m, &plan, sums, compared) != 0)
		goto out;
	/* the header again: the report shows the metadata from it */
	if (headers_there(m[0]) < 0 || headers_there(m[1]) < 0)
		goto out;
	const struct report rep = { { m[0], m[1], &plan, sums, compared }, o->json };
	int r = print_rendered(render_report, &rep);
	if (r < 0) {
		log_errf("cannot write the report: %s", strerror(-r));
		goto out;
	}
	ret = 0;
out:
	free(sums);
	free(compared);
	diff_plan_free(&plan);
close:
	model_close(m[0]);
	model_close(m[1]);
	/* an error no read failed of (a read-ahead's) is still said */
	evlog_set_sink(NULL, NULL);
	if (ret == 0 && first_event[0])
		fprintf(stderr, "ggufs: %s\n", first_event);
	return ret;
}
