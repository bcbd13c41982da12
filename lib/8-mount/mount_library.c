/* A library's mount (mount.h over lib/7-library): each call asks the library for the
 * node of an inode or a name; a model's files are read as a single mount's are
 * (mount_read_tree).
 *
 * What the kernel may cache: inside a model directory everything, as for one model (a
 * slot's version never changes); the names of library folders never, since the folder
 * they follow may change at any time, and the attributes of folders and of models.tsv
 * and models.json never either. Every number a lookup gives the kernel holds its slot
 * until the kernel forgets it (library_kernel_hold, library_forget). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "library.h"
#include "mount_impl.h"

/* What an open file or directory keeps: its node (a model's held built), and a plain
 * file's source handle, a table's text, or a folder's listing. */
struct lib_file {
	struct lib_ref ref;
	void *file;
	char *text;
	size_t len;
	struct lib_list_entry *list;
	size_t n_list;
};

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

/* For compare/OTHER: its length, computed by its first lookup (st_size is exact, as
 * every file's): true, or false with the error (an EIO counted with its cause, as a
 * read's), r let go. */
static bool compare_sized(struct mount *m, struct lib_ref *r, struct mount_err *err)
{
	if (r->kind != LIB_COMPARE)
		return true;
	char why[GGUF_ERR_MAX] = "";
	uint64_t size;
	const int ret = library_compare_size(m->library, r, &size, why);
	if (ret == 0)
		return true;
	library_put(m->library, r);
	if (ret == -EIO)
		mount_counted_eio_said(&m->counters, why, err);
	else
		mount_fail(err, -ret);
	return false;
}

/* -ret into err when ret < 0: true when ret is 0. */
static bool ok_or_fail(int ret, struct mount_err *err)
{
	return ret == 0 || mount_fail(err, -ret);
}

static bool lib_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                       struct mount_err *err)
{
	struct lib_ref r;
	int ret = library_lookup(m->library, parent, name, &r);
	if (ret == -ENOENT)
		return true;   /* a negative entry, not cached */
	if (ret < 0)
		return mount_fail(err, -ret);
	if (!compare_sized(m, &r, err))
		return false;
	e->ino = r.ino;
	library_stat(m->library, &r, &e->attr);
	e->attr_ttl = attr_fixed(&r) ? MOUNT_TTL_FOREVER : 0;
	e->entry_ttl = inside_model(&r) ? MOUNT_TTL_FOREVER : 0;
	library_kernel_hold(m->library, &r);   /* until the kernel forgets it */
	library_put(m->library, &r);
	return true;
}

/* The kernel forgot n lookups of ino: the holds lib_lookup took for them let go. */
static void lib_forget(struct mount *m, uint64_t ino, uint64_t n)
{
	library_forget(m->library, ino, n);
}

static bool lib_getattr(struct mount *m, uint64_t ino, void *file, struct stat *st, double *ttl,
                        struct mount_err *err)
{
	(void)file;
	struct lib_ref r;
	if (!ok_or_fail(library_get(m->library, ino, false, &r), err) ||
	    !compare_sized(m, &r, err))
		return false;
	library_stat(m->library, &r, st);
	*ttl = attr_fixed(&r) ? MOUNT_TTL_FOREVER : 0;
	library_put(m->library, &r);
	return true;
}

static void lib_file_free(struct mount *m, void *file)
{
	struct lib_file *h = file;
	if (!h)
		return;
	if (h->file)
		library_file_close(m->library, h->file);
	library_put(m->library, &h->ref);
	library_list_free(m->library, h->list, h->n_list);
	free(h->text);
	free(h);
}

/* A directory: a model's lists from its tree, and may be cached as one model's is; a
 * library folder's listing is read from the source at each open. */
static int open_dir(struct mount *m, struct lib_file *h, struct mount_open *o)
{
	if (h->ref.kind == LIB_TREE && !tree_is_dir(h->ref.node))
		return -ENOTDIR;
	int ret = h->ref.kind == LIB_TREE ? 0 : library_list(m->library, &h->ref, &h->list,
	                                                     &h->n_list);
	o->cache_readdir = o->keep_cache = h->ref.kind == LIB_TREE;
	return ret;
}

/* A file (opened for reading: lib_open refused the rest). A model's file holds its
 * model built until released; a plain file is opened in the source (a replaced one
 * keeps the version it opened); models.tsv and models.json are made whole here, read
 * past the page cache, and so are compare/ files; a quant file of a model changed since
 * it was built keeps none of its pages (tree_quants_changed). model.gguf tells the
 * front end its file, which the kernel may read itself. why: a plain file's EIO's
 * cause. */
static int open_file(struct mount *m, struct lib_file *h, struct mount_open *o,
                     char why[GGUF_ERR_MAX])
{
	enum lib_kind k = h->ref.kind;
	int ret = 0;
	if (k == LIB_FOLDER || k == LIB_BROKEN || k == LIB_COMPARE_DIR ||
	    (k == LIB_TREE && tree_is_dir(h->ref.node)))
		ret = -EISDIR;
	else if (k == LIB_PLAIN)
		ret = library_file_open(m->library, &h->ref, &h->file, why);
	else if (k == LIB_TSV || k == LIB_JSON)
		ret = library_table(m->library, k == LIB_JSON, &h->text, &h->len);
	o->direct_io = k == LIB_TSV || k == LIB_JSON || k == LIB_COMPARE;
	o->keep_cache = !o->direct_io &&
	                !(ret == 0 && k == LIB_TREE && tree_quants_changed(h->ref.tree, h->ref.node));
	if (ret == 0 && k == LIB_TREE && h->ref.node->kind == TREE_MODEL) {
		o->pt_fd = tree_model_file_fd(h->ref.tree);
		o->pt_not_file = mount_not_file(h->ref.tree);
		o->pt_path = model_path(tree_model(h->ref.tree));
	}
	return ret;
}

static bool lib_open(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid, void **file,
                     struct mount_open *o, struct mount_err *err)
{
	(void)uid;
	if (!dir && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)))
		return mount_fail(err, EROFS);
	struct lib_file *h = calloc(1, sizeof *h);
	if (!h)
		return mount_fail(err, ENOMEM);
	char why[GGUF_ERR_MAX] = "";
	int ret = library_get(m->library, ino, true, &h->ref);
	if (ret == 0)
		ret = dir ? open_dir(m, h, o) : open_file(m, h, o, why);
	if (ret < 0) {
		lib_file_free(m, h);
		if (ret != -EIO || !why[0])
			return mount_fail(err, -ret);
		mount_counted_eio_said(&m->counters, why, err);   /* a plain file's, said */
		return false;
	}
	*file = h;
	return true;
}

static bool lib_readdir(struct mount *m, uint64_t ino, void *file, uint64_t off, mount_dir_fn add,
                        void *ctx, struct mount_err *err)
{
	(void)m, (void)err;
	const struct lib_file *h = file;
	const struct lib_ref *r = &h->ref;
	uint64_t count = r->kind == LIB_TREE ? library_tree_dir_count(r) : h->n_list;
	for (uint64_t pos = off; pos < count + 2; pos++) {
		const char *name;
		uint64_t child;
		bool dir = true;
		if (pos < 2) {
			name = pos == 0 ? "." : "..";
			child = pos == 0 ? ino : library_parent(r);
		} else if (r->kind == LIB_TREE) {
			library_tree_dir_entry(r, pos - 2, &name, &child, &dir);
		} else {
			name = h->list[pos - 2].name;
			child = h->list[pos - 2].ino;
			dir = h->list[pos - 2].dir;
		}
		if (!add(ctx, name, child, dir, pos + 1))
			break;
	}
	return true;
}

static bool lib_read(struct mount *m, uint64_t ino, void *file, uint64_t off, uint64_t len,
                     bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	(void)ino, (void)fills_cache;
	struct lib_file *h = file;
	switch (h->ref.kind) {
	case LIB_TREE:
		return mount_read_tree(m, h->ref.tree, h->ref.node, off, len, reply, ctx, err);
	case LIB_TSV:
	case LIB_JSON:
		mount_reply_slice(h->text, h->len, off, len, reply, ctx);
		return true;
	case LIB_ERROR: {
		const char *text = library_error_text(&h->ref);
		mount_reply_slice(text, text ? strlen(text) : 0, off, len, reply, ctx);
		return true;
	}
	case LIB_PLAIN:
	case LIB_COMPARE: {
		char *buf = malloc(len ? len : 1);
		char why[GGUF_ERR_MAX] = "";
		int64_t r = !buf                       ? -ENOMEM
		            : h->ref.kind == LIB_PLAIN ? library_file_read(m->library, h->file, buf,
		                                                           len, off)
		                                       : library_compare_read(m->library, &h->ref,
		                                                              buf, len, off, why);
		if (r >= 0)
			mount_reply_slice(buf, (uint64_t)r, 0, len, reply, ctx);
		else if (r == -EIO && h->ref.kind == LIB_COMPARE)
			mount_counted_eio_said(&m->counters, why, err);
		else
			mount_fail(err, (int)-r);
		free(buf);
		return r >= 0;
	}
	default:
		return mount_fail(err, EISDIR);
	}
}

/* A read-only file system of no fixed size. */
static void lib_statfs(struct mount *m, struct statvfs *sv)
{
	(void)m, (void)sv;
}

/* The root's own counters beside the mount's: models opened so far, built now, and
 * the library's slots now. */
static const char *const lib_counter[] = { "user.ggufs.models_opened", "user.ggufs.models_built",
                                           "user.ggufs.slots" };

static uint64_t lib_counter_value(struct mount *m, size_t i)
{
	uint64_t v[3];
	library_counts(m->library, &v[0], &v[1]);
	v[2] = library_slots(m->library);
	return v[i];
}

static const struct mount_counted lib_counted = {
	.extra = lib_counter, .n_extra = 3, .extra_value = lib_counter_value,
};

/* getxattr of name, or listxattr when name is NULL: a model's user.gguf.* from its tree
 * (as `ggufs FILE` shows them) and model.gguf's user.ggufs.passthrough, the root's
 * user.ggufs.* counters; nothing on folders and plain files. */
static int64_t lib_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                         struct mount_err *err)
{
	(void)err;
	struct lib_ref r;
	int ret = library_get(m->library, ino, false, &r);
	if (ret < 0)
		return ret;
	int64_t x = name ? -ENODATA : 0;
	if (r.kind == LIB_TREE && r.node->kind == TREE_MODEL && name &&
	    strcmp(name, MOUNT_PASSTHROUGH_XATTR) == 0)
		x = mount_passthrough_value(m, ino, r.tree, buf, size);
	else if (r.kind == LIB_TREE)
		x = name ? tree_getxattr(r.tree, r.node, name, buf, size)
		         : mount_tree_listxattr(r.tree, r.node, buf, size);
	else if (ino == LIB_ROOT_INO && name)
		x = mount_counters_get(m, &lib_counted, name, buf, size);
	else if (ino == LIB_ROOT_INO)
		x = mount_counters_list(m, &lib_counted, buf, size);
	library_put(m->library, &r);
	return x == -ENOENT ? -ENODATA : x;
}

static const struct mount_kind library_kind = {
	.lookup = lib_lookup, .forget = lib_forget, .getattr = lib_getattr, .open = lib_open, .readdir = lib_readdir,
	.read = lib_read, .file_free = lib_file_free, .statfs = lib_statfs, .xattr = lib_xattr,
};

struct mount *mount_library(struct library *lib)
{
	struct mount *m = mount_new(&library_kind);
	if (m)
		m->library = lib;
	return m;
}
