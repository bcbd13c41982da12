/* A file of a library that is not a model, shown as itself (library.h): its source's
 * attributes (read bits only) and bytes. Its blocks are its size's, as it is stored.
 * An open opens it in the source if it still is the version looked up (ESTALE: another
 * file took the name since); reads go to that handle, which keeps that version. */
#include <errno.h>

#include "evlog.h"
#include "library_impl.h"

static void plain_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	const struct lib_slot *s = lib_ref_slot(r);
	lib_attr_of_slot(s, a);
	a->stored = true;
	a->size = s->st.size > 0 ? (uint64_t)s->st.size : 0;
}

/* The source's handle of r's version into *open: 0, -ESTALE, or -errno; an EIO's cause
 * in why and said in the log, once per cause (its numbers aside), as a read's is. */
static int plain_open(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX])
{
	(void)flags;
	const struct library *lib = r->ctx;
	const struct lib_slot *s = lib_ref_slot(r);
	*open = NULL;
	why[0] = 0;
	int ret = lib->src->ops->open_file(lib->src->ctx, s->src, s->first_version, open, why);
	if (ret == -EIO) {
		if (!why[0])
			gguf_errf(why, "%s: the source could not open it", s->path);
		char key[GGUF_ERR_MAX + 16] = "eio open ";
		evlog_key_cause(key, sizeof key, why);
		evlog(EVLOG_ERR, key, "EIO to an open of %s, because %s", s->path, why);
	}
	return ret;
}

/* The source's bytes (its errors have no line of their own: why empty). */
static int64_t plain_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                          uint64_t off, char why[GGUF_ERR_MAX])
{
	const struct library *lib = r->ctx;
	why[0] = 0;
	return lib->src->ops->read_file(lib->src->ctx, open, buf, len, off);
}

static void plain_close(const struct node_ref *r, void *open)
{
	const struct library *lib = r->ctx;
	if (open)
		lib->src->ops->close_file(lib->src->ctx, open);
}

const struct tree_provider lib_plain_provider = {
	.name = "library file",
	.attr = plain_attr,
	.open = plain_open,
	.close = plain_close,
	.read = plain_read,
};
