/* The mount: what a file system front end asks of a mounted model or library, one call
 * per request, and knows nothing of FUSE. A single model and a library are answered
 * alike, through their namespace (ns.h) and its providers (mount.c); the front end
 * translates each request into one call here and the answer into one reply.
 *
 * Inode numbers are the tree's (tree_ino.h) for a model and the library's (library.h)
 * for a library; the front end passes them through. An open file is an id (fh) into the
 * mount's table of open files (handle_table.h): a request that arrives after the
 * release of its file (async direct I/O, read-ahead on another thread) finds nothing
 * and fails with EBADF, never a freed handle.
 *
 * Errors: a call that fails returns false (or a negative count) and fills one struct
 * mount_err, which carries the errno for the reply and, where there is one, the cause,
 * made where the failure was seen (the fetcher's last error, a file that shrank, an
 * edit refused): the front end says it (mount_err_say) and replies the errno; it never
 * goes looking for a cause after the fact. */
#ifndef GGUFS_MOUNT_H
#define GGUFS_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "errline.h"
#include "evlog.h"

/* The longest cause a mount_err carries: an error line with the file it names. */
#define MOUNT_CAUSE_MAX 1024
/* An error's key: a cause without its numbers (evlog_key_cause), and a word. */
#define MOUNT_KEY_MAX (GGUF_ERR_MAX + 72)
/* How long the kernel may keep a name or attribute that never changes (a day). */
#define MOUNT_TTL_FOREVER 86400.0
/* model.gguf's attribute: whether its opens now pass through to the file. */
#define MOUNT_PASSTHROUGH_XATTR "user.ggufs.passthrough"

/* A failed call: the errno to reply, and why, to say. */
struct mount_err {
	int no;                       /* > 0 */
	enum evlog_level level;       /* how to say cause */
	char cause[MOUNT_CAUSE_MAX];  /* one line, or "" when the errno says it all */
	char key[MOUNT_KEY_MAX];      /* "": said each time; else the evlog key under which
	                               * the first of a cause is said and the rest counted */
};

/* Says e->cause in the event log (nothing when it is empty), under e->key: a storm of
 * one failure is said once and counted. */
void mount_err_say(const struct mount_err *e);

struct mount;

/* What a front end's passthrough (its kernel side) tells the mount, for the attribute
 * MOUNT_PASSTHROUGH_XATTR of model.gguf: why_not(arg, ino, fd, not_file, path, buf,
 * size) writes into buf why an open of model.gguf inode ino, whose file is fd (-1 when
 * model.gguf is not one file as it lies: not_file says why), would not pass through, or
 * "yes"; path names the model for a log line. */
struct mount_passthrough {
	void (*why_not)(void *arg, uint64_t ino, int fd, const char *not_file, const char *path,
	                char *buf, size_t size);
	void *arg;
};

/* A name looked up: its number (0: no such name) and attributes, and how long the
 * kernel may keep each (seconds; 0: ask again every time). */
struct mount_entry {
	uint64_t ino;
	struct stat attr;
	double entry_ttl, attr_ttl;
};

/* What an open answers: the id of the open file and how the kernel is to treat it. */
struct mount_open {
	uint64_t fh;
	bool direct_io;       /* reads past the page cache */
	bool keep_cache;      /* the page cache stays across opens */
	bool cache_readdir;   /* a directory's listing may be cached */
	/* model.gguf when it is byte for byte one local file: its fd, which the kernel may
	 * read itself (passthrough); else -1, and pt_not_file says why (NULL: not model.gguf) */
	int pt_fd;
	const char *pt_not_file;
	const char *pt_path;  /* the model's name, for a log line */
};

/* The mount of namespace ns (ns.h: a single model's tree, tree_ns_new; a model's with
 * metadata edits, -o edits=FILE, mount_source.c's; a library's, library_ns_new), which
 * it frees with itself (and at once when the mount cannot be made). What ns is made
 * over must outlive the mount. NULL out of memory (ns NULL too). */
struct ns;
struct mount *mount_new(struct ns *ns);

/* What an edit tells the front end: the kernel is to forget what it cached of ino (its
 * attributes and size; with pages, its pages too), before the request that made the
 * edit is answered. */
struct mount_notify {
	void (*forget)(void *arg, uint64_t ino, bool pages);
	void *arg;
};
void mount_set_notify(struct mount *m, const struct mount_notify *n);
/* Frees the mount (not what it was made over), with the open files not released. */
void mount_free(struct mount *m);
/* The front end's passthrough, asked for model.gguf's attribute (NULL: "off"). */
void mount_set_passthrough(struct mount *m, const struct mount_passthrough *pt);

/* The file a single model's model.gguf is byte for byte, for passthrough: its fd, or -1
 * (a library, whose models are each its own; or a model that is not one local file,
 * *not_file says why). */
int mount_passthrough_file(struct mount *m, const char **not_file);

/* The child name of directory parent, with its attributes and timeouts. A name that is
 * not there is an entry of ino 0 (a negative entry, cached e->entry_ttl). */
bool mount_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                  struct mount_err *err);
/* The kernel forgot n of the lookups that gave it ino (FUSE's FORGET: each entry
 * mount_lookup gave with a number is one, until forgotten): a library lets go of what it
 * kept for them; a model keeps nothing. */
void mount_forget(struct mount *m, uint64_t ino, uint64_t n);
/* The attributes of ino (of open file fh when not 0: a file opened keeps what it
 * opened), and how long they may be kept. */
bool mount_getattr(struct mount *m, uint64_t ino, uint64_t fh, struct stat *st, double *ttl,
                   struct mount_err *err);

/* Opens directory ino for listing (o->fh, o->cache_readdir, o->keep_cache). */
bool mount_opendir(struct mount *m, uint64_t ino, struct mount_open *o, struct mount_err *err);
/* One entry of a listing: its name, number and whether it is a directory, and the
 * offset of the entry after it; false when the reply buffer is full (the entry is not
 * taken). */
typedef bool (*mount_dir_fn)(void *ctx, const char *name, uint64_t ino, bool dir,
                             uint64_t next);
/* The entries of directory ino open as fh from offset off ("." and ".." first: the
 * offset of an entry is its position), each given to add until it is full. */
bool mount_readdir(struct mount *m, uint64_t ino, uint64_t fh, uint64_t off, mount_dir_fn add,
                   void *ctx, struct mount_err *err);
void mount_releasedir(struct mount *m, uint64_t fh);

/* Opens file ino with open(2)'s flags for the user uid (o: the answer): for writing,
 * only a metadata/ file with edits, and only for the mount's owner (EACCES, else EROFS). */
bool mount_open(struct mount *m, uint64_t ino, int flags, uid_t uid, struct mount_open *o,
                struct mount_err *err);
/* The bytes of a read, in count pieces (count 0: end of file); valid during the call. */
typedef void (*mount_data_fn)(void *ctx, const struct iovec *iov, int count);
/* Reads up to len bytes at off of file ino open as fh, given to reply once (memory of
 * the model's mapping where the bytes lie in it, else a per-thread buffer). fills_cache:
 * the read fills the kernel's page cache (a mapping's fault, read-ahead) rather than
 * answer a read(2) past it. */
bool mount_read(struct mount *m, uint64_t ino, uint64_t fh, uint64_t off, uint64_t len,
                bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err);
/* close(2) of fh: what a writer wrote, or its truncation at open alone, is made the
 * key's value before it returns (EINVAL when it cannot be; the error of a write or
 * truncation of fh refused before, making nothing; ENOSYS without edits, so that the
 * kernel stops asking). */
bool mount_flush(struct mount *m, uint64_t ino, uint64_t fh, struct mount_err *err);
/* The open of fh let go (a writer's text that no flush made a value is made one now,
 * its refusal said); the file stays until the last request that still holds it is
 * answered. */
void mount_release(struct mount *m, uint64_t ino, uint64_t fh);

/* An open whose reply failed (the opener gone): let go with nothing made of it. */
void mount_release_unused(struct mount *m, uint64_t fh);

/* The changes of metadata/ with edits (ggufs(1) EDITS), each for the user uid: EROFS
 * on any other mount or file, EACCES for anyone but the mount's owner. A refused edit
 * carries its cause (said as a warning) and is counted (user.ggufs.edits_refused). */

/* What setattr changes (bits of to_set) and the size asked for. */
#define MOUNT_SET_SIZE 1u
#define MOUNT_SET_MODE 2u     /* mode, owner or group: accepted in metadata/ only */
/* The size of metadata/KEY (through open writer fh, its text: past 64 MiB EFBIG, which
 * refuses fh's later writes, truncations and closes as a write past it does; else the
 * value now) or of a scratch file; modes, owners and times accepted and changed nowhere
 * in metadata/: the attributes after, and how long they may be kept. */
bool mount_setattr(struct mount *m, uint64_t ino, uint64_t fh, unsigned to_set, uint64_t size,
                   uid_t uid, struct stat *st, double *ttl, struct mount_err *err);
/* A write of size bytes at off through writer fh (into its text, made the value at
 * close): the count; EINVAL at once when the text can no longer become a value. */
bool mount_write(struct mount *m, uint64_t ino, uint64_t fh, const char *buf, size_t size,
                 uint64_t off, struct mount_err *err);
/* A new file name in metadata/ (a key, or an editor's scratch file), opened with flags:
 * its entry and the open. */
bool mount_create(struct mount *m, uint64_t parent, const char *name, int flags, uid_t uid,
                  struct mount_entry *e, struct mount_open *o, struct mount_err *err);
/* rm metadata/NAME; mv metadata/NAME metadata/NEWNAME (flags: renameat2's). */
bool mount_unlink(struct mount *m, uint64_t parent, const char *name, uid_t uid,
                  struct mount_err *err);
bool mount_rename(struct mount *m, uint64_t parent, const char *name, uint64_t newparent,
                  const char *newname, unsigned flags, uid_t uid, struct mount_err *err);
/* setxattr of user.gguf.type of a key (its value parsed again as that type);
 * removexattr: ENOTSUP (for the owner). */
bool mount_setxattr(struct mount *m, uint64_t ino, const char *name, const char *value,
                    size_t size, uid_t uid, struct mount_err *err);
bool mount_removexattr(struct mount *m, uint64_t ino, uid_t uid, struct mount_err *err);

/* statfs: sizes in 4 KiB blocks, nothing free, read-only unless edits are on. */
void mount_statfs(struct mount *m, struct statvfs *sv);

/* Extended attributes: getxattr's value of name, or listxattr's NUL-separated names
 * (name NULL), of ino: the length; with size, the bytes into buf; or -1 with err
 * (ERANGE when size is short and not 0, ENODATA for a name ino does not have). The
 * model's user.gguf.* (tree_xattr.c), model.gguf's MOUNT_PASSTHROUGH_XATTR, and the
 * root's user.ggufs.* counters (mount_counters.c). */
int64_t mount_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                    struct mount_err *err);

#endif
