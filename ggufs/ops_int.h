/* What the operations of a one-model mount share (private to ops.c, edit_ops.c and
 * edit_handle.c): ops.c answers lookups, listings, opens and reads from the tree;
 * edit_ops.c the requests that change metadata/ with -o edits (and the opens, writes and
 * closes of its writers and scratch files); edit_handle.c what an open file keeps with
 * edits on.
 *
 * With -o edits=FILE the metadata changes (lib/6-tree/tree_edit.h): each request works
 * on the tree current when it came (held for it), an open file on the tree current at
 * its open, and every accepted edit invalidates what the kernel caches of the files it
 * changed (their attributes and pages, metadata/'s listing) before the request that made
 * it is answered. */
#ifndef GGUFS_OPS_INT_H
#define GGUFS_OPS_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "scratch.h"
#include "tree_edit.h"
#include "vbytes.h"

#include "ggufs.h"

/* Without -o edits nothing under a mount changes, so the kernel may cache names and
 * attributes for as long as it likes; with edits, each accepted edit invalidates what
 * it changed (invalidate) and metadata/ names are looked up afresh. */
#define CACHE_TIMEOUT 86400.0

/* The mounted model and its tree, as given to fuse_session_new. */
static inline struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The tree that serves a request now: with edits the current one, held (drop it with
 * drop_tree), else the one tree. */
static inline struct tree *take_tree(struct ggufs *fs)
{
	return fs->edits ? tree_edits_current(fs->edits) : fs->tree;
}

static inline void drop_tree(struct ggufs *fs, struct tree *t)
{
	if (fs->edits)
		tree_release(t);
}

/* edit_handle.c */

/* The most writers of keys open at once (ENFILE past it): each may hold EDIT_TEXT_MAX
 * of text, so this bounds what writers can make the daemon hold (ggufs(1)). */
#define EDIT_WRITERS_MAX 16

/* What an open file keeps with edits on: the tree at its open, so that its reads see
 * one state whole; for a file opened to write, the text written so far, made the key's
 * value at flush (close) or release. */
struct handle {
	struct tree *tree;
	struct scratch_file *scratch;   /* an open scratch file of metadata/ (scratch.h): its
	                                 * reads and writes go to it, not to tree */
	bool writing;
	bool key_writer;        /* holds one of EDIT_WRITERS_MAX */
	bool dirty;             /* written since the last commit */
	int refused;            /* -errno of a write refused (EFBIG, EINVAL), else 0: sticky,
	                         * nothing written after it is taken, and the close fails
	                         * with it, making nothing of the text */
	bool truncation_closed; /* only_truncated, and a close has been seen
	                         * (tree_edits_truncation_closed): made at the last */
	bool only_truncated;    /* opened with O_TRUNC and nothing written since: a shell's
	                         * "> KEY" closes a first descriptor (its dup2) before it
	                         * writes, so that truncation is made at the last close */
	pthread_mutex_t lock;   /* text, dirty */
	struct vbytes text;     /* edit_text.h */
};

/* The handle of an open file, held (handle_put it): only with edits (without, model.gguf's
 * fh is a mark); NULL too once released. */
struct handle *handle_of(const struct ggufs *fs, const struct fuse_file_info *fi);
/* Lets go of a hold of h (from handle_of; NULL allowed), freeing it after the last. */
void handle_put(const struct fuse_file_info *fi, struct handle *h);
/* Gives new handle h its id in fi->fh. False out of memory (h freed). */
bool handle_register(struct fuse_file_info *fi, struct handle *h);
/* The open's hold of registered h let go (its release, or an open whose reply failed):
 * freed now, or by the last request that still holds it. */
void handle_unregister(const struct fuse_file_info *fi, struct handle *h);
/* A new handle on tree t (which it keeps), or NULL out of memory. */
struct handle *handle_new(struct tree *t, bool writing);
/* Frees h, unregistered or never registered, with its tree, scratch file and writer place. */
void handle_free(struct handle *h);
/* A writer's place among EDIT_WRITERS_MAX: false when all are taken. */
bool writer_reserve(void);
void writer_release(void);

/* ops.c */

/* The scratch file of ino, held (scratch_drop it), when ino is one (edits on); else NULL. */
struct scratch_file *scratch_of(const struct ggufs *fs, uint64_t ino);
/* The node of ino in t, or NULL after replying ENOENT (the kernel only asks for inodes
 * we gave it, or a key deleted since). */
const struct tree_node *node_or_reply(fuse_req_t req, const struct tree *t, fuse_ino_t ino);
/* The node of ino in the tree that serves the request now (into *t, held: drop it with
 * drop_tree), or NULL after replying, with nothing held. With edits: a truncation just
 * closed made first (tree_edits_settle), and the tree that holds ino, an older state's
 * when the current one has not got it (tree_edits_holding: model.gguf is one inode per
 * state); none: ESTALE for a model.gguf (the kernel looks its name up again), else
 * ENOENT (the kernel only asks for inodes we gave it, or a key deleted since). */
const struct tree_node *take_node(fuse_req_t req, struct ggufs *fs, fuse_ino_t ino,
                                  struct tree **t);
/* Fills st for node n of t (ops.c says how). */
void fill_stat(const struct ggufs *fs, const struct tree *t, const struct tree_node *n,
               struct stat *st);
/* Fills st for scratch file f of metadata/. */
void fill_scratch_stat(const struct ggufs *fs, struct scratch_file *f, struct stat *st);

/* edit_ops.c */

/* True when the request comes from the mount's owner, who alone may edit; else
 * replies EACCES (allow_other lets others read, never write). */
bool owner_or_reply(fuse_req_t req);
/* An open of scratch file f (held; the handle keeps it), replied. */
void open_scratch(fuse_req_t req, struct ggufs *fs, struct scratch_file *f,
                  struct fuse_file_info *fi);
/* An open with edits on of file n of tree t (held: the handle keeps it, or it is
 * dropped), for writing when write (metadata/KEY, its owner asking), replied. */
void open_with_edits(fuse_req_t req, struct ggufs *fs, struct tree *t,
                     const struct tree_node *n, struct fuse_file_info *fi, bool write);
/* The operations of ggufs_ops that change the tree, or close a file that may have. */
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi);
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                 size_t size, int flags);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
               const char *newname, unsigned int flags);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi);
void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

#endif
