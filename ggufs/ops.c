/* The FUSE low-level operations: each translates one request into a lookup or a read
 * of the tree built at mount, and replies. Modelled on libfuse's example/hello_ll.c
 * and squashfuse's front end. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "ggufs.h"

/* Nothing under a mount ever changes, so the kernel may cache names and attributes
 * for as long as it likes. */
#define CACHE_TIMEOUT 86400.0

/* The mounted model and its tree, as given to fuse_session_new. */
static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino, or NULL after replying ENOENT (the kernel only asks for inodes we
 * gave it, so this is a guard, not a path). */
static const struct tree_node *node_or_reply(fuse_req_t req, fuse_ino_t ino)
{
	const struct tree_node *n = tree_node(fs_of(req)->tree, ino);
	if (!n)
		fuse_reply_err(req, ENOENT);
	return n;
}

/* The directory of ino, or NULL after replying ENOENT or ENOTDIR. */
static const struct tree_node *dir_or_reply(fuse_req_t req, fuse_ino_t ino)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (n && !tree_is_dir(n)) {
		fuse_reply_err(req, ENOTDIR);
		return NULL;
	}
	return n;
}

/* Fills st for node n: sizes from the tree, owner and times from the model file. */
static void fill_stat(const struct ggufs *fs, const struct tree_node *n, struct stat *st)
{
	const struct stat *gs = &fs->model->st;

	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_mode = tree_mode(n, gs->st_mode);
	st->st_nlink = tree_is_dir(n) ? 2 : 1;
	st->st_uid = gs->st_uid;
	st->st_gid = gs->st_gid;
	st->st_size = (off_t)n->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_atim = gs->st_atim;
	st->st_mtim = gs->st_mtim;
	st->st_ctim = gs->st_ctim;
}

/* Reads as large as the kernel allows: max_readahead arrives as the kernel's maximum
 * (128 KiB by default) and is kept, and libfuse already asks for the largest requests
 * (max_pages: 1 MiB). Asynchronous reads keep several in flight; no writeback cache,
 * since nothing is ever written. */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ggufs *fs = userdata;
	/* libfuse refuses the connection unless init repeats -o max_read=N */
	conn->max_read = fs->max_read;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;

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
	const struct tree_node *dir = dir_or_reply(req, parent);
	if (!dir)
		return;

	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.attr_timeout = CACHE_TIMEOUT;
	e.entry_timeout = CACHE_TIMEOUT;
	const struct tree_node *n = tree_lookup(fs->tree, parent, name);
	if (n) {
		e.ino = n->ino;
		e.generation = 1;
		fill_stat(fs, n, &e.attr);
	}
	fuse_reply_entry(req, &e);
}

/* Attributes never change: cached as long as names. */
static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	struct stat st;
	fill_stat(fs_of(req), n, &st);
	fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

/* Listings never change, so the kernel may cache them (cache_readdir) and keep the
 * cache across opens. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct tree_node *n = dir_or_reply(req, ino);
	if (!n)
		return;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* The stream offset of an entry is its position: 0 ".", 1 "..", 2 + i child i. Each
 * call starts where the last one stopped, so a large directory costs O(entries). */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	const struct tree_node *dir = dir_or_reply(req, ino);
	if (!dir)
		return;

	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t count = tree_dir_count(fs->tree, ino);
	size_t used = 0;
	for (uint64_t pos = off < 0 ? 0 : (uint64_t)off; pos < count + 2; pos++) {
		struct stat st;
		memset(&st, 0, sizeof st);
		const char *name;
		if (pos < 2) {
			const struct tree_node *d = pos == 0 ? dir : tree_node(fs->tree, dir->parent);
			name = pos == 0 ? "." : "..";
			st.st_ino = d->ino;
			st.st_mode = S_IFDIR;
		} else {
			const struct tree_node *c = tree_dir_child(fs->tree, ino, pos - 2);
			name = c->name;
			st.st_ino = c->ino;
			st.st_mode = tree_is_dir(c) ? S_IFDIR : S_IFREG;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
		                                (off_t)(pos + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* Nothing is allocated per open directory or file: release is a no-op. */
static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Read-only opens only. Contents are fixed, so the page cache may be kept across
 * opens; direct_io stays off so that mmap works. */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	if (tree_is_dir(n)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fi->direct_io = 0;
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Raw tensor bytes are replied straight from the model's mapping: the kernel copies
 * them from the page cache into the reply with no copy through our memory (a pread
 * into a buffer first measured 3x slower cold). The span is checked against the file's
 * current size first; should the file still shrink before the kernel copies, that copy
 * fails inside the kernel, which answers the reader EIO: the daemon never touches the
 * gone pages itself, so never gets SIGBUS. */
static void read_raw(fuse_req_t req, const struct tree_node *n, size_t want, uint64_t off)
{
	struct ggufs *fs = fs_of(req);
	int fd;
	uint64_t file_off, count;
	if (!tree_raw_span(fs->tree, n, off, want, &fd, &file_off, &count) || count < want) {
		reply_eio(req, fs, n, off, want);
		return;
	}
	fuse_reply_buf(req, (const char *)model_tensor_data(fs->model, n->index) + off, want);
}

/* model.gguf of a local model, replied as read_raw replies a tensor: from the header in
 * memory, zeros and the shards' mappings, which the kernel copies from (a copy through
 * a buffer first would cost what it costs raw tensor files). False, having replied
 * nothing, when the range needs more pieces than one reply takes (tiny tensors) or the
 * model is remote: the caller then reads it through the tree. */
#define MODEL_IOV_MAX 256

static bool read_model_iov(fuse_req_t req, const struct tree_node *n, size_t want, uint64_t off)
{
	struct iovec iov[MODEL_IOV_MAX];
	int count = tree_model_iov(fs_of(req)->tree, n, off, want, iov, MODEL_IOV_MAX);
	if (count == 0)
		return false;
	if (count == -EIO)
		reply_eio(req, fs_of(req), n, off, want);
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
#define REPLY_BUF_SIZE (1u << 20)
#define HUGE_PAGE_SIZE (2u << 20)

static pthread_key_t reply_buf_key;
static pthread_once_t reply_buf_once = PTHREAD_ONCE_INIT;

static void reply_buf_key_init(void)
{
	if (pthread_key_create(&reply_buf_key, free) != 0)
		abort();
}

/* A buffer of size bytes: the thread's own (release_buffer does nothing to it) or, for
 * an oversized request, a malloc'ed one. NULL when out of memory. */
static char *reply_buffer(size_t size)
{
	if (size > REPLY_BUF_SIZE)
		return malloc(size);
	pthread_once(&reply_buf_once, reply_buf_key_init);
	char *buf = pthread_getspecific(reply_buf_key);
	if (!buf) {
		void *p;
		if (posix_memalign(&p, HUGE_PAGE_SIZE, HUGE_PAGE_SIZE) != 0)
			return NULL;
		madvise(p, HUGE_PAGE_SIZE, MADV_HUGEPAGE);   /* a hint: fine if refused */
		buf = p;
		if (pthread_setspecific(reply_buf_key, buf) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

static void release_buffer(char *buf, size_t size)
{
	if (size > REPLY_BUF_SIZE)
		free(buf);
}

/* Serves [off, off + size) of any file into a buffer of the request's size: the tree
 * renders or dequantizes only what the range touches (and, for a remote model, fetches
 * only the blocks it needs; the raw bytes of a local tensor go zero-copy). */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= n->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	atomic_fetch_add_explicit(&fs->reads, 1, memory_order_relaxed);
	uint64_t left = n->size - (uint64_t)off;
	size_t want = left < size ? (size_t)left : size;
	if (n->kind == TREE_RAW && !model_tensor_remote(fs->model, n->index)) {
		read_raw(req, n, want, (uint64_t)off);
		return;
	}
	if (n->kind == TREE_MODEL && read_model_iov(req, n, want, (uint64_t)off))
		return;
	char *buf = reply_buffer(want);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int64_t r = tree_read(fs->tree, n, buf, want, (uint64_t)off);
	if (r == -EIO)
		reply_eio(req, fs, n, (uint64_t)off, want);
	else if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	release_buffer(buf, want);
}

/* Sizes in 4 KiB blocks, nothing free: this is a read-only view of one file. */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)(((uint64_t)fs_of(req)->model->st.st_size + 4095) / 4096);
	/* the inode numbers of tree.h: four per tensor (raw, .f32, .npy, stats/) */
	sv.f_files = TREE_FIRST_META + fs_of(req)->model->meta->n_kv +
	             4 * fs_of(req)->model->n_tensors;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* Replies to an xattr call from the tree's result: the size for a size-0 query, the
 * bytes otherwise, or the (negative) errno. */
static void reply_xattr(fuse_req_t req, int64_t r, const char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

/* user.gguf.* values from the tree, and the root's user.ggufs.* counters (report.c),
 * through a buffer of the size asked for. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int64_t r = n->kind == TREE_ROOT ? counters_get(fs_of(req), name, buf, size) : -ENOENT;
	if (r == -ENOENT)
		r = tree_getxattr(fs_of(req)->tree, n, name, buf, size);
	reply_xattr(req, r, buf, size);
	free(buf);
}

/* The NUL-separated names of a node's attributes, from the tree. */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int64_t r = tree_listxattr(fs_of(req)->tree, n, buf, size);
	if (r >= 0 && n->kind == TREE_ROOT) {   /* the counters after the tree's own */
		int64_t c = counters_list(fs_of(req), NULL, 0);
		if (size && (uint64_t)(r + c) > size)
			r = -ERANGE;
		else if (size)
			counters_list(fs_of(req), buf + r, size - (size_t)r);
		if (r >= 0)
			r += c;
	}
	reply_xattr(req, r, buf, size);
	free(buf);
}

/* Every operation that would change the tree: EROFS. The mount is also "ro", so the
 * kernel answers most of these itself; these are for the ones that reach us anyway. */
static void erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	erofs(req);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	erofs(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	erofs(req);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	erofs(req);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	erofs(req);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	erofs(req);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	erofs(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	erofs(req);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	erofs(req);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	erofs(req);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	erofs(req);
}

const struct fuse_lowlevel_ops ggufs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
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
