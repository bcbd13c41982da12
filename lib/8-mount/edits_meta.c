/* metadata/ with edits (mount_edits.h): the metadata provider of a kit whose trees are
 * edit states (tree_kit_replace of tree_meta_provider), the same keys, names, numbers
 * and bytes, but writable by the mount's owner (u+w, owned by them: node.h's stat
 * rule), and its names come and go with the edits (TREE_P_NAMES_CHANGE). Every other
 * operation is the metadata provider's own. */
#include "mount_edits.h"

static int em_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                     char why[GGUF_ERR_MAX])
{
	return tree_meta_provider.widths(ctx, m, w, why);
}

static int em_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                   void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	return tree_meta_provider.make(ctx, t, r, base, prev, inst, why);
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

static uint64_t em_count(const struct node_ref *dir, void *open)
{
	return tree_meta_provider.count(dir, open);
}

static bool em_entry(const struct node_ref *dir, void *open, uint64_t i, struct node_dirent *e)
{
	return tree_meta_provider.entry(dir, open, i, e);
}

/* The metadata provider's attributes, writable: metadata/ and its keys are the owner's
 * to edit. */
static void em_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	tree_meta_provider.attr(r, open, a);
	a->writable = true;
}

static int64_t em_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                       uint64_t off, char why[GGUF_ERR_MAX])
{
	return tree_meta_provider.read(r, open, buf, len, off, why);
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
	.read = em_read,
	.xattrs = em_xattrs,
};
