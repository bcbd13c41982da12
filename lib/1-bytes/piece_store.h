/* Pieces kept by what they are made from: the disk cache of quantized tensors (issue 45,
 * "keyed by what a block is made from", "one copy per (tensor, type)"). FUSE-free,
 * nothing of GGUF: a piece is a run of bytes named by a key its caller makes.
 *
 * The design, as quants/ uses it (quants_provider.c makes the keys and the pieces):
 *
 *   - A piece is one converted tensor of a quant file: the bytes llama.cpp writes for
 *     tensor T quantized to type t. Its key says everything those bytes are made from
 *     and nothing else: a content identity of T's stored bytes (XXH3-128 of them, with
 *     their length), T's source type and shape (the same bytes as another type or row
 *     length quantize otherwise), t, QUANT_RULES_VERSION (the quantizers' and rules'
 *     version), and the importance matrix's entry for T (a hash of its weights; "none"
 *     without one). Never a path, an inode, a time or a NAME: mv, ln, chmod, touch and
 *     cp of a model find the same pieces; two NAMEs that give T the same type (Q4_K_S
 *     and Q4_K_M) share T's piece; two models holding the same tensor share it too.
 *     A remote model's tensor bytes are hashed as a local one's (read through its
 *     block caches, which check its ETag or sha256 themselves).
 *   - Each piece is one disk cache entry (diskcache.h: its bound, its LRU eviction,
 *     its crash safety, its checksums, its sharing between processes unchanged), in
 *     blocks of PIECE_BLOCK bytes from the piece's start (not the quant file's: one
 *     piece serves every file that holds it at whatever offset).
 *   - A NAME.gguf is assembled, never stored whole: its header from the plan (small,
 *     made on demand), each tensor whose type stays (F16 of an F16 model, the norms
 *     kept F32) read from the model, each converted tensor from its piece, a block of
 *     the piece made once in the process (a reader wanting a block another thread is
 *     making waits for it, then loads it) and stored for every later reader.
 *   - Current, cheaply: the content hash of a tensor is made once per mount, from the
 *     mapping of the version the model parsed, and believed only when model_changed
 *     says after the hash that the file is still that version (its ctime, which every
 *     write moves and no utimensat() puts back: a model rewritten in place with its
 *     size and mtime restored has another ctime). Every block served, loaded or made,
 *     is checked the same way after it is had (an fstat, not a read). A new mount
 *     hashes the bytes the file holds then: a rewritten model's tensors have other
 *     keys, so no block of what it held before is ever served for them.
 *
 * Thread-safe; the store of one mount is shared by all its trees and files. */
#ifndef GGUFS_PIECE_STORE_H
#define GGUFS_PIECE_STORE_H

#include <stdint.h>

#include "errline.h"

/* A piece's disk blocks: the disk cache's block size. */
#define PIECE_BLOCK (128u << 10)
/* Entries held open at once (each a lock and two descriptors); an idle one is closed
 * past it, least recently used first. */
#define PIECE_OPEN_MAX 32
/* The longest key. */
#define PIECE_KEY_MAX 512

struct piece_store;
struct leaving;

/* A store in the disk cache cache_dir bounded to cache_max (dc_open's: 0 the default),
 * storing nothing more once leaving (the mount's hand-over, or NULL) has run. The
 * directory is opened at the first read (nothing is open across a fork to the
 * background); one that cannot be used is said once in the event log, and the pieces
 * are made without it. NULL with one line in err out of memory. */
struct piece_store *piece_store_new(const char *cache_dir, uint64_t cache_max,
                                    struct leaving *leaving, char err[GGUF_ERR_MAX]);
/* Frees ps (NULL: nothing), once no read is in it. */
void piece_store_free(struct piece_store *ps);

/* Makes bytes [off, off + len) of the piece (inside it, within one PIECE_BLOCK) into
 * buf: 0 or -errno with why. A made block is stored only when it returns 0: a maker
 * that cannot prove its bytes current fails. Asked for whole blocks, and for the part
 * a read wants of one whose whole failed (that part is not stored): a failure is the
 * reads' that need the bytes that fail, not their neighbours'. */
typedef int (*piece_make_fn)(void *ctx, uint64_t off, uint64_t len, void *buf,
                             char why[GGUF_ERR_MAX]);

/* How a piece_read had its bytes: a mask. */
enum {
	PIECE_LOADED = 1,   /* some block read from the disk cache */
	PIECE_MADE = 2,     /* some block made by make */
	PIECE_STORED = 4,   /* some block made and stored */
};

/* Bytes [off, off + len) of the piece named key, size bytes long, into buf: each block
 * they touch loaded from its entry when held there whole and checked, else made whole
 * by make (ctx) and stored (a block whose whole fails: the part wanted alone, not
 * stored). 0 with *how set, or make's -errno with why (-ENOMEM too). */
int piece_read(struct piece_store *ps, const char *key, uint64_t size, uint64_t off,
               uint64_t len, void *buf, piece_make_fn make, void *ctx, unsigned *how,
               char why[GGUF_ERR_MAX]);

#endif
