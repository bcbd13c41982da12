/* A mount's namespace: what turns the kernel's numbers and names into node_refs
 * (provider.h), one table of operations per mount. Three implementations: one tree
 * (a single model), edit states (a model with -o edits: a tree per state), a library
 * (folders of models, a tree per model built on demand). The mount (lib/8-mount) asks
 * only this table and the refs' providers: one request path for every kind of mount,
 * each rule of node.h applied once.
 *
 * Every operation is thread-safe. A ref given by get or lookup is held (the tree it is
 * in, a library's slots) until put; the mount keeps an open file's ref for the open's
 * life and puts it when the open file is freed. */
#ifndef GGUFS_NS_H
#define GGUFS_NS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/statvfs.h>

#include "provider.h"

/* The root's number in every namespace (FUSE's). */
#define NS_ROOT_INO 1

/* Flags of struct ns: what the mount does differently for this namespace. */
#define NS_STATES 1u         /* edit states: per-state numbers (zone P) are looked up
                              * again at each walk, NODE_BYTES_FOLLOW_EDITS files read
                              * past the page cache and filled from the state now */
#define NS_WRITABLE 2u       /* changes reach the providers' writes (else EROFS, and a
                              * flush is ENOSYS: the kernel stops sending them) */
#define NS_NO_NEGATIVE 4u    /* a name not there is never kept (a library) */

/* How get is to find a number. */
#define NS_FOR_OPEN 1u       /* an open: a library builds a model directory's model */
#define NS_NOW 2u            /* the node in the state now, not in the state that holds
                              * the number (a listing, a page fill of a file whose bytes
                              * follow the edits); without NS_STATES, the same */

/* What a lookup's *dir_flags holds until the parent is found: no provider flag. */
#define NS_DIR_UNKNOWN (1u << 31)

/* What the root's user.ggufs.* shows besides the mount's counters: the model whose
 * fetches are counted (NULL: none, a library), and the namespace's own counters, named
 * extra[i] and valued by extra_value(ns, i). */
struct ns;
struct ns_counted {
	const struct ggufs_model *model;
	const char *const *extra;
	size_t n_extra;
	uint64_t (*extra_value)(struct ns *ns, size_t i);
};

struct ns_ops {
	/* The ref of number ino into *r, held: 0, or -errno with why: ENOENT for a number
	 * never given (or a per-state number of a state gone that no open holds), ESTALE
	 * for one that names something gone (a library's slot freed, a per-state root
	 * entry's number of a state gone: its name is to be looked up again). how:
	 * NS_FOR_OPEN, NS_NOW. */
	int (*get)(struct ns *ns, uint64_t ino, unsigned how, struct node_ref *r,
	           char why[GGUF_ERR_MAX]);
	/* The child called name of directory parent into *r, held, in the state now: 0,
	 * -ENOENT (a name not there), -ENOTDIR, or -errno with why. On 0 and -ENOENT,
	 * *dir_flags gets parent's provider's flags (TREE_P_NAMES_CHANGE: node.h's entry
	 * TTLs); a parent never given is -ENOENT with *dir_flags as it was (the caller's
	 * NS_DIR_UNKNOWN: an error, not a name not there). A library looks parent and
	 * child up under one hold of its lock. */
	int (*lookup)(struct ns *ns, uint64_t parent, const char *name, struct node_ref *r,
	              unsigned *dir_flags, char why[GGUF_ERR_MAX]);
	/* lets go of r (a ref that holds nothing, or let go already, is fine) */
	void (*put)(struct ns *ns, struct node_ref *r);
	/* The kernel keeps the number a lookup gave it for r, until it forgets it (forget):
	 * once for each lookup answered with a number (never for a listing's). NULL: the
	 * namespace keeps nothing for the kernel. */
	void (*kernel_hold)(struct ns *ns, const struct node_ref *r);
	/* the kernel forgot n of its lookups of ino (FUSE's FORGET); NULL: as above */
	void (*forget)(struct ns *ns, uint64_t ino, uint64_t n);
	/* statfs: sv filled by the mount (4 KiB blocks, read-only unless NS_WRITABLE),
	 * the namespace sets its sizes (f_blocks, f_files) */
	void (*statfs)(struct ns *ns, struct statvfs *sv);
	/* what the root's user.ggufs.* shows besides the mount's counters, into *c */
	void (*counted)(struct ns *ns, struct ns_counted *c);
	/* The one local file the mount's model is byte for byte, for the front end's
	 * passthrough: the model's own model.gguf's (its file_fd), whatever the edits
	 * since; -1 with why not in *not_file. NULL: a library (each model its own). */
	int (*passthrough_fd)(struct ns *ns, const char **not_file);
	/* frees the namespace (not what it was made over: the model, the library) */
	void (*free)(struct ns *ns);
};

/* A namespace: the first member of each implementation's struct. */
struct ns {
	const struct ns_ops *ops;
	unsigned flags;   /* NS_* above */
};

#endif
