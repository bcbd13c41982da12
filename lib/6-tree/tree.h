/* The virtual tree that a mount shows: inodes, names, sizes and a read entry point,
 * built once from a model at mount time. Nothing here knows FUSE. The tree is names and
 * dispatch: a read of a file goes to its renderer (lib/5-render), to the tensor reader
 * (lib/3-reader), to the statistics files (tree_stats.c) or, for model.gguf, to the
 * model's layout as one file (lib/2-model/modelfile.h); extended attributes are
 * tree_xattr.c's.
 *
 * Inode numbers: tree_ino.h.
 *
 * With -o edits, each state of the metadata (overlay.h) has a tree of its own, built
 * from the state's view of the model; trees are held by reference (tree_hold), so a
 * reader that opened a file of one keeps reading it while a newer one serves lookups.
 * What no edit changes (tensors/, stats/, the tensor infos of model.gguf's header) is
 * built once, with the tree of the model's own metadata, and shared by every state's
 * tree, which holds only its metadata part; an edit of a value also keeps the key
 * names and their index of the tree before. */
#ifndef GGUFS_TREE_H
#define GGUFS_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "model.h"
#include "overlay.h"
#include "tree_ino.h"


enum tree_kind {
	TREE_ROOT,
	TREE_DIR_METADATA,
	TREE_DIR_TENSORS,
	TREE_JSON,
	TREE_SUMMARY,
	TREE_META,     /* metadata/KEY */
	TREE_RAW,      /* tensors/NAME */
	TREE_F32,      /* tensors/NAME.f32 */
	TREE_NPY,      /* tensors/NAME.npy */
	TREE_DIR_STATS,
	TREE_STATS,    /* stats/NAME */
	TREE_STATS_TSV,
	TREE_MODEL,    /* model.gguf: the model as one GGUF file (modelfile.h) */
	TREE_DIR_QUANTS,
	TREE_QUANT,    /* quants/NAME.gguf (quant_plan.h); index: NAME's place in quant_names() */
	TREE_QUANTS_TSV,
};

struct tree_node {
	uint64_t ino;
	uint64_t parent;     /* ino of the directory holding it (the root: itself) */
	enum tree_kind kind;
	uint64_t index;      /* key index (TREE_META) or tensor index (TREE_RAW/F32/NPY/STATS) */
	const char *name;    /* file name, escaped (NAMES), NUL-terminated */
	uint64_t size;       /* exact st_size; 0 for directories */
};

struct tree;

/* Builds the tree of model m (which must outlive it): names, sizes of every file
 * (rendered files are rendered once to count their bytes). NULL with err on failure. */
struct tree *tree_build(const struct ggufs_model *m, char err[GGUF_ERR_MAX]);
void tree_free(struct tree *t);

/* The tree of edit state s (held while the tree lives), sharing base's statistics:
 * base, the tree of the model's own metadata, must outlive it. prev (or NULL), the tree
 * of the state s was made from, lends the sizes of the keys s leaves unchanged, so an
 * edit renders only what it changed. NULL with err. */
struct tree *tree_build_state(const struct tree *base, struct ov_state *s,
                              const struct tree *prev, char err[GGUF_ERR_MAX]);
/* -o requantize (llama-quantize's --allow-requantize): quants/ of t, and of the trees of
 * its edit states, holds the quantizations llama.cpp makes only when allowed to
 * requantize a tensor already quantized (dequantized as ggml does, then quantized).
 * Before the first lookup in t. */
void tree_set_requantize(struct tree *t, bool on);
/* Another reference to t; tree_release drops one, the last frees t. A tree from
 * tree_build or tree_build_state starts with one. */
struct tree *tree_hold(struct tree *t);
void tree_release(struct tree *t);
/* The bytes t holds of its own, for tests and benchmarks: the tree of the model's own
 * metadata everything, a state's tree its metadata part only (its state's key table,
 * its keys' nodes, names and marks, model.gguf's header up to the last key), since it shares the tensor part
 * (tensors/, stats/, model.gguf's tensor infos) with the former; the key names and
 * their index when an edit kept every name (counted by the tree that made them);
 * gguf.json's and summary.txt's sizes and marks are made when first asked for. */
uint64_t tree_held_bytes(const struct tree *t);
/* How the files of quants/ are made and kept (tree_quants.c): each NAME.gguf is a
 * computed file (computed.h), opened at its first read, its blocks made by the pool's
 * workers ahead of a sequential reader and kept in the disk cache under the model's
 * identity, NAME and QUANT_RULES_VERSION. */
struct computed_pool;
struct leaving;
struct tree_quant_cache {
	const char *dir;       /* the disk cache's directory (cache_dir_default), NULL: none */
	uint64_t max;          /* its bound in bytes, 0: the default (diskcache.h) */
	unsigned threads;      /* the pool's workers at most (tree_quant_pool_new): 0 for
	                        * the online cores */
	struct computed_pool *pool;   /* the mount's workers and memory, shared by every tree
	                               * of the mount and kept until they are freed; NULL: a
	                               * tree makes its own at its first quant read */
};
/* Sets t's way (copied), before anything is read; a tree of an edit state takes its
 * base's. Without it: no disk cache, workers on every core. false out of memory. */
bool tree_set_quant_cache(struct tree *t, const struct tree_quant_cache *c);
/* A pool for the quants/ files of a mount (computed_pool_new): at most threads workers,
 * 0 for the online cores, and the default memory. NULL with one line in err. Freed by
 * computed_pool_free after every tree that uses it; when leaving (the mount's
 * hand-over, leaving.h; or NULL) runs at the unmount, their files store nothing more
 * on disk; a quick remount shares their entries (computed_pool_opts.leaving). */
struct computed_pool *tree_quant_pool_new(unsigned threads, struct leaving *leaving,
                                          char err[GGUF_ERR_MAX]);
/* True when file n of t is one of quants/ and t's model is no longer the file it parsed
 * (model_changed: written to in place, or shrunk): its reads all fail with EIO, and
 * an open of it must not keep the pages the kernel holds of it (they are of the model
 * as it was). False for every other file. */
bool tree_quants_changed(const struct tree *t, const struct tree_node *n);

/* The edit state of t, or NULL for the tree of the model's own metadata. */
const struct ov_state *tree_state(const struct tree *t);
/* The ino of metadata key k (the k-th key of the tree's metadata), or 0. */
uint64_t tree_key_ino(const struct tree *t, uint64_t k);

/* The ino of the tree's model.gguf (see above). */
uint64_t tree_model_ino(const struct tree *t);

/* With edits, when file n of t last changed (its mtime and ctime): a key's file its
 * key's last edit; metadata/, gguf.json, summary.txt and model.gguf the state's (edits
 * before the mount: FILE's time). False for every other file, and without edits: the
 * model file's times hold. */
bool tree_edit_time(const struct tree *t, const struct tree_node *n, struct timespec *ts);

/* The model the tree shows. */
const struct ggufs_model *tree_model(const struct tree *t);

/* The node of inode ino, or NULL. */
const struct tree_node *tree_node(const struct tree *t, uint64_t ino);
/* The child called name of directory dir, or NULL. */
const struct tree_node *tree_lookup(const struct tree *t, uint64_t dir, const char *name);
/* Children of a directory: count, and the i-th in a stable order (file order). */
uint64_t tree_dir_count(const struct tree *t, uint64_t dir);
const struct tree_node *tree_dir_child(const struct tree *t, uint64_t dir, uint64_t i);
bool tree_is_dir(const struct tree_node *n);

/* st_mode for node n of a model whose file has mode gguf_mode: files r--r--r--,
 * directories r-xr-xr-x, each limited by the read bits of the GGUF file. */
mode_t tree_mode(const struct tree_node *n, mode_t gguf_mode);

/* The attributes of node n of t (tree_stat.c), the one rule for a model wherever it is
 * mounted (alone or in a library): sizes from the tree; mode (tree_mode), owner and
 * times from the model file; st_blocks the model's bytes once, in model.gguf, and one
 * block for every other non-empty file (a view of those bytes or computed from them);
 * with editable (-o edits), metadata/ and its keys the mount owner's and writable by
 * them, and the files an edit changed dated by it (tree_edit_time). st_ino is the
 * tree's number (a library gives its own). */
struct stat;
void tree_stat(const struct tree *t, const struct tree_node *n, bool editable, struct stat *st);

/* Reads up to len bytes of node n at off into buf. Returns the number of bytes (short
 * only at the end of the file), or -errno: -EISDIR for a directory, -EIO when the bytes
 * have gone from the model file (it shrank under the mount) or, for a remote model,
 * could not be fetched or belong to a changed file, with why as the failure was seen
 * (source.h: "PATH: the file shrank from A to B bytes ...", "URL: HTTP 503"; "" when
 * the errno says it all; NULL: not wanted). Thread-safe; allocates nothing proportional
 * to the tensor. */
int64_t tree_read(const struct tree *t, const struct tree_node *n, char *buf, uint64_t len,
                  uint64_t off, char why[GGUF_ERR_MAX]);

/* stats/NAME and stats.tsv are computed by their reads only (never by lookups, sizes or
 * directory listings), each tensor at most once per tree however many threads read it
 * (lib/4-stats/stats.h). How many tensors' statistics have been computed so far: for tests. */
uint64_t tree_stats_computed(const struct tree *t);

/* How many marks reads of n can start from (render_mark.h): 0 for small and
 * non-rendered files. For tests. */
uint64_t tree_render_marks(const struct tree *t, const struct tree_node *n);

/* The zero-copy read: [off, off + len) of n (inside its size) as at most max iovecs
 * into memory the reply may be copied from by the kernel, for the files that are bytes
 * of the model as they lie: a raw tensor file of a local model (one iovec into its
 * mapping) and model.gguf of a local model (tree_model_iov). The count; 0 when n is to
 * be read with tree_read instead (any other file, a remote model, model.gguf in more
 * than max pieces); -EIO with why (as tree_read's) when the file no longer holds the
 * bytes (it shrank: checked against the file as it is now; should it shrink after, the
 * kernel's copy fails and the reader gets EIO, never the daemon a SIGBUS). */
int tree_read_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                  struct iovec *iov, int max, char why[GGUF_ERR_MAX]);

/* Where the bytes of a raw tensor file lie in the model file, for a zero-copy reply:
 * the fd and absolute offset of byte off of n, and how many of the len asked for exist,
 * in the file as it is now (fewer when it shrank): reader_raw_span. False for any node
 * not TREE_RAW, and for a remote tensor (read it with tree_read). */
bool tree_raw_span(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   int *fd, uint64_t *file_off, uint64_t *count);

/* [off, off + len) of model.gguf n of a local model as at most max iovecs into memory
 * and the shards' mappings, for a reply the kernel copies from them (as tree_raw_span):
 * the count, checked against the files as they are now; 0 when the range needs more
 * than max, the model is remote or n is not model.gguf (read it with tree_read); -EIO
 * with why (as tree_read's) when a shard no longer holds the bytes. */
int tree_model_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   struct iovec *iov, int max, char why[GGUF_ERR_MAX]);

/* The fd of the one local file that model.gguf of t is byte for byte (a single-file
 * local model whose metadata is the file's own, or edited back to it: its layout one
 * span, the whole file from offset 0), for handing to the kernel; -1 for any other
 * model.gguf (split, remote, edited). */
int tree_model_file_fd(const struct tree *t);

/* Extended attributes (man page): listxattr fills buf with NUL-separated names, getxattr the
 * value; both return the full length needed, with size 0 as the size query, -ERANGE
 * when size is too small, -ENODATA for a name the node does not have. */
int64_t tree_listxattr(const struct tree *t, const struct tree_node *n, char *buf, uint64_t size);
int64_t tree_getxattr(const struct tree *t, const struct tree_node *n, const char *name,
                      char *buf, uint64_t size);

#endif
