/* The scratch files of metadata/ with edits as the edits namespace's own provider
 * (mount_edits.h, scratch.h): plain files in memory, writable by the mount's owner,
 * whose size and bytes change with every write (never cached), with no extended
 * attributes (vim copies a backup's to the new file). A ref holds its file
 * (edits_scratch_ref: hold[1]), so an open one unlinked is still read and written. */
#include <errno.h>
#include <fcntl.h>

#include "mount_edits.h"

static struct scratch_file *file_of(const struct node_ref *r)
{
	return (struct scratch_file *)r->hold[1];
}

/* A file as a key's is (the model file's read bits), with its own size and time. */
static void es_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	const struct edits_mount *em = r->ctx;
	struct timespec t;
	scratch_stat(file_of(r), &a->size, &t);
	a->atim = a->mtim = a->ctim = t;
	a->read_bits = model_stat(tree_model(em->base))->st_mode & 0444;
	a->writable = true;
	a->flags = NODE_ATTR_CHANGES | NODE_BYTES_CHANGE;
}

/* An open (the mount checked the owner for a writer): O_TRUNC empties the file. */
static int es_open(const struct node_ref *r, int flags, void **open, char why[GGUF_ERR_MAX])
{
	(void)why;
	const bool write = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
	int ret = write && (flags & O_TRUNC) ? scratch_truncate(file_of(r), 0) : 0;
	if (ret < 0)
		return ret;
	struct edit_file *h = edit_file_new(write);
	if (!h)
		return -ENOMEM;
	*open = h;
	return 0;
}

static void es_close(const struct node_ref *r, void *open)
{
	edit_file_free(r->ctx, open);
}

static int64_t es_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                       uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open, (void)why;
	return (int64_t)scratch_read(file_of(r), buf, len, off);
}

static int es_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	(void)r, (void)x;
	return 0;
}

/* Writes, truncations (the mount checked the owner): ENOSPC, EFBIG, ENOMEM as
 * scratch.h's; nothing for the kernel to forget (their bytes are read past its cache,
 * their attributes never kept). */
static int es_write(const struct node_ref *r, void *open, const char *buf, size_t size,
                    uint64_t off, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	(void)open, (void)ch, (void)why;
	return scratch_write(file_of(r), buf, size, off);
}

static int es_truncate(const struct node_ref *r, void *open, uint64_t size,
                       struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	(void)open, (void)ch, (void)why;
	return scratch_truncate(file_of(r), size);
}

/* No attribute is set on a scratch file: ENOTSUP. */
static int es_setxattr(const struct node_ref *r, const char *name, const char *value,
                       size_t size, struct node_changes *ch, char why[GGUF_ERR_MAX])
{
	(void)r, (void)name, (void)value, (void)size, (void)ch, (void)why;
	return -ENOTSUP;
}

static const struct tree_writes es_writes = {
	.write = es_write,
	.truncate = es_truncate,
	.setxattr = es_setxattr,
};

const struct tree_provider edits_scratch_provider = {
	.name = "scratch files",
	.attr = es_attr,
	.open = es_open,
	.close = es_close,
	.read = es_read,
	.xattrs = es_xattrs,
	.writes = &es_writes,
};
