/* A persistent cache of fixed-size blocks of files (remote, or computed: computed.h), in
 * a directory on disk, so that a later mount of the same file version fetches (or
 * computes) nothing again. FUSE-free.
 *
 * Layout: per file version (URL as url_cache_key gives it, size, ETag) one directory,
 * named by a hash of that key (never the token: the key holds no credentials, and its
 * query only as a hash), mode 0700,
 * holding `data` (sparse, the file's size, block k at k * block size) and `map` (a
 * header naming the key, then one record per block: checksum of its bytes, last use),
 * both mode 0600. A block's record is written after its bytes, and a block is served
 * only when its record checks out (a check over its fields and index) and its bytes
 * match the record's checksum: a daemon killed mid-write, a crash that kept a record
 * but not all the bytes, or a torn record never serves a torn block.
 *
 * Bound: the disk usage (st_blocks) of the whole directory stays at most max; a store
 * that would pass it first removes whole entries no mount uses, least recently used
 * first, then punches out the least recently used blocks of the entries in use (this
 * mount's or another's: each block's last use is a time, comparable between mounts);
 * if that is not enough the block is not stored. Stores of every process serialize on
 * the directory's `lock` file (flock), so the bound holds with several mounts sharing
 * the directory. A mount whose block another evicted finds its record gone (or its
 * bytes not matching) at its next load, and fetches the block again.
 *
 * The usage is a running total in `lock`, which every process that changes the
 * directory (a store, an eviction, an entry made or removed) reads and writes back under
 * the flock, adding what st_blocks says its change took or freed: a store costs the same
 * however many entries the directory holds. It is counted afresh by a walk of the
 * directory when a process first opens it, when the total is missing, damaged, or was
 * left mid-change by a process that died, when a change would take it below zero, and
 * when it says a block does not fit yet nothing more can be evicted.
 *
 * Every process (mount, --check, --diff) shares the directory and its entries at once.
 * A process that uses an entry holds a shared flock on its map, so that eviction (which
 * takes it exclusively, without waiting) never removes an entry in use, whole; blocks of
 * entries in use may be punched out all the same (record first). What a process knows
 * of an entry (which blocks it holds, read from the map when it opened it) is a record
 * of its own; a load or store it does not know of asks the map on disk (one record
 * read): a block another process stored is loaded, and one that went is not. A block
 * two processes make at once is made by both (the cache never waits for another
 * process's computation), stored by the first, and loaded or kept by the second only
 * once its record and bytes check out: never a half-written block. Within a process
 * every open of an entry shares one state, through any handle: dc_open of a directory
 * this process has open already (the same device and inode) shares its state, and
 * dc_entry_open of an entry held already references it.
 *
 * A failed write says its cause once in the event log: the file system full (ENOSPC or
 * EDQUOT, with the directory), another error, or the bound (cache_max) with nothing
 * more to free; the block is then not kept and the reader goes on without it.
 *
 * A process that forks after opening a directory shares its descriptors, and so its
 * locks, with the child: the child must not use the cache (ggufs's daemon is the one
 * that goes on once fuse_daemonize's parent exits).
 *
 * Thread-safe. */
#ifndef GGUFS_DISKCACHE_H
#define GGUFS_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DC_DEFAULT_MAX (10ull << 30)  /* the default bound: at most 10 GiB ... */
#define DC_DEFAULT_FREE_DIVISOR 4     /* ... and at most a quarter of (free + cached) */
#define DC_KEY_MAX 3968               /* a longer key (URL) is not cached */

struct diskcache;
struct dc_entry;

/* Opens the cache directory dir (created mode 0700 when missing; its parent must exist),
 * bounded to max bytes, or with max 0 to the default: min(DC_DEFAULT_MAX, (free space
 * of its file system + what the cache holds) / DC_DEFAULT_FREE_DIVISOR), taken now: a
 * handle of its own (its bound, block_size and dc_leaving), on the directory's state
 * that every handle of this process on it shares.
 * NULL with one phrase in err (errlen bytes) when it cannot be used, or must not be: a
 * symlink, another user's, or writable by group or others (its blocks would not be the
 * server's), or its lock file is not a regular file of the user's alone. Entries and
 * files inside are held to the same rule (and files to one name) before they are read;
 * one that fails it is made afresh, and eviction never follows a symlink. No open in
 * the directory waits: only directories and regular files are opened (a FIFO, socket or
 * device never is), all with O_NONBLOCK. */
struct diskcache *dc_open(const char *dir, uint64_t max, uint32_t block_size, char *err,
                          size_t errlen);
/* Whether dir may be used as dc_open uses it (made mode 0700 when missing; its lock
 * file made, checked, closed), without opening it: false with the phrase dc_open would
 * give in err. For a warning at a mount's start, where nothing opens it yet. */
bool dc_usable(const char *dir, char *err, size_t errlen);
/* The mount is ending: nothing more is stored through dc (the processes that go on
 * store what they make); loads go on. NULL: nothing. */
void dc_leaving(struct diskcache *dc);
/* Closes the handle (the directory with the last one); its entries must be closed
 * first. */
void dc_close(struct diskcache *dc);

/* The bound in bytes. */
uint64_t dc_max(const struct diskcache *dc);
/* Bytes the directory's files take on disk now (st_blocks * 512), by a walk of it. */
uint64_t dc_usage(struct diskcache *dc);
/* The running total of that which stores keep (in DIR/lock), read under the lock:
 * UINT64_MAX when there is none that checks out. For tests. */
uint64_t dc_usage_kept(struct diskcache *dc);

/* The entry of one file version: url as url_cache_key gives it, its size,
 * and version (its ETag, or else its Last-Modified; "" means the version cannot be told
 * and nothing is cached: NULL). Created empty when missing or unreadable; shared with
 * the opens of it in this process (each closed by its own dc_entry_close; the entry is
 * let go with the last) and with other processes. NULL when it cannot be made (no room
 * under the bound, a write error, a key too long), or another process holds it
 * exclusively (a ggufs older than shared entries); never waits for another process. */
struct dc_entry *dc_entry_open(struct diskcache *dc, const char *url, uint64_t size,
                               const char *version);
void dc_entry_close(struct dc_entry *e);
/* The entry's directory name in the cache directory (for tests and messages). */
const char *dc_entry_name(const struct dc_entry *e);

/* Fills buf with block index (len bytes: the block size, or less for the last block)
 * when the entry holds it whole and checked, stored by this process or another; false
 * otherwise (a block that fails its check is forgotten). */
bool dc_load(struct dc_entry *e, uint64_t index, uint8_t *buf, size_t len);
/* Whether block index is recorded as held, by this process's record or else the map on
 * disk (unchecked: dc_load checks). */
bool dc_holds(struct dc_entry *e, uint64_t index);
/* Writes block index to disk, making room within the bound; true too when the entry
 * holds those bytes already (another process stored them). False when it could not (no
 * room that may be freed, the file system full, an I/O error: said once in the event
 * log): the block is then just not cached. */
bool dc_store(struct dc_entry *e, uint64_t index, const uint8_t *buf, size_t len);

/* The checksum of a block as the map records it (xxHash's XXH3, 64 bits): for tests. */
uint64_t dc_checksum(const uint8_t *p, size_t n);

#endif
