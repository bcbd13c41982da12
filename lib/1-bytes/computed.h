/* A file whose bytes are computed, not stored: a quantization of a model, say. Read as
 * any other source (source.h), computed a block at a time by a function of the layer
 * above, each block once:
 *
 *   - in memory, a bounded cache of blocks (the remote files' block cache): readers of
 *     the same block at once wait for one computation;
 *   - on disk, with a disk cache (-o cache_dir), each block kept under the file's key
 *     and version, checksummed, within the cache's bound, so that a later mount of the
 *     same file reads it at disk speed instead of computing it again;
 *   - ahead: a reader that goes on sequentially (cat, sha256sum, a model loader) has
 *     the blocks past it computed on worker threads, so that a whole-file read runs at
 *     the speed of every core, not one.
 *
 * A block that cannot be computed (the fill function's -errno: the source's bytes could
 * not be read) fails the reads that need it, is kept nowhere, and is computed again by
 * the next read. FUSE-free; thread-safe. */
#ifndef GGUFS_COMPUTED_H
#define GGUFS_COMPUTED_H

#include <stdint.h>

#include "errline.h"
#include "source.h"

/* Writes bytes [off, off + len) of the file (inside its size, within one block) into
 * buf: 0, or -errno. Called from any thread, for different blocks at once. */
typedef int (*computed_fill_fn)(void *ctx, uint64_t off, uint64_t len, void *buf);

struct computed_opts {
	uint64_t size;              /* the file's size in bytes */
	computed_fill_fn fill;
	void *ctx;                  /* fill's, kept by the caller while the file is open */
	unsigned threads;           /* workers computing ahead; 0: none, reads compute */
	uint64_t memory;            /* bytes of blocks held in memory (at least a few) */
	const char *cache_dir;      /* the disk cache's directory, or NULL for none */
	uint64_t cache_max;         /* its bound (dc_open's max: 0 for the default) */
	const char *key;            /* the file's name in the disk cache: what it is */
	const char *version;        /* and which: another version is another entry */
};

/* The block size: disk cache blocks, memory blocks and fills never span two. */
#define COMPUTED_BLOCK_SIZE (128u << 10)

/* Opens the computed file: its source (source_close frees it; its reads are
 * computed_read's), or NULL with one line in err (out of memory, threads that would not
 * start). A disk cache that cannot be used (another user's directory, one in use by
 * another mount for this key: one that is ending, computed_leaving, is waited for
 * first) is not an error: the file is computed without it, and
 * the reason is said once in the event log. */
struct source *computed_open(const struct computed_opts *o, char err[GGUF_ERR_MAX]);

/* The mount is ending (nothing reads src any more, or soon): its disk cache entry is
 * marked as being let go (dc_leaving), so that a quick remount of the same file waits a
 * moment (DC_LEAVING_WAIT_S) for this one to close it, and reads the blocks kept there,
 * instead of computing every block again without it. Nothing more is stored; reads go
 * on. Safe while workers store blocks (it waits for a store under way). Without a disk
 * cache, nothing. */
void computed_leaving(struct source *src);

/* Counters, for tests and the mount's attributes. */
struct computed_counters {
	uint64_t computed;          /* blocks computed (by readers and workers) */
	uint64_t from_disk;         /* blocks read from the disk cache */
	uint64_t stored;            /* blocks written to the disk cache */
	uint64_t failed;            /* computations that failed */
};
void computed_counters(const struct source *src, struct computed_counters *c);

#endif
