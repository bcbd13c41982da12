/* A file whose bytes are computed, not stored: a quantization of a model, say. Read as
 * any other source (source.h), computed a block at a time by a function of the layer
 * above, each block once:
 *
 *   - in memory, a bounded cache of blocks that every file of a pool shares (the remote
 *     files' block cache): readers of the same block at once wait for one computation;
 *   - on disk, with a disk cache (-o cache_dir), each block kept under the file's key
 *     and version, checksummed, within the cache's bound, so that another mount of the
 *     same file, later or at the same time, reads it at disk speed instead of
 *     computing it again;
 *   - ahead: a reader that goes on sequentially (cat, sha256sum, a model loader) has
 *     the blocks past it computed by the pool's workers, so that a whole-file read runs
 *     at the speed of every core, not one.
 *
 * The pool (one per mount) holds the workers and the memory of every computed file of
 * the mount, whatever the number of files, trees or models: at most its threads, made
 * when blocks are to be made ahead and ending after COMPUTED_POOL_IDLE_S without any,
 * and at most its memory of blocks (more only while readers hold that many at once).
 *
 * A block that cannot be computed (the fill function's -errno: the source's bytes could
 * not be read) fails the reads that need it with the fill's why, is kept nowhere, and
 * is computed again by the next read. FUSE-free; thread-safe. */
#ifndef GGUFS_COMPUTED_H
#define GGUFS_COMPUTED_H

#include <stdint.h>

#include "errline.h"
#include "source.h"

/* The block size: disk cache blocks, memory blocks and fills never span two. */
#define COMPUTED_BLOCK_SIZE (128u << 10)
/* The pool's workers' thread name (top -H, /proc/PID/task/TID/comm). */
#define COMPUTED_THREAD_NAME "ggufs-computed"
/* How long a worker waits for blocks to make before it ends. */
#define COMPUTED_POOL_IDLE_S 2.0
/* The pool's memory, unless told: this many blocks per thread, and at least the
 * minimum (4 MiB), so that two files read at full speed keep their windows ahead. */
#define COMPUTED_POOL_BLOCKS_PER_THREAD 10u
#define COMPUTED_POOL_BLOCKS_MIN 32u

struct computed_pool;
struct leaving;

struct computed_pool_opts {
	unsigned threads;   /* workers at most; 0: none (reads compute, nothing is made ahead) */
	double idle_s;      /* a worker without blocks to make this long ends; 0: the default */
	uint64_t memory;    /* bytes of blocks held in memory by all its files; 0: the default */
	/* the mount's hand-over (leaving.h), or NULL. When it runs, each file of the pool,
	 * open then or opened later, stores nothing more on disk: what it made is the new
	 * mount's to store, which shares the disk cache with it (a quick remount reads what
	 * this one kept, however long it takes to exit). Loads and reads go on. */
	struct leaving *leaving;
};

/* A pool for computed files: no thread yet (each starts when blocks are to be made
 * ahead and none waits), in o->leaving. NULL with one line in err when out of memory. */
struct computed_pool *computed_pool_new(const struct computed_pool_opts *o,
                                        char err[GGUF_ERR_MAX]);
/* Frees p once every file of it is closed, waiting for its workers to end (each is at
 * most between two blocks: none has a file left). NULL: nothing. */
void computed_pool_free(struct computed_pool *p);
/* Workers alive now (for tests and bounds). */
unsigned computed_pool_threads(struct computed_pool *p);

/* Writes bytes [off, off + len) of the file (inside its size, within one block) into
 * buf: 0 (computed), a mask of COMPUTED_FILL_* (how else it had them), or -errno with
 * why (as source.h's reads say it), which the reads that the failed block fails say.
 * Called from any thread, for different blocks at once. */
enum {
	COMPUTED_FILL_KEPT = 1,     /* nothing computed: read from a store of the caller's (a
	                             * disk cache of its own, the bytes it is made from):
	                             * counted as from_disk */
	COMPUTED_FILL_STORED = 2,   /* what it computed, the caller stored: counted so too */
};
typedef int (*computed_fill_fn)(void *ctx, uint64_t off, uint64_t len, void *buf,
                                char why[GGUF_ERR_MAX]);

struct computed_opts {
	uint64_t size;              /* the file's size in bytes */
	computed_fill_fn fill;
	void *ctx;                  /* fill's, kept by the caller while the file is open */
	struct computed_pool *pool; /* its workers and memory, kept until it is closed */
	const char *cache_dir;      /* the disk cache's directory, or NULL for none */
	uint64_t cache_max;         /* its bound (dc_open's max: 0 for the default) */
	const char *key;            /* the file's name in the disk cache: what it is */
	const char *version;        /* and which: another version is another entry */
};

/* Opens the computed file in o->pool: its source (source_close frees it, cancelling
 * the blocks it has queued for the workers and waiting only for those being made; its
 * reads are computed_read's), or NULL with one line in err (out of memory). Its disk
 * cache entry is shared with every other process that has it open (another mount of
 * the same model, an ending one, --check): a block one stored the others load. A disk
 * cache that cannot be used (another user's directory: computed_cache_usable says so
 * at the mount's start) is not an error: the file is computed without it, and the
 * reason is said once in the event log. */
struct source *computed_open(const struct computed_opts *o, char err[GGUF_ERR_MAX]);

/* Whether computed files may use the disk cache in cache_dir (what computed_open's
 * dc_open checks: the directory the user's own and writable by nobody else, its lock
 * file too; made when missing): false with the one line that says why in err. For the
 * mount to say at its start, where the user sees it, that its quantizations will be
 * computed without one. */
bool computed_cache_usable(const char *cache_dir, char err[GGUF_ERR_MAX]);

/* Counters, for tests and the mount's attributes. */
struct computed_counters {
	uint64_t computed;          /* blocks computed (by readers and workers) */
	uint64_t from_disk;         /* blocks read from the disk cache */
	uint64_t stored;            /* blocks written to the disk cache */
	uint64_t failed;            /* computations that failed */
};
void computed_counters(const struct source *src, struct computed_counters *c);
/* Closes src as source_close does, its counters at the end into *c: the blocks that
 * were being made ahead when it closed included. */
void computed_close_counted(struct source *src, struct computed_counters *c);

#endif
