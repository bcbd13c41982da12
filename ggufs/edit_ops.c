/* The requests that change metadata/ with -o edits (ggufs(1) EDITS): writes, truncations,
 * creations, renames and deletions of keys, user.gguf.type, and the opens, flushes and
 * releases of writers and of scratch files; every other change is EROFS. What it shares
 * with ops.c is in ops_int.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>   /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <sys/stat.h>
#include <unistd.h>

#include "edit_text.h"
#include "scratch.h"
#include "tree_edit.h"

#include "ops_int.h"

/* True when the request comes from the mount's owner, who alone may edit; else
 * replies EACCES (allow_other lets others read, never write). */
bool owner_or_reply(fuse_req_t req)
{
	if (fuse_req_ctx(req)->uid == getuid())
		return true;
	fuse_reply_err(req, EACCES);
	return false;
}

/* Logs a refused edit (one line naming the key and the reason) and replies it. */
static void reply_refused(fuse_req_t req, int r, const char *why)
{
	report_refused_edit(fs_of(req), r, why);
	fuse_reply_err(req, -r);
}

/* After an accepted edit: the kernel forgets what it cached of the files the edit
 * changed (ino's, with metadata/'s listing, gguf.json and summary.txt), so that no read
 * shows stale bytes or sizes, nor a mapping stale pages (ops.c fill_tree). model.gguf is
 * a new inode (tree_ino.h): the old one's pages stay, its readers' own. The kernel
 * drops a file's pages only once the reads filling them are answered (and dirty ones
 * of a shared writable mapping written back to us) before the notice returns, which
 * with -s no other thread would do: there the files' pages go at their next open or
 * mmap (the kernel drops a direct_io file's then), and only sizes and times now
 * (offset -1). */
static void invalidate(struct ggufs *fs, uint64_t ino)
{
	static const fuse_ino_t files[] = { TREE_JSON_INO, TREE_SUMMARY_INO };
	if (!fs->se)
		return;
	off_t pages = fs->single_thread ? -1 : 0;
	if (ino)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, pages, 0);
	fuse_lowlevel_notify_inval_inode(fs->se, TREE_METADATA_DIR_INO, 0, 0);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		fuse_lowlevel_notify_inval_inode(fs->se, files[i], pages, 0);
}

/* h (locked) no longer holds a truncation closed and not yet made: written since, or
 * its last close. */
static void handle_truncation_gone(struct ggufs *fs, struct handle *h)
{
	h->only_truncated = false;
	if (h->truncation_closed) {
		h->truncation_closed = false;
		tree_edits_truncation_made(fs->edits);
	}
}

/* Replies to an edit that returned r: refused (err says why), or made: the kernel's
 * caches of what it changed invalidated (ino's, 0: only the lists) and 0 replied. */
static void reply_edit(fuse_req_t req, int r, const char *err, uint64_t ino)
{
	if (r < 0) {
		reply_refused(req, r, err);
		return;
	}
	invalidate(fs_of(req), ino);
	fuse_reply_err(req, 0);
}

/* Makes the text written through h the value of the key of ino, when it was written
 * since: 0 or -errno, logged. A write refused (h->refused) makes nothing, and every
 * close fails with its error again (said once, at the write). A truncation at open with
 * nothing written after it is made at the last close (release) only, since a shell's
 * "> KEY" closes a first descriptor before it writes through its copy; a close before
 * that fails when the empty text would be refused (a number's), and otherwise has
 * lookups wait for the last (tree_edits_settle), so that what follows close(2) sees
 * it made. */
static int handle_commit(struct ggufs *fs, struct handle *h, uint64_t ino, bool last)
{
	pthread_mutex_lock(&h->lock);
	int r = h->refused;
	char err[GGUF_ERR_MAX];
	if (r == 0 && h->dirty && !last && h->only_truncated) {
		r = tree_edits_check(fs->edits, ino, edit_text_bytes(&h->text), h->text.len, err);
		if (r == 0 && !h->truncation_closed) {
			h->truncation_closed = true;
			tree_edits_truncation_closed(fs->edits);
		}
	} else if (r == 0 && h->dirty) {
		r = tree_edits_write(fs->edits, ino, edit_text_bytes(&h->text), h->text.len, err);
		if (r < 0)
			report_refused_edit(fs, r, err);
		h->dirty = false;   /* refused or made: the next close has nothing new */
	}
	if (last)
		handle_truncation_gone(fs, h);
	pthread_mutex_unlock(&h->lock);
	/* refused too: a shared mapping's pages may hold the text refused (fill_tree) */
	invalidate(fs, ino);
	return r;
}

/* An open of scratch file f (held; the handle keeps it): reads and writes go to it
 * straight (direct_io), shared by every open as a file's bytes are. */
void open_scratch(fuse_req_t req, struct ggufs *fs, struct scratch_file *f,
                  struct fuse_file_info *fi)
{
	bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	if (write && !owner_or_reply(req)) {
		scratch_drop(f);
		return;
	}
	int r = write && (fi->flags & O_TRUNC) ? scratch_truncate(f, 0) : 0;
	struct handle *h = r == 0 ? handle_new(take_tree(fs), write) : NULL;
	if (!h) {
		scratch_drop(f);
		fuse_reply_err(req, r < 0 ? -r : ENOMEM);
		return;
	}
	h->scratch = f;
	if (!handle_register(fi, h)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) != 0)
		handle_unregister(fi, h);
}

/* An open with edits on: each holds its tree in a handle; a writer of metadata/KEY
 * (write: its owner asking, checked) holds one of EDIT_WRITERS_MAX places and the key's
 * text. */
void open_with_edits(fuse_req_t req, struct ggufs *fs, struct tree *t,
                     const struct tree_node *n, struct fuse_file_info *fi, bool write)
{
	struct handle *h = handle_new(t, write);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		drop_tree(fs, t);
		return;
	}
	if (write && !(h->key_writer = writer_reserve())) {
		handle_free(h);
		reply_refused(req, -ENFILE, "too many keys open for writing at once (16)");
		return;
	}
	if (write && (fi->flags & O_TRUNC)) {
		/* open(O_TRUNC) makes the value "" even if nothing follows */
		h->dirty = h->only_truncated = true;
	} else if (write && edit_text_load(&h->text, t, n) != 0) {
		handle_free(h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!handle_register(fi, h)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The files an edit changes are read past the page cache, each open from the
	 * tree of its open, so a reader never mixes two states, nor gets stale pages;
	 * model.gguf is an inode of its own per state (tree_ino.h), whose pages are that
	 * state's alone: kept across opens, for mmap (llama.cpp). A writer's text is
	 * its own until close. */
	bool changes = n->kind == TREE_META || n->kind == TREE_JSON || n->kind == TREE_SUMMARY;
	fi->direct_io = write || changes;
	fi->keep_cache = !write && !changes;
	/* model.gguf: a state's own inode, one kind of open each */
	if ((n->kind == TREE_MODEL ? passthrough_reply_open_tree(req, fs, fi, t)
	                           : fuse_reply_open(req, fi)) != 0)
		handle_unregister(fi, h);
}

/* close(2): the text a writer wrote becomes the key's value, durably, before close
 * returns; EINVAL when it does not parse (the old value stays). */
void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!fs_of(req)->edits) {
		/* nothing to flush: ENOSYS has the kernel stop sending FLUSH (no_flush), so
		 * that a close no longer waits for the daemon (a passthrough model.gguf's
		 * opens and closes are all it still asks us about) */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	struct handle *h = handle_of(fs_of(req), fi);
	int r = h && h->writing && !h->scratch ? handle_commit(fs_of(req), h, ino, false) : 0;
	handle_put(fi, h);
	fuse_reply_err(req, -r);
}

/* The last close of an open file: a writer's text that no flush made a value is made one
 * now, and the open's handle let go. */
void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ggufs *fs = fs_of(req);
	struct handle *h = handle_of(fs, fi);
	if (h) {
		if (h->writing && !h->scratch)   /* a text not flushed (a close that failed to
		                                  * reach us) */
			handle_commit(fs, h, ino, true);
		handle_put(fi, h);
		handle_unregister(fi, h);
	}
	fuse_reply_err(req, 0);
}

/* Every operation that would change the tree: EROFS, unless edits make metadata/
 * writable. The mount is "ro" without edits, so the kernel answers most of these
 * itself; these are for the ones that reach us anyway. */
static void erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

/* True when the request may edit: edits on and the mount's owner asking; else replied
 * (EROFS or EACCES). */
static bool may_edit(fuse_req_t req)
{
	if (!fs_of(req)->edits) {
		erofs(req);
		return false;
	}
	return owner_or_reply(req);
}

/* may_edit for a change of the names in directory parent: only metadata/'s change
 * (EROFS elsewhere). */
static bool may_edit_in(fuse_req_t req, fuse_ino_t parent)
{
	if (parent != TREE_METADATA_DIR_INO) {
		erofs(req);
		return false;
	}
	return may_edit(req);
}

/* Size changes (truncate, ftruncate) of metadata/KEY: through an open writer its text
 * (made the value at close), else at once the shown text cut or zero-extended; times
 * are accepted and changed nowhere; so are modes and owners of metadata/ and its files
 * (as vfat's "quiet": cp -a, install and rsync set them after copying, and fail on an
 * error), EPERM elsewhere. */
static void setattr_with(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                         struct handle *h)
{
	struct ggufs *fs = fs_of(req);
	if (!may_edit(req))
		return;
	struct scratch_file *f = h && h->scratch ? NULL : scratch_of(fs, ino);
	if (f || (h && h->scratch)) {   /* a scratch file: its size; the rest as a key's */
		struct scratch_file *of = f ? f : h->scratch;
		int sr = to_set & FUSE_SET_ATTR_SIZE ?
		         scratch_truncate(of, attr->st_size < 0 ? 0 : (uint64_t)attr->st_size) : 0;
		struct stat st;
		fill_scratch_stat(fs, of, &st);
		scratch_drop(f);
		if (sr < 0)
			fuse_reply_err(req, -sr);
		else
			fuse_reply_attr(req, &st, 0);
		return;
	}
	struct tree *t;
	const struct tree_node *n = take_node(req, fs, ino, &t);
	if (!n)
		return;
	int r = 0;
	bool in_metadata = n->kind == TREE_META || n->kind == TREE_DIR_METADATA;
	if ((to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && !in_metadata)
		r = -EPERM;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && n->kind != TREE_META)
		r = -EROFS;
	else if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size > EDIT_TEXT_MAX)
		r = -EFBIG;
	if (r == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
		uint64_t size = (uint64_t)attr->st_size;
		if (h && h->writing) {
			pthread_mutex_lock(&h->lock);
			r = h->refused < 0 ? h->refused : edit_text_resize(&h->text, size);
			if (r == 0) {
				h->dirty = true;
				handle_truncation_gone(fs, h);
			}
			pthread_mutex_unlock(&h->lock);
		} else {
			/* the text as shown, cut or zero-extended, made the value now */
			struct vbytes text = { 0 };
			char err[GGUF_ERR_MAX];
			r = edit_text_load(&text, t, n);
			if (r == 0)
				r = edit_text_resize(&text, size);
			if (r == 0) {
				r = tree_edits_write(fs->edits, ino, edit_text_bytes(&text), size, err);
				if (r < 0) {
					free(text.p);
					drop_tree(fs, t);
					reply_refused(req, r, err);
					return;
				}
				invalidate(fs, ino);
			}
			free(text.p);
		}
	}
	drop_tree(fs, t);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	t = take_tree(fs);
	n = tree_node(t, ino);
	struct stat st;
	if (n) {
		fill_stat(fs, t, n, &st);
		if (h && h->writing)
			st.st_size = (off_t)h->text.len;
		fuse_reply_attr(req, &st, CACHE_TIMEOUT);
	} else {
		fuse_reply_err(req, ENOENT);
	}
	drop_tree(fs, t);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fs_of(req), fi);
	setattr_with(req, ino, attr, to_set, h);
	handle_put(fi, h);
}

/* user.gguf.type of a key: its value's text parsed again as that type. */
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                 size_t size, int flags)
{
	(void)flags;
	if (!may_edit(req))
		return;
	struct ggufs *fs = fs_of(req);
	struct tree *t = take_tree(fs);
	const struct tree_node *n = tree_node(t, ino);
	bool key = n && n->kind == TREE_META;
	drop_tree(fs, t);
	struct scratch_file *f = scratch_of(fs, ino);
	scratch_drop(f);
	if (!key && !f && n) {   /* the rest of the tree is read-only */
		fuse_reply_err(req, EROFS);
		return;
	}
	if (strcmp(name, "user.gguf.type") != 0 || f) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	char err[GGUF_ERR_MAX];
	int r = tree_edits_set_type(fs->edits, ino, value, size, err);
	reply_edit(req, r, err, ino);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	if (may_edit(req))
		fuse_reply_err(req, ENOTSUP);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
              dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	erofs(req);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	erofs(req);
}

/* rm metadata/KEY deletes the key. */
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!may_edit_in(req, parent))
		return;
	struct ggufs *fs = fs_of(req);
	char err[GGUF_ERR_MAX];
	uint64_t ino;
	int r = tree_edits_unlink(fs->edits, name, &ino, err);
	reply_edit(req, r, err, 0);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	erofs(req);
}

void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	erofs(req);
}

/* mv metadata/A metadata/B renames key A to B (a key B is replaced). */
void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
               fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (!may_edit_in(req, parent == newparent ? parent : 0))
		return;
	struct ggufs *fs = fs_of(req);
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((flags & RENAME_NOREPLACE) && tree_edits_taken(fs->edits, newname)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	char err[GGUF_ERR_MAX];
	int r = tree_edits_rename(fs->edits, name, newname, err);
	reply_edit(req, r, err, 0);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	erofs(req);
}

/* A new file in metadata/ is a new key, an empty string until written (and typed with
 * user.gguf.type); the open it comes with is a writer's. */
void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
               struct fuse_file_info *fi)
{
	(void)mode;
	if (!may_edit_in(req, parent))
		return;
	struct ggufs *fs = fs_of(req);
	char err[GGUF_ERR_MAX];
	uint64_t ino;
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	bool key_writer = writing && !scratch_is_name(name);
	if (key_writer && !writer_reserve()) {
		reply_refused(req, -ENFILE, "too many keys open for writing at once (16)");
		return;
	}
	int r = tree_edits_create(fs->edits, name, &ino, err);
	if (r < 0) {
		if (key_writer)
			writer_release();
		reply_refused(req, r, err);
		return;
	}
	invalidate(fs, 0);
	struct tree *t = take_tree(fs);
	struct handle *h = handle_new(t, writing);
	if (h)
		h->key_writer = key_writer;
	else if (key_writer)
		writer_release();
	struct scratch_file *f = scratch_of(fs, ino);
	const struct tree_node *n = f ? NULL : tree_node(t, ino);
	if (!h || (!f && !n)) {
		scratch_drop(f);
		if (h)
			handle_free(h);
		else
			drop_tree(fs, t);
		fuse_reply_err(req, h ? ENOENT : ENOMEM);
		return;
	}
	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.ino = ino;
	e.generation = 1;
	e.attr_timeout = f ? 0 : CACHE_TIMEOUT;
	e.entry_timeout = 0;   /* as op_lookup's in metadata/ with edits */
	if (f) {
		h->scratch = f;
		fill_scratch_stat(fs, f, &e.attr);
	} else {
		fill_stat(fs, t, n, &e.attr);
	}
	if (r == 1 && h->writing) {
		/* a key moved aside made again (tree_edit.h): its text starts empty, made the
		 * value at the last close, as a shell's "> KEY" */
		h->dirty = h->only_truncated = true;
		e.attr.st_size = 0;
	}
	if (!handle_register(fi, h)) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->direct_io = h->writing || f;
	if (fuse_reply_create(req, &e, fi) != 0)
		handle_unregister(fi, h);
}

/* A write of metadata/KEY goes into the writer's text, at its offset (a hole is zeros);
 * the text becomes the value at close. EINVAL at once when the text can no longer
 * become a value of the key's type. */
static void write_with(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                       struct handle *h)
{
	uint64_t end;
	if (!h || !h->writing) {
		erofs(req);
		return;
	}
	if (h->scratch) {
		int sr = off < 0 ? -EINVAL : scratch_write(h->scratch, buf, size, (uint64_t)off);
		if (sr < 0)
			fuse_reply_err(req, -sr);
		else
			fuse_reply_write(req, size);
		return;
	}
	struct ggufs *fs = fs_of(req);
	pthread_mutex_lock(&h->lock);
	int r = h->refused;
	char err[GGUF_ERR_MAX] = "";
	if (r < 0) {   /* refused before: nothing after it is taken */
	} else if (off < 0) {
		r = -EINVAL;
	} else if (__builtin_add_overflow((uint64_t)off, (uint64_t)size, &end) ||
	           end > EDIT_TEXT_MAX) {
		r = -EFBIG;
	} else if ((r = edit_text_write(&h->text, (uint64_t)off, buf, size)) == 0) {
		h->dirty = true;
		handle_truncation_gone(fs, h);
		r = tree_edits_precheck(fs->edits, ino, edit_text_bytes(&h->text), h->text.len, err);
	}
	if (r < 0 && r != -ENOMEM)
		h->refused = r;   /* the close fails with it too, and makes nothing */
	pthread_mutex_unlock(&h->lock);
	if (r < 0 && err[0])   /* the precheck's refusal, said once */
		reply_refused(req, r, err);
	else if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, size);
}

void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
              struct fuse_file_info *fi)
{
	struct handle *h = handle_of(fs_of(req), fi);
	write_with(req, ino, buf, size, off, h);
	handle_put(fi, h);
}

