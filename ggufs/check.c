/* ggufs --check MODEL: the health of every tensor without mounting anything, one line per
 * tensor that is not healthy (stats_segment_health: the counts alone), or with --json
 * one report of every figure (the statistics of stats/NAME, by the same code and through
 * the same tensor reader). Worker threads take the tensors' segments in file order, so that
 * both cores stay busy to the end and the file is read once, front to back, with a
 * reader thread a few segments ahead. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ggufs.h"
#include "clock.h"
#include "guard.h"
#include "names.h"
#include "render_json.h"
#include "render_value.h"
#include "stats.h"

enum { MAX_WORKERS = 8 };

struct result {
	struct tensor_stats s;   /* with --json; else only the counts of stats_health */
	bool all_zero;
	int err;                 /* 0, or -errno of the read */
};

/* One piece of work: a segment of a tensor. */
struct item {
	uint64_t tensor, seg;
};

struct scan {
	const struct tree *t;
	const struct ggufs_model *m;
	struct item *items;      /* every segment of every tensor with a .f32 file, in order */
	uint64_t n_items;
	atomic_uint_fast64_t next;   /* the next item to take */
	_Atomic uint64_t bytes_done;
	bool health_only;            /* without --json: stats_segment_health, not the figures */
	struct stats_part *parts;    /* per item, with --json */
	struct stats_health *health; /* per item, without */
	int *errs;                   /* per item: 0, or -errno of the read */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned running;        /* workers not yet finished */
	pthread_cond_t taken;    /* an item was taken, or the scan is over (under lock) */
	bool over;
};

/* How many items the reader (below) keeps ahead of the ones taken: 4 segments of q4_K
 * are 9.4 MB, more than a disk delivers while both CPUs scan one item each. */
#define READ_AHEAD_ITEMS 4

/* The byte range [*at, *at + *len) of item k in its local shard; false for a remote one
 * (it has its own read-ahead) or an empty one. */
static bool item_span(const struct scan *sc, uint64_t k, const struct model_shard **sh,
                      uint64_t *at, uint64_t *len)
{
	const struct model_tensor *mt = &sc->m->tensors[sc->items[k].tensor];
	const struct gguf_tensor *g = mt->t;
	*sh = &sc->m->shards[mt->shard];
	if (!source_mapped((*sh)->src) || g->n_elements == 0 || g->size == 0)
		return false;
	/* segments are whole blocks: STATS_SEGMENT is a multiple of every block size */
	const uint64_t per_block = g->ti->block_bytes, elems = g->ti->block_elems;
	const uint64_t first = sc->items[k].seg * STATS_SEGMENT;
	const uint64_t n = g->n_elements - first < STATS_SEGMENT ? g->n_elements - first
	                                                         : STATS_SEGMENT;
	*at = g->offset + first / elems * per_block;
	*len = n / elems * per_block;
	return true;
}

/* Touches a byte of every page of [at, at + len) of a local shard's mapping, under the
 * SIGBUS guard: false when a page has gone (the file shrank; the workers will say so). */
static bool touch(const struct model_shard *sh, uint64_t at, uint64_t len, long page)
{
	sigjmp_buf jb;
	if (sigsetjmp(jb, 0)) {
		guard_disarm();
		return false;
	}
	guard_arm(&jb);
	unsigned sum = 0;
	for (uint64_t p = at; p < at + len; p += (uint64_t)page)
		sum += ((const volatile uint8_t *)sh->map)[p];
	sum += ((const volatile uint8_t *)sh->map)[at + len - 1];
	guard_disarm();
	return sum != UINT32_MAX / 3;   /* anything: the reads are what counts */
}

/* The reader: touches the pages of the items a few ahead of the workers, in order. A
 * page fault of the mapping reads synchronously, and the faults of two workers
 * alternating between segments make two streams of the file's read-ahead; one thread
 * faulting its way through in order is one stream, read ahead of the workers while they
 * compute. Measured on a cold 1.4 GB q4_K model: 0.61 s without it, 0.50 s with it, as
 * long as cat takes. posix_fadvise(WILLNEED) and readahead(2) from the workers cost more
 * system time than they saved; plain reads (pread of the items not yet cached) were no
 * faster than touching, and copy what a warm scan need not. A warm scan pays a minor
 * fault per 16 pages here instead of in the workers. */
static void *reader(void *arg)
{
	struct scan *sc = arg;
	const long page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
	for (uint64_t k = 0; k < sc->n_items; k++) {
		pthread_mutex_lock(&sc->lock);
		while (!sc->over && k >= atomic_load(&sc->next) + READ_AHEAD_ITEMS)
			pthread_cond_wait(&sc->taken, &sc->lock);
		const bool over = sc->over;
		pthread_mutex_unlock(&sc->lock);
		if (over)
			break;
		const struct model_shard *sh;
		uint64_t at, len;
		if (item_span(sc, k, &sh, &at, &len) && !touch(sh, at, len, page))
			break;
	}
	return NULL;
}

/* Takes items until none is left, then says so. */
static void *worker(void *arg)
{
	struct scan *sc = arg;
	for (;;) {
		uint64_t k = atomic_fetch_add(&sc->next, 1);
		pthread_mutex_lock(&sc->lock);
		pthread_cond_signal(&sc->taken);
		pthread_mutex_unlock(&sc->lock);
		if (k >= sc->n_items)
			break;
		if (sc->health_only)
			sc->errs[k] = stats_segment_health(sc->m, sc->items[k].tensor,
			                                   sc->items[k].seg, &sc->health[k],
			                                   &sc->bytes_done);
		else
			sc->errs[k] = stats_segment(sc->m, sc->items[k].tensor, sc->items[k].seg,
			                            &sc->parts[k], &sc->bytes_done);
	}
	pthread_mutex_lock(&sc->lock);
	sc->running--;
	pthread_cond_signal(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
	return NULL;
}

/* n bytes in the unit that suits them, as ls -h chooses one (but in powers of 1000, as
 * disks and downloads count): "512 bytes", "14.6 KB", "3.92 MB", "638 MB", "1.52 GB",
 * three significant figures. Written into buf, which is returned. */
static const char *human_size(double n, char buf[24])
{
	static const char *const unit[] = { "KB", "MB", "GB", "TB", "PB" };
	if (n < 999.5) {
		snprintf(buf, 24, "%.0f bytes", n);
		return buf;
	}
	unsigned u = 0;
	n /= 1e3;
	while (n >= 999.5 && u + 1 < sizeof unit / sizeof unit[0]) {
		n /= 1e3;
		u++;
	}
	snprintf(buf, 24, n < 9.995 ? "%.2f %s" : n < 99.95 ? "%.1f %s" : "%.0f %s", n, unit[u]);
	return buf;
}

/* "bytes done / total (rate)" over the last progress line on a terminal. */
static void show_progress(uint64_t done, uint64_t total, double elapsed)
{
	char a[24], b[24], c[24];
	double rate = elapsed > 0 ? (double)done / elapsed : 0;
	fprintf(stderr, "\rggufs: checking: %s / %s (%3.0f%%), %s/s ", human_size((double)done, a),
	        human_size((double)total, b),
	        total ? 100.0 * (double)done / (double)total : 100.0, human_size(rate, c));
	fflush(stderr);
}

/* Runs the workers over every item and waits for them, showing progress every 200 ms
 * when progress is set. */
static void scan_all(struct scan *sc, uint64_t total, bool progress)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (unsigned)cpus;
	if (n > sc->n_items)
		n = sc->n_items ? (unsigned)sc->n_items : 1;
	pthread_t th[MAX_WORKERS];
	unsigned started = 0;
	double t0 = clock_now_s();

	pthread_t rd;
	const bool reading = pthread_create(&rd, NULL, reader, sc) == 0;
	sc->running = n;
	for (; started < n; started++)
		if (pthread_create(&th[started], NULL, worker, sc) != 0)
			break;
	pthread_mutex_lock(&sc->lock);
	sc->running -= n - started;
	if (started == 0) {
		/* no thread to be had: this one does the work */
		sc->running = 1;
		pthread_mutex_unlock(&sc->lock);
		worker(sc);
		pthread_mutex_lock(&sc->lock);
	}
	while (sc->running) {
		struct timespec until = realtime_in_ms(200);
		pthread_cond_timedwait(&sc->cond, &sc->lock, &until);
		if (progress)
			show_progress(atomic_load(&sc->bytes_done), total, clock_now_s() - t0);
	}
	sc->over = true;
	pthread_cond_signal(&sc->taken);
	pthread_mutex_unlock(&sc->lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	if (reading)
		pthread_join(rd, NULL);
	if (progress) {   /* the whole, once, however quick the scan (then the line goes) */
		show_progress(atomic_load(&sc->bytes_done), total, clock_now_s() - t0);
		fprintf(stderr, "\r%*s\r", 72, "");
	}
}

/* p[0..len) through a renderer into f: sized first, then written. */
static void put_rendered(FILE *f, void (*render)(struct sink *, const char *, uint64_t),
                         const char *p, uint64_t len)
{
	struct sink s = sink_counter();
	render(&s, p, len);
	char *buf = malloc(s.pos ? s.pos : 1);
	if (!buf)
		return;
	s = sink_window(buf, 0, s.pos);
	render(&s, p, len);
	fwrite(buf, 1, s.pos, f);
	free(buf);
}

/* What is wrong with tensor g, as the text report words it. */
enum verdict { OK, WARNING, UNHEALTHY, UNCHECKED };

static enum verdict verdict_of(const struct gguf_tensor *g, const struct result *r)
{
	if (!g->has_f32)
		return UNCHECKED;
	if (stats_unhealthy(&r->s))
		return UNHEALTHY;
	if (r->all_zero || r->s.subnormals)
		return WARNING;
	return OK;
}

static uint64_t blocks_of(const struct gguf_tensor *g)
{
	return g->n_elements / g->ti->block_elems;
}

/* One line per tensor that is not healthy: "unhealthy: NAME (TYPE): ...". */
static void report_text(const struct ggufs_model *m, const struct result *res, uint64_t *n_bad,
                        uint64_t *n_warn, uint64_t *n_unchecked)
{
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *g = m->tensors[i].t;
		const struct tensor_stats *s = &res[i].s;
		enum verdict v = verdict_of(g, &res[i]);
		char tn[16];
		if (v == OK)
			continue;
		*n_bad += v == UNHEALTHY;
		*n_warn += v == WARNING;
		*n_unchecked += v == UNCHECKED;
		static const char *const label[] = { "", "warning", "unhealthy", "not checked" };
		printf("%s: ", label[v]);
		put_rendered(stdout, render_escaped, g->name.ptr, g->name.len);
		printf(" (%s): ", ggml_type_name(g->type, tn));
		if (v == UNCHECKED) {
			printf("no dequantizer for this type\n");
			continue;
		}
		const char *sep = "";
		if (v == WARNING) {
			if (res[i].all_zero) {
				printf("all %" PRIu64 " values are zero", s->elements);
				sep = "; ";
			}
			if (s->subnormals)
				printf("%s%" PRIu64 " of %" PRIu64 " values are subnormal", sep,
				       s->subnormals, s->elements);
			printf("\n");
			continue;
		}
		const uint64_t counts[] = { s->nan, s->pos_inf, s->neg_inf };
		static const char *const what[] = { "NaN", "+inf", "-inf" };
		for (int k = 0; k < 3; k++) {
			if (!counts[k])
				continue;
			printf("%s%" PRIu64 " %s", sep, counts[k], what[k]);
			sep = ", ";
		}
		if (*sep)
			printf(" of %" PRIu64 " values", s->elements);
		if (s->bad_blocks)
			printf("%s%" PRIu64 " of %" PRIu64 " blocks with a NaN or infinite scale",
			       *sep ? "; " : "", s->bad_blocks, blocks_of(g));
		printf("\n");
	}
}

/* A float figure as a JSON number, or null when there is none (no finite values). */
static void json_float(const char *key, double v, bool f32)
{
	char buf[RENDER_SCALAR_MAX];
	if (v != v) {
		printf(", \"%s\": null", key);
		return;
	}
	if (f32)
		render_f32((float)v, buf);
	else
		render_f64(v, buf);
	printf(", \"%s\": %s", key, buf);
}

/* The whole report as one JSON document (see ggufs(1)). */
static void report_json(const struct tree *t, const struct result *res, uint64_t total,
                        uint64_t *n_bad, uint64_t *n_warn, uint64_t *n_unchecked)
{
	const struct ggufs_model *m = tree_model(t);
	printf("{\"file\": ");
	put_rendered(stdout, render_json_string, m->path, strlen(m->path));
	printf(", \"bytes\": %" PRIu64 ", \"tensors\": [", total);
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *g = m->tensors[i].t;
		const struct tensor_stats *s = &res[i].s;
		enum verdict v = verdict_of(g, &res[i]);
		static const char *const status[] = { "ok", "warning", "unhealthy", "not checked" };
		char tn[16];
		*n_bad += v == UNHEALTHY;
		*n_warn += v == WARNING;
		*n_unchecked += v == UNCHECKED;
		printf("%s\n  {\"name\": ", i ? "," : "");
		put_rendered(stdout, render_json_string, g->name.ptr, g->name.len);
		printf(", \"type\": \"%s\", \"status\": \"%s\"", ggml_type_name(g->type, tn),
		       status[v]);
		const struct tree_node *sn = tree_tensor_file(t, i, TREE_STATS);
		if (!sn) {
			printf(", \"stats\": null}");
			continue;
		}
		char rel[sizeof "stats/" + NAMES_BUF];
		int rl = snprintf(rel, sizeof rel, "stats/%s", sn->name);
		printf(", \"stats\": ");
		put_rendered(stdout, render_json_string, rel, (uint64_t)rl);
		printf(", \"problems\": [");
		const char *sep = "";
		const struct { bool on; const char *name; } problems[] = {
			{ s->nan != 0, "nan" }, { s->pos_inf != 0, "pos_inf" },
			{ s->neg_inf != 0, "neg_inf" }, { s->bad_blocks != 0, "bad_blocks" },
			{ s->elements && s->zeros == s->elements, "all_zero" },
			{ s->subnormals != 0, "subnormals" },
		};
		for (size_t k = 0; k < sizeof problems / sizeof problems[0]; k++) {
			if (!problems[k].on)
				continue;
			printf("%s\"%s\"", sep, problems[k].name);
			sep = ", ";
		}
		printf("], \"elements\": %" PRIu64, s->elements);
		json_float("min", s->min, true);
		json_float("max", s->max, true);
		json_float("mean", s->mean, false);
		json_float("std", s->std, false);
		json_float("absmax", s->absmax, true);
		printf(", \"nan\": %" PRIu64 ", \"pos_inf\": %" PRIu64 ", \"neg_inf\": %" PRIu64
		       ", \"zeros\": %" PRIu64 ", \"subnormals\": %" PRIu64, s->nan, s->pos_inf,
		       s->neg_inf, s->zeros, s->subnormals);
		if (s->has_scales)
			printf(", \"blocks\": %" PRIu64 ", \"bad_blocks\": %" PRIu64 "}", blocks_of(g),
			       s->bad_blocks);
		else
			printf(", \"blocks\": null, \"bad_blocks\": null}");
	}
	printf("\n], \"unhealthy\": %" PRIu64 ", \"warnings\": %" PRIu64
	       ", \"not_checked\": %" PRIu64 ", \"healthy\": %s}\n",
	       *n_bad, *n_warn, *n_unchecked, *n_bad ? "false" : "true");
}

/* Each tensor's figures from its items' parts, merged in order into res; 0, or the
 * index + 1 of an item whose read failed. */
static uint64_t merge_items(const struct scan *sc, struct result *res)
{
	for (uint64_t k = 0; k < sc->n_items; k++) {
		if (sc->errs[k]) {
			res[sc->items[k].tensor].err = sc->errs[k];
			return k + 1;
		}
	}
	for (uint64_t k = 0, end; k < sc->n_items; k = end) {
		const uint64_t i = sc->items[k].tensor;
		for (end = k + 1; end < sc->n_items && sc->items[end].tensor == i; end++)
			;
		if (sc->health_only) {
			struct stats_health h = sc->health[k];
			for (uint64_t e = k + 1; e < end; e++)
				stats_health_merge(&h, &sc->health[e]);
			res[i].s = (struct tensor_stats){
				.elements = h.elements, .nan = h.nan, .pos_inf = h.pos_inf,
				.neg_inf = h.neg_inf, .subnormals = h.subnormals,
				.bad_blocks = h.bad_blocks,
			};
			res[i].all_zero = h.all_zero;
			continue;
		}
		struct stats_part all = sc->parts[k];
		for (uint64_t e = k + 1; e < end; e++)
			stats_merge(&all, &sc->parts[e]);
		stats_finish(&all, &res[i].s);
		res[i].all_zero = res[i].s.elements && res[i].s.zeros == res[i].s.elements;
	}
	return 0;
}

int check_model(const struct options *o)
{
	char err[GGUF_ERR_MAX];
	int ret = 3;
	const bool json = o->json;
	char *shown;
	struct ggufs_model *m = open_model(o, &shown);
	free(shown);
	if (!m)
		return 3;
	struct tree *t = tree_build(m, err);
	if (!t) {
		fprintf(stderr, "ggufs: %s\n", err);
		model_close(m);
		return 3;
	}
	struct scan sc = { .t = t, .m = m, .lock = PTHREAD_MUTEX_INITIALIZER,
	                   .cond = PTHREAD_COND_INITIALIZER, .taken = PTHREAD_COND_INITIALIZER };
	struct result *res = calloc(m->n_tensors + 1, sizeof *res);
	uint64_t total = 0, n_checked = 0;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *g = m->tensors[i].t;
		if (!g->has_f32)
			continue;
		sc.n_items += stats_segments(g);
		total += g->size;
		n_checked++;
	}
	sc.items = calloc(sc.n_items + 1, sizeof *sc.items);
	sc.health_only = !json;
	if (json)
		sc.parts = calloc(sc.n_items + 1, sizeof *sc.parts);
	else
		sc.health = calloc(sc.n_items + 1, sizeof *sc.health);
	sc.errs = calloc(sc.n_items + 1, sizeof *sc.errs);
	if (!res || !sc.items || !(sc.parts || sc.health) || !sc.errs) {
		fprintf(stderr, "ggufs: %s: out of memory\n", m->path);
		goto out;
	}
	for (uint64_t i = 0, k = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *g = m->tensors[i].t;
		for (uint64_t seg = 0; g->has_f32 && seg < stats_segments(g); seg++)
			sc.items[k++] = (struct item){ i, seg };
	}

	scan_all(&sc, total, isatty(STDERR_FILENO));

	uint64_t failed = merge_items(&sc, res);
	if (failed) {
		char q[80];
		uint64_t i = sc.items[failed - 1].tensor;
		fprintf(stderr, "ggufs: %s: tensor '%s': cannot read: %s\n", m->path,
		        gguf_quote(&m->tensors[i].t->name, q), strerror(-res[i].err));
		goto out;
	}
	uint64_t n_bad = 0, n_warn = 0, n_unchecked = 0;
	if (json) {
		report_json(t, res, total, &n_bad, &n_warn, &n_unchecked);
	} else {
		report_text(m, res, &n_bad, &n_warn, &n_unchecked);
		char size[24];
		printf("%s: %" PRIu64 " tensors checked (%s): %" PRIu64 " unhealthy, %" PRIu64
		       " with warnings", m->path, n_checked, human_size((double)total, size), n_bad,
		       n_warn);
		if (n_unchecked)
			printf(", %" PRIu64 " not checked", n_unchecked);
		printf("\n");
	}
	fflush(stdout);
	ret = n_bad ? 1 : 0;
out:
	free(res);
	free(sc.items);
	free(sc.parts);
	free(sc.health);
	free(sc.errs);
	tree_free(t);
	model_close(m);
	return ret;
}
