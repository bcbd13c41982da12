/* A computed file (computed.h): blocks made by the caller's fill function, kept in its
 * pool's memory block cache and, with a disk cache, on disk; a sequential reader has the
 * blocks ahead of it made by the pool's workers, which serve the files that have blocks
 * to make in turn, one block at a time. */
#include "computed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blockcache.h"
#include "diskcache.h"
#include "evlog.h"
#include "leaving.h"

/* A read this many blocks behind the furthest one is still the same sequential reader
 * (the kernel hands the pieces of its read-ahead to several threads). */
#define COMPUTED_SEQUENTIAL_SLACK 8
/* Blocks kept made ahead of a sequential reader: at first, and at most per worker. */
#define COMPUTED_WINDOW_MIN 2
#define COMPUTED_WINDOW_PER_THREAD 4

struct computed;

struct computed_pool {
	pthread_mutex_t lock;       /* what follows, and every file's read-ahead state */
	pthread_cond_t work;        /* files queued, or the pool ending (CLOCK_MONOTONIC) */
	pthread_cond_t settled;     /* a block made ahead done, a pin let go, a worker ended */
	struct blockcache *bc;      /* every file's blocks (the file is the owner) */
	unsigned max_threads, window_max;
	unsigned n_threads;         /* workers alive */
	unsigned n_waiting;         /* of them, waiting for work */
	unsigned n_woken;           /* of those, signalled and not yet awake */
	double idle_s;
	struct computed *first, *last;   /* the queue: files with blocks to make ahead */
	struct computed *files;     /* every open file */
	pthread_t *ended;           /* workers that ended, not joined yet (max_threads) */
	unsigned n_ended;
	bool stop;                  /* computed_pool_free: the workers end */
	atomic_bool leaving;        /* its leaving has run: nothing more is stored on disk */
	struct leaving_entry leave; /* in the mount's leaving: computed_pool_leave */
};

struct computed {
	struct source src;          /* first: the source is the file */
	struct computed_pool *pool;
	computed_fill_fn fill;
	void *ctx;
	uint64_t size, n_blocks;
	/* the disk cache, shared with every process on it: dc and entry NULL without one */
	struct diskcache *dc;
	struct dc_entry *entry;

	/* the read-ahead state, under pool->lock */
	uint64_t next;              /* the block after the furthest read; UINT64_MAX: none */
	uint64_t ahead_end;         /* blocks before this one are made or being made */
	uint64_t ahead_to;          /* the workers make blocks up to this one */
	unsigned window;
	bool queued, closing;
	struct computed *q_prev, *q_next;   /* in the pool's queue */
	struct computed *f_prev, *f_next;   /* in the pool's files */
	unsigned in_flight;         /* its blocks being made by workers now */

	atomic_uint_fast64_t computed, from_disk, stored, failed;
	pthread_mutex_t failure_lock;
	char failure[GGUF_ERR_MAX]; /* the why of its last fill that failed (a worker's or a
	                             * reader's): what the reads it fails say */
};

/* Bytes of block k (the last may be short). */
static size_t block_len(const struct computed *c, uint64_t k)
{
	const uint64_t start = k * COMPUTED_BLOCK_SIZE;
	return c->size - start < COMPUTED_BLOCK_SIZE ? (size_t)(c->size - start)
	                                             : COMPUTED_BLOCK_SIZE;
}

/* Block k into buf (len bytes): from the disk cache when it holds it checked, else made
 * by fill and stored there, counted as fill says it had it. 0 or fill's -errno. The
 * block cache's fetch function. */
static int make_block(void *arg, uint64_t k, uint8_t *buf, size_t len)
{
	struct computed *c = arg;
	struct dc_entry *e = c->entry;
	if (e && dc_load(e, k, buf, len)) {
		atomic_fetch_add(&c->from_disk, 1);
		return 0;
	}
	char why[GGUF_ERR_MAX] = "";
	const int r = c->fill(c->ctx, k * COMPUTED_BLOCK_SIZE, len, buf, why);
	if (r < 0) {
		atomic_fetch_add(&c->failed, 1);
		pthread_mutex_lock(&c->failure_lock);
		memcpy(c->failure, why, sizeof why);
		pthread_mutex_unlock(&c->failure_lock);
		return r;
	}
	atomic_fetch_add(r & COMPUTED_FILL_KEPT ? &c->from_disk : &c->computed, 1);
	if ((r & COMPUTED_FILL_STORED) ||
	    (e && !atomic_load(&c->pool->leaving) && dc_store(e, k, buf, len)))
		atomic_fetch_add(&c->stored, 1);
	return 0;
}

/* Takes c out of the pool's queue, if in it (under the pool's lock). */
static void queue_out(struct computed_pool *p, struct computed *c)
{
	if (!c->queued)
		return;
	c->queued = false;
	if (c->q_prev)
		c->q_prev->q_next = c->q_next;
	else
		p->first = c->q_next;
	if (c->q_next)
		c->q_next->q_prev = c->q_prev;
	else
		p->last = c->q_prev;
	c->q_prev = c->q_next = NULL;
}

/* Puts c at the end of the pool's queue or takes it out, as it has blocks for the
 * workers or not (under the pool's lock); one in the queue keeps its place. */
static void queue_update(struct computed_pool *p, struct computed *c)
{
	if (c->closing || c->ahead_end >= c->ahead_to) {
		queue_out(p, c);
		return;
	}
	if (c->queued)
		return;
	c->queued = true;
	c->q_prev = p->last;
	c->q_next = NULL;
	if (p->last)
		p->last->q_next = c;
	else
		p->first = c;
	p->last = c;
}

static void *worker(void *arg);

/* A worker for the queue (under the pool's lock): one waiting is woken, else one more
 * starts while under max_threads (after joining those that ended). One that cannot start
 * leaves the blocks to the readers. */
static void wake_worker(struct computed_pool *p)
{
	if (!p->first || p->stop)
		return;
	if (p->n_waiting > p->n_woken) {
		p->n_woken++;
		pthread_cond_signal(&p->work);
		return;
	}
	if (p->n_threads >= p->max_threads)
		return;
	for (; p->n_ended; p->n_ended--)   /* (each has let go of the lock for good) */
		pthread_join(p->ended[p->n_ended - 1], NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, worker, p) == 0) {
		pthread_setname_np(t, COMPUTED_THREAD_NAME);
		p->n_threads++;
	}
}

/* The deadline of a wait of s seconds on the pool's work (CLOCK_MONOTONIC). */
static struct timespec deadline_in(double s)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	const long ns = (long)((s - (double)(time_t)s) * 1e9);
	t.tv_sec += (time_t)s;
	t.tv_nsec += ns;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* Makes block k of c ahead of its reader, into the block cache: true when there was no
 * room (readers hold every block), so c's read-ahead stops until its reader's next read. */
static bool make_ahead(struct computed_pool *p, struct computed *c, uint64_t k)
{
	const size_t len = block_len(c, k);
	struct bc_block *b = bc_claim(p->bc, c, k, len);
	if (b) {
		bc_fill_done(p->bc, b, make_block(c, k, bc_block_data(b), len));
		return false;
	}
	return !bc_contains(p->bc, c, k);
}

/* A worker: takes the next block of the first file of the queue (which goes to the
 * queue's end: the files take turns), until the pool stops or nothing came for idle_s. */
static void *worker(void *arg)
{
	struct computed_pool *p = arg;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct computed *c = p->first;
		if (!c) {
			if (p->stop)
				break;
			const struct timespec until = deadline_in(p->idle_s);
			p->n_waiting++;
			const int r = pthread_cond_timedwait(&p->work, &p->lock, &until);
			p->n_waiting--;
			if (p->n_woken)
				p->n_woken--;
			if (r == ETIMEDOUT && !p->first)
				break;
			continue;
		}
		const uint64_t k = c->ahead_end++;
		c->in_flight++;
		queue_out(p, c);      /* to the end, when it has more: the files take turns */
		queue_update(p, c);
		pthread_mutex_unlock(&p->lock);
		const bool full = make_ahead(p, c, k);
		pthread_mutex_lock(&p->lock);
		if (full && c->ahead_to > c->ahead_end) {
			c->ahead_to = c->ahead_end;   /* the reader's next read starts again */
			queue_update(p, c);
		}
		if (--c->in_flight == 0 && c->closing)
			pthread_cond_broadcast(&p->settled);
	}
	p->n_threads--;
	p->ended[p->n_ended++] = pthread_self();
	pthread_cond_broadcast(&p->settled);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* The reader reads block k: a reader that goes on from near its furthest read keeps
 * the window past it made by the workers, the window doubling up to its most; any
 * other read starts afresh, with nothing ahead. */
static void note_read(struct computed *c, uint64_t k)
{
	struct computed_pool *p = c->pool;
	if (!p->max_threads)
		return;
	pthread_mutex_lock(&p->lock);
	const bool sequential = c->next != UINT64_MAX && k + COMPUTED_SEQUENTIAL_SLACK >= c->next &&
	                        k <= c->next + c->window;
	bool more = false;
	if (!sequential) {
		c->next = k + 1;
		c->window = COMPUTED_WINDOW_MIN;
		c->ahead_end = c->ahead_to = k + 1;
	} else if (k + 1 > c->next) {
		c->next = k + 1;
		if (c->ahead_end < c->next)
			c->ahead_end = c->next;
		const uint64_t to = c->next + c->window < c->n_blocks ? c->next + c->window : c->n_blocks;
		if (to > c->ahead_to) {
			c->ahead_to = to;
			more = true;
		}
		if (c->window < p->window_max)
			c->window *= 2;
		if (c->window > p->window_max)
			c->window = p->window_max;
	}
	queue_update(p, c);
	if (more)
		wake_worker(p);
	pthread_mutex_unlock(&p->lock);
}

/* Source read: block by block through the pool's memory, each made (or loaded from
 * disk) once; a block that could not be made fails the read with its fill's why. */
static int computed_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                         char why[GGUF_ERR_MAX])
{
	struct computed *c = (struct computed *)src;
	struct blockcache *bc = c->pool->bc;
	uint64_t pos = off;
	const uint64_t end = off + len;
	while (pos < end) {
		const uint64_t k = pos / COMPUTED_BLOCK_SIZE, start = k * COMPUTED_BLOCK_SIZE;
		note_read(c, k);
		const uint8_t *data;
		struct bc_block *held;
		const int r = bc_get(bc, c, k, block_len(c, k), make_block, c, &data, &held);
		if (r < 0) {
			if (why) {   /* the fill that failed kept it before the block failed */
				pthread_mutex_lock(&c->failure_lock);
				memcpy(why, c->failure, GGUF_ERR_MAX);
				pthread_mutex_unlock(&c->failure_lock);
			}
			return r;
		}
		const uint64_t stop = start + block_len(c, k) < end ? start + block_len(c, k) : end;
		memcpy((uint8_t *)buf + (pos - off), data + (pos - start), stop - pos);
		bc_release(bc, held);
		pos = stop;
	}
	return 0;
}

/* Frees c with what it holds (out of the pool, its blocks dropped). */
static void free_computed(struct computed *c)
{
	dc_entry_close(c->entry);
	dc_close(c->dc);
	pthread_mutex_destroy(&c->failure_lock);
	free(c);
}

/* Its queued blocks cancelled, the blocks being made waited for (no thread is joined),
 * then its blocks dropped from the pool's memory and c freed. */
static void computed_close(struct source *src)
{
	struct computed_counters counters;
	computed_close_counted(src, &counters);
}

void computed_close_counted(struct source *src, struct computed_counters *out)
{
	struct computed *c = (struct computed *)src;
	struct computed_pool *p = c->pool;
	pthread_mutex_lock(&p->lock);
	c->closing = true;
	queue_update(p, c);
	while (c->in_flight)
		pthread_cond_wait(&p->settled, &p->lock);
	if (c->f_prev)
		c->f_prev->f_next = c->f_next;
	else
		p->files = c->f_next;
	if (c->f_next)
		c->f_next->f_prev = c->f_prev;
	pthread_mutex_unlock(&p->lock);
	bc_drop_owner(p->bc, c);
	computed_counters(src, out);
	free_computed(c);
}

static const struct source_ops computed_ops = {
	.read = computed_read,
	.close = computed_close,
};

/* Opens the disk cache entry of the file (shared with every other process that has it
 * open), or says in the log why it goes without. */
static void open_disk(struct computed *c, const struct computed_opts *o)
{
	char why[GGUF_ERR_MAX];
	c->dc = dc_open(o->cache_dir, o->cache_max, COMPUTED_BLOCK_SIZE, why, sizeof why);
	if (!c->dc) {
		evlog(EVLOG_WARNING, "computed dc", "%s: the disk cache is not used: %s", o->key, why);
		return;
	}
	c->entry = dc_entry_open(c->dc, o->key, o->size, o->version);
	if (c->entry)
		return;
	evlog(EVLOG_WARNING, "computed dc entry", "%s: no disk cache entry could be made: it is "
	      "computed without one", o->key);
	dc_close(c->dc);
	c->dc = NULL;
}

bool computed_cache_usable(const char *cache_dir, char err[GGUF_ERR_MAX])
{
	return dc_usable(cache_dir, err, GGUF_ERR_MAX);
}

struct source *computed_open(const struct computed_opts *o, char err[GGUF_ERR_MAX])
{
	struct computed_pool *p = o->pool;
	struct computed *c = calloc(1, sizeof *c);
	if (!c) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	c->src.ops = &computed_ops;
	c->pool = p;
	c->fill = o->fill;
	c->ctx = o->ctx;
	c->size = o->size;
	c->n_blocks = o->size / COMPUTED_BLOCK_SIZE + (o->size % COMPUTED_BLOCK_SIZE != 0);
	c->next = UINT64_MAX;
	c->window = COMPUTED_WINDOW_MIN;
	pthread_mutex_init(&c->failure_lock, NULL);
	if (o->cache_dir && o->key && o->version && o->version[0])
		open_disk(c, o);
	pthread_mutex_lock(&p->lock);
	c->f_next = p->files;
	if (p->files)
		p->files->f_prev = c;
	p->files = c;
	pthread_mutex_unlock(&p->lock);
	return &c->src;
}

void computed_counters(const struct source *src, struct computed_counters *out)
{
	const struct computed *c = (const struct computed *)src;
	out->computed = atomic_load(&c->computed);
	out->from_disk = atomic_load(&c->from_disk);
	out->stored = atomic_load(&c->stored);
	out->failed = atomic_load(&c->failed);
}

/* The mount is ending (p->leave's fn; computed_pool_opts.leaving says what follows):
 * its files store nothing more on disk. */
static void computed_pool_leave(void *arg)
{
	struct computed_pool *p = arg;
	atomic_store(&p->leaving, true);
}

struct computed_pool *computed_pool_new(const struct computed_pool_opts *o,
                                        char err[GGUF_ERR_MAX])
{
	struct computed_pool *p = calloc(1, sizeof *p);
	if (!p) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	p->max_threads = o->threads;
	p->window_max = o->threads * COMPUTED_WINDOW_PER_THREAD;
	if (p->window_max < COMPUTED_WINDOW_MIN || o->threads > UINT32_MAX / 16)
		p->window_max = COMPUTED_WINDOW_MIN;
	p->idle_s = o->idle_s > 0 ? o->idle_s : COMPUTED_POOL_IDLE_S;
	/* room for the windows of two files, the blocks being made and readers' own */
	const uint64_t least = ((uint64_t)p->window_max + o->threads + 4) * COMPUTED_BLOCK_SIZE;
	uint64_t memory = o->memory;
	if (!memory) {
		memory = (uint64_t)o->threads * COMPUTED_POOL_BLOCKS_PER_THREAD;
		if (memory < COMPUTED_POOL_BLOCKS_MIN)
			memory = COMPUTED_POOL_BLOCKS_MIN;
		memory *= COMPUTED_BLOCK_SIZE;
	}
	if (memory < least)
		memory = least;
	p->bc = bc_new(memory, COMPUTED_BLOCK_SIZE);
	p->ended = calloc(o->threads ? o->threads : 1, sizeof *p->ended);
	pthread_condattr_t attr;
	bool cond_ok = pthread_condattr_init(&attr) == 0;
	cond_ok = cond_ok && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
	          pthread_cond_init(&p->work, &attr) == 0;
	pthread_condattr_destroy(&attr);
	if (!p->bc || !p->ended || !cond_ok) {
		gguf_errf(err, "out of memory");
		if (cond_ok)
			pthread_cond_destroy(&p->work);
		bc_free(p->bc);
		free(p->ended);
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->settled, NULL);
	p->leave = (struct leaving_entry){ .fn = computed_pool_leave, .ctx = p };
	leaving_add(o->leaving, &p->leave);
	return p;
}

void computed_pool_free(struct computed_pool *p)
{
	if (!p)
		return;
	leaving_remove(&p->leave);
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	while (p->n_threads)
		pthread_cond_wait(&p->settled, &p->lock);
	for (; p->n_ended; p->n_ended--)
		pthread_join(p->ended[p->n_ended - 1], NULL);
	pthread_mutex_unlock(&p->lock);
	bc_free(p->bc);
	free(p->ended);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->settled);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

unsigned computed_pool_threads(struct computed_pool *p)
{
	pthread_mutex_lock(&p->lock);
	const unsigned n = p->n_threads;
	pthread_mutex_unlock(&p->lock);
	return n;
}
