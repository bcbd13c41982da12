/* The FUSE low-level operations: each is one call of the mount (lib/8-mount/mount.h),
 * a single model's, with edits or not, or a library's, and one reply, as libfuse's
 * example/hello_ll.c answers from its tables (userdata: struct ggufs). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "compat/fuse_compat.h"
#include "evlog.h"
#include "ggufs.h"
#include "mount.h"

static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The mount a request is for. */
static struct mount *mount_of(fuse_req_t req)
{
	return fs_of(req)->src.mount;
}

/* The user a request comes from (only the mount's owner edits). */
static uid_t uid_of(fuse_req_t req)
{
	return fuse_req_ctx(req)->uid;
}

/* Reads as large as the kernel allows: max_readahead arrives as the kernel's maximum
 * (128 KiB by default) and is kept, and libfuse already asks for the largest requests
 * (max_pages: 1 MiB). Asynchronous reads keep several in flight; no writeback cache:
 * only the edits' writers write, each into its own text. */
static void ops_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ggufs *fs = userdata;
	/* libfuse refuses the connection unless init repeats -o max_read=N */
	conn->max_read = fs->max_read;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* open(O_TRUNC) of a key starts its text empty, in one request */
	if (fs->src.edits && (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC))
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* the files an edit changes and a library's models.tsv and models.json are opened
	 * direct_io: without this, the kernel refuses a shared mapping of them (ENODEV) */
	if (compat_capable(COMPAT_CAP_DIRECT_IO_ALLOW_MMAP))
		compat_want(COMPAT_CAP_DIRECT_IO_ALLOW_MMAP);
	else if (fs->src.edits && !compat_refused())   /* (else said at the start) */
		evlog(EVLOG_WARNING, NULL, "metadata/, gguf.json and summary.txt map privately "
		      "only (a shared mapping is ENODEV): the kernel does not offer "
		      "FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6)");

	passthrough_init(fs);
	pthread_mutex_lock(&fs->init_lock);
	fs->init_seen = true;
	pthread_cond_signal(&fs->init_cond);
	pthread_mutex_unlock(&fs->init_lock);
}

/* mount_notify: the kernel forgets what it cached of ino (its pages too when pages; a
 * directory's listing with them). */
void ops_forget(void *arg, uint64_t ino, bool pages)
{
	struct ggufs *fs = arg;
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, pages ? 0 : -1, 0);
}

/* Replies a failed call: its cause said (the event log), its errno replied. */
static void reply_fail(fuse_req_t req, const struct mount_err *e)
{
	mount_err_say(e);
	fuse_reply_err(req, e->no);
}

/* An entry as FUSE takes it. */
static struct fuse_entry_param entry_of(const struct mount_entry *e)
{
	return (struct fuse_entry_param){ .ino = e->ino, .generation = e->ino ? 1 : 0,
	                                  .attr = e->attr, .attr_timeout = e->attr_ttl,
	                                  .entry_timeout = e->entry_ttl };
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount_entry e;
	struct mount_err err;
	if (!mount_lookup(mount_of(req), parent, name, &e, &err)) {
		reply_fail(req, &err);
		return;
	}
	struct fuse_entry_param p = entry_of(&e);
	/* a reply the kernel did not take (the request interrupted) is no lookup of its */
	if (fuse_reply_entry(req, &p) != 0 && e.ino)
		mount_forget(mount_of(req), e.ino, 1);
}

/* The kernel forgot nlookup lookups of ino: no reply. */
static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	mount_forget(mount_of(req), ino, nlookup);
	fuse_reply_none(req);
}

/* FORGET of several inodes at once (the kernel batches them): each as op_forget. */
static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct mount *m = mount_of(req);
	for (size_t i = 0; i < count; i++)
		mount_forget(m, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double ttl;
	struct mount_err err;
	if (mount_getattr(mount_of(req), ino, fi ? fi->fh : 0, &st, &ttl, &err))
		fuse_reply_attr(req, &st, ttl);
	else
		reply_fail(req, &err);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = mount_of(req);
	struct mount_open o;
	struct mount_err err;
	if (!mount_opendir(m, ino, &o, &err)) {
		reply_fail(req, &err);
		return;
	}
	fi->fh = o.fh;
	fi->cache_readdir = o.cache_readdir;
	fi->keep_cache = o.keep_cache;
	if (fuse_reply_open(req, fi) != 0)
		mount_release_unused(m, o.fh);
}

/* A listing being filled: the reply buffer and the request it is for. */
struct dir_buf {
	fuse_req_t req;
	char *buf;
	size_t size, used;
};

/* mount_dir_fn: one entry into the reply buffer, false when it is full. */
static bool dir_add(void *ctx, const char *name, uint64_t ino, bool dir, uint64_t next)
{
	struct dir_buf *d = ctx;
	struct stat st = { .st_ino = ino, .st_mode = dir ? S_IFDIR : S_IFREG };
	size_t need = fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, name, &st,
	                                (off_t)next);
	if (need > d->size - d->used)
		return false;
	d->used += need;
	return true;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	struct dir_buf d = { .req = req, .buf = malloc(size), .size = size };
	struct mount_err err;
	if (!d.buf)
		fuse_reply_err(req, ENOMEM);
	else if (!mount_readdir(mount_of(req), ino, fi->fh, off < 0 ? 0 : (uint64_t)off,
	                        dir_add, &d, &err))
		reply_fail(req, &err);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	mount_releasedir(mount_of(req), fi->fh);
	fuse_reply_err(req, 0);
}

/* model.gguf that is its model's one local file goes to the kernel with that file
 * (passthrough.c). */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct mount_open o;
	struct mount_err err;
	if (!mount_open(fs->src.mount, ino, fi->flags, uid_of(req), &o, &err)) {
		reply_fail(req, &err);
		return;
	}
	fi->fh = o.fh;
	fi->direct_io = o.direct_io;
	fi->keep_cache = o.keep_cache;
	if ((o.pt_path ? passthrough_reply_open(req, fs, fi, ino, o.pt_fd, o.pt_not_file, o.pt_path)
	               : fuse_reply_open(req, fi)) != 0) {
		mount_release_unused(fs->src.mount, o.fh);
		passthrough_release(fs, ino);
	}
}

/* mount_data_fn: the bytes replied. */
static void reply_data(void *ctx, const struct iovec *iov, int count)
{
	fuse_req_t req = ctx;
	if (count == 0)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_iov(req, iov, count);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	struct mount_err err;
	if (off < 0)
		fuse_reply_err(req, EINVAL);
	else if (!mount_read(mount_of(req), ino, fi->fh, (uint64_t)off, size,
	                     compat_read_fills_cache(), reply_data, req, &err))
		reply_fail(req, &err);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	mount_release(fs->src.mount, ino, fi->fh);
	passthrough_release(fs, ino);   /* its backing id may go with the inode's last open */
	fuse_reply_err(req, 0);
}

/* close(2) of a writer: its text made the value (ENOSYS without edits: the kernel stops
 * asking). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount_err err;
	if (mount_flush(mount_of(req), ino, fi->fh, &err))
		fuse_reply_err(req, 0);
	else
		reply_fail(req, &err);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	struct mount_err err;
	if (off < 0)
		fuse_reply_err(req, EINVAL);
	else if (mount_write(mount_of(req), ino, fi->fh, buf, size, (uint64_t)off, &err))
		fuse_reply_write(req, size);
	else
		reply_fail(req, &err);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	unsigned set = (to_set & FUSE_SET_ATTR_SIZE ? MOUNT_SET_SIZE : 0) |
	               (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) ?
	                MOUNT_SET_MODE : 0);
	struct stat st;
	double ttl;
	struct mount_err err;
	if (mount_setattr(mount_of(req), ino, fi ? fi->fh : 0, set,
	                  attr->st_size < 0 ? 0 : (uint64_t)attr->st_size, uid_of(req), &st, &ttl,
	                  &err))
		fuse_reply_attr(req, &st, ttl);
	else
		reply_fail(req, &err);
}

/* A new file in metadata/ with edits, and its open. */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	(void)mode;
	struct mount *m = mount_of(req);
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	if (!mount_create(m, parent, name, fi->flags, uid_of(req), &e, &o, &err)) {
		reply_fail(req, &err);
		return;
	}
	struct fuse_entry_param p = entry_of(&e);
	fi->fh = o.fh;
	fi->direct_io = o.direct_io;
	if (fuse_reply_create(req, &p, fi) != 0)
		mount_release_unused(m, o.fh);
}

/* The replies of the changes that answer no more than done or not. */
static void reply_done(fuse_req_t req, bool done, const struct mount_err *err)
{
	if (done)
		fuse_reply_err(req, 0);
	else
		reply_fail(req, err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount_err err;
	reply_done(req, mount_unlink(mount_of(req), parent, name, uid_of(req), &err), &err);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct mount_err err;
	reply_done(req, mount_rename(mount_of(req), parent, name, newparent, newname, flags,
	                             uid_of(req), &err), &err);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	(void)flags;
	struct mount_err err;
	reply_done(req, mount_setxattr(mount_of(req), ino, name, value, size, uid_of(req),
	                               &err), &err);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)name;
	struct mount_err err;
	reply_done(req, mount_removexattr(mount_of(req), ino, uid_of(req), &err), &err);
}

/* What no mount changes, edits or not: the mount is "ro" without edits, so the kernel
 * answers most of these itself; these are for the ones that reach us anyway. */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EROFS);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fuse_reply_err(req, EROFS);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fuse_reply_err(req, EROFS);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	mount_statfs(mount_of(req), &sv);
	fuse_reply_statfs(req, &sv);
}

/* getxattr of name, or listxattr when name is NULL, through a buffer of the size asked
 * for. */
static void reply_xattr_of(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	struct mount_err err;
	int64_t r = size && !buf ? -1 : mount_xattr(mount_of(req), ino, name, buf, size, &err);
	if (size && !buf)
		fuse_reply_err(req, ENOMEM);
	else if (r < 0)
		reply_fail(req, &err);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	reply_xattr_of(req, ino, name, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	reply_xattr_of(req, ino, NULL, size);
}

const struct fuse_lowlevel_ops ops_table = {
	.init = ops_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};
