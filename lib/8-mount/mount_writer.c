/* The requests that change metadata/ with -o edits (ggufs(1) EDITS; mount_edits.h):
 * writes, truncations, creations, renames and deletions of keys, user.gguf.type, and the
 * flushes and releases of writers and of scratch files; every other change is EROFS. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>   /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edit_text.h"
#include "mount_edits.h"
#include "node.h"

/* The edits of m (a mount over edits_ns). */
static struct edits_mount *em_of(struct mount *m)
{
	return edits_ns_mount(m->ns);
}

/* The edit_file of open file file (a struct mount_file), or NULL: none, or not open
 * to write nor a scratch file's. */
static struct edit_file *edit_of(void *file)
{
	return file ? ((struct mount_file *)file)->open : NULL;
}

bool mount_edit_owner(uid_t uid, struct mount_err *err)
{
	/* allow_other lets others read, never write */
	return uid == getuid() || mount_fail(err, EACCES);
}

bool mount_edit_refused(struct mount *m, int r, const char *why, struct mount_err *err)
{
	mount_counted_refusal(&m->counters, r, why, err);
	return false;
}

/* After an edit: the kernel forgets what it cached of the files the edit changed (ino's,
 * with metadata/'s listing, gguf.json and summary.txt), so that no read shows stale
 * bytes or sizes, nor a mapping stale pages (mount.c ns_read). model.gguf is a
 * new inode (tree_ino.h): the old one's pages stay, its readers' own. The kernel drops a
 * file's pages only once the reads filling them are answered (and dirty ones of a shared
 * writable mapping written back to us) before the notice returns, which with -s no
 * other thread would do: there the files' pages go at their next open or mmap (the
 * kernel drops a direct_io file's then), and only sizes and times now. */
static void mount_edit_forget(struct mount *m, uint64_t ino)
{
	static const uint64_t files[] = { TREE_JSON_INO, TREE_SUMMARY_INO };
	if (!m->notify.forget)
		return;
	bool pages = !em_of(m)->single_thread;
	if (ino)
		m->notify.forget(m->notify.arg, ino, pages);
	m->notify.forget(m->notify.arg, TREE_METADATA_DIR_INO, true);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		m->notify.forget(m->notify.arg, files[i], pages);
}

/* An edit that returned r: refused (why says why), or made: the kernel's caches of what
 * it changed forgotten (ino's, 0: only the lists). */
static bool mount_edit_done(struct mount *m, int r, const char *why, uint64_t ino,
                      struct mount_err *err)
{
	if (r < 0)
		return mount_edit_refused(m, r, why, err);
	mount_edit_forget(m, ino);
	return true;
}

/* Makes the text written through f the value of the key of ino, when it was written
 * since: 0 or -errno, a refusal said. A write or truncation refused (f->refused) makes
 * nothing, and every close fails with its error again (said once, where it was
 * refused). A truncation at open with nothing written after it is made at a close like
 * any edit, so that what follows close(2) sees it, FILE included (a shell's "> KEY"
 * then shows the empty value until it writes through its copy of the descriptor). When
 * the key's type has no empty value (a number's, a boolean's), a close before the last
 * fails with EINVAL, neither counted nor said: a shell's "echo 7 > KEY" closes a first
 * descriptor before it writes; the last close (release) refuses it, counted and said. */
static bool mount_edit_commit(struct mount *m, struct edit_file *f, uint64_t ino, bool last,
                              struct mount_err *err)
{
	pthread_mutex_lock(&f->lock);
	int r = f->refused;
	char why[GGUF_ERR_MAX];
	if (r < 0) {
		mount_fail(err, -r);   /* said where it was refused */
	} else if (f->dirty && f->only_truncated && !last &&
	           (r = tree_edits_check(em_of(m)->edits, ino, edit_text_bytes(&f->text), f->text.len,
	                                 why)) < 0) {
		mount_fail(err, -r);   /* still dirty: written next, or refused at the last */
	} else if (f->dirty) {
		r = tree_edits_write(em_of(m)->edits, ino, edit_text_bytes(&f->text), f->text.len,
		                     why);
		if (r < 0)
			mount_edit_refused(m, r, why, err);
		f->dirty = false;   /* refused or made: the next close has nothing new */
	}
	pthread_mutex_unlock(&f->lock);
	/* refused too: a shared mapping's pages may hold the text refused (fill_tree) */
	mount_edit_forget(m, ino);
	return r == 0;
}

/* close(2): the text a writer wrote becomes the key's value, durably, before close
 * returns; EINVAL when it does not parse (the old value stays). */
bool mount_edit_flush(struct mount *m, uint64_t ino, void *file, struct mount_err *err)
{
	struct edit_file *f = edit_of(file);
	return !f || !f->writing || f->scratch || mount_edit_commit(m, f, ino, false, err);
}

/* The last close: a writer's text that no flush made a value (a close that failed to
 * reach us) is made one now. */
void mount_edit_release(struct mount *m, uint64_t ino, void *file)
{
	struct edit_file *f = edit_of(file);
	struct mount_err err;
	if (f && f->writing && !f->scratch && !mount_edit_commit(m, f, ino, true, &err))
		mount_err_say(&err);   /* no reply carries it */
}

/* True when uid may edit; else EACCES. */
#define may_edit(uid, err) mount_edit_owner(uid, err)

/* ftruncate of writer h: its text cut or zero-extended to size (made the value at
 * close). Past EDIT_TEXT_MAX it is EFBIG, refused as a write(2) past it is: h refuses
 * every later write and truncation with it, and its close fails with it, making nothing
 * (h->refused). Out of memory (ENOMEM) refuses this one only. */
static int writer_truncate(struct edit_file *h, uint64_t size)
{
	pthread_mutex_lock(&h->lock);
	int r = h->refused < 0 ? h->refused : edit_text_resize(&h->text, size);
	if (r == 0) {
		h->dirty = true;
		h->only_truncated = false;
		/* cut to nothing: written anew; into what was written: no longer in order */
		if (size == 0)
			h->lines_state = LINES_NONE;
		else if (h->lines_state == LINES_ON && size < h->lines.end)
			h->lines_state = LINES_OFF;
	} else if (r != -ENOMEM) {
		h->refused = r;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* Size changes (truncate, ftruncate) of metadata/KEY: through an open writer its text
 * (made the value at close), else at once the shown text cut or zero-extended; times
 * are accepted and changed nowhere; so are modes and owners of metadata/ and its files
 * (as vfat's "quiet": cp -a, install and rsync set them after copying, and fail on an
 * error), EPERM elsewhere. */
bool mount_edit_setattr(struct mount *m, uint64_t ino, void *file, unsigned to_set, uint64_t size,
                  uid_t uid, struct stat *st, double *ttl, struct mount_err *err)
{
	struct edit_file *h = edit_of(file);
	struct edits_mount *em = em_of(m);
	if (!may_edit(uid, err))
		return false;
	struct scratch_file *f = h && h->scratch ? NULL : mount_edit_scratch_of(em, ino);
	if (f || (h && h->scratch)) {   /* a scratch file: its size; the rest as a key's */
		struct scratch_file *of = f ? f : h->scratch;
		int sr = to_set & MOUNT_SET_SIZE ? scratch_truncate(of, size) : 0;
		mount_edit_scratch_stat(em, of, st);
		scratch_drop(f);
		*ttl = 0;
		return sr == 0 || mount_fail(err, -sr);
	}
	struct tree *t;
	const struct tree_node *n = mount_edit_take_node(em, ino, &t, err);
	if (!n)
		return false;
	int r = 0;
	bool in_metadata = tree_is_metadata(n);
	if ((to_set & MOUNT_SET_MODE) && !in_metadata)
		r = -EPERM;
	else if ((to_set & MOUNT_SET_SIZE) && !tree_is_key(n))
		r = -EROFS;
	else if ((to_set & MOUNT_SET_SIZE) && !(h && h->writing) && size > EDIT_TEXT_MAX)
		r = -EFBIG;
	if (r == 0 && (to_set & MOUNT_SET_SIZE) && h && h->writing) {
		r = writer_truncate(h, size);
	} else if (r == 0 && (to_set & MOUNT_SET_SIZE)) {
		/* the text as shown, cut or zero-extended, made the value now */
		struct vbytes text = { 0 };
		char why[GGUF_ERR_MAX];
		r = edit_text_load(&text, t, n);
		if (r == 0)
			r = edit_text_resize(&text, size);
		if (r == 0) {
			r = tree_edits_write(em->edits, ino, edit_text_bytes(&text), size, why);
			if (r < 0) {
				free(text.p);
				tree_release(t);
				return mount_edit_refused(m, r, why, err);
			}
			mount_edit_forget(m, ino);
		}
		free(text.p);
	}
	tree_release(t);
	if (r < 0)
		return mount_fail(err, -r);
	t = tree_edits_current(em->edits);
	n = tree_node(t, ino);
	if (n) {
		mount_edit_stat(t, n, st);
		if (h && h->writing)
			st->st_size = (off_t)h->text.len;
		*ttl = MOUNT_TTL_FOREVER;
	} else {
		mount_fail(err, ENOENT);
	}
	tree_release(t);
	return n != NULL;
}

/* h (locked) took size bytes at off into its text, which held was bytes before: its
 * lines' part (struct edit_file) grown, begun or ended. */
static void lines_written(struct edit_file *h, uint64_t off, uint64_t size, uint64_t was)
{
	const char *text = edit_text_bytes(&h->text);
	if (h->lines_state == LINES_NONE) {
		/* the first write: at the start, or at the end after a whole line (>>) */
		bool line_start = off == 0 || (off == was && text[off - 1] == '\n');
		h->lines_state = line_start ? LINES_ON : LINES_OFF;
		h->lines = (struct edit_lines){ .from = off, .line = 1, .end = off };
		for (const char *p = text; line_start && (p = memchr(p, '\n', (size_t)(text + off - p)));
		     p++)
			h->lines.line++;
	}
	if (h->lines_state == LINES_ON && off == h->lines.end)
		h->lines.end = off + size;
	else
		h->lines_state = LINES_OFF;
}

/* A write of metadata/KEY goes into the writer's text, at its offset (a hole is zeros);
 * the text becomes the value at close. EINVAL at once when the text can no longer
 * become a value of the key's type. */
bool mount_edit_write(struct mount *m, uint64_t ino, void *file, const char *buf, size_t size,
                uint64_t off, struct mount_err *err)
{
	struct edit_file *h = edit_of(file);
	uint64_t end;
	if (!h || !h->writing)
		return mount_fail(err, EROFS);
	if (h->scratch) {
		int sr = scratch_write(h->scratch, buf, size, off);
		return sr >= 0 || mount_fail(err, -sr);
	}
	pthread_mutex_lock(&h->lock);
	int r = h->refused;
	char why[GGUF_ERR_MAX] = "";
	if (r < 0) {   /* refused before: nothing after it is taken */
	} else if (__builtin_add_overflow(off, (uint64_t)size, &end) || end > EDIT_TEXT_MAX) {
		r = -EFBIG;
	} else {
		uint64_t was = h->text.len;
		if ((r = edit_text_write(&h->text, off, buf, size)) == 0) {
			h->dirty = true;
			h->only_truncated = false;
			lines_written(h, off, size, was);
			r = tree_edits_precheck(em_of(m)->edits, ino, edit_text_bytes(&h->text), h->text.len,
			                        h->lines_state == LINES_ON ? &h->lines : NULL, why);
		}
	}
	if (r < 0 && r != -ENOMEM)
		h->refused = r;   /* the close fails with it too, and makes nothing */
	pthread_mutex_unlock(&h->lock);
	if (r < 0 && why[0])   /* the precheck's refusal, said once */
		return mount_edit_refused(m, r, why, err);
	return r == 0 || mount_fail(err, -r);
}

/* may_edit for a change of the names in directory parent: only metadata/'s change
 * (EROFS elsewhere). */
static bool may_edit_in(uint64_t parent, uid_t uid, struct mount_err *err)
{
	return parent == TREE_METADATA_DIR_INO ? may_edit(uid, err) : mount_fail(err, EROFS);
}

/* A new file in metadata/ is a new key, an empty string until written (and typed with
 * user.gguf.type); the open it comes with is a writer's. */
bool mount_edit_create(struct mount *m, uint64_t parent, const char *name, int flags,
                       uid_t uid, struct mount_entry *e, void **file, struct mount_open *o,
                       struct mount_err *err)
{
	struct edits_mount *em = em_of(m);
	if (!may_edit_in(parent, uid, err))
		return false;
	char why[GGUF_ERR_MAX];
	uint64_t ino;
	bool writing = (flags & O_ACCMODE) != O_RDONLY;
	bool key_writer = writing && !scratch_is_name(name);
	if (key_writer && !edit_writer_reserve(em))
		return mount_edit_refused(m, -ENFILE, EDIT_WRITERS_REFUSAL, err);
	int r = tree_edits_create(em->edits, name, &ino, why);
	if (r < 0) {
		if (key_writer)
			edit_writer_release(em);
		return mount_edit_refused(m, r, why, err);
	}
	mount_edit_forget(m, 0);
	struct edit_file *h = edit_file_new(writing);
	if (h)
		h->key_writer = key_writer;
	else if (key_writer)
		edit_writer_release(em);
	struct mount_file *f = NULL;
	int fr = h ? mount_file_now(m, ino, writing, &f) : -ENOMEM;
	if (fr < 0) {
		edit_file_free(em, h);
		return mount_fail(err, -fr);
	}
	f->open = h;
	const bool scratch = f->r.p == &edits_scratch_provider;
	if (scratch)
		h->scratch = (struct scratch_file *)f->r.hold[1];
	if (r == 1 && h->writing) {
		/* a key moved aside made again (tree_edit.h): its text starts empty, made the
		 * value at close, as a shell's "> KEY" */
		h->dirty = h->only_truncated = true;
	}
	e->ino = ino;
	e->attr_ttl = node_attr_ttl(node_stat(&f->r, h, &e->attr));
	e->entry_ttl = 0;   /* as a lookup's in metadata/ */
	o->direct_io = h->writing || scratch;
	*file = f;
	return true;
}

/* rm metadata/KEY deletes the key. */
bool mount_edit_unlink(struct mount *m, uint64_t parent, const char *name, uid_t uid,
                 struct mount_err *err)
{
	if (!may_edit_in(parent, uid, err))
		return false;
	char why[GGUF_ERR_MAX];
	uint64_t ino;
	int r = tree_edits_unlink(em_of(m)->edits, name, &ino, why);
	return mount_edit_done(m, r, why, 0, err);
}

/* mv metadata/A metadata/B renames key A to B (a key B is replaced). */
bool mount_edit_rename(struct mount *m, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, unsigned flags, uid_t uid, struct mount_err *err)
{
	if (!may_edit_in(parent == newparent ? parent : 0, uid, err))
		return false;
	if (flags & RENAME_EXCHANGE)
		return mount_fail(err, EINVAL);
	if ((flags & RENAME_NOREPLACE) && tree_edits_taken(em_of(m)->edits, newname))
		return mount_fail(err, EEXIST);
	char why[GGUF_ERR_MAX];
	int r = tree_edits_rename(em_of(m)->edits, name, newname, why);
	return mount_edit_done(m, r, why, 0, err);
}

/* user.gguf.type of a key: its value's text parsed again as that type. */
bool mount_edit_setxattr(struct mount *m, uint64_t ino, const char *name, const char *value,
                   size_t size, uid_t uid, struct mount_err *err)
{
	if (!may_edit(uid, err))
		return false;
	struct edits_mount *em = em_of(m);
	struct tree *t = tree_edits_current(em->edits);
	const struct tree_node *n = tree_node(t, ino);
	bool key = n && tree_is_key(n), node = n != NULL;
	tree_release(t);
	struct scratch_file *f = mount_edit_scratch_of(em, ino);
	scratch_drop(f);
	if (!key && !f && node)   /* the rest of the tree is read-only */
		return mount_fail(err, EROFS);
	if (strcmp(name, "user.gguf.type") != 0 || f)
		return mount_fail(err, ENOTSUP);
	char why[GGUF_ERR_MAX];
	int r = tree_edits_set_type(em->edits, ino, value, size, why);
	return mount_edit_done(m, r, why, ino, err);
}

bool mount_edit_removexattr(struct mount *m, uint64_t ino, uid_t uid, struct mount_err *err)
{
	(void)m, (void)ino;
	return may_edit(uid, err) && mount_fail(err, ENOTSUP);
}
