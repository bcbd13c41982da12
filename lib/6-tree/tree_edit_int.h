/* What the two files of the edits share (tree_edit.c: the state, its commit and the
 * writes of values; tree_edit_names.c: creating, removing and renaming files of
 * metadata/ and their rules): the edits themselves and the steps both take. Nothing
 * outside lib/6-tree/ includes this. */
#ifndef GGUFS_TREE_EDIT_INT_H
#define GGUFS_TREE_EDIT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "edits_file.h"
#include "parse_value.h"
#include "tree_edit.h"
#include "tree_impl.h"

/* How many deleted keys a create can bring back (tree_edit.h). */
#define TOMBSTONES 8

struct tree_edits {
	pthread_mutex_t lock;       /* one edit at a time, held while its state is built and
	                             * saved; only edits change cur, so they read it here */
	pthread_mutex_t cur_lock;   /* cur, held only to take or swap it: the one lock a
	                             * reader takes, never held across a commit */
	struct tree *base;          /* the model's own metadata (borrowed) */
	struct tree *cur;           /* the current tree (one reference is ours) */
	/* the trees that were current before (one reference each is ours, under cur_lock),
	 * oldest first, each with when it stopped being current: an inode the kernel was
	 * given in an older state (model.gguf is one per state) is answered from the state
	 * that has it (tree_edits_holding) while an open file still holds it, or for a
	 * while after, held or not (a lookup just answered, whose open comes after the
	 * next edits: tree_edit.c keep_past) */
	struct past { struct tree *t; struct timespec until; } *past;
	uint64_t n_past, cap_past;
	void (*commit_hook)(void *);   /* for tests: called inside each commit */
	uint64_t next_gen;             /* for tests: the next state's generation, or 0 */
	void *commit_hook_ctx;
	struct edits_store *store;  /* FILE */
	struct scratch_set *scratch;   /* metadata/'s scratch files (scratch.h) */
	struct edits_identity id;
	/* the types user.gguf.type set on keys, by key id: an empty array of arrays has no
	 * inner type in the file, so the next write takes it from here */
	struct declared { uint64_t id; struct value_type t; } *declared;
	uint64_t n_declared;
	/* the last keys deleted, newest last: a file made again under one's name (install
	 * unlinks its target, then creates it; vim, a save refused, removes the KEY it
	 * made and renames KEY~ back) is that key again, in its place */
	struct ov_key gone[TOMBSTONES];
	uint64_t n_gone;
};

/* Makes s (the next state, taken) current: its tree built, FILE written, then the swap;
 * lock held. 0 or -errno with err. */
int edit_commit(struct tree_edits *e, struct ov_state *s, char err[GGUF_ERR_MAX]);
/* edit_commit of s, the state an ov_* call made of key k of the current tree: NULL, its
 * failure, is out of memory said for that key. */
int edit_commit_key(struct tree_edits *e, struct ov_state *s, uint64_t k, char err[GGUF_ERR_MAX]);
/* One line naming key k of t and why into err. */
void edit_key_err(const struct tree *t, uint64_t k, const char *why, char err[GGUF_ERR_MAX]);
/* The refusal of editing key k of t at all (general.alignment, split.*): -errno with
 * err, or 0. */
int edit_refused(const struct tree *t, uint64_t k, char err[GGUF_ERR_MAX]);
/* True when text is exactly what metadata/KEY shows for v. */
bool edit_is_rendering(const struct gguf_value *v, const char *text, uint64_t len);
/* text parsed as type t into b, within the bounds of a key's value: 0 or -errno with why. */
int edit_parse_bounded(const char *text, uint64_t len, const struct value_type *t,
                       struct value_buf *b, char why[GGUF_ERR_MAX]);
/* The type to parse key k of the current tree's text as: 0 or -1. */
int edit_type_of(const struct tree_edits *e, uint64_t k, struct value_type *t);
/* The same for key (of any state, a key deleted included). */
int edit_type_of_key(const struct tree_edits *e, const struct ov_key *key, struct value_type *t);

#endif
