/* The read-ahead scheduler: for a sequential reader of a remote file, runs of blocks
 * past it claimed in the memory cache (readers of them wait) and queued as jobs, each
 * fetched with one request by one of REMOTE_READAHEAD_THREADS threads, or by the
 * reader itself when it needs a block whose job has not started. The window and the
 * request size grow as the reader goes on (see REMOTE_REQUEST_MIN_BLOCKS). */
#include "remote_int.h"

#include <errno.h>
#include <stdlib.h>

/* Fetches blocks [i, j) of job with one request (none once the file has changed),
 * each handed over as it arrives whole (block_ready, which keeps it on disk too), and
 * ends the claims of the others: 0, or -EIO for the blocks that did not arrive. */
static int fetch_run(struct ahead_job *job, unsigned i, unsigned j)
{
	struct remote_file *f = job->f;
	struct remote *r = f->r;
	struct blocks_sink sink = { .f = f, .blocks = job->blocks + i, .n = j - i,
	                            .first_index = job->first + i };
	int error = -EIO;
	if (!atomic_load(&f->changed)) {
		char err[GGUF_ERR_MAX];
		long status;
		for (unsigned n = 0; n < sink.n; n++)
			sink.segs[n] = bc_block_data(sink.blocks[n]);
		uint64_t first = (job->first + i) * REMOTE_BLOCK_SIZE;
		uint64_t last = (job->first + j - 1) * REMOTE_BLOCK_SIZE +
		                block_len(f, job->first + j - 1) - 1;
		if (remote_fetch(f, first, last, NULL, &sink, true, false, err, &status) == 0)
			error = 0;
	}
	if (!error && sink.done < sink.n)   /* never: a whole body hands every block over */
		error = -EIO;
	for (unsigned n = sink.done; n < sink.n; n++) {   /* those not handed over whole */
		if (error)
			remote_note_failed(f, sink.first_index + n);
		bc_fill_done(r->cache, sink.blocks[n], error);
	}
	return error;
}

/* Ends the claims of job's blocks: those the disk cache holds from there, the others
 * fetched, each run of them with one request. 0, or -EIO when a run failed (its blocks
 * get it). Frees the job; called without locks. */
static int run_job(struct ahead_job *job)
{
	struct remote_file *f = job->f;
	int error = 0;
	for (unsigned i = 0; i < job->n;) {
		uint64_t k = job->first + i;
		if (f->entry && dc_load(f->entry, k, bc_block_data(job->blocks[i]), block_len(f, k))) {
			atomic_fetch_add_explicit(&f->r->n_disk_hits, 1, memory_order_relaxed);
			bc_fill_done(f->r->cache, job->blocks[i++], 0);
			continue;
		}
		unsigned j = i + 1;
		while (j < job->n && !(f->entry && dc_holds(f->entry, job->first + j)))
			j++;
		if (fetch_run(job, i, j))
			error = -EIO;
		i = j;
	}
	free(job);
	return error;
}

/* Puts job at the end of the queue and counts it as its file's. The caller wakes the
 * threads. Called with ahead_lock held. */
static void enqueue_job(struct remote *r, struct ahead_job *job)
{
	job->next = NULL;
	if (r->q_tail)
		r->q_tail->next = job;
	else
		r->q_head = job;
	r->q_tail = job;
	job->f->ahead_pending++;
}

/* Takes the job at *p (prev is the one before it, NULL at the head) out of the queue.
 * Called with ahead_lock held. */
static struct ahead_job *dequeue_at(struct remote *r, struct ahead_job **p,
                                    struct ahead_job *prev)
{
	struct ahead_job *job = *p;
	*p = job->next;
	if (r->q_tail == job)
		r->q_tail = prev;
	return job;
}

/* A job's end: one fewer pending for its file (remote_close waits for none). Called
 * with ahead_lock held. */
static void job_ended(struct remote *r, struct remote_file *f)
{
	f->ahead_pending--;
	pthread_cond_broadcast(&r->ahead_cond);
}

/* Read-ahead thread: takes jobs, oldest first, until the remote is freed. */
static void *ahead_main(void *arg)
{
	struct remote *r = arg;
	pthread_mutex_lock(&r->ahead_lock);
	for (;;) {
		while (!r->q_head && !r->stopping)
			pthread_cond_wait(&r->ahead_cond, &r->ahead_lock);
		if (r->stopping)
			break;
		struct ahead_job *job = dequeue_at(r, &r->q_head, NULL);
		struct remote_file *f = job->f;
		pthread_mutex_unlock(&r->ahead_lock);
		run_job(job);
		pthread_mutex_lock(&r->ahead_lock);
		job_ended(r, f);
	}
	pthread_mutex_unlock(&r->ahead_lock);
	return NULL;
}

/* Starts the read-ahead threads if they are not yet: here, at the first read-ahead, not
 * at mount, because the daemon forks after mounting and a fork keeps only the thread
 * that calls it. False when there are none. Called with ahead_lock held. */
static bool threads_running(struct remote *r)
{
	if (!r->ahead_started) {
		r->ahead_started = true;
		for (; r->n_threads < REMOTE_READAHEAD_THREADS; r->n_threads++)
			if (pthread_create(&r->threads[r->n_threads], NULL, ahead_main, r) != 0)
				break;
	}
	return r->n_threads > 0;
}

/* Queues blocks [from, to) of f that are neither in the header prefix nor cached nor
 * being fetched, in runs of at most `request` blocks, each run claimed in the cache and
 * fetched with one request. Returns the block where it stopped: to, or earlier when the
 * cache has no room (or no memory). Called with ahead_lock held. */
static uint64_t queue_blocks(struct remote_file *f, uint64_t from, uint64_t to, unsigned request)
{
	struct remote *r = f->r;
	uint64_t n_blocks = (f->size + REMOTE_BLOCK_SIZE - 1) / REMOTE_BLOCK_SIZE;
	if (to > n_blocks)
		to = n_blocks;
	struct ahead_job *job = NULL;
	uint64_t k = from;
	for (; k < to && !r->stopping; k++) {
		struct bc_block *b = NULL;
		bool skip = k * REMOTE_BLOCK_SIZE + block_len(f, k) <= f->prefix_len;
		if (!skip) {
			b = bc_claim(r->cache, f, k, block_len(f, k));
			skip = !b && bc_contains(r->cache, f, k);
		}
		if (job && (!b || job->n == request)) {   /* the run ends: off it goes */
			enqueue_job(r, job);
			job = NULL;
		}
		if (!b) {
			if (skip)
				continue;
			break;   /* no room */
		}
		if (!job) {
			job = malloc(sizeof *job + request * sizeof job->blocks[0]);
			if (!job) {
				bc_fill_done(r->cache, b, -ENOMEM);
				break;
			}
			job->f = f;
			job->first = k;
			job->n = 0;
		}
		job->blocks[job->n++] = b;
	}
	if (job)
		enqueue_job(r, job);
	pthread_cond_broadcast(&r->ahead_cond);
	return k;
}

/* The first block at or after k that f's reader wants (source_want): k itself without
 * a want list, UINT64_MAX past the last wanted block. Under ahead_lock. */
static uint64_t wanted_from(const struct remote_file *f, uint64_t k)
{
	if (!f->want)
		return k;
	size_t lo = 0, hi = f->n_want;   /* the first span that ends after k */
	while (lo < hi) {
		const size_t mid = lo + (hi - lo) / 2;
		if (f->want[mid].end <= k)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == f->n_want)
		return UINT64_MAX;
	return k > f->want[lo].first ? k : f->want[lo].first;
}

/* Queues up to count wanted blocks of f from block from on (queue_blocks over the
 * wanted spans only, the gaps skipped): the block where it stopped, past the last one
 * queued. Under ahead_lock. */
static uint64_t queue_wanted(struct remote_file *f, uint64_t from, uint64_t count,
                             unsigned request)
{
	while (count > 0) {
		const uint64_t k = wanted_from(f, from);
		if (k == UINT64_MAX)
			return from;
		uint64_t end = k + count;
		if (f->want) {
			size_t i = 0;   /* the span holding k: the first ending after it */
			while (f->want[i].end <= k)
				i++;
			if (end > f->want[i].end)
				end = f->want[i].end;
		}
		const uint64_t got = queue_blocks(f, k, end, request);
		if (got < end)
			return got;   /* no room */
		count -= end - k;
		from = end;
	}
	return from;
}

/* Read-ahead for a read of blocks [k0, k1]: its own blocks after the first are fetched
 * beside it, and a sequential reader (one that reads on from near where its furthest
 * read ended) gets the window past it kept fetched when it goes further, the window and
 * the request size growing at each read that issues requests. Any other read starts
 * them afresh. */
void ahead_read(struct remote_file *f, uint64_t k0, uint64_t k1)
{
	struct remote *r = f->r;
	if (!r->ahead_wanted)
		return;
	pthread_mutex_lock(&r->ahead_lock);
	if (!threads_running(r)) {
		pthread_mutex_unlock(&r->ahead_lock);
		return;
	}
	/* a reader that wants some ranges only goes on sequentially across a gap */
	const uint64_t expected = f->ra_next == UINT64_MAX ? UINT64_MAX : wanted_from(f, f->ra_next);
	bool sequential = f->ra_next != UINT64_MAX && k0 + REMOTE_SEQUENTIAL_SLACK >= f->ra_next &&
	                  (k0 <= f->ra_next + f->ra_window ||
	                   (expected != UINT64_MAX && k0 <= expected + f->ra_window));
	if (!sequential) {
		f->ra_request = REMOTE_REQUEST_MIN_BLOCKS;
		f->ra_window = REMOTE_WINDOW_MIN_BLOCKS;
		f->ra_next = k1 + 1;
		f->ra_end = k0 + 1;
		f->ra_run = k1 + 1 - k0;
		if (k1 > k0)
			f->ra_end = queue_blocks(f, k0 + 1, k1 + 1, REMOTE_REQUEST_MAX_BLOCKS);
	} else if (k1 + 1 > f->ra_next) {   /* a read behind the furthest issues nothing */
		f->ra_run += k1 + 1 - f->ra_next;
		f->ra_next = k1 + 1;
		if (f->ra_end < k0 + 1)
			f->ra_end = k0 + 1;
		unsigned window = f->ra_window < r->window_max ? f->ra_window : r->window_max;
		/* past 32 MiB the pace of bytes read, not of reads: 128 KiB reads (the kernel's
		 * read-ahead on a remote mount) would otherwise reach the 64 MiB window after
		 * 768 KiB, and a reader of a 4 MB file have 64 MiB past its end fetched. Up to
		 * 32 MiB it grows per read, as fast as before: at 25 MB/s and 50 ms a request,
		 * a cap of twice the run from 1 MiB on cut a 37 MB read from 105 to 71 MB/s
		 * (bench_remote part 2), and one from 16 MiB on to 91 MB/s */
		if (window > REMOTE_WINDOW_FREE_BLOCKS && window > 2 * f->ra_run)
			window = 2 * f->ra_run > REMOTE_WINDOW_FREE_BLOCKS ? (unsigned)(2 * f->ra_run)
			                                                  : REMOTE_WINDOW_FREE_BLOCKS;
		unsigned request = f->ra_request < window / 2 ? f->ra_request : window / 2;
		if (!request)
			request = 1;
		/* whole requests only (a run cut short costs a request's latency for little),
		 * except at the end of the file */
		uint64_t n_blocks = (f->size + REMOTE_BLOCK_SIZE - 1) / REMOTE_BLOCK_SIZE;
		uint64_t target = f->ra_next + window;
		if (f->want) {
			/* the window counts wanted blocks: from the reader's next wanted one */
			const uint64_t next = wanted_from(f, f->ra_next);
			if (next != UINT64_MAX && f->ra_end < next)
				f->ra_end = next;
			target = next == UINT64_MAX ? f->ra_end : next + window;
		}
		if (f->ra_end < target && target < n_blocks)
			target -= (target - f->ra_end) % request;
		if (f->ra_end < target) {
			f->ra_end = f->want ? queue_wanted(f, f->ra_end, target - f->ra_end, request)
			                    : queue_blocks(f, f->ra_end, target, request);
			if (f->ra_request < REMOTE_REQUEST_MAX_BLOCKS)
				f->ra_request *= 2;
			if (f->ra_window < r->window_max)
				f->ra_window *= 2;
		}
	}
	pthread_mutex_unlock(&r->ahead_lock);
}

/* When block k of f waits in the read-ahead queue, not started: takes its job out and
 * runs it here, so that a reader never waits behind other requests (nor longer than one
 * fetch's bound). 1 when it ran and failed, else 0 (ran, or nothing to take). */
int ahead_run_queued(struct remote_file *f, uint64_t k)
{
	struct remote *r = f->r;
	pthread_mutex_lock(&r->ahead_lock);
	struct ahead_job **p = &r->q_head, *prev = NULL;
	while (*p && !((*p)->f == f && k >= (*p)->first && k < (*p)->first + (*p)->n)) {
		prev = *p;
		p = &(*p)->next;
	}
	struct ahead_job *job = *p ? dequeue_at(r, p, prev) : NULL;
	pthread_mutex_unlock(&r->ahead_lock);
	if (!job)
		return 0;
	int error = run_job(job);
	pthread_mutex_lock(&r->ahead_lock);
	job_ended(r, f);
	pthread_mutex_unlock(&r->ahead_lock);
	return error ? 1 : 0;
}

void ahead_take_over(struct remote_file *f, uint64_t off, const struct remote_file *prev)
{
	pthread_mutex_lock(&f->r->ahead_lock);
	if (f->ra_next == UINT64_MAX && prev->ra_next != UINT64_MAX) {
		f->ra_next = off / REMOTE_BLOCK_SIZE;
		f->ra_end = f->ra_next;
		f->ra_run = prev->ra_run;   /* the run goes on from the other file */
		f->ra_request = prev->ra_request;
		f->ra_window = prev->ra_window;
	}
	pthread_mutex_unlock(&f->r->ahead_lock);
}

bool ahead_want(struct remote_file *f, const struct source_range *ranges, size_t n)
{
	struct ahead_span *want = malloc((n ? n : 1) * sizeof *want);
	if (!want)
		return false;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!ranges[i].len || ranges[i].off >= f->size)
			continue;
		const uint64_t last = ranges[i].len > f->size - ranges[i].off
		                              ? f->size - 1 : ranges[i].off + ranges[i].len - 1;
		const uint64_t first = ranges[i].off / REMOTE_BLOCK_SIZE;
		const uint64_t end = last / REMOTE_BLOCK_SIZE + 1;
		if (k && first <= want[k - 1].end) {   /* touching or sharing a block: one span */
			if (end > want[k - 1].end)
				want[k - 1].end = end;
			continue;
		}
		want[k++] = (struct ahead_span){ first, end };
	}
	pthread_mutex_lock(&f->r->ahead_lock);
	free(f->want);
	f->want = want;
	f->n_want = k;
	pthread_mutex_unlock(&f->r->ahead_lock);
	return true;
}

void ahead_forget(struct remote_file *f)
{
	struct remote *r = f->r;
	pthread_mutex_lock(&r->ahead_lock);
	for (struct ahead_job **p = &r->q_head, *prev = NULL; *p;) {
		if ((*p)->f != f) {
			prev = *p;
			p = &(*p)->next;
			continue;
		}
		struct ahead_job *job = dequeue_at(r, p, prev);
		for (unsigned i = 0; i < job->n; i++)
			bc_fill_done(r->cache, job->blocks[i], -EIO);
		free(job);
		f->ahead_pending--;
	}
	while (f->ahead_pending)
		pthread_cond_wait(&r->ahead_cond, &r->ahead_lock);
	pthread_mutex_unlock(&r->ahead_lock);
}

void ahead_stop(struct remote *r)
{
	pthread_mutex_lock(&r->ahead_lock);
	r->stopping = true;
	pthread_cond_broadcast(&r->ahead_cond);
	pthread_mutex_unlock(&r->ahead_lock);
	for (unsigned i = 0; i < r->n_threads; i++)
		pthread_join(r->threads[i], NULL);
	for (struct ahead_job *job = r->q_head, *next; job; job = next) {   /* none: files closed */
		next = job->next;
		for (unsigned i = 0; i < job->n; i++)
			bc_fill_done(r->cache, job->blocks[i], -EIO);
		free(job);
	}
	r->q_head = r->q_tail = NULL;
}
