/* What the mount's files share (private to lib/8-mount): struct mount (mount.c's one
 * path over a namespace: a model's, a library's, a model's with edits, whose changes
 * go through its providers' writes), the open files, the counters, and the one
 * attribute composition by ref. */
#ifndef GGUFS_MOUNT_IMPL_H
#define GGUFS_MOUNT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "handle_table.h"
#include "mount.h"
#include "ns.h"
#include "tree.h"

/* The counters of user.ggufs.* and the last error (mount_counters.c). */
struct mount_counters {
	atomic_uint_fast64_t reads, eio_replies, edits_refused;
	pthread_mutex_t error_lock;  /* the last error found here (a local file that shrank) */
	char last_error[MOUNT_CAUSE_MAX];
	time_t last_error_time;
};

struct mount {
	struct handle_table files;      /* open files and directories, by fh */
	struct mount_counters counters;
	struct mount_passthrough pt;    /* why_not NULL: no passthrough */
	struct ns *ns;                  /* mount_new's (freed with the mount) */
	struct mount_notify notify;     /* forget NULL: the kernel is told nothing */
	bool single_thread;             /* -s: no request waits for another (forget_changes) */
};

/* With single_thread (-s: one thread serves every request), an edit has the kernel
 * forget its files' sizes and times, not their pages (mount.c forget_changes). */
void mount_set_single_thread(struct mount *m, bool single_thread);

/* What an open file or directory keeps: its ref (a library's model held built, an edit
 * state's tree), its provider's per-open state (a plain file's source handle, a table's
 * text, a folder's listing, a writer's text) or NULL, and what its open said. */
struct mount_file {
	struct node_ref r;
	void *open;
	bool dir;
	bool writing;     /* opened to write (or O_TRUNC): read and sized by its provider
	                   * through open, not within its node's size */
	bool zero_copy;   /* NODE_ZERO_COPY: read_iov first */
	bool follows;     /* NODE_BYTES_FOLLOW_EDITS with NS_STATES: a page fill reads the
	                   * state now */
};

/* Fills err with errno no and nothing to say; false, for "return mount_fail(...)". */
bool mount_fail(struct mount_err *err, int no);

/* mount_counters.c */

void mount_counters_init(struct mount_counters *c);
void mount_counters_destroy(struct mount_counters *c);
/* A read of a tree's file served: counted (user.ggufs.reads). */
static inline void mount_counted_read(struct mount_counters *c)
{
	atomic_fetch_add_explicit(&c->reads, 1, memory_order_relaxed);
}
/* A read of [off, off + len) of node n of tree t that failed with EIO, why the read's own
 * (tree_read's: "" when none was said): counted, and err filled with it as the cause,
 * keyed so that each cause is said once. A local model's why is said in the log (once
 * while it is the last) and kept as the last error; a fetched model's is the fetcher's,
 * which said it and keeps it itself (user.ggufs.last_error). */
void mount_counted_eio(struct mount_counters *c, const struct tree *t, const struct tree_node *n,
                       uint64_t off, uint64_t len, const char *why, struct mount_err *err);
/* An EIO whose cause lib said already (why, or "" when unknown): counted and kept as
 * the last error; err gets EIO and nothing more to say. */
void mount_counted_eio_said(struct mount_counters *c, const char *why, struct mount_err *err);
/* An edit refused with -errno r for why (one line naming the key): counted
 * (user.ggufs.edits_refused), kept as the last error, and into err to be said (a
 * warning, each time). */
void mount_counted_refusal(struct mount_counters *c, int r, const char *why,
                           struct mount_err *err);
/* What user.ggufs.* shows besides the counters of every mount: the model's (NULL for a
 * library: no URL, no fetcher), whether edits are on, and extra attributes (names, and
 * their values by get), shown after the rest. */
struct mount_counted {
	const struct ggufs_model *model;
	bool edits;
	const char *const *extra;
	size_t n_extra;
	uint64_t (*extra_value)(struct mount *m, size_t i);
};
/* The root's user.ggufs.* names (NUL-separated) into buf: the length; -ERANGE when size
 * is short and not 0. */
int64_t mount_counters_list(struct mount *m, const struct mount_counted *what, char *buf,
                            size_t size);
/* The value of user.ggufs.NAME: the length (with size, the bytes in buf); -ERANGE,
 * -ENOENT for a name outside user.ggufs. (the tree's), -ENODATA for one that does not
 * apply. */
int64_t mount_counters_get(struct mount *m, const struct mount_counted *what, const char *name,
                           char *buf, size_t size);

/* An attribute's value of len bytes as getxattr answers it: the length; with size,
 * the bytes into buf, or -ERANGE when they do not fit. */
int64_t mount_xattr_value(char *buf, size_t size, const char *value, size_t len);
/* The value of MOUNT_PASSTHROUGH_XATTR of r (a file with a file_fd: model.gguf),
 * number ino as the kernel knows it, from the front end's passthrough: as
 * mount_xattr_value. */
int64_t mount_passthrough_value(struct mount *m, uint64_t ino, const struct node_ref *r,
                                char *buf, size_t size);
/* The one composition of extended attributes of r, number ino as the kernel knows it:
 * getxattr of name, or listxattr when name is NULL: its provider's (a model's
 * user.gguf.*, as `ggufs FILE` shows them), then MOUNT_PASSTHROUGH_XATTR of a file with
 * a file_fd (model.gguf), then on the root the counters of counted; a name is the
 * first that has it. The length, or -errno (ERANGE, ENODATA). */
int64_t mount_xattr_ref(struct mount *m, uint64_t ino, const struct node_ref *r,
                        const struct mount_counted *counted, const char *name, char *buf,
                        size_t size);
/* A file opened as r with a file_fd (model.gguf): its fd into o->pt_fd when it is one
 * local file as it lies (passthrough), else -1 and why not in o->pt_not_file. */
void mount_open_passthrough(const struct node_ref *r, struct mount_open *o);

/* A new open file of ino, its ref in the state now (the one an edit just made), opened
 * to write when writing, its provider's per-open state NULL (the caller's to set): into
 * *file, 0; or -errno (ENOENT: gone meanwhile, ENOMEM). */
int mount_file_now(struct mount *m, uint64_t ino, bool writing, struct mount_file **file);
#endif
