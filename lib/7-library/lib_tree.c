/* A built model's own files in a library (library.h), until its tree's nodes have
 * providers of their own: one provider over tree.h's query functions, giving what a
 * single mount of the model shows (tree_stat: du counts the model once, in
 * model.gguf), its directories' listings, and whether a quant file's pages are stale.
 * Its reads, extended attributes and passthrough are the mount's tree paths. */
#include "library_impl.h"

void lib_tree_attr(const struct tree *t, const struct tree_node *n, struct node_attr *a)
{
	struct stat st;
	tree_stat(t, n, false, &st);
	a->dir = tree_is_dir(n);
	a->stored = n->kind == TREE_MODEL;
	a->read_bits = st.st_mode & 0444;
	a->uid = st.st_uid;
	a->gid = st.st_gid;
	a->size = n->size;
	a->atim = st.st_atim;
	a->mtim = st.st_mtim;
	a->ctim = st.st_ctim;
}

uint64_t lib_tree_count(const struct tree *t, const struct tree_node *n)
{
	return tree_is_dir(n) ? tree_dir_count(t, n->ino) : 0;
}

void lib_tree_entry(const struct tree *t, const struct tree_node *n, uint64_t i,
                    struct node_dirent *e)
{
	const struct tree_node *c = tree_dir_child(t, n->ino, i);
	*e = (struct node_dirent){ c->name, c->ino, tree_is_dir(c) };
}

static void node_attr_of(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_tree_attr(r->tree, r->n, a);
}

static uint64_t node_count(const struct node_ref *dir, void *open)
{
	(void)open;
	return lib_tree_count(dir->tree, dir->n);
}

static bool node_entry(const struct node_ref *dir, void *open, uint64_t i,
                       struct node_dirent *e)
{
	(void)open;
	lib_tree_entry(dir->tree, dir->n, i, e);
	return true;
}

static bool node_stale(const struct node_ref *r)
{
	return tree_quants_changed(r->tree, r->n);
}

static const struct tree_provider lib_tree_provider = {
	.name = "library model tree",
	.count = node_count,
	.entry = node_entry,
	.attr = node_attr_of,
	.stale = node_stale,
};

void lib_tree_ref(const struct tree *t, const struct tree_node *n, struct node_ref *r)
{
	r->p = &lib_tree_provider;
	r->tree = t;
	r->n = n;
}
