/* model.gguf as a provider: the model as one GGUF file (modelfile.h), the tree's layout
 * of it (struct tree's mf: its header, then every tensor's bytes where the header says),
 * a new file in each edit state (a per-state root entry, tree_ino.h). A local model's is
 * read from the mappings without a copy (read_iov), and one that is a local file byte for
 * byte is handed to the kernel to read itself (file_fd: passthrough). */
#include "tree_impl.h"

#include <errno.h>
#include <stdlib.h>

/* model.gguf of one tree. */
struct tree_modelfile {
	const struct tree *t;
	struct tree_node file;
};

static int mf_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                   void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)base, (void)prev, (void)why;
	struct tree_modelfile *mi = malloc(sizeof *mi);
	if (!mi)
		return -ENOMEM;
	mi->t = t;
	mi->file = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO,
		.kind = TREE_MODEL, .prov = (uint16_t)r->prov,
		.flags = model_fetched(t->m) ? 0 : TREE_NODE_IOV, .name = "model.gguf",
		.size = t->mf.size };
	*inst = mi;
	return 0;
}

static void mf_free(void *inst)
{
	free(inst);
}

static uint64_t mf_bytes(const void *inst)
{
	(void)inst;
	return sizeof(struct tree_modelfile);
}

static const struct tree_node *mf_node(void *inst, uint64_t ino)
{
	struct tree_modelfile *mi = inst;
	return ino == mi->file.ino ? &mi->file : NULL;
}

/* Stored: its bytes are the model's, counted by du; dated by the edit state. */
static void mf_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, true, a);
	a->stored = true;
	if (r->n->flags & TREE_NODE_IOV)
		a->flags = NODE_ZERO_COPY;
}

static int64_t mf_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                       uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	if (!tree_clamp(r->n, off, &len))
		return 0;
	/* the sources guard and fetch (modelfile.h) */
	int e = modelfile_read(r->tree->m, &r->tree->mf, off, len, buf, why);
	return e < 0 ? e : (int64_t)len;
}

static int mf_read_iov(const struct node_ref *r, void *open, uint64_t off, uint64_t len,
                       struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	(void)open;
	if (off > r->n->size || len > r->n->size - off || len == 0)
		return 0;
	return modelfile_iov(r->tree->m, &r->tree->mf, off, len, iov, max, why);
}

static int mf_file_fd(const struct node_ref *r, const char **not_file, const char **path)
{
	const struct ggufs_model *m = r->tree->m;
	*path = model_path(m);
	*not_file = NULL;
	if (modelfile_is_file(&r->tree->mf, m))
		return model_file_fd(m, not_file);
	if (model_file_fd(m, not_file) >= 0)
		*not_file = "edited: model.gguf has a header of its own in front of the file's data";
	return -1;
}

static const struct tree_root mf_roots[] = { { "model.gguf", false, true } };

const struct tree_provider tree_modelfile_provider = {
	.name = "model.gguf",
	.roots = mf_roots,
	.n_roots = 1,
	.make = mf_make,
	.free = mf_free,
	.bytes = mf_bytes,
	.node = mf_node,
	.attr = mf_attr,
	.read = mf_read,
	.read_iov = mf_read_iov,
	.file_fd = mf_file_fd,
};
