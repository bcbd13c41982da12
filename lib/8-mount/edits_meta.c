/* metadata/ with edits (mount_edits.h): the metadata provider of a kit whose trees are
 * edit states (tree_kit_replace of tree_meta_provider, ctx the edits_mount), the same
 * keys, names, numbers and bytes, but writable by the mount's owner (u+w, owned by
 * them: node.h's stat rule), its names come and go with the edits
 * (TREE_P_NAMES_CHANGE), its listing skips keys moved aside and ends with the scratch
 * files, and a key opened to write is a writer: its own text, made the key's value at
 * close (edits_writer.c). Every other operation is the metadata provider's own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edit_text.h"
#include "mount_edits.h"
#include "tree_ino.h"

struct edit_file *edit_file_new(bool writing)
{
	struct edit_file *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	pthread_mutex_init(&f->lock, NULL);
	f->writing = writing;
	return f;
}

void edit_file_free(struct edits_mount *em, struct edit_file *f)
{
	if (!f)
		return;
	if (f->key_writer)
		edit_writer_release(em);
	pthread_mutex_destroy(&f->lock);
	free(f->text.p);
	free(f);
}

bool edit_writer_reserve(struct edits_mount *em)
{
	if (atomic_fetch_add(&em->key_writers, 1) < EDIT_WRITERS_MAX)
		return true;
	atomic_fetch_sub(&em->key_writers, 1);
	return false;
}

void edit_writer_release(struct edits_mount *em)
{
	atomic_fetch_sub(&em->key_writers, 1);
}

static int em_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                     char why[GGUF_ERR_MAX])
{
	(void)ctx;
	return tree_meta_provider.widths(NULL, m, w, why);
}

static int em_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                   void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx;
	return tree_meta_provider.make(NULL, t, r, base, prev, inst, why);
}

static void em_free(void *inst)
{
	tree_meta_provider.free(inst);
}

static uint64_t em_bytes(const void *inst)
{
	return tree_meta_provider.bytes(inst);
}

static const struct tree_node *em_node(void *inst, uint64_t ino)
{
	return tree_meta_provider.node(inst, ino);
}

static const struct tree_node *em_lookup(const struct node_ref *dir, const char *name)
{
	return tree_meta_provider.lookup(dir, name);
}

/* The scratch set listed in dir (metadata/), or NULL for none. */
static struct scratch_set *scratch_in(const struct node_ref *dir)
{
	const struct edits_mount *em = dir->ctx;
	return em && em->edits && dir->ino == TREE_METADATA_DIR_INO ?
	       tree_edits_scratch(em->edits) : NULL;
}

/* The keys, then the scratch files. */
static uint64_t em_count(const struct node_ref *dir, void *open)
{
	struct scratch_set *s = scratch_in(dir);
	return tree_meta_provider.count(dir, open) + (s ? scratch_count(s) : 0);
}

/* A key (false for one moved aside, which keeps its place), or a scratch file (false
 * for one gone since the count), its name in a buffer of the thread's, valid until
 * its next entry. */
static bool em_entry(const struct node_ref *dir, void *open, uint64_t i, struct node_dirent *e)
{
	static _Thread_local char name[256];
	struct scratch_set *s = scratch_in(dir);
	const uint64_t keys = tree_meta_provider.count(dir, open);
	if (i < keys) {
		if (!tree_meta_provider.entry(dir, open, i, e))
			return false;
		const struct edits_mount *em = dir->ctx;
		const struct tree_node *c = s ? tree_node(dir->tree, e->ino) : NULL;
		return !c || !tree_edits_aside(em->edits, dir->tree, c);
	}
	uint64_t ino;
	if (!s || !scratch_entry(s, i - keys, name, &ino))
		return false;
	*e = (struct node_dirent){ name, ino, false };
	return true;
}

/* The metadata provider's attributes, writable: metadata/ and its keys are the owner's
 * to edit; through a writer, its text's size. */
static void em_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	tree_meta_provider.attr(r, open, a);
	a->writable = true;
	struct edit_file *h = open;
	if (h && h->writing) {
		pthread_mutex_lock(&h->lock);
		a->size = h->text.len;
		pthread_mutex_unlock(&h->lock);
	}
}

/* An open for writing (the mount checked the owner): a writer's place, and the text
 * to start from (none after O_TRUNC, which makes the value "" even if nothing
 * follows). An open to read keeps nothing. */
static int em_open(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX])
{
	*open = NULL;
	if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC))
		return 0;
	struct edits_mount *em = r->ctx;
	if (!edit_writer_reserve(em)) {
		snprintf(why, GGUF_ERR_MAX, "%s", EDIT_WRITERS_REFUSAL);
		return -ENFILE;
	}
	struct edit_file *h = edit_file_new(true);
	if (!h) {
		edit_writer_release(em);
		return -ENOMEM;
	}
	h->key_writer = true;
	if (flags & O_TRUNC) {
		h->dirty = h->only_truncated = true;
	} else if (edit_text_load(&h->text, r->tree, r->n) != 0) {
		edit_file_free(em, h);
		return -ENOMEM;
	}
	*open = h;
	return 0;
}

static void em_close(const struct node_ref *r, void *open)
{
	edit_file_free(r->ctx, open);
}

/* A writer reads back its own text; else the key's. */
static int64_t em_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                       uint64_t off, char why[GGUF_ERR_MAX])
{
	struct edit_file *h = open;
	if (!h || !h->writing)
		return tree_meta_provider.read(r, open, buf, len, off, why);
	pthread_mutex_lock(&h->lock);
	uint64_t n = off < h->text.len ? h->text.len - off : 0;
	if (n > len)
		n = len;
	if (n)
		memcpy(buf, edit_text_bytes(&h->text) + off, (size_t)n);
	pthread_mutex_unlock(&h->lock);
	return (int64_t)n;
}

static int em_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	return tree_meta_provider.xattrs(r, x);
}

static const struct tree_root em_roots[] = { { "metadata", true, false } };

const struct tree_provider edits_meta_provider = {
	.name = "metadata with edits",
	.flags = TREE_P_OPEN_END | TREE_P_NAMES_CHANGE,
	.roots = em_roots,
	.n_roots = 1,
	.widths = em_widths,
	.make = em_make,
	.free = em_free,
	.bytes = em_bytes,
	.node = em_node,
	.lookup = em_lookup,
	.count = em_count,
	.entry = em_entry,
	.attr = em_attr,
	.open = em_open,
	.close = em_close,
	.read = em_read,
	.xattrs = em_xattrs,
	.writes = &edits_meta_writes,
};
