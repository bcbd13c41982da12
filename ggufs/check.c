/* ggufs --check MODEL: the health of every tensor without mounting anything, one line per
 * tensor that is not healthy (stats_segment_health: the counts alone), or with --json
 * one report of every figure (the statistics of stats/NAME, by the same code and through
 * the same tensor reader). The scan is the stats layer's (stats_scan.h), the report
 * render's (render_check.h); this file opens the model, says progress and prints. */
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
#include "render_check.h"
#include "stats.h"
#include "stats_scan.h"

/* What the visitor fills: per item, the part or the health of its segment. */
struct check_scan {
	const struct ggufs_model *m;
	bool health_only;            /* without --json: stats_segment_health, not the figures */
	struct stats_part *parts;    /* per item, with --json */
	struct stats_health *health; /* per item, without */
};

/* The stats_scan_visit_fn of --check. */
static int visit_segment(void *ctx, const struct stats_scan_job *job, uint64_t seg,
                         uint64_t item, _Atomic uint64_t *progress)
{
	struct check_scan *cs = ctx;
	if (cs->health_only)
		return stats_segment_health(cs->m, job->tensor[0], seg, &cs->health[item],
		                            progress);
	return stats_segment(cs->m, job->tensor[0], seg, &cs->parts[item], progress);
}

/* A job's tensor and where its bytes start in the file, to sort jobs by. */
struct job_offset {
	uint64_t offset;
	uint64_t tensor;
};

static int by_offset(const void *a, const void *b)
{
	const uint64_t oa = ((const struct job_offset *)a)->offset;
	const uint64_t ob = ((const struct job_offset *)b)->offset;
	return oa < ob ? -1 : oa > ob;
}

/* Puts the jobs of sc (one tensor each, of m) in the order of their bytes in the file.
 * False out of memory. */
static bool sort_by_offset(struct stats_scan *sc, const struct ggufs_model *m)
{
	struct job_offset *keys = calloc(sc->n_jobs + 1, sizeof *keys);
	if (!keys)
		return false;
	for (uint64_t j = 0; j < sc->n_jobs; j++)
		keys[j] = (struct job_offset){ m->tensors[sc->jobs[j].tensor[0]].t->offset,
		                               sc->jobs[j].tensor[0] };
	qsort(keys, sc->n_jobs, sizeof *keys, by_offset);
	for (uint64_t j = 0; j < sc->n_jobs; j++)
		sc->jobs[j].tensor[0] = keys[j].tensor;
	free(keys);
	return true;
}

/* "bytes done / total (rate)" over the last progress line on a terminal. */
static void show_progress(void *ctx, uint64_t done, double elapsed)
{
	print_progress("checking", done, *(const uint64_t *)ctx, elapsed);
}

/* Each job's figures from its items, merged in order into res (of its tensor). */
static void merge_items(const struct check_scan *cs, const struct stats_scan *sc,
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

/* The report to print: print_rendered's ctx. */
struct check_report {
	const struct ggufs_model *m;
	const struct check_tensor *res;
	const struct check_counts *counts;
	bool json;
};

static void render_report(struct sink *s, const void *ctx)
{
	const struct check_report *r = ctx;
	if (r->json)
		render_check_json(s, r->m, r->res, r->counts);
	else
		render_check_text(s, r->m, r->res, r->counts);
}

/* Checks model m (taken: closed here) and prints its report, with before in front of
 * it (the separator from the report before); *printed is set when it was printed. The
 * exit status for this model alone. */
static int check_model(const struct options *o, struct ggufs_model *m, const char *before,
                       bool *printed)
{
	char err[GGUF_ERR_MAX];
	int ret = 3;
	/* the tree is built as a mount would, so that a model it refuses is refused here */
	struct tree *t = tree_build(m, err);
	if (!t) {
		log_errf("%s", err);
		model_close(m);
		return 3;
	}
	struct check_scan cs = { .m = m, .health_only = !o->json };
	struct stats_scan sc = { .model = { m, NULL }, .visit = visit_segment, .ctx = &cs };
	struct check_tensor *res = calloc(m->n_tensors + 1, sizeof *res);
	sc.jobs = calloc(m->n_tensors + 1, sizeof *sc.jobs);
	uint64_t total = 0;
	if (res && sc.jobs) {
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			if (!m->tensors[i].t->has_f32)
				continue;
			sc.jobs[sc.n_jobs++].tensor[0] = i;
			total += m->tensors[i].t->size;
		}
		if (model_streamed(m)) {
			/* one reader, front to back: the stream lets go of what it has passed */
			if (!sort_by_offset(&sc, m)) {
				log_errf("%s: out of memory", m->path);
				goto out;
			}
			sc.threads = 1;
		}
		const uint64_t n_items = stats_scan_plan(&sc);
		if (o->json)
			cs.parts = calloc(n_items + 1, sizeof *cs.parts);
		else
			cs.health = calloc(n_items + 1, sizeof *cs.health);
	}
	if (!res || !sc.jobs || !(cs.parts || cs.health)) {
		log_errf("%s: out of memory", m->path);
		goto out;
	}
	const bool progress = isatty(STDERR_FILENO);
	if (progress) {
		sc.progress = show_progress;
		sc.progress_ctx = &total;
	}
	uint64_t failed;
	int r = stats_scan_run(&sc, &failed);
	if (progress)   /* the progress line goes */
		print_progress_end();
	if (r < 0) {
		char q[80];
		const uint64_t i = sc.jobs[failed].tensor[0];
		const char *why = model_streamed(m) ? stream_error(m->shards[0].src) : NULL;
		log_errf("%s: tensor '%s': cannot read: %s", m->path,
		        gguf_quote(&m->tensors[i].t->name, q), why ? why : strerror(-r));
		goto out;
	}
	merge_items(&cs, &sc, res);
	struct check_counts counts;
	check_count(m, res, &counts);
	const struct check_report report = { m, res, &counts, o->json };
	fputs(before, stdout);
	*printed = true;
	if (print_rendered(render_report, &report) < 0)
		log_errf("cannot write the report: %s", strerror(errno));
	ret = counts.unhealthy ? 1 : 0;
out:
	free(res);
	free(sc.jobs);
	free(cs.parts);
	free(cs.health);
	tree_free(t);
	model_close(m);
	return ret;
}

/* What --check checks, in order: an operand that names one model, or a model of an
 * operand that names a library (its path in the library's source). */
struct check_item {
	const char *name;          /* the operand naming one model, or NULL */
	struct library *lib;       /* else the library (owned by the list) */
	char *path;                /* and the model's first file in it (owned) */
};

/* The library that name is (kind: name_kind_of's) opened as a mount opens it, with o's
 * options: NULL after one line on stderr. */
static struct library *open_check_library(const struct options *o, const char *name,
                                          enum name_kind kind)
{
	char err[GGUF_ERR_MAX];
	struct options one = *o;
	one.model = name;
	struct lib_source *src = NULL;
	if (kind == NAME_KIND_HUB_LIBRARY)
		src = open_hub_library(&one, NULL, NULL);   /* (said) */
	else if (kind == NAME_KIND_S3_LIBRARY)
		src = open_s3_library(&one);   /* (said) */
	else if (!(src = lib_source_local(name, err)))
		log_errf("%s", err);
	struct library *lib = src ? library_open(src, err) : NULL;
	if (src && !lib)
		log_errf("%s", err);
	return lib;
}

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
			lib = open_check_library(o, o->operands[k], kind);
			if (!lib) {
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
