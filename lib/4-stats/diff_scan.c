#include "diff_scan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "source.h"

/* Pieces whose sums wait for the ones before them: a thread that would take a piece this
 * far past the oldest one not yet merged waits, so the ring is never overrun. Pieces in
 * flight are at most the scan's threads (8), so a wait is for a piece far slower than
 * the rest (a remote fetch retried). */
enum { RING = 512 };

struct slot {
	struct diff_sums sums;
	uint64_t pair;
	bool ready;
};

struct diff_run {
	const struct ggufs_model *m[2];
	struct stats_scan_job *jobs;
	const uint64_t *pair_of;     /* per job: its plan->same pair */
	struct diff_sums *sums;      /* per pair */
	pthread_mutex_t lock;
	pthread_cond_t room;         /* merged moved on, or the scan failed (under lock) */
	uint64_t merged;             /* items before this one are merged */
	bool failed;
	uint64_t failed_item;        /* the first item in order that failed, and its model */
	int failed_which;
	struct slot ring[RING];
};

/* Merges the ready items from merged on into their pairs' sums (under lock). */
static void merge_ready(struct diff_run *d)
{
	for (struct slot *s; (s = &d->ring[d->merged % RING])->ready; d->merged++) {
		diff_sums_merge(&d->sums[s->pair], &s->sums);
		s->ready = false;
	}
}

/* The stats_scan_visit_fn of --diff: one piece of a pair, merged in order. */
static int visit_piece(void *ctx, const struct stats_scan_job *job, uint64_t seg,
                       uint64_t item, _Atomic uint64_t *progress)
{
	struct diff_run *d = ctx;
	pthread_mutex_lock(&d->lock);
	while (!d->failed && item >= d->merged + RING)
		pthread_cond_wait(&d->room, &d->lock);
	const bool failed = d->failed;
	pthread_mutex_unlock(&d->lock);
	if (failed)   /* after the first failure, which is before this piece */
		return -ECANCELED;
	struct diff_sums s;
	int which = 0;
	int r = diff_range(d->m[0], job->tensor[0], d->m[1], job->tensor[1], seg * DIFF_CHUNK,
	                   DIFF_CHUNK, &s, &which, progress);
	pthread_mutex_lock(&d->lock);
	if (r < 0) {
		if (!d->failed || item < d->failed_item) {
			d->failed_item = item;
			d->failed_which = which;
		}
		d->failed = true;
	} else {
		d->ring[item % RING] = (struct slot){ s, d->pair_of[job - d->jobs], true };
		merge_ready(d);
	}
	pthread_cond_broadcast(&d->room);
	pthread_mutex_unlock(&d->lock);
	return r;
}

/* Tells each fetched shard of m (side w of the plan) that the scan reads only the
 * compared tensors' bytes, so that its read-ahead fetches none of the others' (a tensor
 * renamed, or only in one model): each byte fetched is a compared one. Out of memory
 * only loses that limit. */
static void want_compared(const struct ggufs_model *m, int w, const struct diff_plan *plan,
                          const bool *compared)
{
	if (!model_fetched(m))
		return;
	const uint64_t n_t = model_n_tensors(m);
	bool *read = calloc(n_t ? n_t : 1, sizeof *read);
	struct source_range *ranges = calloc(n_t ? n_t : 1, sizeof *ranges);
	if (read && ranges) {
		for (uint64_t k = 0; k < plan->n_same; k++)
			if (compared[k])
				read[w ? plan->same[k].b : plan->same[k].a] = true;
		/* tensors are in file order, then each file's order: each file's ranges sorted */
		for (uint64_t i = 0, n = 0; i < n_t; i++) {
			uint64_t at;
			struct source *src = model_tensor_bytes(m, i, &at);
			if (read[i])
				ranges[n++] = (struct source_range){ at, model_tensor(m, i)->size };
			if (i + 1 == n_t || model_tensor_file(m, i + 1) != model_tensor_file(m, i)) {
				source_want(src, ranges, n);
				n = 0;
			}
		}
	}
	free(read);
	free(ranges);
}

int diff_scan_run(const struct ggufs_model *a, const struct ggufs_model *b,
                  const struct diff_plan *plan, struct diff_sums *sums, bool *compared,
                  stats_scan_progress_fn progress, void *progress_ctx, uint64_t *total,
                  struct diff_scan_failure *fail)
{
	struct diff_run *d = calloc(1, sizeof *d);
	struct stats_scan_job *jobs = calloc(plan->n_same + 1, sizeof *jobs);
	uint64_t *pair_of = calloc(plan->n_same + 1, sizeof *pair_of);
	int ret = -ENOMEM;
	if (!d || !jobs || !pair_of)
		goto out;
	struct stats_scan sc = { .model = { a, b }, .jobs = jobs, .visit = visit_piece, .ctx = d,
	                         .progress = progress, .progress_ctx = progress_ctx,
	                         .segment = DIFF_CHUNK };
	*total = 0;
	for (uint64_t k = 0; k < plan->n_same; k++) {
		const struct gguf_tensor *ga = model_tensor(a, plan->same[k].a);
		const struct gguf_tensor *gb = model_tensor(b, plan->same[k].b);
		compared[k] = ga->has_f32 && gb->has_f32;
		diff_sums_init(&sums[k]);
		if (!compared[k])
			continue;
		pair_of[sc.n_jobs] = k;
		jobs[sc.n_jobs++] = (struct stats_scan_job){ .tensor = { plan->same[k].a,
		                                                         plan->same[k].b } };
		*total += ga->size + gb->size;
	}
	want_compared(a, 0, plan, compared);
	want_compared(b, 1, plan, compared);
	stats_scan_plan(&sc);
	*d = (struct diff_run){ .m = { a, b }, .jobs = jobs, .pair_of = pair_of, .sums = sums,
	                        .lock = PTHREAD_MUTEX_INITIALIZER,
	                        .room = PTHREAD_COND_INITIALIZER };
	uint64_t failed_job;
	ret = stats_scan_run(&sc, &failed_job);
	if (ret < 0) {
		/* the scan's first failure in order is the first real one: a piece canceled
		 * after it comes later */
		fail->which = d->failed_which;
		fail->pair = pair_of[failed_job];
	}
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->room);
out:
	free(d);
	free(jobs);
	free(pair_of);
	return ret;
}
