/* The virtual tree that a mount shows: numbers, names, sizes and the one entry point for
 * reads, built from a model and a kit of providers (provider.h). Nothing here knows
 * FUSE. The tree is a table of subtrees, each one provider: metadata/ (tree_meta.c),
 * tensors/, stats/ and stats.tsv (tree_tensors.c), gguf.json and summary.txt
 * (tree_render.c), model.gguf (tree_modelfile.c), a kit's features (quants/:
 * quants_provider.h), and the root listing the kit's root table (tree_root.c). Every
 * call below finds a node's provider by its number (tree_ino.h's zones, laid out once
 * per model by the kit) and asks it: no switch over kinds of node outside a provider.
 *
 * With -o edits, each state of the metadata (overlay.h) has a tree of its own, built
 * from the state's view of the model; trees are held by reference (tree_hold), so a
 * reader that opened a file of one keeps reading it while a newer one serves lookups.
 * What no edit changes (tensors/, stats/, the tensor infos of model.gguf's header, the
 * numbers) is built once, with the tree of the model's own metadata, and shared by every
 * state's tree, which holds only its metadata part; an edit of a value also keeps the
 * key names and their index of the tree before. */
#ifndef GGUFS_TREE_H
#define GGUFS_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "model.h"
#include "overlay.h"
#include "provider.h"
#include "tree_ino.h"

/* What a node is, for the mount's kinds of mount until they go (phase 2c): set by each
 * provider beside its own role, read by nothing in this layer. */
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
	TREE_QUANT,    /* quants/NAME.gguf */
	TREE_QUANTS_TSV,
	TREE_OTHER,    /* a node of a provider the kinds above do not name */
};

/* Flags of struct tree_node. */
#define TREE_NODE_DIR 1u   /* a directory */
#define TREE_NODE_IOV 2u   /* its provider's read_iov may answer its reads (a raw tensor
                            * of a local model, a local model.gguf): tried first; any
                            * other node is read with read alone */

/* One file or directory of a tree, owned by its provider (its number's). */
struct tree_node {
	uint64_t ino;
	uint64_t parent;     /* number of the directory holding it (the root: itself) */
	enum tree_kind kind;
	uint16_t prov;       /* its provider's place in the tree's kit (tree_range.prov) */
	uint8_t role;        /* what it is to its provider (the provider's own values) */
	uint8_t flags;       /* TREE_NODE_* */
	uint64_t index;      /* its provider's (a key's position, a tensor's index, ...) */
	const char *name;    /* file name, escaped (names.h), NUL-terminated */
	uint64_t size;       /* exact st_size; 0 for directories */
};
_Static_assert(sizeof(struct tree_node) == 5 * sizeof(uint64_t) + sizeof(const char *),
               "a tree node stays 48 bytes: the largest models have millions");

struct tree;

/* Builds the tree of model m (which must outlive it) with the providers of kit k (which
 * must outlive it too, and is frozen by this call: tree_kit_add refuses from then on):
 * the numbers laid out by the providers' widths, each provider's instance made (names,
 * sizes of every file: rendered files are rendered once to count their bytes). NULL with
 * err on failure (out of memory, a model whose numbers pass the zones: "too many keys
 * and tensors", a provider's refusal). */
struct tree *tree_build(const struct ggufs_model *m, const struct tree_kit *k,
                        char err[GGUF_ERR_MAX]);
void tree_free(struct tree *t);

/* The tree of edit state s (held while the tree lives), with base's kit and numbers,
 * sharing base's TREE_P_SHARED instances (tensors/, stats/): base, the tree of the model's
 * own metadata, must outlive it. prev (or NULL), the tree of the state s was made from,
 * lends each provider what s leaves unchanged (the sizes of the keys), so an edit renders
 * only what it changed. NULL with err (out of memory; a state past the last the zone of
 * per-state numbers holds, after about 2^56 edits). */
struct tree *tree_build_state(const struct tree *base, struct ov_state *s,
                              const struct tree *prev, char err[GGUF_ERR_MAX]);
/* Another reference to t; tree_release drops one, the last frees t. A tree from
 * tree_build or tree_build_state starts with one. */
struct tree *tree_hold(struct tree *t);
void tree_release(struct tree *t);
/* The bytes t holds of its own, for tests and benchmarks: the tree of the model's own
 * metadata everything, a state's tree its own providers' instances only (its state's key
 * table, its keys' nodes, names and marks, model.gguf's header up to the last key), since
 * it shares the rest (tensors/, stats/, model.gguf's tensor infos, the numbers) with the
 * former; the key names and their index when an edit kept every name (counted by the
 * tree that made them); gguf.json's and summary.txt's sizes and marks are made when
 * first asked for. */
uint64_t tree_held_bytes(const struct tree *t);
/* True when an open of file n of t is to keep none of the kernel's pages of it: its
 * provider's stale() (a quants/ file of a model no longer the file it parsed: its reads
 * all fail with EIO, and the pages the kernel holds are of the model as it was). */
bool tree_quants_changed(const struct tree *t, const struct tree_node *n);

/* The edit state of t, or NULL for the tree of the model's own metadata. */
const struct ov_state *tree_state(const struct tree *t);
/* The number of metadata key k (the k-th key of the tree's metadata), or 0. */
uint64_t tree_key_ino(const struct tree *t, uint64_t k);

/* The number of the tree's model.gguf: another in each edit state (tree_ino.h). */
uint64_t tree_model_ino(const struct tree *t);
/* True when ino is the number of a per-state root entry (model.gguf) in some edit state
 * of t's model, t's or another's: a number of a state gone that no open holds names a
 * file to be looked up again (ESTALE), where any other per-state number names nothing
 * (ENOENT). */
bool tree_ino_state_root(const struct tree *t, uint64_t ino);

/* The model the tree shows. */
const struct ggufs_model *tree_model(const struct tree *t);

/* Node n of t's attributes as a tree's provider says them (provider.h's attr helper):
 * dir and size the node's; read bits, owner and times the model file's; with dated and
 * edits, mtime and ctime when the state of t was made (the edit that made it; edits
 * before the mount: FILE's time). Flags none: the provider adds its own. */
void tree_node_attr(const struct tree *t, const struct tree_node *n, bool dated,
                    struct node_attr *a);

/* The node of number ino, or NULL. */
const struct tree_node *tree_node(const struct tree *t, uint64_t ino);
/* The child called name of directory dir, or NULL. */
const struct tree_node *tree_lookup(const struct tree *t, uint64_t dir, const char *name);
/* Children of a directory: count, and the i-th in a stable order (its provider's). */
uint64_t tree_dir_count(const struct tree *t, uint64_t dir);
const struct tree_node *tree_dir_child(const struct tree *t, uint64_t dir, uint64_t i);
bool tree_is_dir(const struct tree_node *n);

/* st_mode for node n of a model whose file has mode gguf_mode: files r--r--r--,
 * directories r-xr-xr-x, each limited by the read bits of the GGUF file. */
mode_t tree_mode(const struct tree_node *n, mode_t gguf_mode);

/* The attributes of node n of t: its provider's attr made a stat by the one
 * rule of node.h (node_stat), wherever the model is mounted (alone or in a library);
 * with editable (-o edits), metadata/ and its keys the mount owner's and writable by
 * them. st_ino is the tree's number (a library gives its own). */
struct stat;
void tree_stat(const struct tree *t, const struct tree_node *n, bool editable, struct stat *st);

/* Reads up to len bytes of node n at off into buf, through its provider. Returns the
 * number of bytes (short only at the end of the file), or -errno: -EISDIR for a
 * directory, -EIO when the bytes have gone from the model file (it shrank under the
 * mount) or, for a remote model, could not be fetched or belong to a changed file, with
 * why as the failure was seen (source.h: "PATH: the file shrank from A to B bytes ...",
 * "URL: HTTP 503"; "" when the errno says it all; NULL: not wanted). Thread-safe;
 * allocates nothing proportional to the tensor. */
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
 * of the model as they lie (TREE_NODE_IOV: a raw tensor file of a local model, one
 * iovec into its mapping; model.gguf of a local model, its pieces). The count; 0 when n
 * is to be read with tree_read instead (any other file, model.gguf in more than max
 * pieces); -EIO with why (as tree_read's) when the file no longer holds the bytes (it
 * shrank: checked against the file as it is now; should it shrink after, the kernel's
 * copy fails and the reader gets EIO, never the daemon a SIGBUS). */
int tree_read_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                  struct iovec *iov, int max, char why[GGUF_ERR_MAX]);

/* The fd of the one local file that model.gguf of t is byte for byte (a single-file
 * local model whose metadata is the file's own, or edited back to it: its layout one
 * span, the whole file from offset 0), for handing to the kernel; -1 for any other
 * model.gguf (split, remote, edited). */
int tree_model_file_fd(const struct tree *t);

/* Extended attributes (man page), as n's provider says them: listxattr fills buf with
 * NUL-separated names, getxattr the value; both return the full length needed, with
 * size 0 as the size query, -ERANGE when size is too small, -ENODATA for a name the node
 * does not have. */
int64_t tree_listxattr(const struct tree *t, const struct tree_node *n, char *buf, uint64_t size);
int64_t tree_getxattr(const struct tree *t, const struct tree_node *n, const char *name,
                      char *buf, uint64_t size);

#endif
