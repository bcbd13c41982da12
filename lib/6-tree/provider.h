/* A subtree as one table of operations, as curl's Curl_handler or SQLite's virtual
 * table: each subtree of a mount (metadata/, tensors/ and stats/, gguf.json and
 * summary.txt, model.gguf, quants/; a library's folders, plain files, tables, model
 * directories and compare/; the edits' scratch files) is one const struct
 * tree_provider, registered once per mount with its per-mount state, and a request
 * reaches it through one node_ref: no switch over kinds of node outside a provider.
 *
 * Two sorts of provider. One in a tree (registered in a kit, tree_kit_add) is handed
 * its numbers when a tree is built (tree_ino.h's zones: its root entries, a stable
 * range, a range per edit state) and makes one instance per tree; its nodes are
 * struct tree_node. A namespace's own (ns.h: a library's folders, the edits' scratch
 * files) is in no tree: the namespace makes its refs, with no node and no instance,
 * and its provider leaves the tree operations NULL.
 *
 * Every operation is thread-safe: requests come on many threads at once. A provider
 * reads its ref and changes only what it owns (its instance, under its own locks).
 * Failures are 0 or -errno with, where the failure was seen, one line in why
 * (GGUF_ERR_MAX; "" when the errno says it all): the mount counts an EIO and says its
 * why, never looking for a cause after the fact. */
#ifndef GGUFS_PROVIDER_H
#define GGUFS_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "errline.h"

struct ggufs_model;
struct tree;
struct tree_node;
struct tree_provider;

/* ---- What a provider says of one node; node.h makes a struct stat of it ---- */

/* Flags of node_attr: how long the kernel may keep what it learnt of the node. */
#define NODE_ATTR_CHANGES 1u        /* its attributes change under one number: attr TTL 0
                                     * (a library folder, models.tsv, a scratch file) */
#define NODE_LIST_CHANGES 2u        /* a directory whose listing is not to be cached (a
                                     * library folder, compare/) */
#define NODE_BYTES_CHANGE 4u        /* its bytes change under one number: read past the
                                     * page cache, direct_io (models.tsv, compare/OTHER,
                                     * a scratch file) */
#define NODE_BYTES_FOLLOW_EDITS 8u  /* its bytes are the metadata's: with edit states,
                                     * direct_io, and a page fill reads the state now
                                     * (metadata/KEY, gguf.json, summary.txt) */
#define NODE_ZERO_COPY 16u          /* read_iov may answer its reads: the mount asks it
                                     * first (a local raw tensor, a local model.gguf) */

/* A node's attributes as its provider says them (attr); node_stat applies the one
 * rule (node.h) to make a stat of them. Zeroed before attr fills it. */
struct node_attr {
	bool dir;                   /* a directory (its size is shown as 0) */
	bool stored;                /* its bytes are storage, not a view or a computation:
	                             * st_blocks counts them (model.gguf, a library's plain
	                             * file); any other non-empty file shows one block */
	bool writable;              /* the mount's owner may write it (metadata/ with edits):
	                             * u+w, and owned by the mount's owner */
	mode_t read_bits;           /* only its 0444 bits count (a model file's, a folder's) */
	uid_t uid;                  /* owner and group, unless writable */
	gid_t gid;
	uint64_t size;              /* exact st_size */
	struct timespec atim, mtim, ctim;
	unsigned flags;             /* NODE_* above */
};

/* ---- Where a provider sits in a tree: its root entries and its numbers ---- */

/* The most root entries one provider has (tensors/, stats/, stats.tsv). */
#define TREE_ROOTS_MAX 4

/* One of a provider's entries at the root of a tree. A stable one is numbered in
 * [TREE_ZONE_ROOT, TREE_ZONE_S) in the kit's root-table order; a per_state one
 * (model.gguf: a new file in each edit state) takes the first numbers of the
 * provider's per-state range. */
struct tree_root {
	const char *name;
	bool dir;
	bool per_state;
};

/* The numbers a provider needs in one model's trees, from widths(): a stable range
 * (zone S) and a range in every edit state (zone P), the latter counting its per_state
 * root entries. Both from the model's own file and the mount's options only, never
 * from a state or a file that may change while mounted (a provider whose entries vary
 * takes a bound: quants/ every candidate NAME), so that the base tree and every state,
 * and a library's model built again, have the same numbers. */
struct tree_widths {
	uint64_t stable;
	uint64_t per_state;
};

/* The numbers a provider was handed in one tree (make()). */
struct tree_range {
	uint64_t root[TREE_ROOTS_MAX];   /* its root entries', in roots[] order */
	uint64_t stable, n_stable;       /* [stable, stable + n_stable) in every state */
	uint64_t state, n_state;         /* this tree's state's own */
	uint64_t open, n_open;           /* TREE_P_OPEN_END: [open, TREE_ZONE_P), else 0s */
	unsigned prov;                   /* its place in the kit: the prov of its nodes */
};

/* ---- What a request holds of one number ---- */

/* A number as a request or an open file holds it: its provider, that provider's
 * per-mount and per-tree state, and its node. A namespace fills it (ns.h get, lookup)
 * and lets it go (put); it is copied by value (an open file keeps the open's), so it
 * holds no pointer into itself. */
struct node_ref {
	const struct tree_provider *p;
	void *ctx;                   /* p's per-mount state (tree_kit_add's ctx) */
	void *inst;                  /* p's per-tree instance (NULL: a namespace's own p) */
	const struct tree *tree;     /* the tree it shows, NULL for none (a folder) */
	const struct tree_node *n;   /* its node in tree (a library's model directory: the
	                              * tree's root), NULL for none */
	uint64_t ino;                /* the number as the kernel knows it */
	uint64_t parent;             /* its directory's, as the kernel knows it ("..") */
	uint64_t ino_base;           /* added to the tree's numbers to make the kernel's (a
	                              * library's slot << 32), else 0 */
	uintptr_t hold[3];           /* the namespace's: what put lets go (a tree held, a
	                              * library's slots); read by its own providers only */
};

/* One entry of a directory's listing: its name (valid while the directory's ref and
 * open are held), its number in the provider's numbers (the mount adds ino_base) and
 * whether it is a directory. */
struct node_dirent {
	const char *name;
	uint64_t ino;
	bool dir;
};

/* The most extended attributes a node has (a tensor's of a split model: 6), and the
 * longest value made in buf (a value's type name, RENDER_TYPE_MAX, and a number). */
#define NODE_XATTR_MAX 8
#define NODE_XATTR_BUF 160
/* One extended attribute: name, and value of len bytes (not NUL-terminated), either in
 * buf or elsewhere (a tensor's name in a model's mapping: the mount copies every value
 * under the SIGBUS guard). */
struct node_xattr {
	const char *name;
	const char *value;
	uint64_t len;
	char buf[NODE_XATTR_BUF];
};

/* The numbers an edit changed, in the provider's numbers, whose attributes and
 * contents the kernel must forget before the request is answered (a directory's
 * listing always; a file's pages but with -s, one thread, where the kernel would wait
 * on it): filled by a write whether it succeeds or is refused (a refused text may sit
 * in a shared mapping's pages). */
#define NODE_CHANGES_MAX 8
struct node_changes {
	unsigned n;
	struct {
		uint64_t ino;
		bool dir;
	} c[NODE_CHANGES_MAX];
};

/* The changes a provider takes (metadata/ with edits; the scratch files), as mount.h's
 * calls of the same names on the ref of their number or directory and its open state.
 * The mount has checked before calling: the namespace is writable (else EROFS), the
 * caller is the mount's owner (else EACCES), the op is not NULL (else EROFS). Each
 * returns 0 or -errno with why, and fills ch. A writer is opened by the provider's
 * open() with flags that write. */
struct tree_writes {
	/* a write of size bytes at off through writer open: 0 (all taken) or -errno */
	int (*write)(const struct node_ref *r, void *open, const char *buf, size_t size,
	             uint64_t off, struct node_changes *ch, char why[GGUF_ERR_MAX]);
	/* the size of r, through open writer open or, NULL, at once */
	int (*truncate)(const struct node_ref *r, void *open, uint64_t size,
	                struct node_changes *ch, char why[GGUF_ERR_MAX]);
	/* close(2) of a writer (last: its release, whose refusal no reply carries) */
	int (*flush)(const struct node_ref *r, void *open, bool last, struct node_changes *ch,
	             char why[GGUF_ERR_MAX]);
	/* A new name in directory dir, opened with flags: its number into *ino, its open
	 * into *open as the open() of ino's provider makes it (a key, or a scratch file:
	 * one per-open state for both). Should the mount then find no ref for ino (gone
	 * meanwhile), it lets go of *open with dir's provider's close. */
	int (*create)(const struct node_ref *dir, const char *name, int flags, uint64_t *ino,
	              void **open, struct node_changes *ch, char why[GGUF_ERR_MAX]);
	int (*unlink)(const struct node_ref *dir, const char *name, struct node_changes *ch,
	              char why[GGUF_ERR_MAX]);
	/* rename(2) within dir (the mount refuses another directory: EROFS); flags:
	 * renameat2's */
	int (*rename)(const struct node_ref *dir, const char *name, const char *newname,
	              unsigned flags, struct node_changes *ch, char why[GGUF_ERR_MAX]);
	int (*setxattr)(const struct node_ref *r, const char *name, const char *value,
	                size_t size, struct node_changes *ch, char why[GGUF_ERR_MAX]);
};

/* ---- The provider ---- */

/* Flags of tree_provider. */
#define TREE_P_SHARED 1u        /* one instance, made with the base tree, serves every
                                 * edit state's tree (tensors/ and stats/) */
#define TREE_P_OPEN_END 2u      /* takes the open-ended range after every stable one
                                 * (metadata/'s keys created by edits); one a kit */
#define TREE_P_NAMES_CHANGE 4u  /* the names in its directories come and go, or lead
                                 * elsewhere: entries in them, and names not there, are
                                 * not kept (metadata/ with edits, a library's folders,
                                 * compare/) */

struct tree_provider {
	const char *name;                  /* "quants": for logs and a kit's errors */
	unsigned flags;                    /* TREE_P_* */
	const struct tree_root *roots;     /* its root entries, listed in this order */
	unsigned n_roots;                  /* at most TREE_ROOTS_MAX */

	/* In a tree (NULL for a namespace's own provider). */

	/* The numbers p needs in m's trees into *w: 0, or -errno with why (a model too
	 * large for the zones). NULL: none beyond its root entries. */
	int (*widths)(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
	              char why[GGUF_ERR_MAX]);
	/* p's instance in tree t (being built: its model and state are set) over numbers r,
	 * into *inst: base and prev are the same provider's instances in the base tree and
	 * in the tree of the state t is made from (NULL when t is the base), to share what
	 * no edit changed and keep what this one did not. Not called for a state's tree
	 * when TREE_P_SHARED (the base's instance serves it). 0 or -errno with why. */
	int (*make)(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
	            void *prev, void **inst, char why[GGUF_ERR_MAX]);
	void (*free)(void *inst);
	/* the bytes inst holds (tree_held_bytes; a shared one counted by the base's tree) */
	uint64_t (*bytes)(const void *inst);
	/* the node of number ino in p's numbers (its root entries', its ranges), complete
	 * (a lazily sized file sized); NULL when no node has it (yet) */
	const struct tree_node *(*node)(void *inst, uint64_t ino);
	/* the child called name of directory dir, one of p's; NULL when none */
	const struct tree_node *(*lookup)(const struct node_ref *dir, const char *name);

	/* Requests. open: the per-open state open() made, or NULL (not opened, or none). */

	/* A directory's listing: how many entries, and the i-th below that into *e; false
	 * for an entry not listed (a key moved aside, a scratch file gone since the
	 * count), which keeps its place. NULL for a provider with no directory. */
	uint64_t (*count)(const struct node_ref *dir, void *open);
	bool (*entry)(const struct node_ref *dir, void *open, uint64_t i, struct node_dirent *e);
	/* r's attributes into a, zeroed before (a tree's node: the tree's helper fills them
	 * from the model file, the provider adjusts); through an open writer, its text's
	 * size. Never fails: what it cannot know it leaves 0. */
	void (*attr)(const struct node_ref *r, void *open, struct node_attr *a);
	/* The open of r with open(2)'s flags (a directory's, a writer's too), its state
	 * into *open: 0 or -errno with why. The mount has refused what attr and writes say
	 * (EISDIR, ENOTDIR, EROFS, EACCES). NULL: nothing kept per open. */
	int (*open)(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX]);
	/* lets go of open, once released and no request holds it */
	void (*close)(const struct node_ref *r, void *open);
	/* Up to len bytes of r at off into buf: the count, short only at the end (0 at or
	 * past it), or -errno with why (EIO: what was lost, fetched, refused). */
	int64_t (*read)(const struct node_ref *r, void *open, char *buf, uint64_t len,
	                uint64_t off, char why[GGUF_ERR_MAX]);
	/* The zero-copy read (NODE_ZERO_COPY): at most len bytes at off as at most max
	 * iovecs into memory the kernel copies the reply from (a mapping): their count;
	 * 0: read it with read instead; -errno with why (the file shrank under it). */
	int (*read_iov)(const struct node_ref *r, void *open, uint64_t off, uint64_t len,
	                struct iovec *iov, int max, char why[GGUF_ERR_MAX]);
	/* The one local file r is byte for byte, for passthrough: its fd, or -1 with why
	 * not in *not_file; *path names the model for a log line. NULL: never a file (and
	 * no user.ggufs.passthrough). */
	int (*file_fd)(const struct node_ref *r, const char **not_file, const char **path);
	/* True when an open of r is to keep none of the kernel's pages of it (a quant file
	 * of a model that changed since). Asked at open only. NULL: never. */
	bool (*stale)(const struct node_ref *r);
	/* r's extended attributes, in listing order, into x: their count */
	int (*xattrs)(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX]);
	/* the changes it takes; NULL: read-only (EROFS; setattr of a mode EPERM) */
	const struct tree_writes *writes;
};

/* ---- Registration: a kit of providers, one per mount (tree_kit.c) ---- */

/* A kit: the providers every tree of a mount is built with, each with its per-mount
 * state, in one root table. Read-only from the first tree built with it
 * (tree_build(m, kit, err)), so that trees built on many threads share it. */
struct tree_kit;

/* A kit holding the core's providers (metadata/, tensors/ + stats/, gguf.json +
 * summary.txt, model.gguf), their root entries in today's listing order. NULL out of
 * memory, with why. */
struct tree_kit *tree_kit_new(char why[GGUF_ERR_MAX]);
/* After every tree built with k. */
void tree_kit_free(struct tree_kit *k);
/* p registered with ctx (which outlives k): its root entries listed after those
 * before. False with why: k in use, p or its name there already, a root name taken,
 * more than TREE_ROOT_ENTRIES_MAX stable root entries or TREE_ROOTS_MAX of p's, a
 * second TREE_P_OPEN_END, a provider without node. */
bool tree_kit_add(struct tree_kit *k, const struct tree_provider *p, void *ctx,
                  char why[GGUF_ERR_MAX]);
/* p in was's place, with ctx (edits' metadata/ for the core's): was's roots, numbers
 * and listing places, so p's roots and TREE_P_OPEN_END must be was's. False with why:
 * k in use, was not in k, the roots differ. */
bool tree_kit_replace(struct tree_kit *k, const struct tree_provider *was,
                      const struct tree_provider *p, void *ctx, char why[GGUF_ERR_MAX]);

/* ---- What a namespace asks of a tree (tree.c) ---- */

/* The ref of tree number ino of t into *r (p, ctx, inst, tree, n; ino and parent in
 * t's numbers, ino_base 0, nothing held: the namespace holds t): 0 or -ENOENT. */
int tree_ref(const struct tree *t, uint64_t ino, struct node_ref *r);
/* The ref of the child called name of directory dir (a ref of t) into *r, as
 * tree_ref: 0, -ENOENT, -ENOTDIR. */
int tree_ref_child(const struct tree *t, const struct node_ref *dir, const char *name,
                   struct node_ref *r);

#endif
