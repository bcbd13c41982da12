/* Pieces kept by what they are made from (piece_store.h): one disk cache entry per key,
 * at most PIECE_OPEN_MAX of them held open, the blocks being made in this process
 * listed so that a second reader of one waits for it instead of making it again, and
 * each thread's last block read in part kept for its next read (a quant file's block
 * and its pieces' blocks do not align: a sequential reader wants each piece block in two
 * reads, which then load and check it once). */
#include "piece_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "evlog.h"
#include "leaving.h"

/* One key's entry, held while reads use it and then kept open up to PIECE_OPEN_MAX. */
struct piece_entry {
	struct piece_entry *next;
	char *key;
	uint64_t size;
	struct dc_entry *e;          /* NULL: none could be made (its blocks are not kept) */
	unsigned refs;               /* reads in it now */
	uint64_t last_use;
};

/* A block being made in this process. */
struct piece_making {
	struct piece_making *next;
	const struct piece_entry *entry;
	uint64_t index;
};

struct piece_store {
	pthread_mutex_t lock;        /* dc, entries, making, tick */
	pthread_cond_t made;         /* a block of making done (stored or not) */
	char *cache_dir;
	uint64_t cache_max;
	/* opened at the first read (a mount that forks to the background opens nothing
	 * before): NULL before, or when it could not be (dc_failed) */
	struct diskcache *dc;
	bool dc_failed;
	struct piece_entry *entries;
	unsigned n_open;
	uint64_t tick;
	struct piece_making *making;
	atomic_bool leaving;         /* leaving has run: nothing more is stored */
	struct leaving_entry leave;
};

/* A thread's last piece block had whole for a read that wanted part of it: the bytes of
 * block index of the piece named key (pieces are named by what they are made from, so
 * the same key is the same bytes in every store of the process), and how it was had. */
struct piece_scratch {
	uint8_t buf[PIECE_BLOCK];
	bool valid;
	uint64_t index;
	size_t len;
	unsigned how;                /* PIECE_LOADED, or PIECE_MADE when it was not stored */
	char key[PIECE_KEY_MAX];
};

static pthread_key_t scratch_key;
static bool scratch_key_made;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_key_make(void)
{
	scratch_key_made = pthread_key_create(&scratch_key, free) == 0;
}

/* The calling thread's scratch block (freed when the thread ends), or NULL when out of
 * memory. */
static struct piece_scratch *scratch_get(void)
{
	pthread_once(&scratch_once, scratch_key_make);
	struct piece_scratch *sc = scratch_key_made ? pthread_getspecific(scratch_key) : NULL;
	if (!sc && (sc = malloc(sizeof *sc))) {
		sc->valid = false;
		if (!scratch_key_made || pthread_setspecific(scratch_key, sc) != 0) {
			free(sc);
			return NULL;
		}
	}
	return sc;
}

/* The mount is ending (ps->leave's fn): nothing more is stored. */
static void store_leave(void *arg)
{
	struct piece_store *ps = arg;
	atomic_store(&ps->leaving, true);
	pthread_mutex_lock(&ps->lock);
	dc_leaving(ps->dc);
	pthread_mutex_unlock(&ps->lock);
}

struct piece_store *piece_store_new(const char *cache_dir, uint64_t cache_max,
                                    struct leaving *leaving, char err[GGUF_ERR_MAX])
{
	struct piece_store *ps = calloc(1, sizeof *ps);
	if (!ps) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	if (!(ps->cache_dir = strdup(cache_dir))) {
		gguf_errf(err, "out of memory");
		free(ps);
		return NULL;
	}
	ps->cache_max = cache_max;
	pthread_mutex_init(&ps->lock, NULL);
	pthread_cond_init(&ps->made, NULL);
	atomic_init(&ps->leaving, false);
	ps->leave = (struct leaving_entry){ .fn = store_leave, .ctx = ps };
	leaving_add(leaving, &ps->leave);
	return ps;
}

/* Closes pe's entry and frees it (out of the list). */
static void entry_free(struct piece_entry *pe)
{
	dc_entry_close(pe->e);
	free(pe->key);
	free(pe);
}

void piece_store_free(struct piece_store *ps)
{
	if (!ps)
		return;
	leaving_remove(&ps->leave);
	for (struct piece_entry *pe = ps->entries, *next; pe; pe = next) {
		next = pe->next;
		entry_free(pe);
	}
	dc_close(ps->dc);
	pthread_cond_destroy(&ps->made);
	pthread_mutex_destroy(&ps->lock);
	free(ps->cache_dir);
	free(ps);
	/* the calling thread's scratch block, which the thread's end would free: a
	 * process's main thread that ends by exit() frees nothing */
	if (scratch_key_made) {
		free(pthread_getspecific(scratch_key));
		pthread_setspecific(scratch_key, NULL);
	}
}

/* Closes idle entries, least recently used first, while more than PIECE_OPEN_MAX are
 * open (under the lock). */
static void entries_trim(struct piece_store *ps)
{
	while (ps->n_open > PIECE_OPEN_MAX) {
		struct piece_entry **oldest = NULL;
		for (struct piece_entry **p = &ps->entries; *p; p = &(*p)->next)
			if (!(*p)->refs && (!oldest || (*p)->last_use < (*oldest)->last_use))
				oldest = p;
		if (!oldest)
			return;   /* every one in use: closed when let go */
		struct piece_entry *pe = *oldest;
		*oldest = pe->next;
		ps->n_open--;
		entry_free(pe);
	}
}

/* The disk cache, opened at the first need (under the lock): NULL when it cannot be
 * used, said once in the event log (the mount said so at its start too). */
static struct diskcache *store_dc(struct piece_store *ps)
{
	if (ps->dc || ps->dc_failed)
		return ps->dc;
	char why[GGUF_ERR_MAX];
	ps->dc = dc_open(ps->cache_dir, ps->cache_max, PIECE_BLOCK, why, sizeof why);
	if (!ps->dc) {
		ps->dc_failed = true;
		evlog(EVLOG_WARNING, "piece dc", "%s: the disk cache is not used: %s", ps->cache_dir,
		      why);
	} else if (atomic_load(&ps->leaving)) {
		dc_leaving(ps->dc);
	}
	return ps->dc;
}

/* The entry of key (size bytes), opened if need be and held: NULL out of memory. */
static struct piece_entry *entry_get(struct piece_store *ps, const char *key, uint64_t size)
{
	pthread_mutex_lock(&ps->lock);
	struct piece_entry *pe = ps->entries;
	while (pe && (pe->size != size || strcmp(pe->key, key) != 0))
		pe = pe->next;
	if (!pe && (pe = calloc(1, sizeof *pe)) && (pe->key = strdup(key))) {
		pe->size = size;
		struct diskcache *dc = store_dc(ps);
		pe->e = dc ? dc_entry_open(dc, key, size, "piece 1") : NULL;
		pe->next = ps->entries;
		ps->entries = pe;
		ps->n_open++;
	} else if (pe && !pe->key) {
		free(pe);
		pe = NULL;
	}
	if (pe) {
		pe->refs++;
		pe->last_use = ++ps->tick;
	}
	entries_trim(ps);
	pthread_mutex_unlock(&ps->lock);
	return pe;
}

/* Lets go of pe (entry_get's). */
static void entry_put(struct piece_store *ps, struct piece_entry *pe)
{
	pthread_mutex_lock(&ps->lock);
	pe->refs--;
	entries_trim(ps);
	pthread_mutex_unlock(&ps->lock);
}

/* Whether block index of pe is being made in this process (under the lock). */
static bool being_made(const struct piece_store *ps, const struct piece_entry *pe, uint64_t index)
{
	for (const struct piece_making *m = ps->making; m; m = m->next)
		if (m->entry == pe && m->index == index)
			return true;
	return false;
}

/* Block index of pe (len bytes) into dst: loaded, or made and stored; a block another
 * thread is making is waited for and loaded (made here if it was not stored). 0 with
 * *how added to, or make's -errno with why. */
static int block_get(struct piece_store *ps, struct piece_entry *pe, uint64_t index,
                     uint8_t *dst, size_t len, piece_make_fn make, void *ctx,
                     unsigned *how, char why[GGUF_ERR_MAX])
{
	struct piece_making mine = { .entry = pe, .index = index };
	for (;;) {
		if (pe->e && dc_load(pe->e, index, dst, len)) {
			*how |= PIECE_LOADED;
			return 0;
		}
		pthread_mutex_lock(&ps->lock);
		if (!being_made(ps, pe, index)) {
			mine.next = ps->making;
			ps->making = &mine;
			pthread_mutex_unlock(&ps->lock);
			break;
		}
		while (being_made(ps, pe, index))
			pthread_cond_wait(&ps->made, &ps->lock);
		pthread_mutex_unlock(&ps->lock);   /* then loaded, or made here if not stored */
	}
	/* loaded once more now that it is this thread's to make: another thread may have
	 * stored it between the load above and the listing (made once, not twice) */
	int r;
	if (pe->e && dc_load(pe->e, index, dst, len)) {
		*how |= PIECE_LOADED;
		r = 0;
	} else if ((r = make(ctx, index * PIECE_BLOCK, len, dst, why)) == 0) {
		*how |= PIECE_MADE;
		if (pe->e && !atomic_load(&ps->leaving) && dc_store(pe->e, index, dst, len))
			*how |= PIECE_STORED;
	}
	pthread_mutex_lock(&ps->lock);
	for (struct piece_making **p = &ps->making; *p; p = &(*p)->next)
		if (*p == &mine) {
			*p = mine.next;
			break;
		}
	pthread_cond_broadcast(&ps->made);
	pthread_mutex_unlock(&ps->lock);
	return r;
}

int piece_read(struct piece_store *ps, const char *key, uint64_t size, uint64_t off,
               uint64_t len, void *buf, piece_make_fn make, void *ctx, unsigned *how,
               char why[GGUF_ERR_MAX])
{
	*how = 0;
	if (off > size || len > size - off)
		return -EINVAL;
	if (strlen(key) >= PIECE_KEY_MAX)
		return -EINVAL;
	struct piece_entry *pe = entry_get(ps, key, size);
	if (!pe)
		return -ENOMEM;
	struct piece_scratch *sc = NULL;
	int r = 0;
	for (uint64_t pos = off, end = off + len; pos < end && r == 0;) {
		const uint64_t index = pos / PIECE_BLOCK, start = index * PIECE_BLOCK;
		const size_t blen = size - start < PIECE_BLOCK ? (size_t)(size - start) : PIECE_BLOCK;
		const uint64_t stop = start + blen < end ? start + blen : end;
		const bool whole = pos == start && stop == start + blen;
		if (!whole && !sc && !(sc = scratch_get())) {
			r = -ENOMEM;
			break;
		}
		if (!whole && sc->valid && sc->index == index && sc->len == blen &&
		    strcmp(sc->key, key) == 0) {   /* this thread's last block, read again */
			memcpy((uint8_t *)buf + (pos - off), sc->buf + (pos - start), stop - pos);
			*how |= sc->how;
			pos = stop;
			continue;
		}
		uint8_t *dst = whole ? (uint8_t *)buf + (pos - off) : sc->buf;
		unsigned got = 0;
		if (!whole)
			sc->valid = false;
		r = block_get(ps, pe, index, dst, blen, make, ctx, &got, why);
		*how |= got;
		if (r == 0 && !whole) {
			memcpy((uint8_t *)buf + (pos - off), sc->buf + (pos - start), stop - pos);
			sc->valid = true, sc->index = index, sc->len = blen;
			sc->how = got & PIECE_MADE && !(got & PIECE_STORED) ? PIECE_MADE : PIECE_LOADED;
			memcpy(sc->key, key, strlen(key) + 1);
		} else if (r < 0 && r != -ENOMEM && !whole) {
			/* the block fails, perhaps for bytes outside the range: the range alone */
			r = make(ctx, pos, stop - pos, (uint8_t *)buf + (pos - off), why);
			*how |= r == 0 ? PIECE_MADE : 0;
		}
		pos = stop;
	}
	entry_put(ps, pe);
	return r;
}
