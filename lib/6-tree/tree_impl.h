/* What the tree's own files share (tree.c: the namespace, a state's metadata part and
 * the dispatch of reads; tree_tensors.c: the part no edit changes; tree_index.c: the
 * name lookup; tree_stats.c: the statistics files; tree_edit.c: the edits): the tree
 * itself. Nothing outside lib/6-tree/ includes this. */
#ifndef GGUFS_TREE_IMPL_H
#define GGUFS_TREE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "modelfile.h"
#include "overlay.h"
#include "quant_plan.h"
#include "render_mark.h"
#include "tree.h"

/* A lookup table of names in directories: open addressing over the positions of nodes
 * in one array (+ 1; 0 = empty), at most half full. */
struct name_index {
	uint64_t *slots;
	uint64_t mask;
};

/* What no metadata edit changes, built once with the tree of the model's own metadata
 * (which owns it) and shared by the tree of every edit state: tensors/ and stats/, their
 * files' nodes, names and sizes, the statistics and stats.tsv's layout, and the tensor
 * part of model.gguf's layout. A state's tree then holds only its metadata part. */
struct tree_tensors {
	uint64_t first_ino;          /* the first tensor file's number (tree_ino.h) */
	uint64_t n_nodes;            /* nodes[i] is ino first_ino + i (4 per tensor; one
	                              * without a dequantizer leaves 3 unused: ino 0) */
	struct tree_node *nodes;
	char *names;                 /* their names, NUL-terminated, back to back */
	uint64_t names_len;
	struct name_index index;     /* tensors/ and stats/ by name */
	uint64_t *tensor_children;   /* inos of tensors/, in file order */
	uint64_t n_tensor_children;
	uint32_t *npy_header_len;    /* per tensor, 0 without .npy */
	struct stats_slot *stats;    /* per tensor (tree_stats.c) */
	uint64_t *stats_children;    /* inos of stats/, in file order */
	uint64_t n_stats_children;
	uint64_t *tsv_line;          /* n_stats_children + 1 offsets in stats.tsv, were every
	                              * line at its widest: where the line of
	                              * stats_children[k] would start, then the end (the
	                              * file's size; [0] is where the first line starts) */
	atomic_uint_fast64_t stats_computed;
	/* the tensor part of model.gguf's layouts (modelfile.h), made by the first layout
	 * that needs it (a split model's own; a single file's first edit state) */
	pthread_mutex_t layout_lock;
	struct modelfile_tensors *layout;
};

/* metadata/'s file names and their index, shared by the trees of states whose keys have
 * the same names and ids in the same places (an edit of a value, the commonest, changes
 * none of them, and rebuilding the index was most of an edit of 100,000 keys). */
struct key_names {
	atomic_uint_fast64_t refs;
	char *names;                 /* every key's file name, NUL-terminated, back to back */
	uint64_t len;
	struct name_index index;     /* metadata/ by name: positions of keys */
	struct tree_node *nodes;     /* metadata/KEY by position, with the sizes of the tree
	                              * that made them; a tree sharing them differs in the
	                              * sizes of the keys edited since (struct tree) */
};

/* quants/ (tree_quants.c): every NAME's plan, made at the first lookup, listing or
 * stat in quants/ and kept; the nodes of the NAMEs made and quants.tsv, by j
 * (tree_ino.h). */
#define TREE_QUANT_NAME_MAX 16   /* "MXFP4_MOE.gguf" and its NUL */
/* One NAME.gguf's computed bytes (computed.h): opened at its first read, closed when
 * the tree goes or, idle, to make room for another (TREE_QUANT_OPEN_MAX). */
struct tree_quant_file {
	const struct tree *t;        /* the fill function's: the tree and the plan */
	const struct quant_plan *qp;
	struct source *src;          /* NULL until opened */
	bool opening;                /* being opened (the lock dropped): wait on opened */
	bool closing;                /* being closed (the lock dropped; it still holds its
	                              * disk cache entry): wait on opened before opening */
	unsigned readers;            /* reads in src now: it is not closed under them */
	uint64_t last_use;           /* tree_quants.tick at the last read's start */
	uint64_t computed, from_disk, stored;   /* counters of its sources closed */
};
struct tree_quants {
	pthread_mutex_t lock;
	atomic_bool made;
	struct quant_set qs;
	struct tree_node nodes[TREE_QUANT_TSV_SLOT + 1];
	char names[TREE_QUANT_TSV_SLOT][TREE_QUANT_NAME_MAX];
	unsigned children[TREE_QUANT_TSV_SLOT + 1];   /* quants/'s listing: the NAMEs made, quants.tsv */
	uint64_t n_children;
	bool requantize;   /* -o requantize: llama-quantize's --allow-requantize */
	/* the files' computed bytes, under files_lock (apart from lock: an open may wait
	 * for a disk cache entry another mount lets go) */
	pthread_mutex_t files_lock;
	pthread_cond_t opened;           /* a file opened or closed */
	struct tree_quant_file *files;   /* TREE_QUANT_TSV_SLOT, made at the first read */
	unsigned n_open;
	uint64_t tick;
	struct tree_quant_cache cache;   /* dir malloc'ed (tree_set_quant_cache) */
	struct computed_pool *own_pool;  /* without cache.pool (not a mount's tree): made
	                                  * at the first open, freed with the tree */
};

struct tree {
	const struct ggufs_model *m;
	struct ov_state *state;      /* the edit state whose view m is (held), or NULL */
	const struct tree *base;     /* the tree whose tensor part this one shares, or NULL */
	atomic_uint_fast64_t refs;   /* tree_hold / tree_release */
	uint64_t n_orig;             /* keys of the model's file: where tensor inos start */
	struct tree_tensors *tensors;   /* owned when base is NULL, else base's */
	struct tree_node fixed[TREE_QUANTS_DIR_INO + 1];   /* by ino: the root and its files */
	uint64_t n_keys;             /* = m->meta->n_kv */
	/* metadata/KEY of the key at each position of m->meta (key_at): names->nodes, but
	 * for the keys whose size differs from there, in over (by position); or, when
	 * those are many, keys: all of them, the tree's own */
	struct tree_node *keys;
	struct key_override { uint64_t k; struct tree_node node; } *over;
	uint64_t n_over;
	struct key_names *names;     /* the keys' names and index (held): made for this
	                              * tree, or the tree before's when they are its */
	bool names_made;             /* made for this tree (tree_held_bytes counts them) */
	struct key_marks {           /* the restart points (render_mark.h) of the keys that
	                              * have any, by position */
		uint64_t k;
		struct render_marks ms;
	} *marked;
	uint64_t n_marked, cap_marked;
	struct render_marks json_marks;  /* gguf.json's */
	/* gguf.json's and summary.txt's sizes, rendered when first asked for (a lookup,
	 * a listing, a read), not when the tree is built: an edit then costs what it
	 * changed, not a rendering of every tensor */
	pthread_mutex_t size_lock;
	atomic_bool sized;
	struct modelfile mf;         /* model.gguf's layout */
	/* with edits (tree_edit.c sets them): when this state was made, and when each key
	 * (by position in m->meta) last changed; key_time NULL otherwise */
	struct timespec made;
	struct timespec *key_time;
	struct tree_quants quants;
};

/* The name index (tree_index.c): an empty one for n names (false out of memory);
 * nodes[i] entered; the node of nodes called name in dir that x holds, or NULL. */
bool name_index_init(struct name_index *x, uint64_t n);
void name_index_add(struct name_index *x, const struct tree_node *nodes, uint64_t i);
const struct tree_node *name_index_find(const struct name_index *x,
                                        const struct tree_node *nodes, uint64_t dir,
                                        const char *name);

/* The tensor part (tree_tensors.c): built for model m whose file has n_orig keys (NULL
 * out of memory); freed (NULL too) with m's tensor count; the tensor part of model.gguf's
 * layouts of m, made the first time it is asked for (a single file's unedited
 * model.gguf needs none, so a mount without edits never makes it), NULL with err. */
struct tree_tensors *tree_tensors_build(const struct ggufs_model *m, uint64_t n_orig);
void tree_tensors_free(struct tree_tensors *tt, uint64_t n_t);
const struct modelfile_tensors *tree_tensor_layout(struct tree_tensors *tt,
                                                   const struct ggufs_model *m,
                                                   char err[GGUF_ERR_MAX]);

/* The statistics files (tree_stats.c). */
struct stats_slot;
/* One slot per tensor, each empty until its statistics are first read; NULL when out
 * of memory. tree_stats_free takes NULL too. */
struct stats_slot *tree_stats_new(uint64_t n_tensors);
void tree_stats_free(struct stats_slot *slots, uint64_t n_tensors);
/* Lays stats.tsv out once stats/ is built: where each line starts; its size is the
 * last. */
void tree_stats_layout(const struct ggufs_model *m, struct tree_tensors *tt);
/* Reads [off, off + len) of stats/NAME or stats.tsv (inside the file), computing the
 * statistics of only the tensors whose text the range covers (in stats.tsv: or comes
 * before, as lines are as long as their figures): len, or -errno with a read's why. */
int64_t tree_stats_read(const struct tree *t, const struct tree_node *n, char *buf,
                        uint64_t len, uint64_t off, char why[GGUF_ERR_MAX]);

/* quants/ (tree_quants.c). tree_quants_init before anything can free the tree. Nodes are
 * NULL (or the count 0) when the plans could not be made (out of memory, a page of the
 * model's header gone): a later call tries again. */
void tree_quants_init(struct tree *t);
void tree_quants_free(struct tree *t);
uint64_t tree_quants_bytes(const struct tree *t);
const struct tree_node *tree_quants_node(const struct tree *t, uint64_t ino);
const struct tree_node *tree_quants_lookup(const struct tree *t, const char *name);
uint64_t tree_quants_count(const struct tree *t);
const struct tree_node *tree_quants_child(const struct tree *t, uint64_t i);
/* The counters of quants/NAME.gguf n so far (its xattrs user.ggufs.blocks_*): blocks
 * computed, read from the disk cache, stored in it. */
void tree_quants_counters(const struct tree *t, const struct tree_node *n, uint64_t *computed,
                          uint64_t *from_disk, uint64_t *stored);
/* Reads [off, off + len) of quants/NAME.gguf or quants.tsv n (inside it): len, or
 * -EIO with why (the model's bytes could not be read, a local file changed or shrank). */
int64_t tree_quants_read(const struct tree *t, const struct tree_node *n, char *buf,
                         uint64_t len, uint64_t off, char why[GGUF_ERR_MAX]);

#endif
