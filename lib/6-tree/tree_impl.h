/* What the tree core and its core providers share (tree.c: the trees, their numbers'
 * dispatch and the read entry points; tree_kit.c: the kit and the layout of numbers;
 * tree_root.c, tree_meta.c, tree_tensors.c with tree_stats.c and tree_index.c,
 * tree_render.c, tree_modelfile.c: the core's providers; tree_edit.c: the edits): the
 * kit, the layout, the tree itself. Nothing outside lib/6-tree/ includes this; a feature's
 * provider (quants_provider.c) sees provider.h and tree.h only. */
#ifndef GGUFS_TREE_IMPL_H
#define GGUFS_TREE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "modelfile.h"
#include "overlay.h"
#include "provider.h"
#include "render_mark.h"
#include "sink.h"
#include "tree.h"

/* ---- The kit (tree_kit.c) ---- */

/* The core's providers, at these places of every kit (tree_kit_new); a feature's follow. */
enum tree_kit_core {
	KIT_ROOT,        /* the root: the kit's root table (tree_root.c) */
	KIT_META,        /* metadata/ (tree_meta.c; edits may replace it) */
	KIT_TENSORS,     /* tensors/, stats/, stats.tsv (tree_tensors.c) */
	KIT_MODELFILE,   /* model.gguf (tree_modelfile.c) */
	KIT_RENDER,      /* gguf.json, summary.txt (tree_render.c) */
	KIT_CORE         /* how many */
};
/* The most providers a kit holds, the core's included, and root entries in all. */
#define TREE_KIT_MAX 16
#define TREE_KIT_ROOTS_MAX (TREE_KIT_MAX * TREE_ROOTS_MAX)

struct tree_kit {
	struct kit_entry {
		const struct tree_provider *p;
		void *ctx;
	} e[TREE_KIT_MAX];
	unsigned n;
	/* the root's listing: each entry its provider's place and its place in the
	 * provider's roots[] */
	struct kit_root {
		uint8_t prov, root;
	} roots[TREE_KIT_ROOTS_MAX];
	unsigned n_roots;
	atomic_bool frozen;   /* a tree was built with it: read-only from then on */
};

extern const struct tree_provider tree_root_provider;
extern const struct tree_provider tree_meta_provider;
extern const struct tree_provider tree_tensors_provider;
extern const struct tree_provider tree_modelfile_provider;
extern const struct tree_provider tree_render_provider;

/* ---- The numbers of one model's trees (tree_kit.c) ---- */

/* Where each provider of a kit sits in one model's trees (tree_ino.h's zones), laid out
 * once with the tree of the model's own metadata, which owns it, and shared by the tree of
 * every edit state; with the tensor part of model.gguf's layouts, which no edit changes. */
struct tree_layout {
	/* by root-table entry: a stable one's number, a per-state one's place in a state's
	 * range */
	uint64_t root_no[TREE_KIT_ROOTS_MAX];
	uint8_t root_owner[TREE_ROOT_ENTRIES_MAX];   /* provider of number 2 + i, or NONE */
	struct layout_prov {
		uint64_t stable, n_stable;     /* its range in zone S */
		uint64_t state_off, n_state;   /* its place and width in a state's range */
	} p[TREE_KIT_MAX];
	uint64_t open, n_open;   /* the open-ended range, of provider open_prov */
	unsigned open_prov;      /* TREE_KIT_MAX: none */
	uint64_t w;              /* numbers a state: W */
	/* the tensor part of model.gguf's layouts (modelfile.h), made by the first layout
	 * that needs it (a split model's own; a single file's first edit state) */
	pthread_mutex_t tensors_lock;
	struct modelfile_tensors *tensors;
};
#define TREE_LAYOUT_NONE UINT8_MAX

/* Lays out the numbers of m's trees with the providers of k into *lay (its lock made):
 * 0, or -1 with err (a provider's widths refused, or the zones passed: "too many keys
 * and tensors"). tree_layout_free lets go of what it holds. */
int tree_layout_make(const struct tree_kit *k, const struct ggufs_model *m,
                     struct tree_layout *lay, char err[GGUF_ERR_MAX]);
void tree_layout_free(struct tree_layout *lay);

/* ---- The tree ---- */

struct tree {
	const struct ggufs_model *m;
	struct ov_state *state;      /* the edit state whose view m is (held), or NULL */
	const struct tree *base;     /* the tree whose layout and shared instances this one
	                              * uses, or NULL */
	atomic_uint_fast64_t refs;   /* tree_hold / tree_release */
	const struct tree_kit *kit;
	struct tree_layout *lay;     /* owned when base is NULL, else base's */
	uint64_t state_first;        /* the first number of this state's range in zone P */
	unsigned n_made;             /* providers whose instance was made (tree_free) */
	struct modelfile mf;         /* model.gguf's layout (the model.gguf provider's, and
	                              * gguf.json's and the tensors' user.gguf.model_offset) */
	/* with edits (tree_edit.c sets them): when this state was made, and when each key
	 * (by position in m's metadata) last changed; key_time NULL otherwise */
	struct timespec made;
	struct timespec *key_time;
	void *inst[];                /* each provider's instance, by place in the kit */
};

/* The ref of node n of t (its provider's, by n->prov), nothing held. */
static inline void tree_ref_of(const struct tree *t, const struct tree_node *n,
                               struct node_ref *r)
{
	const struct kit_entry *e = &t->kit->e[n->prov];
	*r = (struct node_ref){ .p = e->p, .ctx = e->ctx, .inst = t->inst[n->prov], .tree = t,
	                        .n = n, .ino = n->ino, .parent = n->parent };
}

/* The numbers provider i was handed in t (make's range). */
void tree_range_of(const struct tree *t, unsigned i, struct tree_range *r);

/* The number of the root-table entry e of t (stable, or in t's state). */
uint64_t tree_root_no(const struct tree *t, unsigned e);

/* The tensor part of model.gguf's layouts of t's model m (the base's or a view of it: its
 * tensors are the base's), made the first time it is asked for (a single file's unedited
 * model.gguf needs none, so a mount without edits never makes it): NULL with err. */
const struct modelfile_tensors *tree_tensor_layout(const struct tree *t,
                                                   const struct ggufs_model *m,
                                                   char err[GGUF_ERR_MAX]);

/* len cut to what n holds from off: false when nothing is left to read (off at or past
 * the end, len 0). */
static inline bool tree_clamp(const struct tree_node *n, uint64_t off, uint64_t *len)
{
	if (off >= n->size || *len == 0)
		return false;
	if (*len > n->size - off)
		*len = n->size - off;
	return true;
}

/* A rendered file (metadata/KEY, gguf.json, summary.txt): emit renders it into s, which
 * keeps the window it was asked for, from mark from (s->pos set to the mark's) or, NULL,
 * from its start. */
typedef void (*tree_emit_fn)(const void *arg, struct sink *s, const struct render_mark *from);
/* Reads [off, off + len) of a rendered file of t (inside it) with the SIGBUS guard armed,
 * starting at the last of marks (or NULL) before off: len, or -EIO with why when a page of
 * the header it renders has gone (model_header_holds's line). */
int64_t tree_read_rendered(const struct tree *t, tree_emit_fn emit, const void *arg,
                           const struct render_marks *marks, char *buf, uint64_t len,
                           uint64_t off, char why[GGUF_ERR_MAX]);

/* ---- metadata/ (tree_meta.c) ---- */

/* metadata/KEY of the key at position k of t's metadata (below its count), or NULL. */
const struct tree_node *tree_meta_key(const struct tree *t, uint64_t k);
/* The marks of key node n of t, or NULL. */
const struct render_marks *tree_meta_marks(const struct tree *t, const struct tree_node *n);
/* gguf.json's marks in t, or NULL (tree_render.c). */
const struct render_marks *tree_render_json_marks(const struct tree *t,
                                                  const struct tree_node *n);

/* ---- tensors/, stats/ (tree_tensors.c, tree_stats.c, tree_index.c) ---- */

/* A lookup table of names in directories: open addressing over the positions of nodes
 * in one array (+ 1; 0 = empty), at most half full. */
struct name_index {
	uint64_t *slots;
	uint64_t mask;
};

/* The roles of the tensors provider's nodes. */
enum tensors_role {
	TENSORS_RAW, TENSORS_F32, TENSORS_NPY, TENSORS_STATS, TENSORS_TSV, TENSORS_DIR,
	TENSORS_STATS_DIR
};

/* tensors/, stats/ and stats.tsv: the provider's one instance (TREE_P_SHARED), built
 * with the tree of the model's own metadata and shared by the tree of every edit state:
 * their files' nodes, names and sizes, the statistics and stats.tsv's layout. */
struct tree_tensors {
	const struct ggufs_model *m;
	struct tree_node dirs[3];    /* tensors/, stats/, stats.tsv */
	uint64_t first_ino;          /* the first tensor file's number (its stable range) */
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
};

/* The name index (tree_index.c): an empty one for n names (false out of memory);
 * nodes[i] entered; the node of nodes called name in dir that x holds, or NULL. */
bool name_index_init(struct name_index *x, uint64_t n);
void name_index_add(struct name_index *x, const struct tree_node *nodes, uint64_t i);
const struct tree_node *name_index_find(const struct name_index *x,
                                        const struct tree_node *nodes, uint64_t dir,
                                        const char *name);

/* The statistics files (tree_stats.c). */
struct stats_slot;
/* One slot per tensor, each empty until its statistics are first read; NULL when out
 * of memory. tree_stats_free takes NULL too. */
struct stats_slot *tree_stats_new(uint64_t n_tensors);
void tree_stats_free(struct stats_slot *slots, uint64_t n_tensors);
/* Lays stats.tsv out once stats/ is built: where each line starts; its size is the
 * last. */
void tree_stats_layout(const struct ggufs_model *m, struct tree_tensors *tt);
/* Reads [off, off + len) of stats/NAME or stats.tsv n (inside the file) of m,
 * computing the statistics of only the tensors whose text the range covers (in
 * stats.tsv: or comes before, as lines are as long as their figures): len, or -errno
 * with a read's why. */
int64_t tree_stats_read(struct tree_tensors *tt, const struct ggufs_model *m,
                        const struct tree_node *n, char *buf, uint64_t len, uint64_t off,
                        char why[GGUF_ERR_MAX]);

#endif
