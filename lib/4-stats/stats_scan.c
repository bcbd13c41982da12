#include "stats_scan.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "model.h"
#include "reader.h"
#include "stats.h"

enum { MAX_WORKERS = 8 };

/* How many values the reader (below) keeps ahead of the items taken: 4 segments, 9.4 MB
 * of q4_K, more than a disk delivers while both CPUs scan one item each. */
#define READ_AHEAD_VALUES (4 * STATS_SEGMENT)

/* A scan as it runs. */
struct run {
	struct stats_scan *sc;
	uint64_t segment;            /* values per item */
	uint64_t n_items;
	uint64_t ahead;              /* items the reader keeps ahead */
	atomic_uint_fast64_t next;   /* the next item to take */
	atomic_uint_fast64_t wake_at;   /* the reader waits for next to reach this, or
	                                 * UINT64_MAX */
	atomic_bool failed;          /* a visit failed: take no more */
	uint64_t first_failed;       /* the first item in order whose visit failed, or
	                              * n_items (under lock) */
	int first_err;               /* its -errno */
	_Atomic uint64_t bytes_done;
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* a worker finished (under lock) */
	unsigned running;        /* workers not yet finished */
	pthread_cond_t taken;    /* an item was taken, or the scan is over (under lock) */
	bool over;
};

/* The scan's values per segment. */
static uint64_t segment_of(const struct stats_scan *sc)
{
	return sc->segment ? sc->segment : STATS_SEGMENT;
}

uint64_t stats_scan_plan(struct stats_scan *sc)
{
	const uint64_t per = segment_of(sc);
	uint64_t n = 0;
	for (uint64_t j = 0; j < sc->n_jobs; j++) {
		struct stats_scan_job *job = &sc->jobs[j];
		const uint64_t values = model_tensor(sc->model[0], job->tensor[0])->n_elements;
		job->segments = values ? (values - 1) / per + 1 : 1;
		job->first_item = n;
		n += job->segments;
	}
	return n;
}

/* The job of item k: the last whose first item is at most k (jobs are in item order). */
static uint64_t job_of(const struct stats_scan *sc, uint64_t k)
{
	uint64_t lo = 0, hi = sc->n_jobs;
	while (hi - lo > 1) {
		const uint64_t mid = lo + (hi - lo) / 2;
		if (sc->jobs[mid].first_item <= k)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The byte range [*at, *at + *len) of segment seg (of per values) of tensor i's stored
 * bytes (whole blocks: a segment is a multiple of every block size); false for an empty
 * one. */
static bool segment_span(const struct ggufs_model *m, uint64_t i, uint64_t seg, uint64_t per,
                         uint64_t *at, uint64_t *len)
{
	const struct gguf_tensor *g = model_tensor(m, i);
	if (g->n_elements == 0 || g->size == 0)
		return false;
	const uint64_t per_block = g->ti->block_bytes, elems = g->ti->block_elems;
	const uint64_t first = seg * per;
	if (first >= g->n_elements)
		return false;
	const uint64_t n = g->n_elements - first < per ? g->n_elements - first : per;
	*at = first / elems * per_block;
	*len = (n + elems - 1) / elems * per_block;
	if (*at > g->size)
		return false;
	if (*len > g->size - *at)
		*len = g->size - *at;
	return *len > 0;
}

/* What touching counts, so that the compiler keeps the loads. */
struct touch {
	long page;
	unsigned sum;
};

/* The source_visit_fn of the reader: a byte of every page of p[0..len). */
static void touch_pages(void *ctx, const uint8_t *p, uint64_t len)
{
	struct touch *t = ctx;
	const volatile uint8_t *v = p;
	for (uint64_t off = 0; off < len; off += (uint64_t)t->page)
		t->sum += v[off];
	t->sum += v[len - 1];
}

/* The reader: touches the pages of the items a few ahead of the workers, in order, in
 * each mapped model (through the tensor reader, so under the SIGBUS guard: it stops at
 * a page that has gone, and the workers will say so). A page fault of the mapping reads
 * synchronously, and the faults of two workers alternating between segments make two
 * streams of the file's read-ahead; one thread faulting its way through in order is one
 * stream, read ahead of the workers while they compute. Measured on a cold 1.4 GB q4_K
 * model: 0.61 s without it, 0.50 s with it, as long as cat takes.
 * posix_fadvise(WILLNEED) and readahead(2) from the workers cost more system time than
 * they saved; plain reads (pread of the items not yet cached) were no faster than
 * touching, and copy what a warm scan need not. A warm scan pays a minor fault per 16
 * pages here instead of in the workers. A remote model has its own read-ahead. */
static void *reader(void *arg)
{
	struct run *r = arg;
	const struct stats_scan *sc = r->sc;
	struct touch t = { .page = sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096 };
	for (uint64_t k = 0, j = 0; k < r->n_items; k++) {
		if (k >= atomic_load(&r->next) + r->ahead) {
			/* ahead as far as it may go: it waits until half of its lead is taken, so
			 * that it is woken once for that many items, not for every one (--diff's
			 * small items: 57 thousand wakes and switches on 2 x 4 GB, 8% of the CPU
			 * time) */
			const uint64_t want = k + 1 - r->ahead + r->ahead / 2;
			pthread_mutex_lock(&r->lock);
			atomic_store(&r->wake_at, want);
			while (!r->over && atomic_load(&r->next) < want)
				pthread_cond_wait(&r->taken, &r->lock);
			atomic_store(&r->wake_at, UINT64_MAX);
			const bool over = r->over;
			pthread_mutex_unlock(&r->lock);
			if (over)
				return NULL;
		}
		while (j + 1 < sc->n_jobs && sc->jobs[j + 1].first_item <= k)
			j++;
		const struct stats_scan_job *job = &sc->jobs[j];
		const uint64_t seg = k - job->first_item;
		for (int side = 0; side < 2 && sc->model[side]; side++) {
			const struct ggufs_model *m = sc->model[side];
			const uint64_t i = job->tensor[side];
			uint64_t at, len;
			if (!model_tensor_mapped(m, i) || !segment_span(m, i, seg, r->segment, &at, &len))
				continue;
			if (reader_visit_raw(m, i, at, len, NULL, touch_pages, &t, NULL) < 0)
				return NULL;
		}
	}
	return NULL;
}

/* Takes items until none is left or a visit failed, then says so. */
static void *worker(void *arg)
{
	struct run *r = arg;
	struct stats_scan *sc = r->sc;
	for (;;) {
		const uint64_t k = atomic_load(&r->failed) ? r->n_items
		                                           : atomic_fetch_add(&r->next, 1);
		/* next is stored before wake_at is read, and the reader stores wake_at before
		 * it reads next: one of the two sees the other's */
		if (k + 1 >= atomic_load(&r->wake_at)) {
			pthread_mutex_lock(&r->lock);
			pthread_cond_signal(&r->taken);
			pthread_mutex_unlock(&r->lock);
		}
		if (k >= r->n_items)
			break;
		const struct stats_scan_job *job = &sc->jobs[job_of(sc, k)];
		const int err = sc->visit(sc->ctx, job, k - job->first_item, k, &r->bytes_done);
		if (err) {
			atomic_store(&r->failed, true);
			pthread_mutex_lock(&r->lock);
			if (k < r->first_failed) {
				r->first_failed = k;
				r->first_err = err;
			}
			pthread_mutex_unlock(&r->lock);
		}
	}
	pthread_mutex_lock(&r->lock);
	r->running--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* The CLOCK_REALTIME time 200 ms from now: a wait's deadline on a default condition. */
static struct timespec in_200ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += 200000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* Runs the workers and the reader over every item and waits for them, telling progress
 * every 200 ms. */
static void run_all(struct run *r)
{
	struct stats_scan *sc = r->sc;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (unsigned)cpus;
	if (sc->threads && n > sc->threads)
		n = sc->threads;
	if (n > r->n_items)
		n = r->n_items ? (unsigned)r->n_items : 1;
	pthread_t th[MAX_WORKERS];
	unsigned started = 0;
	const double t0 = clock_now_s();

	pthread_t rd;
	const bool reading = pthread_create(&rd, NULL, reader, r) == 0;
	r->running = n;
	for (; started < n; started++)
		if (pthread_create(&th[started], NULL, worker, r) != 0)
			break;
	pthread_mutex_lock(&r->lock);
	r->running -= n - started;
	if (started == 0) {
		/* no thread to be had: this one does the work */
		r->running = 1;
		pthread_mutex_unlock(&r->lock);
		worker(r);
		pthread_mutex_lock(&r->lock);
	}
	while (r->running) {
		struct timespec until = in_200ms();
		pthread_cond_timedwait(&r->cond, &r->lock, &until);
		if (sc->progress && r->running)
			sc->progress(sc->progress_ctx, atomic_load(&r->bytes_done), clock_now_s() - t0);
	}
	r->over = true;
	pthread_cond_signal(&r->taken);
	pthread_mutex_unlock(&r->lock);
	for (unsigned k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	if (reading)
		pthread_join(rd, NULL);
	if (sc->progress)   /* the whole, once, however quick the scan */
		sc->progress(sc->progress_ctx, atomic_load(&r->bytes_done), clock_now_s() - t0);
}

int stats_scan_run(struct stats_scan *sc, uint64_t *failed)
{
	struct run r = { .sc = sc, .segment = segment_of(sc), .lock = PTHREAD_MUTEX_INITIALIZER,
	                 .cond = PTHREAD_COND_INITIALIZER, .taken = PTHREAD_COND_INITIALIZER };
	for (uint64_t j = 0; j < sc->n_jobs; j++)
		r.n_items += sc->jobs[j].segments;
	r.ahead = READ_AHEAD_VALUES / r.segment;
	atomic_init(&r.wake_at, UINT64_MAX);
	r.first_failed = r.n_items;

	run_all(&r);

	int ret = 0;
	*failed = UINT64_MAX;
	if (r.first_failed < r.n_items) {
		ret = r.first_err;
		*failed = job_of(sc, r.first_failed);
	}
	pthread_mutex_destroy(&r.lock);
	pthread_cond_destroy(&r.cond);
	pthread_cond_destroy(&r.taken);
	return ret;
}
