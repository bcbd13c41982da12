/* The mount's calls (mount.h): the open files by id, held by each request that uses
 * one; the error said; and the one request path over a namespace (ns.h), a single
 * model's, a model's with edits or a library's: each request asks the namespace for the
 * ref of a number or name and the ref's provider for the rest, with node.h's rules once
 * (the stat, the TTLs, how an open is cached), the one read (read_ref), the one
 * composition of extended attributes (mount_xattr_ref) and the one passthrough
 * (file_fd); a writable namespace's changes through its providers' writes, the
 * kernel told to forget what they name. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount_impl.h"
#include "node.h"
#include "thread_buf.h"

/* ---- one request path over a namespace (ns.h) ---- */

void mount_open_passthrough(const struct node_ref *r, struct mount_open *o)
{
	if (r->p->file_fd)
		o->pt_fd = r->p->file_fd(r, &o->pt_not_file, &o->pt_path);
}

/* -ret into err: an EIO with a cause (a plain file's open, a comparison) counted and
 * kept as the last error, the cause said where it was seen. False. */
static bool failed(struct mount *m, int ret, const char *why, struct mount_err *err)
{
	if (ret == -EIO && why[0]) {
		mount_counted_eio_said(&m->counters, why, err);
		return false;
	}
	return mount_fail(err, -ret);
}

static bool ns_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                      struct mount_err *err)
{
	struct node_ref r;
	unsigned dir_flags = NS_DIR_UNKNOWN;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->lookup(m->ns, parent, name, &r, &dir_flags, why);
	if (ret == -ENOENT && dir_flags != NS_DIR_UNKNOWN) {   /* a negative entry */
		e->entry_ttl = node_entry_ttl(m->ns->flags, dir_flags, NULL);
		return true;
	}
	if (ret < 0)
		return failed(m, ret, why, err);
	e->ino = r.ino;
	e->attr_ttl = node_attr_ttl(node_stat(&r, NULL, &e->attr));
	e->entry_ttl = node_entry_ttl(m->ns->flags, dir_flags, &r);
	if (m->ns->ops->kernel_hold)   /* until the kernel forgets it */
		m->ns->ops->kernel_hold(m->ns, &r);
	m->ns->ops->put(m->ns, &r);
	return true;
}

static bool ns_getattr(struct mount *m, uint64_t ino, void *file, struct stat *st, double *ttl,
                       struct mount_err *err)
{
	/* with edit states, an fstat answers from the open's (a model.gguf of an older
	 * state is in no other, a scratch file unlinked in none), a writer's size its
	 * text's */
	const struct mount_file *f = file;
	if (f && (m->ns->flags & NS_STATES)) {
		*ttl = node_attr_ttl(node_stat(&f->r, f->open, st));
		return true;
	}
	struct node_ref r;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->get(m->ns, ino, 0, &r, why);
	if (ret < 0)
		return failed(m, ret, why, err);
	*ttl = node_attr_ttl(node_stat(&r, NULL, st));
	m->ns->ops->put(m->ns, &r);
	return true;
}

static void ns_file_free(struct mount *m, void *file)
{
	struct mount_file *f = file;
	if (!f)
		return;
	if (f->open && f->r.p->close)
		f->r.p->close(&f->r, f->open);
	m->ns->ops->put(m->ns, &f->r);
	free(f);
}

/* What f's attributes a say for its reads. */
static void file_attr(struct mount *m, struct mount_file *f, const struct node_attr *a)
{
	f->dir = a->dir;
	f->zero_copy = a->flags & NODE_ZERO_COPY;
	f->follows = (m->ns->flags & NS_STATES) && (a->flags & NODE_BYTES_FOLLOW_EDITS);
}

int mount_file_now(struct mount *m, uint64_t ino, bool writing, struct mount_file **file)
{
	struct mount_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	char why[GGUF_ERR_MAX];
	int ret = m->ns->ops->get(m->ns, ino, NS_NOW, &f->r, why);
	if (ret < 0) {
		free(f);
		return ret;
	}
	struct node_attr a;
	node_attr(&f->r, NULL, &a);
	file_attr(m, f, &a);
	f->writing = writing;
	*file = f;
	return 0;
}

/* Opens ino (a directory when dir) for uid into f: the ref got for an open (a model
 * directory's model built), the one open rule (EISDIR, ENOTDIR; a write of a file
 * that is not writable EROFS, of one by another than the mount's owner EACCES), its
 * provider's open, how the kernel is to cache it (node_open_cache), and a file with a
 * file_fd (model.gguf) tells the front end its file, which the kernel may read itself
 * (passthrough). 0 or -errno with why. */
static int open_ref(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid,
                    struct mount_file *f, struct mount_open *o, char why[GGUF_ERR_MAX])
{
	int ret = m->ns->ops->get(m->ns, ino, NS_FOR_OPEN, &f->r, why);
	if (ret < 0)
		return ret;
	const struct node_ref *r = &f->r;
	struct node_attr a;
	node_attr(r, NULL, &a);
	if (dir != a.dir)
		return dir ? -ENOTDIR : -EISDIR;
	if (f->writing && !a.writable)
		return -EROFS;
	if (f->writing && uid != getuid())   /* allow_other lets others read, never write */
		return -EACCES;
	file_attr(m, f, &a);
	if (r->p->open && (ret = r->p->open(r, flags, &f->open, why)) < 0)
		return ret;
	struct node_cache c;
	node_open_cache(m->ns->flags, &a, f->writing,
	                !dir && r->p->stale && r->p->stale(r), &c);
	o->direct_io = c.direct_io;
	o->keep_cache = c.keep_cache;
	o->cache_readdir = c.cache_readdir;
	if (!dir)
		mount_open_passthrough(r, o);
	return 0;
}

static bool ns_open(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid, void **file,
                    struct mount_open *o, struct mount_err *err)
{
	const bool writing = !dir && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC));
	if (writing && !(m->ns->flags & NS_WRITABLE))
		return mount_fail(err, EROFS);
	struct mount_file *f = calloc(1, sizeof *f);
	if (!f)
		return mount_fail(err, ENOMEM);
	f->writing = writing;
	char why[GGUF_ERR_MAX] = "";
	int ret = open_ref(m, ino, dir, flags, uid, f, o, why);
	if (ret < 0) {
		ns_file_free(m, f);
		if (!writing || !why[0])
			return failed(m, ret, why, err);
		mount_counted_refusal(&m->counters, ret, why, err);   /* a writer refused */
		return false;
	}
	*file = f;
	return true;
}

/* ".", ".." and the provider's entries from offset off (an entry it no longer lists
 * keeps its offset), numbered as the kernel knows them. With edit states, from the
 * state now: a listing read from the open's state after an edit would be kept by the
 * kernel after the edit's forget, stale until the next edit. */
static bool ns_readdir(struct mount *m, uint64_t ino, void *file, uint64_t off, mount_dir_fn add,
                       void *ctx, struct mount_err *err)
{
	const struct mount_file *f = file;
	struct node_ref now;
	const struct node_ref *r = &f->r;
	if (m->ns->flags & NS_STATES) {
		char why[GGUF_ERR_MAX];
		int ret = m->ns->ops->get(m->ns, ino, NS_NOW, &now, why);
		if (ret < 0)
			return failed(m, ret, why, err);
		r = &now;
	}
	const uint64_t count = r->p->count ? r->p->count(r, f->open) : 0;
	for (uint64_t pos = off; pos < count + 2; pos++) {
		struct node_dirent d = { pos == 0 ? "." : "..", pos == 0 ? ino : r->parent, true };
		if (pos >= 2 && !r->p->entry(r, f->open, pos - 2, &d))
			continue;
		if (pos >= 2)
			d.ino += r->ino_base;
		if (!add(ctx, d.name, d.ino, d.dir, pos + 1))
			break;
	}
	if (r == &now)
		m->ns->ops->put(m->ns, &now);
	return true;
}

/* Raw tensor bytes of a local model, and its model.gguf, are replied straight from the
 * mappings (read_iov): the kernel copies them from the page cache into the reply with
 * no copy through our memory (a pread into a buffer first measured 3x slower cold). */
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

/* An EIO of r's read of [off, off + len) with why: a tree's file counted with its
 * path, a namespace's own with its cause. False. */
static bool read_eio(struct mount *m, const struct node_ref *r, uint64_t off, uint64_t len,
                     const char *why, struct mount_err *err)
{
	if (r->tree)
		mount_counted_eio(&m->counters, r->tree, r->n, off, len, why, err);
	else
		failed(m, -EIO, why, err);
	return false;
}

/* The one read: [off, off + len) of r through its provider's per-open state open, given
 * to reply once. A tree's file is read within its size and counted (user.ggufs.reads),
 * but through a writer (writing: its own text); zero_copy (NODE_ZERO_COPY, seen at
 * open): from its mapping with no copy where its read_iov can; else into a per-thread
 * buffer. EIO counted with the provider's why. */
static bool read_ref(struct mount *m, const struct node_ref *r, void *open, bool writing,
                     bool zero_copy, uint64_t off, uint64_t len, mount_data_fn reply,
                     void *ctx, struct mount_err *err)
{
	if (!r->p->read)
		return mount_fail(err, EISDIR);
	if (r->n && !writing) {
		if (off >= r->n->size || len == 0) {
			reply(ctx, NULL, 0);
			return true;
		}
		mount_counted_read(&m->counters);
		if (r->n->size - off < len)
			len = r->n->size - off;
	}
	char why[GGUF_ERR_MAX] = "";
	if (zero_copy) {
		struct iovec iov[READ_IOV_MAX];
		const int count = r->p->read_iov(r, open, off, len, iov, READ_IOV_MAX, why);
		if (count == -EIO)
			return read_eio(m, r, off, len, why, err);
		if (count < 0)
			return mount_fail(err, -count);
		if (count > 0) {
			reply(ctx, iov, count);
			return true;
		}
	}
	bool owned;
	char *buf = thread_buf_get(&reply_buf, len ? (size_t)len : 1, &owned);
	if (!buf)
		return mount_fail(err, ENOMEM);
	const int64_t n = r->p->read(r, open, buf, len, off, why);
	if (n >= 0) {
		struct iovec one = { buf, (size_t)n };
		reply(ctx, &one, 1);
	} else if (n == -EIO) {
		read_eio(m, r, off, len, why, err);
	} else {
		mount_fail(err, (int)-n);
	}
	thread_buf_put(buf, owned);
	return n >= 0;
}

/* Reads [off, off + len) of the open file's ref (read_ref). With edit states, a fill
 * of the kernel's page cache of a file whose bytes follow the edits reads the state
 * now: such files are opened direct_io, so a read(2) reads the state of its open, but
 * the kernel fills the one page cache of their inode, for any mapping of any open,
 * through the open that faults; filled from the state now, it never holds another
 * state's pages than that one, since each edit drops them after making its state
 * current (forget_changes): an old open that keeps faulting cannot bring its state's
 * pages back under a mapping made after. A file gone from the state now is read in
 * the open's. */
static bool ns_read(struct mount *m, uint64_t ino, void *file, uint64_t off, uint64_t len,
                    bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	const struct mount_file *f = file;
	if (f->dir)
		return mount_fail(err, EISDIR);
	struct node_ref now;
	char why[GGUF_ERR_MAX];
	if (fills_cache && f->follows && !f->writing &&
	    m->ns->ops->get(m->ns, ino, NS_NOW, &now, why) == 0) {
		bool ok = read_ref(m, &now, NULL, false, f->zero_copy, off, len, reply, ctx, err);
		m->ns->ops->put(m->ns, &now);
		return ok;
	}
	return read_ref(m, &f->r, f->open, f->writing, f->zero_copy, off, len, reply, ctx, err);
}

static void ns_statfs(struct mount *m, struct statvfs *sv)
{
	if (m->ns->flags & NS_WRITABLE)   /* edits go to the edits file */
		sv->f_flag = 0;
	m->ns->ops->statfs(m->ns, sv);
}

/* The root's counters beside the mount's, as the namespace counts them. */
static uint64_t ns_counter_value(struct mount *m, size_t i)
{
	struct ns_counted c;
	m->ns->ops->counted(m->ns, &c);
	return c.extra_value(m->ns, i);
}

/* Appends listxattr's part x (a length, or -errno) to *at; false on an error (into *at). */
static bool list_add(int64_t *at, int64_t x)
{
	*at = x < 0 ? x : *at + x;
	return x >= 0;
}

int64_t mount_xattr_ref(struct mount *m, uint64_t ino, const struct node_ref *r,
                        const struct mount_counted *counted, const char *name, char *buf,
                        size_t size)
{
	const bool root = ino == NS_ROOT_INO;
	int64_t x;
	if (name) {
		x = node_getxattr(r, name, buf, size);
		if (x == -ENODATA && r->p->file_fd && strcmp(name, MOUNT_PASSTHROUGH_XATTR) == 0)
			x = mount_passthrough_value(m, ino, r, buf, size);
		if (x == -ENODATA && root)
			x = mount_counters_get(m, counted, name, buf, size);
	} else {
		x = 0;
		if (list_add(&x, node_listxattr(r, buf, size)) && r->p->file_fd) {
			if (size && (uint64_t)x + sizeof MOUNT_PASSTHROUGH_XATTR > size)
				x = -ERANGE;
			else if (size)
				memcpy(buf + x, MOUNT_PASSTHROUGH_XATTR, sizeof MOUNT_PASSTHROUGH_XATTR);
			if (x >= 0)
				x += (int64_t)sizeof MOUNT_PASSTHROUGH_XATTR;
		}
		if (x >= 0 && root)
			list_add(&x, mount_counters_list(m, counted, size ? buf + x : NULL,
			                                 size ? size - (size_t)x : 0));
	}
	return x == -ENOENT ? -ENODATA : x;
}

/* Extended attributes of ino (mount_xattr_ref), with the namespace's counters. */
static int64_t ns_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                        struct mount_err *err)
{
	(void)err;
	struct node_ref r;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->get(m->ns, ino, 0, &r, why);
	if (ret < 0)
		return ret;
	struct ns_counted c;
	m->ns->ops->counted(m->ns, &c);
	const struct mount_counted counted = { .model = c.model,
	                                       .edits = m->ns->flags & NS_WRITABLE,
	                                       .extra = c.extra,
	                                       .n_extra = c.n_extra,
	                                       .extra_value = ns_counter_value };
	const int64_t x = mount_xattr_ref(m, ino, &r, &counted, name, buf, size);
	m->ns->ops->put(m->ns, &r);
	return x;
}


/* ---- the changes of a writable namespace (NS_WRITABLE: edits), through the
 * providers' writes (provider.h struct tree_writes) ---- */

/* The kernel forgets what ch names in r's numbers: attributes, a directory's listing,
 * a file's pages too but with -s, where no other thread would answer the reads that
 * fill them before the notice returns (their pages go at the next open or mmap then,
 * the kernel drops a direct_io file's). */
static void forget_changes(struct mount *m, const struct node_ref *r,
                           const struct node_changes *ch)
{
	for (unsigned i = 0; m->notify.forget && i < ch->n && i < NODE_CHANGES_MAX; i++)
		m->notify.forget(m->notify.arg, ch->c[i].ino + r->ino_base,
		                 ch->c[i].dir || !m->single_thread);
}

/* A change's result ret into err: a failure with a why is an edit refused (counted in
 * user.ggufs.edits_refused, kept as the last error, said as a warning), one without a
 * plain errno. */
static bool changed(struct mount *m, int ret, const char *why, struct mount_err *err)
{
	if (ret >= 0)
		return true;
	if (!why[0])
		return mount_fail(err, -ret);
	mount_counted_refusal(&m->counters, ret, why, err);
	return false;
}

/* The checks before any change (design §11.5): EROFS unless the namespace is
 * writable, EACCES for anyone but the mount's owner (allow_other lets others read,
 * never write). */
static bool may_change(struct mount *m, uid_t uid, struct mount_err *err)
{
	if (!(m->ns->flags & NS_WRITABLE))
		return mount_fail(err, EROFS);
	return uid == getuid() || mount_fail(err, EACCES);
}

/* close(2) of a writer (last: its release, whose refusal no reply carries, said here):
 * its provider's flush. Nothing else to flush: ENOSYS without NS_WRITABLE has the
 * kernel stop sending FLUSH (no_flush), so that a close no longer waits for the daemon
 * (a passthrough model.gguf's opens and closes are all it still asks about). */
static bool ns_flush(struct mount *m, const struct mount_file *f, bool last,
                     struct mount_err *err)
{
	if (!(m->ns->flags & NS_WRITABLE))
		return mount_fail(err, ENOSYS);
	const struct tree_writes *w = f ? f->r.p->writes : NULL;
	if (!f || !f->open || !w || !w->flush)
		return true;
	struct node_changes ch = { 0 };
	char why[GGUF_ERR_MAX] = "";
	const int ret = w->flush(&f->r, f->open, last, &ch, why);
	forget_changes(m, &f->r, &ch);
	if (changed(m, ret, why, err))
		return true;
	if (last)
		mount_err_say(err);
	return false;
}

/* setattr: modes and owners accepted and changed nowhere where the provider takes
 * changes (as vfat's "quiet": cp -a, install and rsync set them after copying, and
 * fail on an error), EPERM elsewhere; a size through its provider's truncate (of the
 * open f's writer), EROFS where none; times accepted and changed nowhere. The
 * attributes after, from the state now (a scratch file unlinked: its open's). */
static bool ns_setattr(struct mount *m, uint64_t ino, const struct mount_file *f,
                       unsigned to_set, uint64_t size, uid_t uid, struct stat *st, double *ttl,
                       struct mount_err *err)
{
	if (!may_change(m, uid, err))
		return false;
	struct node_ref got, now;
	char why[GGUF_ERR_MAX] = "";
	int ret = f ? 0 : m->ns->ops->get(m->ns, ino, 0, &got, why);
	if (ret < 0)
		return failed(m, ret, why, err);
	const struct node_ref *r = f ? &f->r : &got;
	void *open = f ? f->open : NULL;
	const struct tree_writes *w = r->p->writes;
	if ((to_set & MOUNT_SET_MODE) && !w) {
		ret = -EPERM;
	} else if ((to_set & MOUNT_SET_SIZE) && (!w || !w->truncate)) {
		ret = -EROFS;
	} else if (to_set & MOUNT_SET_SIZE) {
		struct node_changes ch = { 0 };
		ret = w->truncate(r, open, size, &ch, why);
		forget_changes(m, r, &ch);
	}
	if (ret == 0) {
		char now_why[GGUF_ERR_MAX];
		const int got_now = m->ns->ops->get(m->ns, ino, NS_NOW, &now, now_why);
		if (got_now == 0)
			*ttl = node_attr_ttl(node_stat(&now, open, st));
		else if (f && !f->r.tree)
			*ttl = node_attr_ttl(node_stat(&f->r, open, st));
		else
			ret = got_now;
		if (got_now == 0)
			m->ns->ops->put(m->ns, &now);
	}
	if (!f)
		m->ns->ops->put(m->ns, &got);
	return changed(m, ret, why, err);
}

/* A write through open writer f: its provider's. */
static bool ns_write(struct mount *m, const struct mount_file *f, const char *buf, size_t size,
                     uint64_t off, struct mount_err *err)
{
	const struct tree_writes *w = f->r.p->writes;
	if (!f->writing || !w || !w->write)
		return mount_fail(err, EROFS);
	struct node_changes ch = { 0 };
	char why[GGUF_ERR_MAX] = "";
	const int ret = w->write(&f->r, f->open, buf, size, off, &ch, why);
	forget_changes(m, &f->r, &ch);
	return changed(m, ret, why, err);
}

/* The ref of directory parent in the state now for a change of its names by uid into
 * *dir, and its provider's writes: NULL with err (EROFS, EACCES, the get's). */
static const struct tree_writes *dir_writes(struct mount *m, uint64_t parent, uid_t uid,
                                            struct node_ref *dir, struct mount_err *err)
{
	if (!(m->ns->flags & NS_WRITABLE)) {
		mount_fail(err, EROFS);
		return NULL;
	}
	char why[GGUF_ERR_MAX] = "";
	const int ret = m->ns->ops->get(m->ns, parent, NS_NOW, dir, why);
	if (ret < 0) {
		failed(m, ret, why, err);
		return NULL;
	}
	const struct tree_writes *w = dir->p->writes;
	if (!w)
		mount_fail(err, EROFS);
	else if (uid != getuid())
		mount_fail(err, EACCES);
	if (!w || uid != getuid()) {
		m->ns->ops->put(m->ns, dir);
		return NULL;
	}
	return w;
}

/* A new name in parent, opened with flags: its provider's create, then the new
 * number's ref in the state now (gone meanwhile: ENOENT, the open let go with the
 * directory's provider's close) as the open file, cached as node_open_cache says. */
static bool ns_create(struct mount *m, uint64_t parent, const char *name, int flags, uid_t uid,
                      struct mount_entry *e, void **file, struct mount_open *o,
                      struct mount_err *err)
{
	struct node_ref dir;
	const struct tree_writes *w = dir_writes(m, parent, uid, &dir, err);
	if (!w)
		return false;
	if (!w->create) {
		m->ns->ops->put(m->ns, &dir);
		return mount_fail(err, EROFS);
	}
	struct node_changes ch = { 0 };
	char why[GGUF_ERR_MAX] = "";
	void *open = NULL;
	uint64_t ino;
	int ret = w->create(&dir, name, flags, &ino, &open, &ch, why);
	forget_changes(m, &dir, &ch);
	struct mount_file *f = NULL;
	if (ret == 0 && (ret = mount_file_now(m, ino + dir.ino_base,
	                                      (flags & O_ACCMODE) != O_RDONLY, &f)) < 0) {
		if (open && dir.p->close)
			dir.p->close(&dir, open);
		why[0] = 0;
	}
	const unsigned dir_flags = dir.p->flags;
	m->ns->ops->put(m->ns, &dir);
	if (ret < 0)
		return changed(m, ret, why, err);
	f->open = open;
	struct node_attr a;
	node_attr(&f->r, NULL, &a);
	e->ino = f->r.ino;
	e->attr_ttl = node_attr_ttl(node_stat(&f->r, open, &e->attr));
	e->entry_ttl = node_entry_ttl(m->ns->flags, dir_flags, &f->r);
	struct node_cache c;
	node_open_cache(m->ns->flags, &a, f->writing, false, &c);
	o->direct_io = c.direct_io;
	o->keep_cache = c.keep_cache;
	*file = f;
	return true;
}

/* rm: its directory provider's unlink. */
static bool ns_unlink(struct mount *m, uint64_t parent, const char *name, uid_t uid,
                      struct mount_err *err)
{
	struct node_ref dir;
	const struct tree_writes *w = dir_writes(m, parent, uid, &dir, err);
	if (!w)
		return false;
	struct node_changes ch = { 0 };
	char why[GGUF_ERR_MAX] = "";
	const int ret = w->unlink ? w->unlink(&dir, name, &ch, why) : -EROFS;
	forget_changes(m, &dir, &ch);
	m->ns->ops->put(m->ns, &dir);
	return changed(m, ret, why, err);
}

/* mv within one directory (another: EROFS): its provider's rename. */
static bool ns_rename(struct mount *m, uint64_t parent, const char *name, uint64_t newparent,
                      const char *newname, unsigned flags, uid_t uid, struct mount_err *err)
{
	struct node_ref dir;
	if (parent != newparent)
		return mount_fail(err, EROFS);
	const struct tree_writes *w = dir_writes(m, parent, uid, &dir, err);
	if (!w)
		return false;
	struct node_changes ch = { 0 };
	char why[GGUF_ERR_MAX] = "";
	const int ret = w->rename ? w->rename(&dir, name, newname, flags, &ch, why) : -EROFS;
	forget_changes(m, &dir, &ch);
	m->ns->ops->put(m->ns, &dir);
	return changed(m, ret, why, err);
}

/* setxattr of ino in the state now: its provider's (EROFS where none). */
static bool ns_setxattr(struct mount *m, uint64_t ino, const char *name, const char *value,
                        size_t size, uid_t uid, struct mount_err *err)
{
	if (!may_change(m, uid, err))
		return false;
	struct node_ref r;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->get(m->ns, ino, NS_NOW, &r, why);
	if (ret < 0)
		return failed(m, ret, why, err);
	const struct tree_writes *w = r.p->writes;
	struct node_changes ch = { 0 };
	ret = w && w->setxattr ? w->setxattr(&r, name, value, size, &ch, why) : -EROFS;
	forget_changes(m, &r, &ch);
	m->ns->ops->put(m->ns, &r);
	return changed(m, ret, why, err);
}

struct mount *mount_new(struct ns *ns)
{
	struct mount *m = ns ? calloc(1, sizeof *m) : NULL;
	if (!m) {
		if (ns)
			ns->ops->free(ns);
		return NULL;
	}
	m->ns = ns;
	m->files = (struct handle_table)HANDLE_TABLE_INIT;
	mount_counters_init(&m->counters);
	return m;
}

/* ---- mount.h's calls: the open file of fh held for each, and the request path's ---- */

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
			ns_file_free(m, handle_table_slot(&m->files, i));
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
	return ns_lookup(m, parent, name, e, err);
}

void mount_forget(struct mount *m, uint64_t ino, uint64_t n)
{
	if (m->ns->ops->forget)   /* the holds ns_lookup took for them let go */
		m->ns->ops->forget(m->ns, ino, n);
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
		ns_file_free(m, file);
}

bool mount_getattr(struct mount *m, uint64_t ino, uint64_t fh, struct stat *st, double *ttl,
                   struct mount_err *err)
{
	void *file = fh ? take_file(m, fh) : NULL;
	bool ok = ns_getattr(m, ino, file, st, ttl, err);
	put_file(m, fh, file, false);
	return ok;
}

/* Registers new open file under o->fh: false out of memory (file freed). */
static bool add_file(struct mount *m, void *file, struct mount_open *o, struct mount_err *err)
{
	o->fh = handle_table_add(&m->files, file);
	if (!o->fh) {
		ns_file_free(m, file);
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
	return ns_open(m, ino, dir, flags, uid, &file, o, err) && add_file(m, file, o, err);
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
	bool ok = ns_readdir(m, ino, file, off, add, ctx, err);
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
	bool ok = ns_read(m, ino, file, off, len, fills_cache, reply, ctx, err);
	put_file(m, fh, file, false);
	return ok;
}

void mount_release(struct mount *m, uint64_t ino, uint64_t fh)
{
	(void)ino;
	void *file = take_file(m, fh);
	if (!file)
		return;
	struct mount_err err;
	if (m->ns->flags & NS_WRITABLE)   /* a writer's text no flush made a value */
		ns_flush(m, file, true, &err);
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

void mount_set_single_thread(struct mount *m, bool single_thread)
{
	m->single_thread = single_thread;
}

bool mount_flush(struct mount *m, uint64_t ino, uint64_t fh, struct mount_err *err)
{
	(void)ino;
	void *file = (m->ns->flags & NS_WRITABLE) ? take_file(m, fh) : NULL;
	bool ok = ns_flush(m, file, false, err);
	put_file(m, fh, file, false);
	return ok;
}

bool mount_setattr(struct mount *m, uint64_t ino, uint64_t fh, unsigned to_set, uint64_t size,
                   uid_t uid, struct stat *st, double *ttl, struct mount_err *err)
{
	void *file = fh ? take_file(m, fh) : NULL;
	bool ok = ns_setattr(m, ino, file, to_set, size, uid, st, ttl, err);
	put_file(m, fh, file, false);
	return ok;
}

bool mount_write(struct mount *m, uint64_t ino, uint64_t fh, const char *buf, size_t size,
                 uint64_t off, struct mount_err *err)
{
	(void)ino;
	void *file = take_file(m, fh);
	if (!file)   /* released */
		return mount_fail(err, EROFS);
	bool ok = ns_write(m, file, buf, size, off, err);
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
	return ns_create(m, parent, name, flags, uid, e, &file, o, err) &&
	       add_file(m, file, o, err);
}

bool mount_unlink(struct mount *m, uint64_t parent, const char *name, uid_t uid,
                  struct mount_err *err)
{
	return ns_unlink(m, parent, name, uid, err);
}

bool mount_rename(struct mount *m, uint64_t parent, const char *name, uint64_t newparent,
                  const char *newname, unsigned flags, uid_t uid, struct mount_err *err)
{
	return ns_rename(m, parent, name, newparent, newname, flags, uid, err);
}

bool mount_setxattr(struct mount *m, uint64_t ino, const char *name, const char *value,
                    size_t size, uid_t uid, struct mount_err *err)
{
	return ns_setxattr(m, ino, name, value, size, uid, err);
}

bool mount_removexattr(struct mount *m, uint64_t ino, uid_t uid, struct mount_err *err)
{
	(void)ino;
	/* no attribute is removed: ENOTSUP where changes are taken at all */
	return may_change(m, uid, err) && mount_fail(err, ENOTSUP);
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
	ns_statfs(m, sv);
}

int64_t mount_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                    struct mount_err *err)
{
	int64_t r = ns_xattr(m, ino, name, buf, size, err);
	if (r < 0) {
		mount_fail(err, (int)-r);
		return -1;
	}
	return r;
}


/* ---- passthrough ---- */

int64_t mount_passthrough_value(struct mount *m, uint64_t ino, const struct node_ref *r,
                                char *buf, size_t size)
{
	char value[256] = "off (-o passthrough=no)";
	if (m->pt.why_not) {
		const char *not_file = NULL, *path = NULL;
		const int fd = r->p->file_fd(r, &not_file, &path);
		m->pt.why_not(m->pt.arg, ino, fd, not_file, path, value, sizeof value);
	}
	return mount_xattr_value(buf, size, value, strnlen(value, sizeof value - 1));
}

int mount_passthrough_file(struct mount *m, const char **not_file)
{
	*not_file = NULL;
	return m->ns->ops->passthrough_fd ? m->ns->ops->passthrough_fd(m->ns, not_file) : -1;
}
