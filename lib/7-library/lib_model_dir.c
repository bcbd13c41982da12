/* A library's model directory (library.h): before its model is built, the attributes
 * of its first file as listed (a directory of its read bits); once built, its tree's
 * root, listing the root's entries and then compare/ (library_compare.c). The names in
 * it never change (a slot's version never does): the kernel may keep them, and its
 * listing. Lookups in it are the library's (library_lookup: compare/ or the tree). */
#include "library_impl.h"

static void model_dir_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	if (r->tree) {
		lib_tree_attr(r->tree, r->n, a);
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
	return dir->tree ? lib_tree_count(dir->tree, dir->n) + 1 : 0;
}

static bool model_dir_entry(const struct node_ref *dir, void *open, uint64_t i,
                            struct node_dirent *e)
{
	(void)open;
	if (i == lib_tree_count(dir->tree, dir->n))   /* the model directory's last */
		*e = (struct node_dirent){ LIB_COMPARE_NAME, LIB_COMPARE_LOW, true };
	else
		lib_tree_entry(dir->tree, dir->n, i, e);
	return true;
}

const struct tree_provider lib_model_dir_provider = {
	.name = "library model directory",
	.count = model_dir_count,
	.entry = model_dir_entry,
	.attr = model_dir_attr,
};
