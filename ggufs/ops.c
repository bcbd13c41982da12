/* The FUSE low-level operations of a one-model mount: each translates one request into
 * a lookup or a read of the tree built at mount, and replies. Modelled on libfuse's
 * example/hello_ll.c and squashfuse's front end. The requests that change metadata/
 * with -o edits are edit_ops.c's; what the two share, and how edits hold trees, is in
 * ops_int.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "edit_text.h"
#include "evlog.h"
#include "scratch.h"
#include "thread_buf.h"
#include "tree_edit.h"

#include "compat/fuse_compat.h"
#include "ops_int.h"

/* The scratch file of ino, held (scratch_drop it), when ino is one (edits on); else NULL. */
struct scratch_file *scratch_of(const struct ggufs *fs, uint64_t ino)
{
	return fs->edits && ino >= TREE_SCRATCH_INO ?
	       scratch_by_ino(tree_edits_scratch(fs->edits), ino) : NULL;
}

/* With edits, waits for a truncation just closed to be made (tree_edits_settle), so
 * that a lookup, stat or open right after a close sees what it made; not with -s, whose
 * one thread is the one that would make it. */
static void settle(struct ggufs *fs)
{
	if (fs->edits && !fs->single_thread)
		tree_edits_settle(fs->edits);
}

/* The node of ino in t, or NULL after replying ENOENT (the kernel only asks for inodes
 * we gave it, or a key deleted since). */
const struct tree_node *node_or_reply(fuse_req_t req, const struct tree *t, fuse_ino_t ino)
{
	const struct tree_node *n = tree_node(t, ino);
	if (!n)
		fuse_reply_err(req, ENOENT);
	return n;
}

/* The node of ino in the tree that serves the request now (into *t, held: drop it with
 * drop_tree), or NULL after replying ENOENT, with nothing held. */
const struct tree_node *take_node(fuse_req_t req, struct ggufs *fs, fuse_ino_t ino,
                                  struct tree **t)
{
	if (!fs->edits) {
		*t = fs->tree;
		return node_or_reply(req, *t, ino);
	}
	settle(fs);
	*t = tree_edits_holding(fs->edits, ino);
	if (!*t)
		fuse_reply_err(req, tree_ino_is_model(ino) ? ESTALE : ENOENT);
	return *t ? tree_node(*t, ino) : NULL;
}

/* The directory of ino, or NULL after replying ENOENT or ENOTDIR. */
static const struct tree_node *dir_or_reply(fuse_req_t req, const struct tree *t, fuse_ino_t ino)
{
	const struct tree_node *n = node_or_reply(req, t, ino);
	if (n && !tree_is_dir(n)) {
		fuse_reply_err(req, ENOTDIR);
		return NULL;
	}
	return n;
}

/* Fills st for node n of t: the tree's rule (tree_stat), metadata/ writable with edits. */
void fill_stat(const struct ggufs *fs, const struct tree *t, const struct tree_node *n,
               struct stat *st)
{
	tree_stat(t, n, fs->edits != NULL, st);
}

/* Fills st for scratch file f of metadata/: a file as a key's is (the mount owner's,
 * writable by them), with its own size and time. */
void fill_scratch_stat(const struct ggufs *fs, struct scratch_file *f, struct stat *st)
{
	uint64_t size;
	struct timespec t;
	struct tree_node as_key = { .kind = TREE_META };
	scratch_stat(f, &size, &t);
	memset(st, 0, sizeof *st);
	st->st_ino = scratch_ino(f);
	st->st_mode = tree_mode(&as_key, fs->model->st.st_mode) | S_IWUSR;
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = size ? 1 : 0;
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

/* Reads as large as the kernel allows: max_readahead arrives as the kernel's maximum
 * (128 KiB by default) and is kept, and libfuse already asks for the largest requests
 * (max_pages: 1 MiB). Asynchronous reads keep several in flight; no writeback cache,
 * since nothing is ever written. */
void ggufs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ggufs *fs = userdata;
	/* libfuse refuses the connection unless init repeats -o max_read=N */
	conn->max_read = fs->max_read;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* open(O_TRUNC) of a key starts its text empty, in one request */
	if (fs->edits && (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC))
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* the files an edit changes are opened direct_io (edit_ops.c): without this, the
	 * kernel refuses a shared mapping of them (ENODEV) */
	if (fs->edits && compat_capable(COMPAT_CAP_DIRECT_IO_ALLOW_MMAP))
		compat_want(COMPAT_CAP_DIRECT_IO_ALLOW_MMAP);
	else if (fs->edits && !compat_refused())   /* (else said at the start) */
		evlog(EVLOG_WARNING, NULL, "metadata/, gguf.json and summary.txt map privately "
		      "only (a shared mapping is ENODEV): the kernel does not offer "
		      "FUSE_DIRECT_IO_ALLOW_MMAP (Linux 6.6)");

	passthrough_init(fs);
	pthread_mutex_lock(&fs->init_lock);
	fs->init_seen = true;
	pthread_cond_signal(&fs->init_cond);
	pthread_mutex_unlock(&fs->init_lock);
}

/* A name in a directory: an entry with long timeouts, or a negative entry (ino 0),
 * which the kernel may cache just as long since no name ever appears. */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ggufs *fs = fs_of(req);
	settle(fs);
	struct tree *t = take_tree(fs);
	const struct tree_node *dir = dir_or_reply(req, t, parent);
	if (dir) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.attr_timeout = CACHE_TIMEOUT;
		/* a name that is not there now may be made by an edit: not cached then */
		e.entry_timeout = fs->edits && parent == TREE_METADATA_DIR_INO ? 0 : CACHE_TIMEOUT;
		const struct tree_node *n = tree_lookup(t, parent, name);
		struct scratch_file *f = fs->edits && parent == TREE_METADATA_DIR_INO &&
		                         scratch_is_name(name) ?
		                         scratch_by_name(tree_edits_scratch(fs->edits), name) : NULL;
		if (n && fs->edits && tree_edits_aside(fs->edits, t, n))
			n = NULL;   /* moved aside (tree_edit.h): not there */
		if (f) {
			e.ino = scratch_ino(f);
			e.generation = 1;
			e.attr_timeout = 0;
			fill_scratch_stat(fs, f, &e.attr);
			scratch_drop(f);
		} else if (n) {
			e.ino = n->ino;
			e.generation = 1;
			/* model.gguf is another inode in each edit state (tree_ino.h), and a
			 * rename over a key keeps the key's inode, not the renamed file's: looked
			 * up again at every path walk, so the kernel never keeps a stale one */
			e.entry_timeout = fs->edits && (n->kind == TREE_MODEL ||
			                                parent == TREE_METADATA_DIR_INO) ?
			                  0 : CACHE_TIMEOUT;
			fill_stat(fs, t, n, &e.attr);
		}
		fuse_reply_entry(req, &e);
	}
	drop_tree(fs, t);
}

/* Attributes never change: cached as long as names. An fstat of an open file answers
 * from the tree of its open (the model.gguf of an older edit state is in no other). */
static void getattr_with(fuse_req_t req, fuse_ino_t ino, struct handle *h)
{
	struct ggufs *fs = fs_of(req);
	/* a scratch file's through its open handle (it may be unlinked), else by number;
	 * never cached, as its size changes with every write */
	struct scratch_file *f = h && h->scratch ? NULL : scratch_of(fs, ino);
	if (f || (h && h->scratch)) {
		struct stat st;
		fill_scratch_stat(fs, f ? f : h->scratch, &st);
		scratch_drop(f);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	struct tree *t = NULL;
	const struct tree_node *n = h ? node_or_reply(req, t = tree_hold(h->tree), ino) :
	                            take_node(req, fs, ino, &t);
	if (n) {
		struct stat st;
		fill_stat(fs, t, n, &st);
		if (h && h->writing)
			st.st_size = (off_t)h->text.len;
		fuse_reply_attr(req, &st, CACHE_TIMEOUT);
	}
	if (h)
		tree_release(t);
	else if (n)
		drop_tree(fs, t);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fs_of(req), fi);
	getattr_with(req, ino, h);
	handle_put(fi, h);
}

/* Listings never change, so the kernel may cache them (cache_readdir) and keep the
 * cache across opens. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct tree *t = take_tree(fs);
	const struct tree_node *n = dir_or_reply(req, t, ino);
	if (n) {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
		fuse_reply_open(req, fi);
	}
	drop_tree(fs, t);
}

/* A directory being listed: its tree's children, then, in metadata/ with edits, its
 * scratch files (scratch.h). */
struct dir_of {
	struct ggufs *fs;
	const struct tree *t;
	fuse_ino_t ino;
	uint64_t count;                /* the tree's children */
	struct scratch_set *scratch;   /* or NULL */
	char scratch_name[256];
};

/* Child i of the directory (ctx: struct dir_of), or NULL for one not listed: a key
 * moved aside (its position kept), or a scratch file gone since the count. */
static const char *tree_child(void *ctx, uint64_t i, fuse_ino_t *ino, bool *dir)
{
	struct dir_of *d = ctx;
	if (i >= d->count) {
		uint64_t scratch_ino;
		if (!scratch_entry(d->scratch, i - d->count, d->scratch_name, &scratch_ino))
			return NULL;
		*ino = scratch_ino;
		*dir = false;
		return d->scratch_name;
	}
	const struct tree_node *c = tree_dir_child(d->t, d->ino, i);
	if (d->scratch && tree_edits_aside(d->fs->edits, d->t, c))
		return NULL;
	*ino = c->ino;
	*dir = tree_is_dir(c);
	return c->name;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	struct tree *t = take_tree(fs);
	const struct tree_node *dir = dir_or_reply(req, t, ino);
	if (dir) {
		struct dir_of d = { .fs = fs, .t = t, .ino = ino, .count = tree_dir_count(t, ino) };
		if (fs->edits && ino == TREE_METADATA_DIR_INO)
			d.scratch = tree_edits_scratch(fs->edits);
		uint64_t n = d.count + (d.scratch ? scratch_count(d.scratch) : 0);
		reply_dir(req, size, off, dir->ino, tree_node(t, dir->parent)->ino, n, tree_child, &d);
	}
	drop_tree(fs, t);
}

/* Nothing is allocated per open directory: release is a no-op. */
static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Opens for reading anywhere; with edits, metadata/KEY for writing too (its owner
 * only). Without edits, contents are fixed, so the page cache may be kept across
 * opens; direct_io stays off so that mmap works. With edits each open holds its tree.
 * model.gguf, when it is the model's one local file, is opened with passthrough
 * (passthrough.c): its reads and mappings then never come here. */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct scratch_file *f = scratch_of(fs, ino);
	if (f) {
		open_scratch(req, fs, f, fi);
		return;
	}
	struct tree *t;
	const struct tree_node *n = take_node(req, fs, ino, &t);
	if (!n)
		return;
	bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	if (tree_is_dir(n)) {
		fuse_reply_err(req, EISDIR);
	} else if (write && (!fs->edits || n->kind != TREE_META)) {
		fuse_reply_err(req, EROFS);
	} else if (write && !owner_or_reply(req)) {
	} else {
		open_with_edits(req, fs, t, n, fi, write);
		return;   /* t kept by the handle, or dropped */
	}
	drop_tree(fs, t);
}

/* Raw tensor bytes of a local model, and its model.gguf, are replied straight from the
 * mappings (tree_read_iov): the kernel copies them from the page cache into the reply
 * with no copy through our memory (a pread into a buffer first measured 3x slower
 * cold). False, having replied nothing, when the file is to be read through the tree
 * (rendered, dequantized, remote, or model.gguf in more pieces than one reply takes). */
#define READ_IOV_MAX 256

static bool read_iov(fuse_req_t req, const struct tree *t, const struct tree_node *n,
                     size_t want, uint64_t off)
{
	struct iovec iov[READ_IOV_MAX];
	int count = tree_read_iov(t, n, off, want, iov, READ_IOV_MAX);
	if (count == 0)
		return false;
	if (count == -EIO)
		reply_eio(req, fs_of(req), t, n, off, want);
	else if (count < 0)
		fuse_reply_err(req, -count);
	else
		fuse_reply_iov(req, iov, count);
	return true;
}

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

/* With edits, the tree a fill of the kernel's page cache for ino reads (held: drop it
 * with drop_tree), or NULL for the tree of the open. The files an edit changes are
 * opened direct_io: a read(2) reads the state of its open, but the kernel fills the
 * one page cache of their inode, for any mapping of any open (fs/fuse/file.c
 * fuse_file_mmap drops it at each mmap and each open), through the open that faults.
 * Filled from the state now, it never holds another state's pages than that one,
 * since each edit drops them after making its state current (edit_ops.c invalidate):
 * an old open that keeps faulting cannot bring its state's pages back under a mapping
 * made after. A key gone from the state now is read in the open's. */
static struct tree *fill_tree(struct ggufs *fs, uint64_t ino)
{
	if (!fs->edits || !compat_read_fills_cache())
		return NULL;
	struct tree *now = take_tree(fs);
	const struct tree_node *n = tree_node(now, ino);
	if (n && (n->kind == TREE_META || n->kind == TREE_JSON || n->kind == TREE_SUMMARY))
		return now;
	drop_tree(fs, now);
	return NULL;
}

/* Serves [off, off + size) of any file into a buffer of the request's size: the tree
 * renders or dequantizes only what the range touches (and, for a remote model, fetches
 * only the blocks it needs; the raw bytes of a local tensor go zero-copy). */
static void read_with(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct handle *h)
{
	struct ggufs *fs = fs_of(req);
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (h && h->scratch) {
		char *buf = malloc(size ? size : 1);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fuse_reply_buf(req, buf, (size_t)scratch_read(h->scratch, buf, size, (uint64_t)off));
		free(buf);
		return;
	}
	if (h && h->writing) {   /* a writer reads back its own text */
		pthread_mutex_lock(&h->lock);
		reply_slice(req, edit_text_bytes(&h->text), h->text.len, size, (uint64_t)off);
		pthread_mutex_unlock(&h->lock);
		return;
	}
	if (!h && fs->edits) {   /* every open has one: a read after its release */
		fuse_reply_err(req, EBADF);
		return;
	}
	/* an open file reads the tree of its open; else (no edits) the one tree */
	struct tree *t = h ? h->tree : fs->tree;
	struct tree *now = h ? fill_tree(fs, ino) : NULL;
	const struct tree_node *n = node_or_reply(req, now ? now : t, ino);
	if (n)
		ggufs_read_node(req, fs, now ? now : t, n, size, (uint64_t)off);
	if (now)
		drop_tree(fs, now);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fs_of(req), fi);
	read_with(req, ino, size, off, h);
	handle_put(fi, h);
}

void ggufs_read_node(fuse_req_t req, struct ggufs *fs, const struct tree *t,
                     const struct tree_node *n, size_t size, uint64_t off)
{
	if (off >= n->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
	uint64_t left = n->size - off;
	size_t want = left < size ? (size_t)left : size;
	if (read_iov(req, t, n, want, off))
		return;
	bool owned;
	char *buf = thread_buf_get(&reply_buf, want, &owned);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int64_t r = tree_read(t, n, buf, want, off);
	if (r == -EIO)
		reply_eio(req, fs, t, n, off, want);
	else if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	thread_buf_put(buf, owned);
}

/* Sizes in 4 KiB blocks, nothing free: a view of one file (edits, with -o edits, go to
 * the edits file, not to the file system). */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	const struct ggufs *fs = fs_of(req);
	/* the inode numbers of tree.h: four per tensor (raw, .f32, .npy, stats/) */
	reply_statfs(req, ((uint64_t)fs->model->st.st_size + 4095) / 4096,
	             TREE_FIRST_META + fs->model->meta->n_kv + 4 * fs->model->n_tensors,
	             !fs->edits);
}

/* user.gguf.* values from the tree, the root's user.ggufs.* counters (report.c) and
 * model.gguf's user.ggufs.passthrough, through a buffer of the size asked for. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ggufs *fs = fs_of(req);
	struct scratch_file *f = scratch_of(fs, ino);
	if (f) {   /* a scratch file has no attributes (vim copies a backup's to the new file) */
		scratch_drop(f);
		fuse_reply_err(req, ENODATA);
		return;
	}
	struct tree *t;
	const struct tree_node *n = take_node(req, fs, ino, &t);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
	} else {
		int64_t r = n->kind == TREE_ROOT ? counters_get(fs, name, buf, size) : -ENOENT;
		if (n->kind == TREE_MODEL && strcmp(name, PASSTHROUGH_XATTR) == 0)
			r = passthrough_xattr(fs, t, buf, size);
		if (r == -ENOENT)
			r = tree_getxattr(t, n, name, buf, size);
		reply_xattr(req, r, buf, size);
	}
	free(buf);
	drop_tree(fs, t);
}

/* The NUL-separated names of a node's attributes, from the tree. */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ggufs *fs = fs_of(req);
	struct scratch_file *f = scratch_of(fs, ino);
	if (f) {
		scratch_drop(f);
		reply_xattr(req, 0, NULL, size);
		return;
	}
	struct tree *t;
	const struct tree_node *n = take_node(req, fs, ino, &t);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		drop_tree(fs, t);
		return;
	}
	int64_t r = tree_listxattr(t, n, buf, size);
	if (r >= 0 && (n->kind == TREE_ROOT || n->kind == TREE_MODEL)) {
		/* the counters, or model.gguf's passthrough, after the tree's own */
		int64_t c = n->kind == TREE_MODEL ? (int64_t)sizeof PASSTHROUGH_XATTR
		                                  : counters_list(fs_of(req), NULL, 0);
		if (size && (uint64_t)(r + c) > size)
			r = -ERANGE;
		else if (size && n->kind == TREE_MODEL)
			memcpy(buf + r, PASSTHROUGH_XATTR, sizeof PASSTHROUGH_XATTR);
		else if (size)
			counters_list(fs_of(req), buf + r, size - (size_t)r);
		if (r >= 0)
			r += c;
	}
	reply_xattr(req, r, buf, size);
	free(buf);
	drop_tree(fs, t);
}

const struct fuse_lowlevel_ops ggufs_ops = {
	.init = ggufs_op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
};
