/* A single model's mount (mount.h over lib/6-tree): each call is a lookup or a read of
 * the tree built at mount. Nothing under it changes, so the kernel may keep names,
 * attributes, listings and pages for as long as it likes (MOUNT_TTL_FOREVER, and
 * negative entries too: no name ever appears). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "mount_impl.h"

/* The node of ino, or NULL with ENOENT (the kernel only asks for numbers it was given). */
static const struct tree_node *node_of(const struct tree *t, uint64_t ino, struct mount_err *err)
{
	const struct tree_node *n = tree_node(t, ino);
	if (!n)
		mount_fail(err, ENOENT);
	return n;
}

/* The directory of ino, or NULL with ENOENT or ENOTDIR. */
static const struct tree_node *dir_of(const struct tree *t, uint64_t ino, struct mount_err *err)
{
	const struct tree_node *n = node_of(t, ino, err);
	if (n && !tree_is_dir(n)) {
		mount_fail(err, ENOTDIR);
		return NULL;
	}
	return n;
}

static bool mm_lookup(struct mount *m, uint64_t parent, const char *name,
                         struct mount_entry *e, struct mount_err *err)
{
	if (!dir_of(m->tree, parent, err))
		return false;
	e->entry_ttl = e->attr_ttl = MOUNT_TTL_FOREVER;
	const struct tree_node *n = tree_lookup(m->tree, parent, name);
	if (n) {
		e->ino = n->ino;
		tree_stat(m->tree, n, false, &e->attr);
	}
	return true;
}

static bool mm_getattr(struct mount *m, uint64_t ino, void *file, struct stat *st, double *ttl,
                          struct mount_err *err)
{
	(void)file;
	const struct tree_node *n = node_of(m->tree, ino, err);
	if (!n)
		return false;
	tree_stat(m->tree, n, false, st);
	*ttl = MOUNT_TTL_FOREVER;
	return true;
}

/* Opens for reading anywhere. Contents are fixed, so the page cache (and a listing) may
 * be kept across opens (but a quant file's once the model changed: tree_quants_changed);
 * direct_io stays off so that mmap works. model.gguf tells the front end its file,
 * which the kernel may read itself (passthrough). The open file is the tree (nothing is
 * held per open, nor freed). */
static bool mm_open(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid, void **file,
                       struct mount_open *o, struct mount_err *err)
{
	(void)uid;
	const struct tree_node *n = dir ? dir_of(m->tree, ino, err) : node_of(m->tree, ino, err);
	if (!n)
		return false;
	if (dir) {
		o->cache_readdir = o->keep_cache = true;
	} else if (tree_is_dir(n)) {
		return mount_fail(err, EISDIR);
	} else if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) {
		return mount_fail(err, EROFS);
	} else {
		/* a quant file of a model changed since: its old pages let go, its reads EIO */
		o->keep_cache = !tree_quants_changed(m->tree, n);
		if (n->kind == TREE_MODEL) {
			o->pt_fd = tree_model_file_fd(m->tree);
			o->pt_not_file = mount_not_file(m->tree);
			o->pt_path = model_path(tree_model(m->tree));
		}
	}
	*file = m->tree;
	return true;
}

static bool mm_readdir(struct mount *m, uint64_t ino, void *file, uint64_t off,
                          mount_dir_fn add, void *ctx, struct mount_err *err)
{
	(void)file;
	const struct tree_node *dir = dir_of(m->tree, ino, err);
	if (!dir)
		return false;
	uint64_t count = tree_dir_count(m->tree, ino);
	for (uint64_t pos = off; pos < count + 2; pos++) {
		const struct tree_node *c = pos == 0 ? dir :
		                            pos == 1 ? tree_node(m->tree, dir->parent) :
		                            tree_dir_child(m->tree, ino, pos - 2);
		if (!add(ctx, pos == 0 ? "." : pos == 1 ? ".." : c->name, c->ino, tree_is_dir(c),
		         pos + 1))
			break;
	}
	return true;
}

static bool mm_read(struct mount *m, uint64_t ino, void *file, uint64_t off, uint64_t len,
                       bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	(void)file, (void)fills_cache;
	const struct tree_node *n = node_of(m->tree, ino, err);
	return n && mount_read_tree(m, m->tree, n, off, len, reply, ctx, err);
}

/* Sizes in 4 KiB blocks, nothing free: a view of one file. */
static void mm_statfs(struct mount *m, struct statvfs *sv)
{
	const struct ggufs_model *model = tree_model(m->tree);
	sv->f_blocks = (fsblkcnt_t)(((uint64_t)model_stat(model)->st_size + 4095) / 4096);
	/* the inode numbers of tree_ino.h: four per tensor (raw, .f32, .npy, stats/) */
	sv->f_files = (fsfilcnt_t)(TREE_FIRST_META + model_meta(model)->n_kv +
	                           4 * model_n_tensors(model));
}

/* user.gguf.* values from the tree, the root's user.ggufs.* counters and model.gguf's
 * user.ggufs.passthrough (listed after the tree's own). */
static int64_t mm_xattr(struct mount *m, uint64_t ino, const char *name, char *buf,
                           size_t size, struct mount_err *err)
{
	(void)err;
	const struct tree_node *n = tree_node(m->tree, ino);
	if (!n)
		return -ENOENT;
	struct mount_counted what = { .model = tree_model(m->tree) };
	if (!name && n->kind == TREE_ROOT) {
		int64_t r = tree_listxattr(m->tree, n, buf, size);
		if (r < 0)
			return r;
		int64_t c = mount_counters_list(m, &what, size ? buf + r : NULL,
		                                size ? size - (size_t)r : 0);
		return c < 0 ? c : r + c;
	}
	if (!name)
		return mount_tree_listxattr(m->tree, n, buf, size);
	if (n->kind == TREE_MODEL && strcmp(name, MOUNT_PASSTHROUGH_XATTR) == 0)
		return mount_passthrough_value(m, 0, m->tree, buf, size);
	int64_t r = n->kind == TREE_ROOT ? mount_counters_get(m, &what, name, buf, size) : -ENOENT;
	return r == -ENOENT ? tree_getxattr(m->tree, n, name, buf, size) : r;
}

static const struct mount_kind mm_kind = {
	.lookup = mm_lookup, .getattr = mm_getattr, .open = mm_open, .readdir = mm_readdir,
	.read = mm_read, .statfs = mm_statfs, .xattr = mm_xattr,
};

struct mount *mount_model(struct tree *t)
{
	struct mount *m = mount_new(&mm_kind);
	if (m)
		m->tree = t;
	return m;
}
