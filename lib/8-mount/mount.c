/* The mount's calls (mount.h) as every kind of mount shares them: the open files by id,
 * held by each request that uses one; the error said; the one read of a model's file;
 * the attributes every kind answers alike. Each call then goes to its kind's operation
 * (mount_impl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "mount_impl.h"
#include "thread_buf.h"

struct mount *mount_new(const struct mount_kind *kind)
{
	struct mount *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->kind = kind;
	m->files = (struct handle_table)HANDLE_TABLE_INIT;
	mount_counters_init(&m->counters);
	return m;
}

/* Frees open file (a kind's), when the kind has anything to free. */
static void file_free(struct mount *m, void *file)
{
	if (m->kind->file_free)
		m->kind->file_free(m, file);
}

bool mount_fail(struct mount_err *err, int no)
{
	err->no = no;
	err->level = EVLOG_ERR;
	err->cause[0] = 0;
	err->key[0] = 0;
	return false;
}

void mount_err_say(const struct mount_err *e)
{
	if (e->cause[0])
		evlog(e->level, e->key[0] ? e->key : NULL, "%s", e->cause);
}

void mount_free(struct mount *m)
{
	if (!m)
		return;
	mount_counters_destroy(&m->counters);
	/* open files never released (the kernel's releases lost at an unmount) */
	for (size_t i = 0; i < m->files.cap; i++)
		if (m->files.slots && handle_table_slot(&m->files, i))
			file_free(m, handle_table_slot(&m->files, i));
	free(m->files.slots);
	pthread_mutex_destroy(&m->files.lock);
	if (m->ns)
		m->ns->ops->free(m->ns);
	free(m);
}

void mount_set_passthrough(struct mount *m, const struct mount_passthrough *pt)
{
	if (pt)
		m->pt = *pt;
	else
		memset(&m->pt, 0, sizeof m->pt);
}

bool mount_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                  struct mount_err *err)
{
	memset(e, 0, sizeof *e);
	return m->kind->lookup(m, parent, name, e, err);
}

void mount_forget(struct mount *m, uint64_t ino, uint64_t n)
{
	if (m->kind->forget)
		m->kind->forget(m, ino, n);
}

/* The open file of fh, held (put_file lets go), or NULL once released. */
static void *take_file(struct mount *m, uint64_t fh)
{
	return handle_table_take(&m->files, fh);
}

/* Lets go of a hold of file (fh's), freeing it after the last; release: the open's. */
static void put_file(struct mount *m, uint64_t fh, void *file, bool release)
{
	if (file && handle_table_drop(&m->files, fh, release))
		file_free(m, file);
}

bool mount_getattr(struct mount *m, uint64_t ino, uint64_t fh, struct stat *st, double *ttl,
                   struct mount_err *err)
{
	void *file = fh ? take_file(m, fh) : NULL;
	bool ok = m->kind->getattr(m, ino, file, st, ttl, err);
	put_file(m, fh, file, false);
	return ok;
}

/* Registers new open file under o->fh: false out of memory (file freed). */
static bool add_file(struct mount *m, void *file, struct mount_open *o, struct mount_err *err)
{
	o->fh = handle_table_add(&m->files, file);
	if (!o->fh) {
		file_free(m, file);
		return mount_fail(err, ENOMEM);
	}
	return true;
}

/* Opens ino (a directory when dir) for uid into o, its file registered under o->fh. */
static bool open_file(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid,
                      struct mount_open *o, struct mount_err *err)
{
	memset(o, 0, sizeof *o);
	o->pt_fd = -1;
	void *file = NULL;
	return m->kind->open(m, ino, dir, flags, uid, &file, o, err) && add_file(m, file, o, err);
}

bool mount_opendir(struct mount *m, uint64_t ino, struct mount_open *o, struct mount_err *err)
{
	return open_file(m, ino, true, O_RDONLY, 0, o, err);
}

bool mount_readdir(struct mount *m, uint64_t ino, uint64_t fh, uint64_t off, mount_dir_fn add,
                   void *ctx, struct mount_err *err)
{
	void *file = take_file(m, fh);
	if (!file)
		return mount_fail(err, EBADF);
	bool ok = m->kind->readdir(m, ino, file, off, add, ctx, err);
	put_file(m, fh, file, false);
	return ok;
}

void mount_releasedir(struct mount *m, uint64_t fh)
{
	mount_release(m, 0, fh);
}

bool mount_open(struct mount *m, uint64_t ino, int flags, uid_t uid, struct mount_open *o,
                struct mount_err *err)
{
	return open_file(m, ino, false, flags, uid, o, err);
}

bool mount_read(struct mount *m, uint64_t ino, uint64_t fh, uint64_t off, uint64_t len,
                bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	void *file = take_file(m, fh);
	if (!file)   /* a read after its release: to a reader gone */
		return mount_fail(err, EBADF);
	bool ok = m->kind->read(m, ino, file, off, len, fills_cache, reply, ctx, err);
	put_file(m, fh, file, false);
	return ok;
}

void mount_release(struct mount *m, uint64_t ino, uint64_t fh)
{
	void *file = take_file(m, fh);
	if (!file)
		return;
	if (m->kind->release)
		m->kind->release(m, ino, file);
	put_file(m, fh, file, false);   /* the take's */
	put_file(m, fh, file, true);    /* the open's */
}

void mount_set_notify(struct mount *m, const struct mount_notify *n)
{
	if (n)
		m->notify = *n;
	else
		memset(&m->notify, 0, sizeof m->notify);
}

bool mount_flush(struct mount *m, uint64_t ino, uint64_t fh, struct mount_err *err)
{
	/* nothing to flush: ENOSYS has the kernel stop sending FLUSH (no_flush), so that a
	 * close no longer waits for the daemon (a passthrough model.gguf's opens and closes
	 * are all it still asks about) */
	if (!m->kind->flush)
		return mount_fail(err, ENOSYS);
	void *file = take_file(m, fh);
	bool ok = m->kind->flush(m, ino, file, err);
	put_file(m, fh, file, false);
	return ok;
}

bool mount_setattr(struct mount *m, uint64_t ino, uint64_t fh, unsigned to_set, uint64_t size,
                   uid_t uid, struct stat *st, double *ttl, struct mount_err *err)
{
	if (!m->kind->setattr)
		return mount_fail(err, EROFS);
	void *file = fh ? take_file(m, fh) : NULL;
	bool ok = m->kind->setattr(m, ino, file, to_set, size, uid, st, ttl, err);
	put_file(m, fh, file, false);
	return ok;
}

bool mount_write(struct mount *m, uint64_t ino, uint64_t fh, const char *buf, size_t size,
                 uint64_t off, struct mount_err *err)
{
	void *file = m->kind->write ? take_file(m, fh) : NULL;
	if (!file)   /* no writer (or released) */
		return mount_fail(err, EROFS);
	bool ok = m->kind->write(m, ino, file, buf, size, off, err);
	put_file(m, fh, file, false);
	return ok;
}

bool mount_create(struct mount *m, uint64_t parent, const char *name, int flags, uid_t uid,
                  struct mount_entry *e, struct mount_open *o, struct mount_err *err)
{
	memset(e, 0, sizeof *e);
	memset(o, 0, sizeof *o);
	o->pt_fd = -1;
	void *file = NULL;
	if (!m->kind->create)
		return mount_fail(err, EROFS);
	return m->kind->create(m, parent, name, flags, uid, e, &file, o, err) &&
	       add_file(m, file, o, err);
}

bool mount_unlink(struct mount *m, uint64_t parent, const char *name, uid_t uid,
                  struct mount_err *err)
{
	return m->kind->unlink ? m->kind->unlink(m, parent, name, uid, err)
	                       : mount_fail(err, EROFS);
}

bool mount_rename(struct mount *m, uint64_t parent, const char *name, uint64_t newparent,
                  const char *newname, unsigned flags, uid_t uid, struct mount_err *err)
{
	return m->kind->rename ? m->kind->rename(m, parent, name, newparent, newname, flags, uid,
	                                         err)
	                       : mount_fail(err, EROFS);
}

bool mount_setxattr(struct mount *m, uint64_t ino, const char *name, const char *value,
                    size_t size, uid_t uid, struct mount_err *err)
{
	return m->kind->setxattr ? m->kind->setxattr(m, ino, name, value, size, uid, err)
	                         : mount_fail(err, EROFS);
}

bool mount_removexattr(struct mount *m, uint64_t ino, uid_t uid, struct mount_err *err)
{
	return m->kind->removexattr ? m->kind->removexattr(m, ino, uid, err)
	                            : mount_fail(err, EROFS);
}

void mount_release_unused(struct mount *m, uint64_t fh)
{
	void *file = take_file(m, fh);
	put_file(m, fh, file, false);
	put_file(m, fh, file, true);
}

void mount_statfs(struct mount *m, struct statvfs *sv)
{
	memset(sv, 0, sizeof *sv);
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	sv->f_namemax = 255;
	sv->f_flag = ST_RDONLY;
	m->kind->statfs(m, sv);
}

int64_t mount_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                    struct mount_err *err)
{
	int64_t r = m->kind->xattr(m, ino, name, buf, size, err);
	if (r < 0) {
		mount_fail(err, (int)-r);
		return -1;
	}
	return r;
}

/* ---- what every kind of mount answers alike ---- */

int64_t mount_passthrough_value(struct mount *m, uint64_t ino, const struct tree *t, char *buf,
                                size_t size)
{
	char value[256] = "off (-o passthrough=no)";
	if (m->pt.why_not)
		m->pt.why_not(m->pt.arg, ino, tree_model_file_fd(t), mount_not_file(t),
		              model_path(tree_model(t)), value, sizeof value);
	return mount_xattr_value(buf, size, value, strnlen(value, sizeof value - 1));
}

int mount_passthrough_file(struct mount *m, const char **not_file)
{
	*not_file = m->tree ? mount_not_file(m->tree) : NULL;
	return m->tree ? tree_model_file_fd(m->tree) : -1;
}

const char *mount_not_file(const struct tree *t)
{
	const char *why;
	if (tree_model_file_fd(t) >= 0)
		return NULL;
	if (model_file_fd(tree_model(t), &why) < 0)
		return why;
	return "edited: model.gguf has a header of its own in front of the file's data";
}

int64_t mount_tree_listxattr(const struct tree *t, const struct tree_node *n, char *buf,
                             size_t size)
{
	int64_t x = tree_listxattr(t, n, buf, size);
	if (x < 0 || n->kind != TREE_MODEL)
		return x;
	if (size && (uint64_t)x + sizeof MOUNT_PASSTHROUGH_XATTR > size)
		return -ERANGE;
	if (size)
		memcpy(buf + x, MOUNT_PASSTHROUGH_XATTR, sizeof MOUNT_PASSTHROUGH_XATTR);
	return x + (int64_t)sizeof MOUNT_PASSTHROUGH_XATTR;
}

void mount_reply_slice(const char *text, uint64_t n, uint64_t off, uint64_t len,
                       mount_data_fn reply, void *ctx)
{
	if (!text || off >= n) {
		reply(ctx, NULL, 0);
		return;
	}
	struct iovec iov = { (void *)(text + off), n - off < len ? (size_t)(n - off) : (size_t)len };
	reply(ctx, &iov, 1);
}

/* Raw tensor bytes of a local model, and its model.gguf, are replied straight from the
 * mappings (tree_read_iov): the kernel copies them from the page cache into the reply
 * with no copy through our memory (a pread into a buffer first measured 3x slower
 * cold). */
#define READ_IOV_MAX 256

/* One reply buffer per worker thread, kept for the thread's life. A fresh 1 MiB
 * malloc per request is a fresh mmap, and faulting its 256 pages in cost more than
 * dequantizing into them; a kept buffer is faulted once and stays in cache. Requests
 * are at most 1 MiB (max_pages); a larger one falls back to malloc.
 *
 * The buffer is one 2 MiB-aligned transparent huge page where the kernel grants it
 * (THP "madvise" or "always"): the kernel takes the reply one 4 KiB page at a time,
 * looking each up in our page tables, and a huge page makes every lookup short. Cold
 * .f32 reads measured 3.8-4.0 -> 4.6 GB/s for q4_K. It costs 2 MiB of memory per
 * thread instead of 1 (libfuse runs at most max_threads, 10 by default). */
static struct thread_buf reply_buf = THREAD_BUF(1u << 20, true);

bool mount_read_tree(struct mount *m, const struct tree *t, const struct tree_node *n,
                     uint64_t off, uint64_t len, mount_data_fn reply, void *ctx,
                     struct mount_err *err)
{
	if (off >= n->size || len == 0) {
		reply(ctx, NULL, 0);
		return true;
	}
	mount_counted_read(&m->counters);
	uint64_t left = n->size - off;
	size_t want = left < len ? (size_t)left : (size_t)len;
	struct iovec iov[READ_IOV_MAX];
	char why[GGUF_ERR_MAX];
	int count = tree_read_iov(t, n, off, want, iov, READ_IOV_MAX, why);
	if (count == -EIO) {
		mount_counted_eio(&m->counters, t, n, off, want, why, err);
		return false;
	}
	if (count < 0)
		return mount_fail(err, -count);
	if (count > 0) {
		reply(ctx, iov, count);
		return true;
	}
	bool owned;
	char *buf = thread_buf_get(&reply_buf, want, &owned);
	if (!buf)
		return mount_fail(err, ENOMEM);
	int64_t r = tree_read(t, n, buf, want, off, why);
	if (r >= 0) {
		struct iovec one = { buf, (size_t)r };
		reply(ctx, &one, 1);
	} else if (r == -EIO) {
		mount_counted_eio(&m->counters, t, n, off, want, why, err);
	} else {
		mount_fail(err, (int)-r);
	}
	thread_buf_put(buf, owned);
	return r >= 0;
}
