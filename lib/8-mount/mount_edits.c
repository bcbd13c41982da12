/* A model's mount with -o edits=FILE (mount_edits.h): lookups, listings, opens and
 * reads, each from the tree of a state of the metadata (lib/6-tree/tree_edit.h), and
 * the scratch files editors make in metadata/ (scratch.h). The requests that change
 * metadata/ are mount_writer.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edit_text.h"
#include "mount_edits.h"

struct edit_file *mount_edit_file_new(struct tree *t, bool writing)
{
	struct edit_file *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	pthread_mutex_init(&f->lock, NULL);
	f->tree = t;
	f->writing = writing;
	return f;
}

void mount_edit_file_free(struct mount *m, struct edit_file *f)
{
	if (f->key_writer)
		mount_edit_writer_release(m);
	tree_release(f->tree);
	scratch_drop(f->scratch);
	pthread_mutex_destroy(&f->lock);
	free(f->text.p);
	free(f);
}

bool mount_edit_writer_reserve(struct mount *m)
{
	if (atomic_fetch_add(&m->key_writers, 1) < EDIT_WRITERS_MAX)
		return true;
	atomic_fetch_sub(&m->key_writers, 1);
	return false;
}

void mount_edit_writer_release(struct mount *m)
{
	atomic_fetch_sub(&m->key_writers, 1);
}

struct scratch_file *mount_edit_scratch_of(struct mount *m, uint64_t ino)
{
	return tree_ino_ns_own(ino) ? scratch_by_ino(tree_edits_scratch(m->edits), ino) : NULL;
}

void mount_edit_stat(const struct tree *t, const struct tree_node *n, struct stat *st)
{
	tree_stat(t, n, true, st);
}

void mount_edit_scratch_stat(struct mount *m, struct scratch_file *f, struct stat *st)
{
	uint64_t size;
	struct timespec t;
	struct tree_node as_key = { .kind = TREE_META };
	scratch_stat(f, &size, &t);
	memset(st, 0, sizeof *st);
	st->st_ino = scratch_ino(f);
	st->st_mode = tree_mode(&as_key, model_stat(tree_model(m->tree))->st_mode) | S_IWUSR;
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = size ? 1 : 0;
	st->st_atim = st->st_mtim = st->st_ctim = t;
}

const struct tree_node *mount_edit_take_node(struct mount *m, uint64_t ino, struct tree **t,
                                       struct mount_err *err)
{
	*t = tree_edits_holding(m->edits, ino);
	if (!*t) {
		mount_fail(err, tree_ino_state_root(m->tree, ino) ? ESTALE : ENOENT);
		return NULL;
	}
	return tree_node(*t, ino);
}

/* The directory ino of t, or NULL with ENOENT or ENOTDIR. */
static const struct tree_node *dir_of(const struct tree *t, uint64_t ino, struct mount_err *err)
{
	const struct tree_node *n = tree_node(t, ino);
	if (!n)
		mount_fail(err, ENOENT);
	else if (!tree_is_dir(n))
		mount_fail(err, ENOTDIR);
	return n && tree_is_dir(n) ? n : NULL;
}

/* A name: an entry whose attributes may be kept (but a scratch file's, which change with
 * every write); a name in metadata/ is looked up afresh, since an edit may make or
 * remove it; model.gguf is another inode in each edit state (tree_ino.h), and a rename
 * over a key keeps the key's inode, not the renamed file's: looked up again at every
 * path walk, so the kernel never keeps a stale one. */
static bool ed_lookup(struct mount *m, uint64_t parent, const char *name, struct mount_entry *e,
                      struct mount_err *err)
{
	struct tree *t = tree_edits_current(m->edits);
	bool ok = dir_of(t, parent, err) != NULL;
	if (ok) {
		e->attr_ttl = MOUNT_TTL_FOREVER;
		e->entry_ttl = parent == TREE_METADATA_DIR_INO ? 0 : MOUNT_TTL_FOREVER;
		const struct tree_node *n = tree_lookup(t, parent, name);
		struct scratch_file *f = parent == TREE_METADATA_DIR_INO && scratch_is_name(name) ?
		                         scratch_by_name(tree_edits_scratch(m->edits), name) : NULL;
		if (n && tree_edits_aside(m->edits, t, n))
			n = NULL;   /* moved aside (tree_edit.h): not there */
		if (f) {
			e->ino = scratch_ino(f);
			e->attr_ttl = 0;
			mount_edit_scratch_stat(m, f, &e->attr);
			scratch_drop(f);
		} else if (n) {
			e->ino = n->ino;
			/* model.gguf and quants/'s files are other inodes in each state */
			if (tree_ino_per_state(n->ino))
				e->entry_ttl = 0;
			mount_edit_stat(t, n, &e->attr);
		}
	}
	tree_release(t);
	return ok;
}

/* An fstat of an open file answers from the tree of its open (the model.gguf of an
 * older edit state is in no other), a writer's size its text's; a scratch file's through
 * its open file (it may be unlinked), else by number, never cached, as its size changes
 * with every write. */
static bool ed_getattr(struct mount *m, uint64_t ino, void *file, struct stat *st, double *ttl,
                       struct mount_err *err)
{
	struct edit_file *h = file;
	struct scratch_file *f = h && h->scratch ? NULL : mount_edit_scratch_of(m, ino);
	if (f || (h && h->scratch)) {
		mount_edit_scratch_stat(m, f ? f : h->scratch, st);
		scratch_drop(f);
		*ttl = 0;
		return true;
	}
	struct tree *t = NULL;
	const struct tree_node *n;
	if (h) {
		t = tree_hold(h->tree);
		n = tree_node(t, ino);
		if (!n)
			mount_fail(err, ENOENT);
	} else {
		n = mount_edit_take_node(m, ino, &t, err);
	}
	if (n) {
		mount_edit_stat(t, n, st);
		if (h && h->writing)
			st->st_size = (off_t)h->text.len;
		*ttl = MOUNT_TTL_FOREVER;
	}
	if (t)
		tree_release(t);
	return n != NULL;
}

/* An open of scratch file f (held; the open file keeps it): reads and writes go to it
 * straight (direct_io), shared by every open as a file's bytes are. */
static bool open_scratch(struct mount *m, struct scratch_file *f, int flags, uid_t uid,
                         void **file, struct mount_open *o, struct mount_err *err)
{
	bool write = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	int r = write && !mount_edit_owner(uid, err) ? -1 :
	        write && (flags & O_TRUNC) ? scratch_truncate(f, 0) : 0;
	struct edit_file *h = r == 0 ? mount_edit_file_new(tree_edits_current(m->edits), write) : NULL;
	if (!h) {
		scratch_drop(f);
		return r == -1 ? false : mount_fail(err, r < 0 ? -r : ENOMEM);
	}
	h->scratch = f;
	o->direct_io = true;
	*file = h;
	return true;
}

/* The open of a file whose name an edit may change, for writing when write (checked:
 * metadata/KEY, its owner asking): f gets its text (or the truncation's empty one). */
static bool mount_edit_open_writer(struct mount *m, struct edit_file *h,
                                   const struct tree_node *n, int flags,
                                   struct mount_err *err)
{
	if (!(h->key_writer = mount_edit_writer_reserve(m)))
		return mount_edit_refused(m, -ENFILE, "too many keys open for writing at once (16)", err);
	if (flags & O_TRUNC) {
		/* open(O_TRUNC) makes the value "" even if nothing follows */
		h->dirty = h->only_truncated = true;
	} else if (edit_text_load(&h->text, h->tree, n) != 0) {
		return mount_fail(err, ENOMEM);
	}
	return true;
}

/* Opens for reading anywhere, metadata/KEY for writing too (its owner only); each open
 * holds its tree. The files an edit changes are read past the page cache, each open from
 * the tree of its open, so a reader never mixes two states, nor gets stale pages;
 * model.gguf is an inode of its own per state (tree_ino.h), whose pages are that
 * state's alone: kept across opens, for mmap (llama.cpp), and passed through to the
 * file when it is the file. A writer's text is its own until close. */
static bool ed_open(struct mount *m, uint64_t ino, bool dir, int flags, uid_t uid, void **file,
                    struct mount_open *o, struct mount_err *err)
{
	if (dir) {   /* listings are read at each readdir from the state then */
		struct tree *t = tree_edits_current(m->edits);
		bool ok = dir_of(t, ino, err) != NULL;
		/* listings may be cached: an edit has the kernel forget metadata/'s */
		o->cache_readdir = o->keep_cache = true;
		*file = ok ? mount_edit_file_new(t, false) : NULL;
		if (ok && !*file)
			mount_fail(err, ENOMEM);
		if (!*file)
			tree_release(t);
		return *file != NULL;
	}
	struct scratch_file *f = mount_edit_scratch_of(m, ino);
	if (f)
		return open_scratch(m, f, flags, uid, file, o, err);
	struct tree *t;
	const struct tree_node *n = mount_edit_take_node(m, ino, &t, err);
	if (!n)
		return false;
	bool write = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	struct edit_file *h = NULL;
	bool ok = false;
	if (tree_is_dir(n))
		mount_fail(err, EISDIR);
	else if (write && n->kind != TREE_META)
		mount_fail(err, EROFS);
	else if (write && !mount_edit_owner(uid, err))
		;
	else if (!(h = mount_edit_file_new(t, write)))
		mount_fail(err, ENOMEM);
	else
		ok = !write || mount_edit_open_writer(m, h, n, flags, err);
	if (!h)
		tree_release(t);
	else if (!ok)
		mount_edit_file_free(m, h);
	if (!ok)
		return false;
	bool changes = n->kind == TREE_META || n->kind == TREE_JSON || n->kind == TREE_SUMMARY;
	o->direct_io = write || changes;
	o->keep_cache = !write && !changes && !tree_quants_changed(t, n);
	if (n->kind == TREE_MODEL) {
		o->pt_fd = tree_model_file_fd(t);
		o->pt_not_file = mount_not_file(t);
		o->pt_path = model_path(tree_model(t));
	}
	*file = h;
	return true;
}

/* A listing from the state now: its tree's children (a key moved aside skipped, its
 * position kept), then, in metadata/, its scratch files. */
static bool ed_readdir(struct mount *m, uint64_t ino, void *file, uint64_t off, mount_dir_fn add,
                       void *ctx, struct mount_err *err)
{
	(void)file;
	struct tree *t = tree_edits_current(m->edits);
	const struct tree_node *dir = dir_of(t, ino, err);
	if (dir) {
		uint64_t count = tree_dir_count(t, ino);
		struct scratch_set *scratch = ino == TREE_METADATA_DIR_INO ?
		                              tree_edits_scratch(m->edits) : NULL;
		uint64_t n = count + (scratch ? scratch_count(scratch) : 0);
		char name[256];
		for (uint64_t pos = off; pos < n + 2; pos++) {
			const struct tree_node *c = pos == 0 ? dir :
			                            pos == 1 ? tree_node(t, dir->parent) :
			                            pos - 2 < count ? tree_dir_child(t, ino, pos - 2) : NULL;
			uint64_t child;
			bool ok;
			if (pos < 2)
				ok = add(ctx, pos == 0 ? "." : "..", c->ino, true, pos + 1);
			else if (c && scratch && tree_edits_aside(m->edits, t, c))
				continue;
			else if (c)
				ok = add(ctx, c->name, c->ino, tree_is_dir(c), pos + 1);
			else if (scratch_entry(scratch, pos - 2 - count, name, &child))
				ok = add(ctx, name, child, false, pos + 1);
			else
				continue;   /* a scratch file gone since the count */
			if (!ok)
				break;
		}
	}
	tree_release(t);
	return dir != NULL;
}

/* With edits, the tree a fill of the kernel's page cache for ino reads (held), or NULL
 * for the tree of the open. The files an edit changes are opened direct_io: a read(2)
 * reads the state of its open, but the kernel fills the one page cache of their inode,
 * for any mapping of any open (fs/fuse/file.c fuse_file_mmap drops it at each mmap and
 * each open), through the open that faults. Filled from the state now, it never holds
 * another state's pages than that one, since each edit drops them after making its
 * state current (mount_edit_forget): an old open that keeps faulting cannot bring its state's
 * pages back under a mapping made after. A key gone from the state now is read in the
 * open's. */
static struct tree *fill_tree(struct mount *m, uint64_t ino, bool fills_cache)
{
	if (!fills_cache)
		return NULL;
	struct tree *now = tree_edits_current(m->edits);
	const struct tree_node *n = tree_node(now, ino);
	if (n && (n->kind == TREE_META || n->kind == TREE_JSON || n->kind == TREE_SUMMARY))
		return now;
	tree_release(now);
	return NULL;
}

/* A scratch file's bytes, a writer's own text, or the file in the tree of its open
 * (or the state now, for a fill of the page cache). */
static bool ed_read(struct mount *m, uint64_t ino, void *file, uint64_t off, uint64_t len,
                    bool fills_cache, mount_data_fn reply, void *ctx, struct mount_err *err)
{
	struct edit_file *h = file;
	if (h->scratch) {
		char *buf = malloc(len ? len : 1);
		if (!buf)
			return mount_fail(err, ENOMEM);
		mount_reply_slice(buf, scratch_read(h->scratch, buf, len, off), 0, len, reply, ctx);
		free(buf);
		return true;
	}
	if (h->writing) {   /* a writer reads back its own text */
		pthread_mutex_lock(&h->lock);
		mount_reply_slice(edit_text_bytes(&h->text), h->text.len, off, len, reply, ctx);
		pthread_mutex_unlock(&h->lock);
		return true;
	}
	struct tree *now = fill_tree(m, ino, fills_cache);
	const struct tree *t = now ? now : h->tree;
	const struct tree_node *n = tree_node(t, ino);
	bool ok = n ? mount_read_tree(m, t, n, off, len, reply, ctx, err) : mount_fail(err, ENOENT);
	if (now)
		tree_release(now);
	return ok;
}

static void ed_file_free(struct mount *m, void *file)
{
	mount_edit_file_free(m, file);
}

/* Sizes in 4 KiB blocks, nothing free: a view of one file (edits go to the edits file,
 * not to the file system); writable. */
static void ed_statfs(struct mount *m, struct statvfs *sv)
{
	const struct ggufs_model *model = tree_model(m->tree);
	sv->f_blocks = (fsblkcnt_t)(((uint64_t)model_stat(model)->st_size + 4095) / 4096);
	/* the inode numbers of tree_ino.h: four per tensor (raw, .f32, .npy, stats/) */
	sv->f_files = (fsfilcnt_t)(TREE_FIRST_META + model_meta(model)->n_kv +
	                           4 * model_n_tensors(model));
	sv->f_flag = 0;
}

/* user.gguf.* values from the tree that holds ino, the root's user.ggufs.* counters and
 * model.gguf's user.ggufs.passthrough; a scratch file has none (vim copies a backup's to
 * the new file). */
static int64_t ed_xattr(struct mount *m, uint64_t ino, const char *name, char *buf, size_t size,
                        struct mount_err *err)
{
	struct scratch_file *f = mount_edit_scratch_of(m, ino);
	if (f) {
		scratch_drop(f);
		return name ? -ENODATA : 0;
	}
	struct tree *t;
	const struct tree_node *n = mount_edit_take_node(m, ino, &t, err);
	if (!n)
		return -err->no;
	struct mount_counted what = { .model = tree_model(t), .edits = true };
	int64_t r;
	if (!name && n->kind == TREE_ROOT) {
		r = tree_listxattr(t, n, buf, size);
		int64_t c = r < 0 ? 0 : mount_counters_list(m, &what, size ? buf + r : NULL,
		                                            size ? size - (size_t)r : 0);
		r = r < 0 ? r : c < 0 ? c : r + c;
	} else if (!name) {
		r = mount_tree_listxattr(t, n, buf, size);
	} else if (n->kind == TREE_MODEL && strcmp(name, MOUNT_PASSTHROUGH_XATTR) == 0) {
		r = mount_passthrough_value(m, 0, t, buf, size);
	} else {
		r = n->kind == TREE_ROOT ? mount_counters_get(m, &what, name, buf, size) : -ENOENT;
		if (r == -ENOENT)
			r = tree_getxattr(t, n, name, buf, size);
	}
	tree_release(t);
	return r;
}

static const struct mount_kind edits_kind = {
	.lookup = ed_lookup, .getattr = ed_getattr, .open = ed_open, .readdir = ed_readdir,
	.read = ed_read, .file_free = ed_file_free, .statfs = ed_statfs, .xattr = ed_xattr,
	.flush = mount_edit_flush, .release = mount_edit_release, .setattr = mount_edit_setattr,
	.write = mount_edit_write, .create = mount_edit_create, .unlink = mount_edit_unlink,
	.rename = mount_edit_rename, .setxattr = mount_edit_setxattr,
	.removexattr = mount_edit_removexattr,
};

struct mount *mount_model_edits(struct tree *base, struct tree_edits *e, bool single_thread)
{
	struct mount *m = mount_new(&edits_kind);
	if (!m)
		return NULL;
	m->edits = e;
	m->tree = base;   /* of the model's own metadata: for its file's attributes */
	m->single_thread = single_thread;
	return m;
}
