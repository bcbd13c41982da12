/* The root of a tree as a provider (the core's, first in every kit): number 1, listing
 * the kit's root table in its order (the core's entries as they always were, then each
 * feature's in registration order), each entry found by its number in its own
 * provider. */
#include "tree_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The root's node in one tree. */
struct tree_root_inst {
	struct tree_node root;
};

static int root_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                     void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)t, (void)base, (void)prev, (void)why;
	struct tree_root_inst *ri = malloc(sizeof *ri);
	if (!ri)
		return -ENOMEM;
	ri->root = (struct tree_node){ .ino = TREE_ROOT_INO, .parent = TREE_ROOT_INO,
	                               .kind = TREE_ROOT, .prov = (uint16_t)r->prov,
	                               .flags = TREE_NODE_DIR, .name = "" };
	*inst = ri;
	return 0;
}

static void root_free(void *inst)
{
	free(inst);
}

static uint64_t root_bytes(const void *inst)
{
	(void)inst;
	return sizeof(struct tree_root_inst);
}

static const struct tree_node *root_node(void *inst, uint64_t ino)
{
	struct tree_root_inst *ri = inst;
	return ino == TREE_ROOT_INO ? &ri->root : NULL;
}

/* The root table entry e of kit k's root entry. */
static const struct tree_root *entry_root(const struct tree_kit *k, unsigned e)
{
	return &k->e[k->roots[e].prov].p->roots[k->roots[e].root];
}

static const struct tree_node *root_lookup(const struct node_ref *dir, const char *name)
{
	const struct tree *t = dir->tree;
	for (unsigned e = 0; e < t->kit->n_roots; e++)
		if (strcmp(entry_root(t->kit, e)->name, name) == 0)
			return tree_node(t, tree_root_no(t, e));
	return NULL;
}

static uint64_t root_count(const struct node_ref *dir, void *open)
{
	(void)open;
	return dir->tree->kit->n_roots;
}

static bool root_entry(const struct node_ref *dir, void *open, uint64_t i,
                       struct node_dirent *e)
{
	(void)open;
	const struct tree *t = dir->tree;
	if (i >= t->kit->n_roots)
		return false;
	const struct tree_root *root = entry_root(t->kit, (unsigned)i);
	*e = (struct node_dirent){ .name = root->name, .ino = tree_root_no(t, (unsigned)i),
	                           .dir = root->dir };
	return true;
}

static void root_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, false, a);
}

const struct tree_provider tree_root_provider = {
	.name = "root",
	.make = root_make,
	.free = root_free,
	.bytes = root_bytes,
	.node = root_node,
	.lookup = root_lookup,
	.count = root_count,
	.entry = root_entry,
	.attr = root_attr,
};
