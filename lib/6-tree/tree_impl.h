/* What the tree's own files share (tree.c: the namespace and the dispatch of reads;
 * tree_stats.c: the statistics files): the tree itself. Nothing outside lib/6-tree/
 * includes this. */
#ifndef GGUFS_TREE_IMPL_H
#define GGUFS_TREE_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "modelfile.h"
#include "overlay.h"
#include "render_mark.h"
#include "tree.h"

struct tree {
	const struct ggufs_model *m;
	struct ov_state *state;      /* the edit state whose view m is (held), or NULL */
	const struct tree *base;     /* the tree whose statistics this one shares, or NULL */
	atomic_uint_fast64_t refs;   /* tree_hold / tree_release */
	uint64_t n_orig;             /* keys of the model's file: where tensor inos start */
	uint64_t *meta_ino;          /* ino of the key at each position of m->meta */
	uint64_t n_nodes;            /* inode numbers 0 .. n_nodes - 1; 0 and gaps unused */
	struct tree_node *nodes;
	char *names;                 /* every escaped name, NUL-terminated, back to back */
	uint64_t *tensor_children;   /* inos of tensors/, in file order */
	uint64_t n_tensor_children;
	uint64_t *slots;             /* lookup hash: ino, 0 = empty */
	uint64_t slot_mask;
	uint32_t *npy_header_len;    /* per tensor, 0 without .npy */
	uint64_t n_marks;
	struct render_marks *marks;  /* per ino below n_marks: restart points
	                              * of gguf.json and metadata/KEY (render_mark.h) */
	struct stats_slot *stats;    /* per tensor (tree_stats.c) */
	uint64_t *stats_children;    /* inos of stats/, in file order */
	uint64_t n_stats_children;
	uint64_t *tsv_line;          /* n_stats_children + 1 offsets in stats.tsv, were every
	                              * line at its widest: where the line of
	                              * stats_children[k] would start, then the end (the
	                              * file's size; [0] is where the first line starts) */
	atomic_uint_fast64_t stats_computed;
	struct modelfile mf;         /* model.gguf's layout */
	/* with edits (tree_edit.c sets them): when this state was made, and when each key
	 * (by position in m->meta) last changed; key_time NULL otherwise */
	struct timespec made;
	struct timespec *key_time;
};

/* The statistics files (tree_stats.c). */
struct stats_slot;
/* One slot per tensor, each empty until its statistics are first read; NULL when out
 * of memory. tree_stats_free takes NULL too. */
struct stats_slot *tree_stats_new(uint64_t n_tensors);
void tree_stats_free(struct stats_slot *slots, uint64_t n_tensors);
/* Lays stats.tsv out once stats/ is built: where each line starts, and its size. */
void tree_stats_layout(struct tree *t);
/* Reads [off, off + len) of stats/NAME or stats.tsv (inside the file), computing the
 * statistics of only the tensors whose text the range covers (in stats.tsv: or comes
 * before, as lines are as long as their figures): len, or -errno. */
int64_t tree_stats_read(const struct tree *t, const struct tree_node *n, char *buf,
                        uint64_t len, uint64_t off);

#endif
