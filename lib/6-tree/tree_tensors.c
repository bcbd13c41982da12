/* tensors/, stats/ and stats.tsv as one provider (struct tree_tensors, tree_impl.h):
 * each tensor's stored bytes (NAME), its values as float32 (NAME.f32) and as a NumPy
 * array (NAME.npy) through the tensor reader, its statistics (stats/NAME, a line of
 * stats.tsv: tree_stats.c). Nothing here changes with the metadata: one instance, built
 * with the tree of the model's own metadata, serves the tree of every edit state
 * (TREE_P_SHARED), its nodes found by one name index for both directories. Numbers: 4 a
 * tensor in its stable range (raw, .f32, .npy, then stats/ after every tensor's three). */
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "reader.h"
#include "render_npy.h"
#include "render_stats.h"

/* Bytes of the .f32 rendering of tensor i; the parser bounded n_elements by 2^63, and a
 * known layout bounds it by 8 x the file size, so x4 cannot overflow. */
static uint64_t f32_size(const struct gguf_tensor *g)
{
	return g->n_elements * sizeof(float);
}

/* The same for every tensor's files: NAME, and with a dequantizer NAME.f32, NAME.npy
 * and stats/NAME. */
static uint64_t tensor_names_bytes(const struct ggufs_model *m)
{
	char buf[NAMES_BUF];
	uint64_t total = 1;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		uint64_t len = names_encode(g->name.ptr, g->name.len, true, buf);
		total += len + 1 + (g->has_f32 ? 2 * (len + 5) + len + 1 : 0);
	}
	return total;
}

/* The files of tensor i of m into tt: tensors/NAME, and with a dequantizer NAME.f32,
 * NAME.npy and stats/NAME, their names written at w: the end of the names written. */
static char *add_tensor(struct tree_tensors *tt, const struct ggufs_model *m, uint64_t i,
                        char *w)
{
	const struct gguf_tensor *g = model_tensor(m, i);
	const struct tree_node *tdir = &tt->dirs[0], *sdir = &tt->dirs[1];
	struct tree_node *at = &tt->nodes[3 * i];
	const char *base_name = w;
	size_t len = names_encode(g->name.ptr, g->name.len, true, w);
	const uint8_t iov = model_tensor_mapped(m, i) ? TREE_NODE_IOV : 0;
	for (unsigned j = 0; j < (g->has_f32 ? 3u : 1u); j++) {
		static const char *const suffix[] = { "", ".f32", ".npy" };
		static const enum tree_kind kinds[] = { TREE_RAW, TREE_F32, TREE_NPY };
		if (j)
			memmove(w, base_name, len);
		strcpy(w + len, suffix[j]);
		at[j] = (struct tree_node){ .ino = tt->first_ino + 3 * i + j, .parent = tdir->ino,
		                            .kind = kinds[j], .prov = tdir->prov,
		                            .role = (uint8_t)(TENSORS_RAW + j),
		                            .flags = j == 0 ? iov : 0, .index = i, .name = w };
		w += len + strlen(suffix[j]) + 1;
		tt->tensor_children[tt->n_tensor_children++] = at[j].ino;
		name_index_add(&tt->index, tt->nodes, (uint64_t)(&at[j] - tt->nodes));
	}
	at[0].size = g->size;
	if (!g->has_f32)
		return w;
	char hdr[NPY_HEADER_MAX];
	tt->npy_header_len[i] = (uint32_t)npy_header(g, hdr);
	at[1].size = f32_size(g);
	at[2].size = tt->npy_header_len[i] + f32_size(g);

	struct tree_node *sn = &tt->nodes[3 * model_n_tensors(m) + i];
	memmove(w, base_name, len);
	w[len] = 0;
	*sn = (struct tree_node){ .ino = tt->first_ino + (uint64_t)(sn - tt->nodes),
	                          .parent = sdir->ino, .kind = TREE_STATS, .prov = sdir->prov,
	                          .role = TENSORS_STATS, .index = i, .name = w,
	                          .size = render_stats_size(g) };
	w += len + 1;
	tt->stats_children[tt->n_stats_children++] = sn->ino;
	name_index_add(&tt->index, tt->nodes, (uint64_t)(sn - tt->nodes));
	return w;
}

static void tensors_free(void *inst)
{
	struct tree_tensors *tt = inst;
	if (!tt)
		return;
	free(tt->nodes);
	free(tt->names);
	free(tt->index.slots);
	free(tt->tensor_children);
	free(tt->npy_header_len);
	tree_stats_free(tt->stats, model_n_tensors(tt->m));
	free(tt->stats_children);
	free(tt->tsv_line);
	free(tt);
}

/* Four numbers a tensor. */
static int tensors_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                          char why[GGUF_ERR_MAX])
{
	(void)ctx;
	const uint64_t n_t = model_n_tensors(m);
	if (n_t > UINT64_MAX / 4) {
		gguf_errf(why, "%" PRIu64 " tensors", n_t);
		return -EFBIG;
	}
	w->stable = 4 * n_t;
	return 0;
}

/* The instance for the base tree t (the model's own file) over numbers r. */
static int tensors_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                        void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)base, (void)prev, (void)why;
	const struct ggufs_model *m = t->m;
	const uint64_t n_t = model_n_tensors(m);
	struct tree_tensors *tt = calloc(1, sizeof *tt);
	if (!tt)
		return -ENOMEM;
	tt->m = m;
	atomic_init(&tt->stats_computed, 0);
	static const struct { const char *name; enum tree_kind kind; uint8_t role; bool dir; }
	dirs[3] = {
		{ "tensors", TREE_DIR_TENSORS, TENSORS_DIR, true },
		{ "stats", TREE_DIR_STATS, TENSORS_STATS_DIR, true },
		{ "stats.tsv", TREE_STATS_TSV, TENSORS_TSV, false },
	};
	for (unsigned d = 0; d < 3; d++)
		tt->dirs[d] = (struct tree_node){ .ino = r->root[d], .parent = TREE_ROOT_INO,
			.kind = dirs[d].kind, .prov = (uint16_t)r->prov, .role = dirs[d].role,
			.flags = dirs[d].dir ? TREE_NODE_DIR : 0, .name = dirs[d].name };
	tt->first_ino = r->stable;
	tt->n_nodes = 4 * n_t;
	tt->nodes = calloc(tt->n_nodes + 1, sizeof *tt->nodes);
	tt->names_len = tensor_names_bytes(m);
	tt->names = malloc(tt->names_len);
	tt->tensor_children = calloc(3 * n_t + 1, sizeof *tt->tensor_children);
	tt->npy_header_len = calloc(n_t + 1, sizeof *tt->npy_header_len);
	tt->stats = tree_stats_new(n_t);
	tt->stats_children = calloc(n_t + 1, sizeof *tt->stats_children);
	tt->tsv_line = calloc(n_t + 1, sizeof *tt->tsv_line);
	if (!tt->nodes || !tt->names || !tt->tensor_children || !tt->npy_header_len ||
	    !tt->stats || !tt->stats_children || !tt->tsv_line ||
	    !name_index_init(&tt->index, tt->n_nodes)) {
		tensors_free(tt);
		return -ENOMEM;
	}
	char *w = tt->names;
	for (uint64_t i = 0; i < n_t; i++)
		w = add_tensor(tt, m, i, w);
	tree_stats_layout(m, tt);
	tt->dirs[2].size = tt->tsv_line[tt->n_stats_children];
	*inst = tt;
	return 0;
}

static uint64_t tensors_bytes(const void *inst)
{
	const struct tree_tensors *tt = inst;
	const uint64_t n_t = model_n_tensors(tt->m);
	return sizeof *tt + (tt->n_nodes + 1) * sizeof *tt->nodes + tt->names_len +
	       (tt->index.mask + 1) * sizeof *tt->index.slots +
	       (3 * n_t + 1) * sizeof *tt->tensor_children + (n_t + 1) * sizeof(uint32_t) +
	       (n_t + 1) * 2 * sizeof(uint64_t);
}

static const struct tree_node *tensors_node(void *inst, uint64_t ino)
{
	struct tree_tensors *tt = inst;
	for (unsigned d = 0; d < 3; d++)
		if (ino == tt->dirs[d].ino)
			return &tt->dirs[d];
	if (ino < tt->first_ino || ino - tt->first_ino >= tt->n_nodes)
		return NULL;
	const struct tree_node *n = &tt->nodes[ino - tt->first_ino];
	return n->ino == ino ? n : NULL;
}

static const struct tree_node *tensors_lookup(const struct node_ref *dir, const char *name)
{
	const struct tree_tensors *tt = dir->inst;
	return name_index_find(&tt->index, tt->nodes, dir->n->ino, name);
}

static uint64_t tensors_count(const struct node_ref *dir, void *open)
{
	(void)open;
	const struct tree_tensors *tt = dir->inst;
	return dir->n->role == TENSORS_DIR ? tt->n_tensor_children
	     : dir->n->role == TENSORS_STATS_DIR ? tt->n_stats_children : 0;
}

static bool tensors_entry(const struct node_ref *dir, void *open, uint64_t i,
                          struct node_dirent *e)
{
	(void)open;
	const struct tree_tensors *tt = dir->inst;
	const uint64_t *children = dir->n->role == TENSORS_DIR ? tt->tensor_children
	                         : tt->stats_children;
	if (i >= tensors_count(dir, NULL))
		return false;
	const struct tree_node *n = &tt->nodes[children[i] - tt->first_ino];
	*e = (struct node_dirent){ .name = n->name, .ino = n->ino };
	return true;
}

/* The model file's attributes; a mapped raw tensor read without a copy. */
static void tensors_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, false, a);
	if (r->n->flags & TREE_NODE_IOV)
		a->flags = NODE_ZERO_COPY;
}

/* Reads [off, off + len) of tensor file n of m (inside it) through the tensor reader:
 * the .npy header rendered here, the values and stored bytes read there. 0 or -errno
 * with the reader's why. */
static int read_tensor(const struct ggufs_model *m, const struct tree_node *n, char *buf,
                       uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	uint64_t i = n->index;
	if (n->role == TENSORS_RAW)
		return reader_raw(m, i, off, len, buf, why);
	if (n->role == TENSORS_NPY) {
		char hdr[NPY_HEADER_MAX];
		uint64_t h = npy_header(model_tensor(m, i), hdr);
		if (off < h) {
			uint64_t k = h - off < len ? h - off : len;
			memcpy(buf, hdr + off, k);
			buf += k;
			off += k;
			len -= k;
		}
		off -= h;
	}
	return reader_f32(m, i, off, len, buf, why);
}

static int64_t tensors_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                            uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	const struct tree_node *n = r->n;
	if (tree_is_dir(n))
		return -EISDIR;
	if (!tree_clamp(n, off, &len))
		return 0;
	struct tree_tensors *tt = r->inst;
	const struct ggufs_model *m = r->tree->m;
	if (n->role == TENSORS_STATS || n->role == TENSORS_TSV)
		return tree_stats_read(tt, m, n, buf, len, off, why);
	int e = read_tensor(m, n, buf, len, off, why);
	return e < 0 ? e : (int64_t)len;
}

/* A raw tensor's bytes as one iovec into the mapping, checked against the file as it
 * is now. */
static int tensors_read_iov(const struct node_ref *r, void *open, uint64_t off, uint64_t len,
                            struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	(void)open;
	const struct ggufs_model *m = r->tree->m;
	const uint8_t *mapped = r->n->role == TENSORS_RAW ? model_tensor_mapped(m, r->n->index)
	                                                  : NULL;
	if (!mapped || max < 1 || off > r->n->size || len > r->n->size - off)
		return 0;
	int fd;
	uint64_t file_off, count;
	if (!reader_raw_span(m, r->n->index, off, len, &fd, &file_off, &count, why) ||
	    count < len)
		return -EIO;
	iov[0] = (struct iovec){ .iov_base = (void *)(mapped + off), .iov_len = (size_t)len };
	return 1;
}

/* A tensor file's user.gguf.*: its name, type, dims, offset in its file and in
 * model.gguf (which an edit or a merge moves), and a split model's file. */
static int tensors_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	const struct tree_node *n = r->n;
	if (n->role != TENSORS_RAW && n->role != TENSORS_F32 && n->role != TENSORS_NPY)
		return 0;
	const struct ggufs_model *m = r->tree->m;
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
	x[4].name = "user.gguf.model_offset";
	x[4].len = (uint64_t)snprintf(x[4].buf, sizeof x[4].buf, "%" PRIu64,
	                              modelfile_tensor_offset(&r->tree->mf, m, n->index));
	x[4].value = x[4].buf;
	if (model_n_files(m) == 1)
		return 5;
	struct model_file_info f;
	model_file(m, model_tensor_file(m, n->index), &f);
	const char *slash = strrchr(f.path, '/');
	x[5].name = "user.gguf.shard";
	x[5].value = slash ? slash + 1 : f.path;
	x[5].len = strlen(x[5].value);
	return 6;
}

uint64_t tree_stats_computed(const struct tree *t)
{
	const struct tree_tensors *tt = t->inst[KIT_TENSORS];
	return atomic_load(&tt->stats_computed);
}

static const struct tree_root tensors_roots[] = {
	{ "tensors", true, false }, { "stats", true, false }, { "stats.tsv", false, false },
};

const struct tree_provider tree_tensors_provider = {
	.name = "tensors",
	.flags = TREE_P_SHARED,
	.roots = tensors_roots,
	.n_roots = 3,
	.widths = tensors_widths,
	.make = tensors_make,
	.free = tensors_free,
	.bytes = tensors_bytes,
	.node = tensors_node,
	.lookup = tensors_lookup,
	.count = tensors_count,
	.entry = tensors_entry,
	.attr = tensors_attr,
	.read = tensors_read,
	.read_iov = tensors_read_iov,
	.xattrs = tensors_xattrs,
};
