#include "tree.h"
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"
#include "render_value.h"

/* The most attributes a node has (a tensor's of a split model). */
#define XATTR_MAX 6

/* The names and values of a node's extended attributes, in listing order. */
struct xattr {
	const char *name;
	char buf[RENDER_TYPE_MAX + 64];
	const char *value;   /* buf, the tensor name (in the mapping) or the shard file name */
	uint64_t len;
};

static int node_xattrs(const struct tree *t, const struct tree_node *n,
                       struct xattr x[XATTR_MAX])
{
	const struct ggufs_model *m = tree_model(t);
	if (n->kind == TREE_META) {
		const struct gguf_value *v = &model_meta(m)->kv[n->index].value;
		x[0].name = "user.gguf.type";
		x[0].len = render_value_type(v, x[0].buf);
		x[0].value = x[0].buf;
		if (v->type != GGUF_TYPE_ARRAY)
			return 1;
		x[1].name = "user.gguf.count";
		x[1].len = (uint64_t)snprintf(x[1].buf, sizeof x[1].buf, "%" PRIu64, v->count);
		x[1].value = x[1].buf;
		return 2;
	}
	if (n->kind == TREE_QUANT) {
		/* how its blocks were had so far: made, read from the disk cache, stored */
		uint64_t v[3];
		static const char *const names[3] = { "user.ggufs.blocks_computed",
			"user.ggufs.blocks_from_disk", "user.ggufs.blocks_stored" };
		tree_quants_counters(t, n, &v[0], &v[1], &v[2]);
		for (int i = 0; i < 3; i++) {
			x[i].name = names[i];
			x[i].len = (uint64_t)snprintf(x[i].buf, sizeof x[i].buf, "%" PRIu64, v[i]);
			x[i].value = x[i].buf;
		}
		return 3;
	}
	if (n->kind != TREE_RAW && n->kind != TREE_F32 && n->kind != TREE_NPY)
		return 0;
	const struct gguf_tensor *g = model_tensor(m, n->index);
	char tmp[16];
	x[0].name = "user.gguf.name";
	x[0].value = g->name.ptr;
	x[0].len = g->name.len;
	x[1].name = "user.gguf.type";
	x[1].len = (uint64_t)snprintf(x[1].buf, sizeof x[1].buf, "%s", ggml_type_name(g->type, tmp));
	x[1].value = x[1].buf;
	x[2].name = "user.gguf.dims";
	int k = 0;
	for (uint32_t d = 0; d < g->n_dims; d++)
		k += snprintf(x[2].buf + k, sizeof x[2].buf - (size_t)k, "%s%" PRIu64, d ? "," : "",
		              g->ne[d]);
	x[2].len = (uint64_t)k;
	x[2].value = x[2].buf;
	x[3].name = "user.gguf.offset";
	x[3].len = (uint64_t)snprintf(x[3].buf, sizeof x[3].buf, "%" PRIu64, g->offset);
	x[3].value = x[3].buf;
	/* where the bytes are in model.gguf, which an edit or a merge moves */
	x[4].name = "user.gguf.model_offset";
	x[4].len = (uint64_t)snprintf(x[4].buf, sizeof x[4].buf, "%" PRIu64,
	                              modelfile_tensor_offset(&t->mf, m, n->index));
	x[4].value = x[4].buf;
	if (model_n_files(m) == 1)
		return 5;
	/* the file that offset is in */
	struct model_file_info f;
	model_file(m, model_tensor_file(m, n->index), &f);
	const char *slash = strrchr(f.path, '/');
	x[5].name = "user.gguf.shard";
	x[5].value = slash ? slash + 1 : f.path;
	x[5].len = strlen(x[5].value);
	return 6;
}

int64_t tree_listxattr(const struct tree *t, const struct tree_node *n, char *buf, uint64_t size)
{
	struct xattr x[XATTR_MAX];
	int count = node_xattrs(t, n, x);
	uint64_t need = 0;
	for (int i = 0; i < count; i++)
		need += strlen(x[i].name) + 1;
	if (size == 0)
		return (int64_t)need;
	if (size < need)
		return -ERANGE;
	for (int i = 0; i < count; i++) {
		size_t l = strlen(x[i].name) + 1;
		memcpy(buf, x[i].name, l);
		buf += l;
	}
	return (int64_t)need;
}

/* A copy out of the mapping, as guard_call runs it. */
struct copy {
	char *to;
	const char *from;
	uint64_t len;
};

static void run_copy(void *ctx)
{
	const struct copy *c = ctx;
	memcpy(c->to, c->from, c->len);
}

int64_t tree_getxattr(const struct tree *t, const struct tree_node *n, const char *name,
                      char *buf, uint64_t size)
{
	struct xattr x[XATTR_MAX];
	int count = node_xattrs(t, n, x);
	for (int i = 0; i < count; i++) {
		if (strcmp(x[i].name, name) != 0)
			continue;
		if (size == 0)
			return (int64_t)x[i].len;
		if (size < x[i].len)
			return -ERANGE;
		/* the tensor name lies in the mapping, which may have shrunk */
		struct copy c = { .to = buf, .from = x[i].value, .len = x[i].len };
		int e = guard_call(run_copy, &c);
		return e < 0 ? e : (int64_t)x[i].len;
	}
	return -ENODATA;
}
