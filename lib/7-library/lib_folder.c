/* The root and the folders of a library as one provider (library.h): a folder's
 * attributes are its source's (read bits only), and change under its number (attr TTL
 * 0); its names come and go with the source (no entry kept, no listing cached). An
 * open lists the folder (again, when it changed) into a listing that holds the slots it
 * names while it is open; the root's starts with models.tsv and models.json. */
#include <errno.h>
#include <stdlib.h>

#include "library_impl.h"

struct lib_listing *lib_listing_new(size_t room)
{
	struct lib_listing *l = malloc(sizeof *l + room * sizeof l->e[0]);
	if (l)
		l->n = 0;
	return l;
}

void lib_listing_add(struct library *lib, struct lib_listing *l, struct lib_slot *c,
                     uint64_t ino, bool dir)
{
	lib_slot_hold(lib, c);
	l->e[l->n++] = (struct lib_list_entry){ c->name, ino, dir, c };
}

void lib_listing_free(struct library *lib, struct lib_listing *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&lib->lock);
	for (size_t i = 0; i < l->n; i++)
		if (l->e[i].held)
			lib_slot_drop(lib, l->e[i].held);
	lib_listings_trim(lib);
	lib_unlock(lib);
	free(l);
}

uint64_t lib_listing_count(const struct node_ref *dir, void *open)
{
	(void)dir;
	const struct lib_listing *l = open;
	return l ? l->n : 0;
}

bool lib_listing_entry(const struct node_ref *dir, void *open, uint64_t i,
                       struct node_dirent *e)
{
	(void)dir;
	const struct lib_list_entry *le = &((const struct lib_listing *)open)->e[i];
	*e = (struct node_dirent){ le->name, le->ino, le->dir };
	return true;
}

void lib_listing_close(const struct node_ref *dir, void *open)
{
	lib_listing_free(dir->ctx, open);
}

/* A folder's attributes: the source's when it was listed, read bits only. */
static void folder_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_attr_of_slot(lib_ref_slot(r), a);
	a->dir = true;
	a->flags = NODE_ATTR_CHANGES | NODE_LIST_CHANGES;
}

/* The listing of folder r, as it is now (read again if it changed), into *open: 0,
 * -ENOMEM, or -errno of the source's listing (said in the log). */
static int folder_open(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX])
{
	(void)flags;
	why[0] = 0;
	struct library *lib = r->ctx;
	struct lib_slot *f = lib_ref_slot(r);
	pthread_mutex_lock(&lib->lock);
	int ret = lib_folder_refresh(lib, f, false);
	const bool root = f->no == 0;
	struct lib_listing *l = ret == 0 ? lib_listing_new(f->n_children + (root ? 2 : 0)) : NULL;
	if (ret == 0 && !l)
		ret = -ENOMEM;
	if (l && root) {
		l->e[l->n++] = (struct lib_list_entry){ LIB_TSV_NAME, LIB_TSV_INO, false, NULL };
		l->e[l->n++] = (struct lib_list_entry){ LIB_JSON_NAME, LIB_JSON_INO, false, NULL };
	}
	for (size_t i = 0; l && i < f->n_children; i++) {
		struct lib_slot *c = f->children[i];
		lib_listing_add(lib, l, c, lib_ino(c->no, 1), c->type != LIB_NODE_FILE);
	}
	lib_unlock(lib);
	if (ret < 0) {
		lib_listing_free(lib, l);
		return ret;
	}
	*open = l;
	return 0;
}

const struct tree_provider lib_folder_provider = {
	.name = "library folder",
	.flags = TREE_P_NAMES_CHANGE,
	.count = lib_listing_count,
	.entry = lib_listing_entry,
	.attr = folder_attr,
	.open = folder_open,
	.close = lib_listing_close,
};
