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

#include "ggufs.h"
#include "handle_table.h"

#define CACHE_TIMEOUT 86400.0

static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* What an open file or directory keeps: its node (a model's held built), and a plain
 * file's source handle, a table's text, or a folder's listing. */
struct lib_handle {
	uint64_t id;            /* what fi->fh holds for an open file (open_files) */
	struct lib_ref ref;
	void *file;
	char *text;
	size_t len;
	struct lib_list_entry *list;
	size_t n_list;
	bool passthrough;       /* a model.gguf open handed to the kernel (passthrough.c) */
};

/* The open files, by id (handle_table.h): the kernel may still be answering a read of a
 * file (async direct I/O, read-ahead) when its release arrives on another thread, and a
 * model's file must keep its tree, and a table its text, until that read is answered. A
 * read that comes after the release finds nothing: EBADF, to a reader gone. */
static struct handle_table open_files = HANDLE_TABLE_INIT;

/* Registers h: its id into h->id, or false out of memory. */
static bool files_add(struct lib_handle *h)
{
	h->id = handle_table_add(&open_files, h);
	return h->id != 0;
}

/* The handle of id, held for a read (files_drop lets go), or NULL once released. */
static struct lib_handle *files_take(uint64_t id)
{
	return handle_table_take(&open_files, id);
}

/* Drops one hold of h (release: the open's, too): true when it was the last, and h is
 * out of the table for the caller to free. */
static bool files_drop(struct lib_handle *h, bool release)
{
	return handle_table_drop(&open_files, h->id, release);
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

/* The node of ino into *r (let go with library_put), or false after replying the error. */
static bool get_or_reply(fuse_req_t req, struct ggufs *fs, fuse_ino_t ino, struct lib_ref *r)
{
	int ret = library_get(fs->library, ino, false, r);
	if (ret < 0)
		fuse_reply_err(req, -ret);
	return ret == 0;
}

/* For compare/OTHER: its length, computed by its first lookup (st_size is exact, as
 * every file's): true, or false after replying the error (an EIO counted with its
 * cause, as a read's). */
static bool compare_sized(fuse_req_t req, struct ggufs *fs, struct lib_ref *r)
{
	if (r->kind != LIB_COMPARE)
		return true;
	char err[GGUF_ERR_MAX] = "";
	uint64_t size;
	const int ret = library_compare_size(fs->library, r, &size, err);
	if (ret == 0)
		return true;
	library_put(fs->library, r);
	if (ret == -EIO)
		report_eio(fs, err);
	fuse_reply_err(req, -ret);
	return false;
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
	if (!compare_sized(req, fs, &r))
		return;
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
	if (!get_or_reply(req, fs, ino, &r) || !compare_sized(req, fs, &r))
		return;
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

/* Child i of the directory open as h (a struct lib_handle): a model's from its tree
 * (library_tree_dir_entry), a folder's from the listing made at its open. */
static const char *handle_child(void *ctx, uint64_t i, fuse_ino_t *ino, bool *dir)
{
	const struct lib_handle *h = ctx;
	if (h->ref.kind == LIB_TREE) {
		const char *name;
		uint64_t child;
		library_tree_dir_entry(&h->ref, i, &name, &child, dir);
		*ino = child;
		return name;
	}
	*ino = h->list[i].ino;
	*dir = h->list[i].dir;
	return h->list[i].name;
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	struct lib_handle *h = (struct lib_handle *)(uintptr_t)fi->fh;
	const struct lib_ref *r = &h->ref;
	uint64_t count = r->kind == LIB_TREE ? library_tree_dir_count(r) : h->n_list;
	reply_dir(req, size, off, ino, library_parent(r), count, handle_child, h);
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
		char err[GGUF_ERR_MAX] = "";
		int64_t r = !buf                       ? -ENOMEM
		            : h->ref.kind == LIB_PLAIN ? library_file_read(fs->library, h->file, buf,
		                                                           size, off)
		                                       : library_compare_read(fs->library, &h->ref,
		                                                              buf, size, off, err);
		if (r == -EIO && h->ref.kind == LIB_COMPARE)
			report_eio(fs, err);
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
	reply_statfs(req, 0, 0, true);
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
		int n = snprintf(text, sizeof text, "%llu", (unsigned long long)v[i]);
		return xattr_value(buf, size, text, (size_t)n);
	}
	int64_t r = counters_get(fs, name, buf, size);
	return r == -ENOENT ? -ENODATA : r;
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

/* getxattr of name, or listxattr when name is NULL: a model's user.gguf.* from its tree
 * (as `ggufs FILE` shows them) and model.gguf's user.ggufs.passthrough, the root's
 * user.ggufs.* counters; nothing on folders and plain files. */
static void reply_attrs(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct ggufs *fs = fs_of(req);
	struct lib_ref r;
	if (!get_or_reply(req, fs, ino, &r))
		return;
	char *buf = size ? malloc(size) : NULL;
	int64_t x = name ? -ENODATA : 0;
	if (size && !buf)
		x = -ENOMEM;
	else if (r.kind == LIB_TREE && r.node->kind == TREE_MODEL && name &&
	         strcmp(name, PASSTHROUGH_XATTR) == 0)
		x = passthrough_xattr(fs, r.tree, ino, buf, size);
	else if (r.kind == LIB_TREE)
		x = name ? tree_getxattr(r.tree, r.node, name, buf, size)
		         : model_listxattr(&r, buf, size);
	else if (ino == LIB_ROOT_INO)
		x = name ? root_get(fs, name, buf, size) : root_list(fs, buf, size);
	reply_xattr(req, x, buf, size);
	free(buf);
	library_put(fs->library, &r);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	reply_attrs(req, ino, name, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	reply_attrs(req, ino, NULL, size);
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
