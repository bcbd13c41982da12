/* The FUSE low-level operations over the mount (lib/8-mount/mount.h): each is one call
 * of the mount and one reply, as libfuse's example/hello_ll.c answers from its tables.
 * A library's mount is served here (userdata: struct ggufs, whose mount is set). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "compat/fuse_compat.h"
#include "ggufs.h"
#include "mount.h"

static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Replies a failed call: its cause said (the event log), its errno replied. */
static void reply_fail(fuse_req_t req, const struct mount_err *e)
{
	mount_err_say(e);
	fuse_reply_err(req, e->no);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mount_entry e;
	struct mount_err err;
	if (!mount_lookup(fs_of(req)->mount, parent, name, &e, &err)) {
		reply_fail(req, &err);
		return;
	}
	struct fuse_entry_param p = { .ino = e.ino, .generation = e.ino ? 1 : 0, .attr = e.attr,
	                              .attr_timeout = e.attr_ttl, .entry_timeout = e.entry_ttl };
	fuse_reply_entry(req, &p);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double ttl;
	struct mount_err err;
	if (mount_getattr(fs_of(req)->mount, ino, fi ? fi->fh : 0, &st, &ttl, &err))
		fuse_reply_attr(req, &st, ttl);
	else
		reply_fail(req, &err);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mount *m = fs_of(req)->mount;
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
		mount_releasedir(m, o.fh);
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
	else if (!mount_readdir(fs_of(req)->mount, ino, fi->fh, off < 0 ? 0 : (uint64_t)off,
	                        dir_add, &d, &err))
		reply_fail(req, &err);
	else
		fuse_reply_buf(req, d.buf, d.used);
	free(d.buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	mount_releasedir(fs_of(req)->mount, fi->fh);
	fuse_reply_err(req, 0);
}

/* model.gguf that is its model's one local file goes to the kernel with that file
 * (passthrough.c). */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct mount_open o;
	struct mount_err err;
	if (!mount_open(fs->mount, ino, fi->flags, &o, &err)) {
		reply_fail(req, &err);
		return;
	}
	fi->fh = o.fh;
	fi->direct_io = o.direct_io;
	fi->keep_cache = o.keep_cache;
	if ((o.pt_path ? passthrough_reply_open(req, fs, fi, ino, o.pt_fd, o.pt_not_file, o.pt_path)
	               : fuse_reply_open(req, fi)) != 0) {
		mount_release(fs->mount, ino, o.fh);
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
	else if (!mount_read(fs_of(req)->mount, ino, fi->fh, (uint64_t)off, size,
	                     compat_read_fills_cache(), reply_data, req, &err))
		reply_fail(req, &err);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	mount_release(fs->mount, ino, fi->fh);
	passthrough_release(fs, ino);   /* its backing id may go with the inode's last open */
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	mount_statfs(fs_of(req)->mount, &sv);
	fuse_reply_statfs(req, &sv);
}

/* getxattr of name, or listxattr when name is NULL, through a buffer of the size asked
 * for. */
static void reply_xattr_of(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	struct mount_err err;
	int64_t r = size && !buf ? -1 : mount_xattr(fs_of(req)->mount, ino, name, buf, size, &err);
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

const struct fuse_lowlevel_ops mount_ops = {
	.init = ggufs_op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};
