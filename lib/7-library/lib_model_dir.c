/* A library's model directory (library.h): before its model is built, the attributes
 * of its first file as listed (a directory of its read bits); once built, its tree's
 * root, listing the root's entries and then compare/ (library_compare.c). The names in
 * it never change (a slot's version never does): the kernel may keep them, and its
 * listing. Lookups in it are the library's (library_lookup: compare/ or the tree). */
#include "library_impl.h"

/* The tree's own ref of its root, which dir (built) shows. */
static struct node_ref root_of(const struct node_ref *dir)
{
	struct node_ref root;
	tree_ref(dir->tree, dir->n->ino, &root);
	return root;
}

static void model_dir_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	if (r->tree) {
		const struct node_ref root = root_of(r);
		root.p->attr(&root, NULL, a);
		return;
	}
	lib_attr_of_slot(lib_ref_slot(r), a);
	a->dir = true;
}

/* The tree root's entries, then compare/; none before the model is built (an open
 * builds it). */
static uint64_t model_dir_count(const struct node_ref *dir, void *open)
{
	(void)open;
	if (!dir->tree)
		return 0;
	const struct node_ref root = root_of(dir);
	return root.p->count(&root, NULL) + 1;
}

static bool model_dir_entry(const struct node_ref *dir, void *open, uint64_t i,
                            struct node_dirent *e)
{
	(void)open;
	const struct node_ref root = root_of(dir);
	if (i == root.p->count(&root, NULL)) {   /* the model directory's last */
		*e = (struct node_dirent){ LIB_COMPARE_NAME, LIB_COMPARE_LOW, true };
		return true;
	}
	return root.p->entry(&root, NULL, i, e);
}

const struct tree_provider lib_model_dir_provider = {
	.name = "library model directory",
	.count = model_dir_count,
	.entry = model_dir_entry,
	.attr = model_dir_attr,
};
