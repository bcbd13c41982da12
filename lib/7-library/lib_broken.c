/* The directory of a library's model that does not parse (library.h): it holds `error`
 * alone, the line `ggufs FILE` would print ("ggufs: LINE\n"), set once by the model's
 * build (one block, as every computed file). The directory's listing is not cached (as
 * no library directory's but a model's tree); the names in it never change. */
#include <string.h>

#include "library_impl.h"

static void broken_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_attr_of_slot(lib_ref_slot(r), a);
	a->dir = true;
	a->flags = NODE_LIST_CHANGES;
}

static uint64_t broken_count(const struct node_ref *dir, void *open)
{
	(void)dir, (void)open;
	return 1;
}

static bool broken_entry(const struct node_ref *dir, void *open, uint64_t i,
                         struct node_dirent *e)
{
	(void)dir, (void)open, (void)i;
	*e = (struct node_dirent){ "error", LIB_ERROR_LOW, false };
	return true;
}

const struct tree_provider lib_broken_provider = {
	.name = "library broken model",
	.count = broken_count,
	.entry = broken_entry,
	.attr = broken_attr,
};

/* The error's text (set before the slot was BROKEN, never changed after), or NULL. */
static const char *error_text(const struct node_ref *r)
{
	return lib_ref_slot(r)->error;
}

static void error_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_attr_of_slot(lib_ref_slot(r), a);
	const char *text = error_text(r);
	a->size = text ? strlen(text) : 0;
}

static int64_t error_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                          uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	why[0] = 0;
	const char *text = error_text(r);
	return lib_text_read(text, text ? strlen(text) : 0, buf, len, off);
}

const struct tree_provider lib_error_provider = {
	.name = "library model error",
	.attr = error_attr,
	.read = error_read,
};
