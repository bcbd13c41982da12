#include "blockcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum bc_state { BC_LOADING, BC_READY, BC_FAILED };

struct bc_block {
	const void *owner;
	uint64_t index;
	size_t len;
	enum bc_state state;
	int error;               /* BC_FAILED */
	unsigned refs;           /* readers holding it, and its filler while loading */
	bool in_table;
	bool ahead;              /* claimed by read-ahead and not read yet */
	struct bc_block *next;   /* hash chain */
	struct bc_block *newer, *older;  /* recency list: table members only */
	uint8_t *data;
};

struct blockcache {
	pthread_mutex_t lock;
	pthread_cond_t filled;   /* some block left BC_LOADING */
	size_t block_size;
	uint64_t max_blocks;
	uint64_t count;          /* in the table */
	struct bc_block **buckets;
	uint64_t mask;
	struct bc_block *newest, *oldest;
	uint8_t *spare[BC_SPARE_MAX];   /* bytes of evicted full blocks, kept for the next */
	unsigned n_spare;
};

/* The bucket of (owner, index). */
static uint64_t bucket(const struct blockcache *bc, const void *owner, uint64_t index)
{
	uint64_t h = (uint64_t)(uintptr_t)owner * 0x9e3779b97f4a7c15ull ^ index;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h & bc->mask;
}

struct blockcache *bc_new(uint64_t bound, size_t block_size)
{
	struct blockcache *bc = calloc(1, sizeof *bc);
	if (!bc)
		return NULL;
	bc->block_size = block_size;
	bc->max_blocks = bound / block_size;
	if (bc->max_blocks < 4)
		bc->max_blocks = 4;
	uint64_t n = 16;
	while (n < 2 * bc->max_blocks && n < (1ull << 30))
		n <<= 1;
	bc->buckets = calloc(n, sizeof *bc->buckets);
	if (!bc->buckets) {
		free(bc);
		return NULL;
	}
	bc->mask = n - 1;
	pthread_mutex_init(&bc->lock, NULL);
	pthread_cond_init(&bc->filled, NULL);
	return bc;
}

/* Block bytes are mapped, not malloc'ed: unmapped when evicted, they leave the process
 * at once, where malloc arenas (one per thread, and blocks are freed by whichever
 * thread evicts them) would keep them, and the memory bound would not hold. But the
 * last BC_SPARE_MAX full blocks evicted are kept for the next ones inserted: a reader
 * streaming through a file evicts a block per block it inserts, and a fresh mapping's
 * page faults (32 for 128 KiB, each a trip through the hypervisor on a VM) cost more
 * than computing a block of q8_0. Called locked (or with the cache no longer shared). */
static uint8_t *data_alloc(struct blockcache *bc, size_t len)
{
	if (len == bc->block_size && bc->n_spare)
		return bc->spare[--bc->n_spare];
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	               -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* A block and its bytes (taken out of the table and held by nobody): the bytes kept
 * as a spare when there is room. Called locked. */
static void block_free(struct blockcache *bc, struct bc_block *b)
{
	if (b->data && b->len == bc->block_size && bc->n_spare < BC_SPARE_MAX)
		bc->spare[bc->n_spare++] = b->data;
	else if (b->data)
		munmap(b->data, b->len ? b->len : 1);
	free(b);
}

void bc_free(struct blockcache *bc)
{
	if (!bc)
		return;
	for (uint64_t i = 0; i <= bc->mask; i++) {
		for (struct bc_block *b = bc->buckets[i], *next; b; b = next) {
			next = b->next;
			block_free(bc, b);
		}
	}
	for (unsigned i = 0; i < bc->n_spare; i++)
		munmap(bc->spare[i], bc->block_size);
	free(bc->buckets);
	pthread_mutex_destroy(&bc->lock);
	pthread_cond_destroy(&bc->filled);
	free(bc);
}

/* The block of (owner, index) in the table, or NULL. Called locked. */
static struct bc_block *find(struct blockcache *bc, const void *owner, uint64_t index)
{
	for (struct bc_block *b = bc->buckets[bucket(bc, owner, index)]; b; b = b->next)
		if (b->owner == owner && b->index == index)
			return b;
	return NULL;
}

/* Takes b out of the recency list. Called locked. */
static void list_unlink(struct blockcache *bc, struct bc_block *b)
{
	if (b->newer)
		b->newer->older = b->older;
	else
		bc->newest = b->older;
	if (b->older)
		b->older->newer = b->newer;
	else
		bc->oldest = b->newer;
	b->newer = b->older = NULL;
}

/* Puts b first in the recency list, as the most recently used. Called locked. */
static void list_push(struct blockcache *bc, struct bc_block *b)
{
	b->older = bc->newest;
	b->newer = NULL;
	if (bc->newest)
		bc->newest->newer = b;
	bc->newest = b;
	if (!bc->oldest)
		bc->oldest = b;
}

/* Takes b out of the table and the list; freed here unless someone holds it. */
static void remove_block(struct blockcache *bc, struct bc_block *b)
{
	struct bc_block **p = &bc->buckets[bucket(bc, b->owner, b->index)];
	while (*p != b)
		p = &(*p)->next;
	*p = b->next;
	list_unlink(bc, b);
	b->in_table = false;
	bc->count--;
	if (!b->refs)
		block_free(bc, b);
}

/* Pushes out the least recently used block nobody holds; false if every one is held. */
static bool evict_one(struct blockcache *bc)
{
	for (struct bc_block *b = bc->oldest; b; b = b->newer) {
		if (!b->refs && b->state == BC_READY) {
			remove_block(bc, b);
			return true;
		}
	}
	return false;
}

/* A new loading block for (owner, index), held once by its filler, in the table. With
 * must false, NULL rather than go over the bound. Called locked. */
static struct bc_block *insert(struct blockcache *bc, const void *owner, uint64_t index,
                               size_t len, bool must)
{
	while (bc->count >= bc->max_blocks && evict_one(bc))
		;
	if (bc->count >= bc->max_blocks && !must)
		return NULL;
	struct bc_block *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->data = data_alloc(bc, len);
	if (!b->data) {
		free(b);
		return NULL;
	}
	b->owner = owner;
	b->index = index;
	b->len = len;
	b->state = BC_LOADING;
	b->refs = 1;
	b->in_table = true;
	uint64_t h = bucket(bc, owner, index);
	b->next = bc->buckets[h];
	bc->buckets[h] = b;
	list_push(bc, b);
	bc->count++;
	return b;
}

struct bc_block *bc_claim(struct blockcache *bc, const void *owner, uint64_t index, size_t len)
{
	pthread_mutex_lock(&bc->lock);
	struct bc_block *b = find(bc, owner, index) ? NULL : insert(bc, owner, index, len, false);
	if (b)
		b->ahead = true;
	pthread_mutex_unlock(&bc->lock);
	return b;
}

uint8_t *bc_block_data(struct bc_block *b)
{
	return b->data;
}

void bc_fill_done(struct blockcache *bc, struct bc_block *b, int error)
{
	pthread_mutex_lock(&bc->lock);
	b->state = error ? BC_FAILED : BC_READY;
	b->error = error;
	if (error && b->in_table)
		remove_block(bc, b);
	pthread_cond_broadcast(&bc->filled);
	pthread_mutex_unlock(&bc->lock);
	bc_release(bc, b);
}

int bc_get(struct blockcache *bc, const void *owner, uint64_t index, size_t len,
           bc_fetch_fn fetch, void *arg, const uint8_t **data, struct bc_block **held)
{
	*data = NULL;
	pthread_mutex_lock(&bc->lock);
	struct bc_block *b = find(bc, owner, index);
	if (b) {
		b->refs++;
		/* a read-ahead block keeps its place at its first read: a streaming reader
		 * reads each block once, and promoting them would put the blocks it has read
		 * after those still ahead of it, which would then be pushed out first */
		if (b->ahead) {
			b->ahead = false;
		} else {
			list_unlink(bc, b);
			list_push(bc, b);
		}
		while (b->state == BC_LOADING)
			pthread_cond_wait(&bc->filled, &bc->lock);
		pthread_mutex_unlock(&bc->lock);
		if (b->state == BC_FAILED || b->len < len) {
			int r = b->state == BC_FAILED ? b->error : -EIO;
			bc_release(bc, b);
			return r;
		}
		*held = b;
		*data = b->data;
		return 0;
	}
	b = insert(bc, owner, index, len, true);
	/* the filler's hold ends in bc_fill_done; this one is the caller's. Taken under the
	 * lock: a reader that finds the block loading counts itself in at the same time, and
	 * an increment outside it could lose another's (a leak, seen once under ASan) */
	if (b)
		b->refs++;
	pthread_mutex_unlock(&bc->lock);
	if (!b)
		return -ENOMEM;
	int r = fetch(arg, index, b->data, len);
	bc_fill_done(bc, b, r);
	if (r) {
		bc_release(bc, b);
		return r;
	}
	*held = b;
	*data = b->data;
	return 0;
}

void bc_release(struct blockcache *bc, struct bc_block *b)
{
	pthread_mutex_lock(&bc->lock);
	if (--b->refs == 0 && !b->in_table)
		block_free(bc, b);
	pthread_mutex_unlock(&bc->lock);
}

void bc_drop_owner(struct blockcache *bc, const void *owner)
{
	pthread_mutex_lock(&bc->lock);
	for (uint64_t i = 0; i <= bc->mask; i++) {
		for (struct bc_block *b = bc->buckets[i], *next; b; b = next) {
			next = b->next;
			if (b->owner == owner)
				remove_block(bc, b);
		}
	}
	pthread_mutex_unlock(&bc->lock);
}

uint64_t bc_count(struct blockcache *bc)
{
	pthread_mutex_lock(&bc->lock);
	uint64_t n = bc->count;
	pthread_mutex_unlock(&bc->lock);
	return n;
}

bool bc_contains(struct blockcache *bc, const void *owner, uint64_t index)
{
	pthread_mutex_lock(&bc->lock);
	bool yes = find(bc, owner, index) != NULL;
	pthread_mutex_unlock(&bc->lock);
	return yes;
}
