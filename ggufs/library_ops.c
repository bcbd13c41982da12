/* The FUSE low-level operations of a library mount: each asks lib/7-library for the
 * node of an inode or a name and replies; the reads of a model's files are ops.c's.
 *
 * What the kernel may cache: inside a model directory everything, as for one model (a
 * slot's version never changes); the names of library folders never, since the folder
 * they follow may change at any time, and the attributes of folders and of models.tsv
 * and models.json never either. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "ggufs.h"

#define CACHE_TIMEOUT 86400.0

static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* What an open file or directory keeps: its node (a model's held built), and a plain
 * file's source handle, a table's text, or a folder's listing. */
struct lib_handle {
	uint64_t id;            /* what fi->fh holds for an open file (open_files) */
	unsigned refs;          /* the open, and each read in progress */
	bool released;
	struct lib_ref ref;
	void *file;
	char *text;
	size_t len;
	struct lib_list_entry *list;
	size_t n_list;
	bool passthrough;       /* a model.gguf open handed to the kernel (passthrough.c) */
};

/* The open files, by id. The kernel may still be answering a read of a file (async
 * direct I/O, read-ahead) when its release arrives on another thread, and a model's
 * file must keep its tree, and a table its text, until that read is answered: so a
 * read finds its handle here and holds it, and the release frees it only once no read
 * holds it (a read that comes after it finds nothing: EBADF, to a reader gone). */
static struct {
	pthread_mutex_t lock;
	struct lib_handle **slots;
	size_t cap;
	uint32_t generation;
} open_files = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Registers h: its id into h->id, or false out of memory. */
static bool files_add(struct lib_handle *h)
{
	pthread_mutex_lock(&open_files.lock);
	size_t i = 0;
	while (i < open_files.cap && open_files.slots[i])
		i++;
	if (i == open_files.cap) {
		size_t cap = open_files.cap ? 2 * open_files.cap : 64;
		struct lib_handle **s = realloc(open_files.slots, cap * sizeof *s);
		if (!s) {
			pthread_mutex_unlock(&open_files.lock);
			return false;
		}
		memset(s + open_files.cap, 0, (cap - open_files.cap) * sizeof *s);
		open_files.slots = s;
		open_files.cap = cap;
	}
	open_files.slots[i] = h;
	h->id = (uint64_t)++open_files.generation << 32 | i;
	h->refs = 1;
	pthread_mutex_unlock(&open_files.lock);
	return true;
}

/* The handle of id, held for a read (files_drop lets go), or NULL once released. */
static struct lib_handle *files_take(uint64_t id)
{
	pthread_mutex_lock(&open_files.lock);
	size_t i = (size_t)(id & 0xffffffffu);
	struct lib_handle *h = i < open_files.cap ? open_files.slots[i] : NULL;
	if (h && (h->id != id || h->released))
		h = NULL;
	if (h)
		h->refs++;
	pthread_mutex_unlock(&open_files.lock);
	return h;
}

/* Drops one hold of h (release: the open's, too): true when it was the last, and h is
 * out of the table for the caller to free. */
static bool files_drop(struct lib_handle *h, bool release)
{
	pthread_mutex_lock(&open_files.lock);
	if (release)
		h->released = true;
	bool last = --h->refs == 0;
	if (last)
		open_files.slots[h->id & 0xffffffffu] = NULL;
	pthread_mutex_unlock(&open_files.lock);
	return last;
}

/* True for the nodes whose attributes never change for their number. */
static bool attr_fixed(const struct lib_ref *r)
{
	return r->kind != LIB_FOLDER && r->kind != LIB_TSV && r->kind != LIB_JSON;
}

/* True for the nodes inside a model directory whose names never change either (the
 * names in compare/ follow the folder). */
static bool inside_model(const struct lib_ref *r)
{
	return (r->kind == LIB_TREE && r->node->ino != TREE_ROOT_INO) || r->kind == LIB_ERROR ||
	       r->kind == LIB_COMPARE_DIR;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ggufs *fs = fs_of(req);
	struct lib_ref r;
	int ret = library_lookup(fs->library, parent, name, &r);
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	if (ret == -ENOENT) {
		fuse_reply_entry(req, &e);   /* a negative entry, not cached */
		return;
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	e.ino = r.ino;
	e.generation = 1;
	library_stat(fs->library, &r, &e.attr);
	e.attr_timeout = attr_fixed(&r) ? CACHE_TIMEOUT : 0;
	e.entry_timeout = inside_model(&r) ? CACHE_TIMEOUT : 0;
	library_put(fs->library, &r);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	struct lib_ref r;
	int ret = library_get(fs->library, ino, false, &r);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	struct stat st;
	library_stat(fs->library, &r, &st);
	library_put(fs->library, &r);
	fuse_reply_attr(req, &st, attr_fixed(&r) ? CACHE_TIMEOUT : 0);
}

/* Frees h and lets go of its node. */
static void handle_free(struct ggufs *fs, struct lib_handle *h)
{
	if (!h)
		return;
	if (h->passthrough)   /* its backing id may go with the inode's last open */
		passthrough_release(fs, h->ref.ino);
	if (h->file)
		library_file_close(fs->library, h->file);
	library_put(fs->library, &h->ref);
	library_list_free(h->list, h->n_list);
	free(h->text);
	free(h);
}

/* A model's directories list from its tree, and may be cached as one model's are; a
 * library folder's listing is read from the source at each open. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct lib_handle *h = calloc(1, sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int ret = library_get(fs->library, ino, true, &h->ref);
	if (ret == 0 && h->ref.kind == LIB_TREE && !tree_is_dir(h->ref.node))
		ret = -ENOTDIR;
	else if (ret == 0 && h->ref.kind != LIB_TREE)
		ret = library_list(fs->library, &h->ref, &h->list, &h->n_list);
	if (ret < 0) {
		handle_free(fs, h);
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->cache_readdir = fi->keep_cache = h->ref.kind == LIB_TREE;
	if (fuse_reply_open(req, fi) != 0)
		handle_free(fs, h);
}

/* The stream offset of an entry is its position: 0 ".", 1 "..", 2 + i child i. */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	struct lib_handle *h = (struct lib_handle *)(uintptr_t)fi->fh;
	const struct lib_ref *r = &h->ref;
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t count = r->kind == LIB_TREE ? library_tree_dir_count(r) : h->n_list;
	size_t used = 0;
	for (uint64_t pos = off < 0 ? 0 : (uint64_t)off; pos < count + 2; pos++) {
		struct stat st;
		memset(&st, 0, sizeof st);
		const char *name;
		if (pos < 2) {
			name = pos == 0 ? "." : "..";
			st.st_ino = pos == 0 ? ino : library_parent(r);
			st.st_mode = S_IFDIR;
		} else if (r->kind == LIB_TREE) {
			uint64_t child;
			bool dir;
			library_tree_dir_entry(r, pos - 2, &name, &child, &dir);
			st.st_ino = child;
			st.st_mode = dir ? S_IFDIR : S_IFREG;
		} else {
			const struct lib_list_entry *c = &h->list[pos - 2];
			name = c->name;
			st.st_ino = c->ino;
			st.st_mode = c->dir ? S_IFDIR : S_IFREG;
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

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(fs_of(req), (struct lib_handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Opens for reading only. A model's file holds its model built until released; a
 * plain file is opened in the source (a replaced one keeps the version it opened);
 * models.tsv and models.json are made whole here, read past the page cache; compare/
 * files are made by their first read, also past the page cache (their size, 0, is not
 * theirs). */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	struct lib_handle *h = calloc(1, sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int ret = library_get(fs->library, ino, true, &h->ref);
	enum lib_kind k = h->ref.kind;
	if (ret == 0) {
		if (k == LIB_FOLDER || k == LIB_BROKEN || k == LIB_COMPARE_DIR ||
		    (k == LIB_TREE && tree_is_dir(h->ref.node)))
			ret = -EISDIR;
		else if (k == LIB_PLAIN)
			ret = library_file_open(fs->library, &h->ref, &h->file);
		else if (k == LIB_TSV || k == LIB_JSON)
			ret = library_table(fs->library, k == LIB_JSON, &h->text, &h->len);
	}
	if (ret < 0) {
		handle_free(fs, h);
		fuse_reply_err(req, -ret);
		return;
	}
	if (!files_add(h)) {
		handle_free(fs, h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = h->id;
	fi->direct_io = k == LIB_TSV || k == LIB_JSON || k == LIB_COMPARE;
	fi->keep_cache = !fi->direct_io;
	/* model.gguf that is its model's one local file goes to the kernel with that file;
	 * the reply must follow at once (passthrough.c rewrites it) */
	if (k == LIB_TREE && h->ref.node->kind == TREE_MODEL)
		h->passthrough = passthrough_open_ino(fs, ino, h->ref.tree, fi->flags & O_DIRECT);
	if (fuse_reply_open(req, fi) != 0 && files_drop(h, true))
		handle_free(fs, h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct lib_handle *h = files_take(fi->fh);
	if (h) {
		files_drop(h, false);   /* the take's */
		if (files_drop(h, true))
			handle_free(fs_of(req), h);
	}
	fuse_reply_err(req, 0);
}

/* [off, off + len) of text (of n bytes): replied. */
static void reply_slice(fuse_req_t req, const char *text, size_t n, size_t size, uint64_t off)
{
	if (!text || off >= n)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_buf(req, text + off, n - off < size ? (size_t)(n - off) : size);
}

static void read_handle(fuse_req_t req, struct ggufs *fs, struct lib_handle *h, size_t size,
                        uint64_t off);

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	(void)ino;
	struct ggufs *fs = fs_of(req);
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct lib_handle *h = files_take(fi->fh);
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	read_handle(req, fs, h, size, (uint64_t)off);
	if (files_drop(h, false))
		handle_free(fs, h);
}

/* Replies to a read of [off, off + size) of the file open as h. */
static void read_handle(fuse_req_t req, struct ggufs *fs, struct lib_handle *h, size_t size,
                        uint64_t off)
{
	switch (h->ref.kind) {
	case LIB_TREE:
		ggufs_read_node(req, fs, h->ref.tree, h->ref.node, size, off);
		return;
	case LIB_TSV:
	case LIB_JSON:
		reply_slice(req, h->text, h->len, size, off);
		return;
	case LIB_ERROR: {
		const char *text = library_error_text(&h->ref);
		reply_slice(req, text, text ? strlen(text) : 0, size, off);
		return;
	}
	case LIB_PLAIN:
	case LIB_COMPARE: {
		char *buf = malloc(size ? size : 1);
		int64_t r = !buf                       ? -ENOMEM
		            : h->ref.kind == LIB_PLAIN ? library_file_read(fs->library, h->file, buf,
		                                                           size, off)
		                                       : library_compare_read(fs->library, &h->ref,
		                                                              buf, size, off);
		if (r < 0)
			fuse_reply_err(req, (int)-r);
		else
			fuse_reply_buf(req, buf, (size_t)r);
		free(buf);
		return;
	}
	default:
		fuse_reply_err(req, EISDIR);
	}
}

/* A read-only file system of no fixed size. */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* The root's own counters beside the mount's: models opened so far, built now. */
static const char *const lib_counter[] = { "user.ggufs.models_opened", "user.ggufs.models_built" };

static int64_t root_list(struct ggufs *fs, char *buf, size_t size)
{
	int64_t c = counters_list(fs, NULL, 0);
	size_t need = (size_t)c;
	for (size_t i = 0; i < 2; i++)
		need += strlen(lib_counter[i]) + 1;
	if (!size)
		return (int64_t)need;
	if (need > size)
		return -ERANGE;
	counters_list(fs, buf, size);
	size_t at = (size_t)c;
	for (size_t i = 0; i < 2; i++) {
		memcpy(buf + at, lib_counter[i], strlen(lib_counter[i]) + 1);
		at += strlen(lib_counter[i]) + 1;
	}
	return (int64_t)need;
}

static int64_t root_get(struct ggufs *fs, const char *name, char *buf, size_t size)
{
	for (size_t i = 0; i < 2; i++) {
		if (strcmp(name, lib_counter[i]) != 0)
			continue;
		uint64_t v[2];
		library_counts(fs->library, &v[0], &v[1]);
		char text[24];
		size_t n = (size_t)snprintf(text, sizeof text, "%llu", (unsigned long long)v[i]);
		if (size && n > size)
			return -ERANGE;
		if (size)
			memcpy(buf, text, n);
		return (int64_t)n;
	}
	int64_t r = counters_get(fs, name, buf, size);
	return r == -ENOENT ? -ENODATA : r;
}

static void reply_xattr(fuse_req_t req, int64_t r, const char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

/* A model's user.gguf.* from its tree (as `ggufs FILE` shows them) and model.gguf's
 * user.ggufs.passthrough, the root's user.ggufs.* counters; nothing on folders and
 * plain files. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ggufs *fs = fs_of(req);
	struct lib_ref r;
	int ret = library_get(fs->library, ino, false, &r);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	char *buf = size ? malloc(size) : NULL;
	int64_t x = -ENODATA;
	if (size && !buf)
		x = -ENOMEM;
	else if (r.kind == LIB_TREE && r.node->kind == TREE_MODEL &&
	         strcmp(name, PASSTHROUGH_XATTR) == 0)
		x = passthrough_xattr(fs, r.tree, ino, buf, size);
	else if (r.kind == LIB_TREE)
		x = tree_getxattr(r.tree, r.node, name, buf, size);
	else if (ino == LIB_ROOT_INO)
		x = root_get(fs, name, buf, size);
	reply_xattr(req, x, buf, size);
	free(buf);
	library_put(fs->library, &r);
}

/* The names of a model node's attributes: the tree's, and model.gguf's passthrough
 * after them. */
static int64_t model_listxattr(const struct lib_ref *r, char *buf, size_t size)
{
	int64_t x = tree_listxattr(r->tree, r->node, buf, size);
	if (x < 0 || r->node->kind != TREE_MODEL)
		return x;
	if (size && (uint64_t)x + sizeof PASSTHROUGH_XATTR > size)
		return -ERANGE;
	if (size)
		memcpy(buf + x, PASSTHROUGH_XATTR, sizeof PASSTHROUGH_XATTR);
	return x + (int64_t)sizeof PASSTHROUGH_XATTR;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct ggufs *fs = fs_of(req);
	struct lib_ref r;
	int ret = library_get(fs->library, ino, false, &r);
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	char *buf = size ? malloc(size) : NULL;
	int64_t x = 0;
	if (size && !buf)
		x = -ENOMEM;
	else if (r.kind == LIB_TREE)
		x = model_listxattr(&r, buf, size);
	else if (ino == LIB_ROOT_INO)
		x = root_list(fs, buf, size);
	reply_xattr(req, x, buf, size);
	free(buf);
	library_put(fs->library, &r);
}

const struct fuse_lowlevel_ops library_ops = {
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
