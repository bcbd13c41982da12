/* The changes metadata/ with -o edits takes (ggufs(1) EDITS; mount_edits.h), as the
 * edits_meta provider's writes (provider.h struct tree_writes): writes, truncations and
 * closes of writers of keys, creations, renames and deletions of keys and scratch files,
 * user.gguf.type. The mount has checked that the caller is the mount's owner; each
 * change returns 0 or -errno, with why when it is an edit refused (counted and said by
 * the mount), and names in ch what the kernel must forget of it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>   /* RENAME_NOREPLACE, RENAME_EXCHANGE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edit_text.h"
#include "mount_edits.h"
#include "tree_ino.h"

/* Adds ino (a directory when dir) to ch. */
static void change(struct node_changes *ch, uint64_t ino, bool dir)
{
	if (ch->n < NODE_CHANGES_MAX) {
		ch->c[ch->n].ino = ino;
		ch->c[ch->n++].dir = dir;
	}
}

/* After an edit: the kernel forgets what it cached of the files the edit changed (ino's
 * when not 0, with metadata/'s listing, gguf.json and summary.txt), so that no read
 * shows stale bytes or sizes, nor a mapping stale pages (mount.c ns_read). model.gguf is
 * a new inode (tree_ino.h): the old one's pages stay, its readers' own. */
static void edit_changes(struct node_changes *ch, uint64_t ino)
{
	if (ino)
		change(ch, ino, false);
	change(ch, TREE_METADATA_DIR_INO, true);
	change(ch, TREE_JSON_INO, false);
	change(ch, TREE_SUMMARY_INO, false);
}

/* Makes the text written through writer f the value of the key of r, when it was
 * written since. A write or truncation refused (f->refused) makes nothing, and every
 * close fails with its error again, with no why (said once, where it was refused). A
 * truncation at open with nothing written after it is made at a close like any edit, so
 * that what follows close(2) sees it, FILE included (a shell's "> KEY" then shows the
 * empty value until it writes through its copy of the descriptor). When the key's type
 * has no empty value (a number's, a boolean's), a close before the last fails with
 * EINVAL and no why, neither counted nor said: a shell's "echo 7 > KEY" closes a first
 * descriptor before it writes; the last close (release) refuses it, counted and said.
 * close(2) returns once the value is made, durably; refused, the old value stays. */
static int ew_flush(const struct node_ref *r, void *open, bool last, struct node_changes *ch,
                    char why[GGUF_ERR_MAX])
{
	struct edit_file *f = open;
	const struct edits_mount *em = r->ctx;
	if (!f || !f->writing)
		return 0;
	pthread_mutex_lock(&f->lock);
	int ret = f->refused;
	if (ret < 0) {
		/* said where it was refused */
	} else if (f->dirty && f->only_truncated && !last &&
	           (ret = tree_edits_check(em->edits, r->ino, edit_text_bytes(&f->text),
	                                   f->text.len, why)) < 0) {
		why[0] = 0;   /* still dirty: written next, or refused at the last */
	} else if (f->dirty) {
		ret = tree_edits_write(em->edits, r->ino, edit_text_bytes(&f->text), f->text.len,
		                       why);
		f->dirty = false;   /* refused or made: the next close has nothing new */
	}
	pthread_mutex_unlock(&f->lock);
	/* refused too: a shared mapping's pages may hold the text refused (mount.c ns_read) */
	edit_changes(ch, r->ino);
	return ret;
}

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

/* A size change (truncate, ftruncate) of metadata/KEY: through an open writer its text
 * (made the value at close), else at once the shown text cut or zero-extended; EROFS
 * for metadata/ itself, EFBIG past EDIT_TEXT_MAX. */
static int ew_truncate(const struct node_ref *r, void *open, uint64_t size,
                       struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	struct edit_file *h = open;
	const struct edits_mount *em = r->ctx;
	if (!tree_is_key(r->n))
		return -EROFS;
	if (h && h->writing)
		return writer_truncate(h, size);
	if (size > EDIT_TEXT_MAX)
		return -EFBIG;
	/* the text as shown, cut or zero-extended, made the value now */
	struct vbytes text = { 0 };
	int ret = edit_text_load(&text, r->tree, r->n);
	if (ret == 0)
		ret = edit_text_resize(&text, size);
	if (ret == 0) {
		ret = tree_edits_write(em->edits, r->ino, edit_text_bytes(&text), size, why);
		if (ret == 0)
			edit_changes(ch, r->ino);
	}
	free(text.p);
	return ret;
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
 * the text becomes the value at close. EINVAL at once, with why, when the text can no
 * longer become a value of the key's type; EFBIG past EDIT_TEXT_MAX. */
static int ew_write(const struct node_ref *r, void *open, const char *buf, size_t size,
                    uint64_t off, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	(void)ch;
	struct edit_file *h = open;
	const struct edits_mount *em = r->ctx;
	uint64_t end;
	if (!h || !h->writing)
		return -EROFS;
	pthread_mutex_lock(&h->lock);
	int ret = h->refused;
	if (ret < 0) {   /* refused before: nothing after it is taken */
	} else if (__builtin_add_overflow(off, (uint64_t)size, &end) || end > EDIT_TEXT_MAX) {
		ret = -EFBIG;
	} else {
		uint64_t was = h->text.len;
		if ((ret = edit_text_write(&h->text, off, buf, size)) == 0) {
			h->dirty = true;
			h->only_truncated = false;
			lines_written(h, off, size, was);
			ret = tree_edits_precheck(em->edits, r->ino, edit_text_bytes(&h->text),
			                          h->text.len,
			                          h->lines_state == LINES_ON ? &h->lines : NULL, why);
		}
	}
	if (ret < 0 && ret != -ENOMEM)
		h->refused = ret;   /* the close fails with it too, and makes nothing */
	pthread_mutex_unlock(&h->lock);
	return ret;
}

/* A new file in metadata/ (dir) is a new key, an empty string until written (and typed
 * with user.gguf.type), or a scratch file; the open it comes with is a writer's when
 * flags write. ENFILE past EDIT_WRITERS_MAX writers of keys. */
static int ew_create(const struct node_ref *dir, const char *name, int flags, uint64_t *ino,
                     void **open, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	struct edits_mount *em = dir->ctx;
	const bool writing = (flags & O_ACCMODE) != O_RDONLY;
	const bool key_writer = writing && !scratch_is_name(name);
	if (key_writer && !edit_writer_reserve(em)) {
		snprintf(why, GGUF_ERR_MAX, "%s", EDIT_WRITERS_REFUSAL);
		return -ENFILE;
	}
	const int r = tree_edits_create(em->edits, name, ino, why);
	if (r < 0) {
		if (key_writer)
			edit_writer_release(em);
		return r;
	}
	edit_changes(ch, 0);
	struct edit_file *h = edit_file_new(writing);
	if (!h) {
		if (key_writer)
			edit_writer_release(em);
		why[0] = 0;
		return -ENOMEM;
	}
	h->key_writer = key_writer;
	if (r == 1 && writing) {
		/* a key moved aside made again (tree_edit.h): its text starts empty, made the
		 * value at close, as a shell's "> KEY" */
		h->dirty = h->only_truncated = true;
	}
	*open = h;
	return 0;
}

/* rm metadata/KEY deletes the key (or the scratch file). */
static int ew_unlink(const struct node_ref *dir, const char *name, struct node_changes *ch,
                     char why[GGUF_ERR_MAX])
{
	const struct edits_mount *em = dir->ctx;
	uint64_t ino;
	const int r = tree_edits_unlink(em->edits, name, &ino, why);
	if (r == 0)
		edit_changes(ch, 0);
	return r;
}

/* mv metadata/A metadata/B renames key A to B (a key B is replaced). */
static int ew_rename(const struct node_ref *dir, const char *name, const char *newname,
                     unsigned flags, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	const struct edits_mount *em = dir->ctx;
	if (flags & RENAME_EXCHANGE)
		return -EINVAL;
	if ((flags & RENAME_NOREPLACE) && tree_edits_taken(em->edits, newname))
		return -EEXIST;
	const int r = tree_edits_rename(em->edits, name, newname, why);
	if (r == 0)
		edit_changes(ch, 0);
	return r;
}

/* user.gguf.type of a key: its value's text parsed again as that type (EROFS for
 * metadata/ itself, ENOTSUP for another name). */
static int ew_setxattr(const struct node_ref *r, const char *name, const char *value,
                       size_t size, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	const struct edits_mount *em = r->ctx;
	if (!tree_is_key(r->n))
		return -EROFS;
	if (strcmp(name, "user.gguf.type") != 0)
		return -ENOTSUP;
	const int ret = tree_edits_set_type(em->edits, r->ino, value, size, why);
	if (ret == 0)
		edit_changes(ch, r->ino);
	return ret;
}

const struct tree_writes edits_meta_writes = {
	.write = ew_write,
	.truncate = ew_truncate,
	.flush = ew_flush,
	.create = ew_create,
	.unlink = ew_unlink,
	.rename = ew_rename,
	.setxattr = ew_setxattr,
};
