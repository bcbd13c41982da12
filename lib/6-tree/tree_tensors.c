/* The part of a tree no metadata edit changes (struct tree_tensors, tree_impl.h):
 * tensors/ and stats/, their nodes, names and sizes, stats.tsv's layout, and the tensor
 * part of model.gguf's layouts. Built once with the tree of the model's own metadata,
 * which owns it, and shared by the tree of every edit state. */
#include "tree_impl.h"

#include <stdlib.h>
#include <string.h>

#include "names.h"
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
static char *add_tensor(struct tree_tensors *tt, const struct ggufs_model *m, uint64_t n_orig,
                        uint64_t i, char *w)
{
	const struct gguf_tensor *g = model_tensor(m, i);
	uint64_t base_ino = tree_ino_tensor(n_orig, i, 0);
	struct tree_node *at = &tt->nodes[base_ino - tt->first_ino];
	const char *base_name = w;
	size_t len = names_encode(g->name.ptr, g->name.len, true, w);
	for (uint64_t j = 0; j < (g->has_f32 ? 3u : 1u); j++) {
		static const char *const suffix[] = { "", ".f32", ".npy" };
		static const enum tree_kind kinds[] = { TREE_RAW, TREE_F32, TREE_NPY };
		if (j)
			memmove(w, base_name, len);
		strcpy(w + len, suffix[j]);
		at[j] = (struct tree_node){ .ino = base_ino + j, .parent = TREE_TENSORS_DIR_INO,
		                            .kind = kinds[j], .index = i, .name = w };
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

	uint64_t sino = tree_ino_stats(n_orig, model_n_tensors(m), i);
	struct tree_node *sn = &tt->nodes[sino - tt->first_ino];
	memmove(w, base_name, len);
	w[len] = 0;
	*sn = (struct tree_node){ .ino = sino, .parent = TREE_STATS_DIR_INO, .kind = TREE_STATS,
	                          .index = i, .name = w, .size = render_stats_size(g) };
	w += len + 1;
	tt->stats_children[tt->n_stats_children++] = sn->ino;
	name_index_add(&tt->index, tt->nodes, (uint64_t)(sn - tt->nodes));
	return w;
}

/* Frees the tensor part (NULL too). */
void tree_tensors_free(struct tree_tensors *tt, uint64_t n_t)
{
	if (!tt)
		return;
	free(tt->nodes);
	free(tt->names);
	free(tt->index.slots);
	free(tt->tensor_children);
	free(tt->npy_header_len);
	tree_stats_free(tt->stats, n_t);
	free(tt->stats_children);
	free(tt->tsv_line);
	if (tt->layout)
		modelfile_tensors_free(tt->layout);
	free(tt->layout);
	pthread_mutex_destroy(&tt->layout_lock);
	free(tt);
}

/* The tensor part of m's trees (see tree_impl.h), numbered after n_orig keys, or NULL
 * out of memory. */
struct tree_tensors *tree_tensors_build(const struct ggufs_model *m, uint64_t n_orig)
{
	const uint64_t n_t = model_n_tensors(m);
	struct tree_tensors *tt = calloc(1, sizeof *tt);
	if (!tt)
		return NULL;
	pthread_mutex_init(&tt->layout_lock, NULL);
	atomic_init(&tt->stats_computed, 0);
	tt->first_ino = tree_ino_tensor(n_orig, 0, 0);
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
	    !tt->stats || !tt->stats_children || !tt->tsv_line || !name_index_init(&tt->index, tt->n_nodes)) {
		tree_tensors_free(tt, n_t);
		return NULL;
	}
	char *w = tt->names;
	for (uint64_t i = 0; i < n_t; i++)
		w = add_tensor(tt, m, n_orig, i, w);
	tree_stats_layout(m, tt);
	return tt;
}

/* The tensor part of model.gguf's layouts of tt's model m (made the first time; a
 * single file's unedited model.gguf needs none, so a mount without edits never makes
 * it): NULL with err. */
const struct modelfile_tensors *tree_tensor_layout(struct tree_tensors *tt,
                                                   const struct ggufs_model *m,
                                                   char err[GGUF_ERR_MAX])
{
	pthread_mutex_lock(&tt->layout_lock);
	if (!tt->layout) {
		struct modelfile_tensors *mt = calloc(1, sizeof *mt);
		if (!mt)
			gguf_errf(err, "%s: out of memory for model.gguf", model_path(m));
		else if (modelfile_tensors_build(m, mt, err) < 0) {
			free(mt);
			mt = NULL;
		}
		tt->layout = mt;
	}
	const struct modelfile_tensors *mt = tt->layout;
	pthread_mutex_unlock(&tt->layout_lock);
	return mt;
}

