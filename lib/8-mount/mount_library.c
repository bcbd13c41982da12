/* A library's mount (mount.h) over its namespace (library_ns_new, ns.h), until every
 * kind of mount shares one request path: each call asks the namespace for the ref of a
 * number or a name, and the ref's provider for the rest, with node.h's rules (one stat,
 * the TTLs, how an open is cached). A model's own files are read, and their extended
 * attributes and passthrough answered, by the mount's tree paths (mount_read_tree),
 * as a single mount's are.
 *
 * What the kernel may cache follows: inside a model directory everything, as for one
 * model (a slot's version never changes); the names of library folders and of compare/
 * never, since what they follow may change at any time, nor a name not there; the
 * attributes of folders and of models.tsv and models.json never either. Every number a
 * lookup gives the kernel holds its slot until the kernel forgets it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "library.h"
#include "mount_impl.h"
#include "node.h"

/* What an open file or directory keeps: its ref (a model's held built) and its
 * provider's per-open state (a plain file's source handle, a table's text, a folder's
 * listing), or NULL. */
struct lib_file {
	struct node_ref ref;
	void *open;
};

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

static bool lib_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                       struct mount_err *err)
{
	struct node_ref r;
	unsigned dir_flags = 0;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->lookup(m->ns, parent, name, &r, &dir_flags, why);
	if (ret == -ENOENT) {   /* a negative entry */
		e->entry_ttl = node_entry_ttl(m->ns->flags, dir_flags, NULL);
		return true;
	}
	if (ret < 0)
		return failed(m, ret, why, err);
	e->ino = r.ino;
	e->attr_ttl = node_attr_ttl(node_stat(&r, NULL, &e->attr));
	e->entry_ttl = node_entry_ttl(m->ns->flags, dir_flags, &r);
	m->ns->ops->kernel_hold(m->ns, &r);   /* until the kernel forgets it */
	m->ns->ops->put(m->ns, &r);
	return true;
}

/* The kernel forgot n lookups of ino: the holds lib_lookup took for them let go. */
static void lib_forget(struct mount *m, uint64_t ino, uint64_t n)
{
	m->ns->ops->forget(m->ns, ino, n);
}

static bool lib_getattr(struct mount *m, uint64_t ino, void *file, struct stat *st, double *ttl,
                        struct mount_err *err)
{
	(void)file;
	struct node_ref r;
	char why[GGUF_ERR_MAX] = "";
	int ret = m->ns->ops->get(m->ns, ino, 0, &r, why);
	if (ret < 0)
		return failed(m, ret, why, err);
	*ttl = node_attr_ttl(node_stat(&r, NULL, st));
	m->ns->ops->put(m->ns, &r);
	return true;
}

static void lib_file_free(struct mount *m, void *file)
{
	struct lib_file *h = file;
	if (!h)
		return;
	if (h->open && h->ref.p->close)
		h->ref.p->close(&h->ref, h->open);
	m->ns->ops->put(m->ns, &h->ref);
	free(h);
}

/* Opens ino for reading (a directory when dir) into h: the ref got for an open (a model
 * directory's model built), its provider's open, and how the kernel is to cache it
 * (node_open_cache). model.gguf tells the front end its file, which the kernel may
 * read itself. 0 or -errno with why. */
static int open_ref(struct mount *m, uint64_t ino, bool dir, int flags, struct lib_file *h,
                    struct mount_open *o, char why[GGUF_ERR_MAX])
{
	int ret = m->ns->ops->get(m->ns, ino, NS_FOR_OPEN, &h->ref, why);
	if (ret < 0)
		return ret;
	const struct node_ref *r = &h->ref;
	struct node_attr a;
	node_attr(r, NULL, &a);
	if (dir != a.dir)
		return dir ? -ENOTDIR : -EISDIR;
	if (r->p->open && (ret = r->p->open(r, flags, &h->open, why)) < 0)
		return ret;
	struct node_cache c;
	node_open_cache(m->ns->flags, &a, false, !dir && r->p->stale && r->p->stale(r), &c);
	o->direct_io = c.direct_io;
	o->keep_cache = c.keep_cache;
	o->cache_readdir = c.cache_readdir;
	if (r->tree && r->n->kind == TREE_MODEL) {
		o->pt_fd = tree_model_file_fd(r->tree);
		o->pt_not_file = mount_not_file(r->tree);
		o->pt_path = model_path(tree_model(r->tree));
	}
	return 0;
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
	int ret = open_ref(m, ino, dir, flags, h, o, why);
	if (ret < 0) {
		lib_file_free(m, h);
		return failed(m, ret, why, err);
	}
	*file = h;
	return true;
}

/* ".", ".." and the provider's entries from offset off (an entry it no longer lists
 * keeps its offset), numbered as the kernel knows them. */
static bool lib_readdir(struct mount *m, uint64_t ino, void *file, uint64_t off, mount_dir_fn add,
                        void *ctx, struct mount_err *err)
{
	(void)m, (void)err;
	const struct lib_file *h = file;
	const struct node_ref *r = &h->ref;
	const uint64_t count = r->p->count ? r->p->count(r, h->open) : 0;
	for (uint64_t pos = off; pos < count + 2; pos++) {
		struct node_dirent d = { pos == 0 ? "." : "..", pos == 0 ? ino : r->parent, true };
		if (pos >= 2 && !r->p->entry(r, h->open, pos - 2, &d))
			continue;
		if (pos >= 2)
			d.ino += r->ino_base;
		if (!add(ctx, d.name, d.ino, d.dir, pos + 1))
			break;
	}
	return true;
}

static bool lib_read(struct mount *m, uint64_t ino, void *file, uint64_t off, uint64_t len,
                     bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	(void)ino, (void)fills_cache;
	struct lib_file *h = file;
	const struct node_ref *r = &h->ref;
	if (r->tree)
		return mount_read_tree(m, r->tree, r->n, off, len, reply, ctx, err);
	if (!r->p->read)
		return mount_fail(err, EISDIR);
	char *buf = malloc(len ? len : 1);
	if (!buf)
		return mount_fail(err, ENOMEM);
	char why[GGUF_ERR_MAX] = "";
	const int64_t n = r->p->read(r, h->open, buf, len, off, why);
	if (n >= 0)
		mount_reply_slice(buf, (uint64_t)n, 0, len, reply, ctx);
	else
		failed(m, (int)n, why, err);
	free(buf);
	return n >= 0;
}

static void lib_statfs(struct mount *m, struct statvfs *sv)
{
	m->ns->ops->statfs(m->ns, sv);
}

/* The root's counters beside the mount's, as the namespace counts them. */
static uint64_t lib_counter_value(struct mount *m, size_t i)
{
	struct ns_counted c;
	m->ns->ops->counted(m->ns, &c);
	return c.extra_value(m->ns, i);
}

/* getxattr of name, or listxattr when name is NULL: a model's user.gguf.* from its tree
 * (as `ggufs FILE` shows them) and model.gguf's user.ggufs.passthrough, the root's
 * user.ggufs.* counters; nothing on folders and plain files. */
static int64_t lib_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
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
	const struct mount_counted counted = { .model = c.model, .extra = c.extra,
	                                       .n_extra = c.n_extra,
	                                       .extra_value = lib_counter_value };
	int64_t x = name ? -ENODATA : 0;
	if (r.tree && r.n->kind == TREE_MODEL && name && strcmp(name, MOUNT_PASSTHROUGH_XATTR) == 0)
		x = mount_passthrough_value(m, ino, r.tree, buf, size);
	else if (r.tree)
		x = name ? tree_getxattr(r.tree, r.n, name, buf, size)
		         : mount_tree_listxattr(r.tree, r.n, buf, size);
	else if (ino == NS_ROOT_INO && name)
		x = mount_counters_get(m, &counted, name, buf, size);
	else if (ino == NS_ROOT_INO)
		x = mount_counters_list(m, &counted, buf, size);
	m->ns->ops->put(m->ns, &r);
	return x == -ENOENT ? -ENODATA : x;
}

static const struct mount_kind library_kind = {
	.lookup = lib_lookup, .forget = lib_forget, .getattr = lib_getattr, .open = lib_open,
	.readdir = lib_readdir, .read = lib_read, .file_free = lib_file_free,
	.statfs = lib_statfs, .xattr = lib_xattr,
};

struct mount *mount_library(struct library *lib)
{
	struct ns *ns = library_ns_new(lib);
	struct mount *m = ns ? mount_new(&library_kind) : NULL;
	if (m)
		m->ns = ns;
	else if (ns)
		ns->ops->free(ns);
	return m;
}
