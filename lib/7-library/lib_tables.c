/* models.tsv and models.json at a library's root (library.h, library_table.c): made
 * whole by each open from every model of the library now, read from that text past
 * the page cache (their bytes change under one number), sized by their last rendering
 * (their attributes change too: attr TTL 0); mode 0444, the root's owner and times;
 * one block each, as every computed file (node.h). */
#include <errno.h>
#include <stdlib.h>

#include "library_impl.h"

/* A table's text, as its open made it. */
struct lib_table_text {
	char *text;
	size_t len;
};

static bool is_json(const struct node_ref *r)
{
	return r->ino == LIB_JSON_INO;
}

static void tables_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	struct library *lib = r->ctx;
	lib_attr_of_slot(lib->root, a);
	a->read_bits = 0444;
	a->size = atomic_load(is_json(r) ? &lib->json_size : &lib->tsv_size);
	a->flags = NODE_ATTR_CHANGES | NODE_BYTES_CHANGE;
}

static int tables_open(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX])
{
	(void)flags;
	why[0] = 0;
	struct lib_table_text *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	int ret = library_table(r->ctx, is_json(r), &t->text, &t->len);
	if (ret < 0) {
		free(t);
		return ret;
	}
	*open = t;
	return 0;
}

static int64_t tables_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                           uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)r;
	why[0] = 0;
	const struct lib_table_text *t = open;
	return lib_text_read(t->text, t->len, buf, len, off);
}

static void tables_close(const struct node_ref *r, void *open)
{
	(void)r;
	struct lib_table_text *t = open;
	if (t)
		free(t->text);
	free(t);
}

const struct tree_provider lib_tables_provider = {
	.name = "library tables",
	.attr = tables_attr,
	.open = tables_open,
	.close = tables_close,
	.read = tables_read,
};
