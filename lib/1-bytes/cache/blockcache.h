/* A bounded memory cache of fixed-size blocks of files (remote, or computed: computed.h),
 * least recently used out first. A block is fetched once however many threads want it
 * at the same time: the first claims it and fetches, the others wait for the bytes.
 * Thread-safe. */
#ifndef GGUFS_BLOCKCACHE_H
#define GGUFS_BLOCKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct blockcache;
struct bc_block;

/* Evicted blocks whose bytes a cache keeps for reuse, beyond its bound. */
#define BC_SPARE_MAX 4

/* Fills buf with the len bytes of block index of the file owner: 0 or -errno. */
typedef int (*bc_fetch_fn)(void *arg, uint64_t index, uint8_t *buf, size_t len);

/* A cache of at most max(bound / block_size, 4) blocks of block_size bytes (more only
 * while that many are in use by readers at once), and the bytes of BC_SPARE_MAX more
 * evicted. NULL when out of memory. */
struct blockcache *bc_new(uint64_t bound, size_t block_size);
void bc_free(struct blockcache *bc);

/* The len (<= block size) bytes of block index of owner into *data, from the cache or
 * fetched into it by fetch(arg, ...), held for the caller until bc_release(*held): 0, or
 * -errno when the fetch failed (*data NULL, nothing kept). */
int bc_get(struct blockcache *bc, const void *owner, uint64_t index, size_t len,
           bc_fetch_fn fetch, void *arg, const uint8_t **data, struct bc_block **held);
void bc_release(struct blockcache *bc, struct bc_block *b);

/* For read-ahead: a new empty block for (owner, index) that the caller fills and ends
 * with bc_fill_done, or NULL when the block is cached or being fetched already, or the
 * cache has no room without pushing out a block that a reader holds. It counts as used
 * when claimed, and its first read does not count again (so a streaming reader's blocks
 * leave in the order they were claimed, after the ones it read, before the ones ahead). */
struct bc_block *bc_claim(struct blockcache *bc, const void *owner, uint64_t index, size_t len);
uint8_t *bc_block_data(struct bc_block *b);
/* Ends a claim: error 0 makes the bytes available, else they are dropped and the
 * readers waiting for them get error. */
void bc_fill_done(struct blockcache *bc, struct bc_block *b, int error);

/* Forgets every block of owner (which nobody may read or fill any more). */
void bc_drop_owner(struct blockcache *bc, const void *owner);

/* Blocks held now (for tests and bounds). */
uint64_t bc_count(struct blockcache *bc);
/* Whether (owner, index) is cached, fetched or not (for tests). */
bool bc_contains(struct blockcache *bc, const void *owner, uint64_t index);

#endif
