/* A computed file (computed.h): blocks made by the caller's fill function, kept in a
 * memory block cache and, with a disk cache, on disk; a sequential reader has the blocks
 * ahead of it made on worker threads. */
#include "computed.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "evlog.h"
#include "remote/blockcache.h"
#include "remote/diskcache.h"

/* A read this many blocks behind the furthest one is still the same sequential reader
 * (the kernel hands the pieces of its read-ahead to several threads). */
#define COMPUTED_SEQUENTIAL_SLACK 8
/* Blocks kept made ahead of a sequential reader: at first, and at most per worker. */
#define COMPUTED_WINDOW_MIN 2
#define COMPUTED_WINDOW_PER_THREAD 4

struct computed {
	struct source src;          /* first: the source is the file */
	computed_fill_fn fill;
	void *ctx;
	uint64_t size, n_blocks;
	struct blockcache *bc;
	struct diskcache *dc;       /* NULL without a disk cache */
	struct dc_entry *entry;     /* the file's entry in it, or NULL */

	pthread_mutex_t lock;       /* the read-ahead state below */
	pthread_cond_t work;        /* blocks to make ahead, or stop */
	uint64_t next;              /* the block after the furthest read; UINT64_MAX: none */
	uint64_t ahead_end;         /* blocks before this one are made or being made */
	uint64_t ahead_to;          /* the workers make blocks up to this one */
	unsigned window, window_max;
	bool stop;
	atomic_bool leaving;        /* computed_leaving: nothing more goes to disk */
	pthread_t *threads;
	unsigned n_threads;

	atomic_uint_fast64_t computed, from_disk, stored, failed;
};

/* Bytes of block k (the last may be short). */
static size_t block_len(const struct computed *c, uint64_t k)
{
	const uint64_t start = k * COMPUTED_BLOCK_SIZE;
	return c->size - start < COMPUTED_BLOCK_SIZE ? (size_t)(c->size - start)
	                                             : COMPUTED_BLOCK_SIZE;
}

/* Block k into buf (len bytes): from the disk cache when it holds it checked, else made
 * by fill and stored there. 0 or fill's -errno. The block cache's fetch function. */
static int make_block(void *arg, uint64_t k, uint8_t *buf, size_t len)
{
	struct computed *c = arg;
	if (c->entry && dc_holds(c->entry, k) && dc_load(c->entry, k, buf, len)) {
		atomic_fetch_add(&c->from_disk, 1);
		return 0;
	}
	const int r = c->fill(c->ctx, k * COMPUTED_BLOCK_SIZE, len, buf);
	if (r < 0) {
		atomic_fetch_add(&c->failed, 1);
		return r;
	}
	atomic_fetch_add(&c->computed, 1);
	if (c->entry && !atomic_load(&c->leaving) && dc_store(c->entry, k, buf, len))
		atomic_fetch_add(&c->stored, 1);
	return 0;
}

/* The reader reads block k: a reader that goes on from near its furthest read keeps
 * the window past it made by the workers, the window doubling up to its most; any
 * other read starts afresh, with nothing ahead. */
static void note_read(struct computed *c, uint64_t k)
{
	if (!c->n_threads)
		return;
	pthread_mutex_lock(&c->lock);
	const bool sequential = c->next != UINT64_MAX && k + COMPUTED_SEQUENTIAL_SLACK >= c->next &&
	                        k <= c->next + c->window;
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
			pthread_cond_broadcast(&c->work);
		}
		if (c->window < c->window_max)
			c->window *= 2;
		if (c->window > c->window_max)
			c->window = c->window_max;
	}
	pthread_mutex_unlock(&c->lock);
}

/* A worker: makes the blocks of [ahead_end, ahead_to), one at a time, into the block
 * cache, until the file closes. */
static void *worker(void *arg)
{
	struct computed *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->stop && c->ahead_end >= c->ahead_to)
			pthread_cond_wait(&c->work, &c->lock);
		if (c->stop)
			break;
		const uint64_t k = c->ahead_end++;
		pthread_mutex_unlock(&c->lock);
		const size_t len = block_len(c, k);
		struct bc_block *b = bc_claim(c->bc, c, k, len);
		bool full = false;
		if (b)
			bc_fill_done(c->bc, b, make_block(c, k, bc_block_data(b), len));
		else
			full = !bc_contains(c->bc, c, k);   /* no room: readers hold every block */
		pthread_mutex_lock(&c->lock);
		if (full && c->ahead_to > c->ahead_end)
			c->ahead_to = c->ahead_end;   /* the reader's next read starts again */
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static int computed_read(struct source *src, uint64_t off, uint64_t len, void *buf)
{
	struct computed *c = (struct computed *)src;
	uint64_t pos = off;
	const uint64_t end = off + len;
	while (pos < end) {
		const uint64_t k = pos / COMPUTED_BLOCK_SIZE, start = k * COMPUTED_BLOCK_SIZE;
		note_read(c, k);
		const uint8_t *data;
		struct bc_block *held;
		const int r = bc_get(c->bc, c, k, block_len(c, k), make_block, c, &data, &held);
		if (r < 0)
			return r;
		const uint64_t stop = start + block_len(c, k) < end ? start + block_len(c, k) : end;
		memcpy((uint8_t *)buf + (pos - off), data + (pos - start), stop - pos);
		bc_release(c->bc, held);
		pos = stop;
	}
	return 0;
}

/* Stops the workers (the first n) and frees c with what it holds. */
static void free_computed(struct computed *c, unsigned n)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->work);
	pthread_mutex_unlock(&c->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(c->threads[i], NULL);
	free(c->threads);
	if (c->bc) {
		bc_drop_owner(c->bc, c);
		bc_free(c->bc);
	}
	dc_entry_close(c->entry);
	dc_close(c->dc);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->work);
	free(c);
}

static void computed_close(struct source *src)
{
	struct computed *c = (struct computed *)src;
	free_computed(c, c->n_threads);
}

static const struct source_ops computed_ops = {
	.read = computed_read,
	.close = computed_close,
};

/* Opens the disk cache entry of the file, or says in the log why it goes without. */
static void open_disk(struct computed *c, const struct computed_opts *o)
{
	char why[GGUF_ERR_MAX];
	c->dc = dc_open(o->cache_dir, o->cache_max, COMPUTED_BLOCK_SIZE, why, sizeof why);
	if (!c->dc) {
		evlog(EVLOG_WARNING, "computed dc", "%s: the disk cache is not used: %s", o->key, why);
		return;
	}
	bool busy = false;
	c->entry = dc_entry_open(c->dc, o->key, o->size, o->version, &busy);
	if (!c->entry) {
		evlog(EVLOG_WARNING, "computed dc entry", "%s: %s", o->key,
		      busy ? "another mount uses its disk cache entry: it is computed without it"
		           : "no disk cache entry could be made: it is computed without one");
		dc_close(c->dc);
		c->dc = NULL;
	}
}

struct source *computed_open(const struct computed_opts *o, char err[GGUF_ERR_MAX])
{
	struct computed *c = calloc(1, sizeof *c);
	if (!c) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	c->src.ops = &computed_ops;
	c->fill = o->fill;
	c->ctx = o->ctx;
	c->size = o->size;
	c->n_blocks = o->size / COMPUTED_BLOCK_SIZE + (o->size % COMPUTED_BLOCK_SIZE != 0);
	c->next = UINT64_MAX;
	c->window = COMPUTED_WINDOW_MIN;
	c->window_max = o->threads * COMPUTED_WINDOW_PER_THREAD;
	if (c->window_max < COMPUTED_WINDOW_MIN)
		c->window_max = COMPUTED_WINDOW_MIN;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);
	/* room for the window, the blocks being made and a reader's own */
	uint64_t memory = o->memory;
	const uint64_t least = ((uint64_t)c->window_max + o->threads + 4) * COMPUTED_BLOCK_SIZE;
	if (memory < least)
		memory = least;
	c->bc = bc_new(memory, COMPUTED_BLOCK_SIZE);
	c->threads = calloc(o->threads ? o->threads : 1, sizeof *c->threads);
	if (!c->bc || !c->threads) {
		gguf_errf(err, "out of memory");
		free_computed(c, 0);
		return NULL;
	}
	if (o->cache_dir && o->key && o->version && o->version[0])
		open_disk(c, o);
	for (unsigned i = 0; i < o->threads; i++) {
		const int r = pthread_create(&c->threads[i], NULL, worker, c);
		if (r) {
			gguf_errf(err, "cannot start a thread: %s", strerror(r));
			free_computed(c, i);
			return NULL;
		}
		c->n_threads = i + 1;
	}
	return &c->src;
}

void computed_leaving(struct source *src)
{
	struct computed *c = (struct computed *)src;
	atomic_store(&c->leaving, true);   /* (a store that began before is dc_leaving's) */
	dc_leaving(c->dc);   /* (dc: set before computed_open returned, kept to the close) */
}

void computed_counters(const struct source *src, struct computed_counters *out)
{
	const struct computed *c = (const struct computed *)src;
	out->computed = atomic_load(&c->computed);
	out->from_disk = atomic_load(&c->from_disk);
	out->stored = atomic_load(&c->stored);
	out->failed = atomic_load(&c->failed);
}
