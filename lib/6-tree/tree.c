#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "hash.h"
#include "modelfile.h"
#include "names.h"
#include "reader.h"
#include "render_json.h"
#include "render_mark.h"
#include "render_npy.h"
#include "render_stats.h"
#include "render_summary.h"
#include "render_value.h"
#include "sink.h"

static const char *const fixed_names[] = {
	[TREE_ROOT_INO] = "", [TREE_METADATA_DIR_INO] = "metadata",
	[TREE_TENSORS_DIR_INO] = "tensors", [TREE_JSON_INO] = "gguf.json",
	[TREE_SUMMARY_INO] = "summary.txt", [TREE_STATS_DIR_INO] = "stats",
	[TREE_STATS_TSV_INO] = "stats.tsv",
	[TREE_MODEL_INO] = "model.gguf",
};
static const enum tree_kind fixed_kinds[] = {
	[TREE_ROOT_INO] = TREE_ROOT, [TREE_METADATA_DIR_INO] = TREE_DIR_METADATA,
	[TREE_TENSORS_DIR_INO] = TREE_DIR_TENSORS, [TREE_JSON_INO] = TREE_JSON,
	[TREE_SUMMARY_INO] = TREE_SUMMARY, [TREE_STATS_DIR_INO] = TREE_DIR_STATS,
	[TREE_STATS_TSV_INO] = TREE_STATS_TSV, [TREE_MODEL_INO] = TREE_MODEL,
};
#define LAST_FIXED_INO TREE_MODEL_INO

/* The lookup hash of name in directory dir. */
static uint64_t hash_entry(uint64_t dir, const char *name)
{
	return hash_bytes(name, strlen(name), dir);
}

/* Enters n, one of t's nodes, in the lookup table (linear probing; the table is at most
 * half full) by its position in nodes, which is its ino but for model.gguf's. */
static void slot_add(struct tree *t, const struct tree_node *n)
{
	uint64_t i = hash_entry(n->parent, n->name) & t->slot_mask;
	while (t->slots[i])
		i = (i + 1) & t->slot_mask;
	t->slots[i] = (uint64_t)(n - t->nodes);
}

/* Emits the content of a rendered file (metadata/KEY, gguf.json, summary.txt) into s,
 * which keeps the window it was asked for: all of it, or what follows the mark from
 * (s->pos set to the mark's). */
static void render(const struct tree *t, const struct tree_node *n, struct sink *s,
                   const struct render_mark *from)
{
	const struct ggufs_model *m = t->m;
	switch (n->kind) {
	case TREE_META:
		if (from)
			render_value_from(s, &m->meta->kv[n->index].value, from);
		else
			render_value(s, &m->meta->kv[n->index].value);
		break;
	case TREE_JSON:
		render_json_from(s, m, &t->mf, from);
		break;
	case TREE_SUMMARY:
		render_summary(s, m);
		break;
	default:
		break;
	}
}

/* The marks of n, when its renderer can start again from one (gguf.json and
 * metadata/KEY; summary.txt is small and cannot), else NULL. */
static struct render_marks *marks_of(const struct tree *t, const struct tree_node *n)
{
	return n->kind == TREE_JSON || n->kind == TREE_META ? &t->marks[n->ino] : NULL;
}

uint64_t tree_render_marks(const struct tree *t, const struct tree_node *n)
{
	const struct render_marks *ms = marks_of(t, n);
	return ms ? ms->n : 0;
}

/* Runs a renderer into a counting sink: the exact size of the file it renders. Its
 * marks are kept for the reads. */
static uint64_t rendered_size(const struct tree *t, const struct tree_node *n)
{
	struct sink s = sink_counter();
	struct render_marks *ms = marks_of(t, n);
	if (ms)
		render_marks_record(&s, ms);
	render(t, n, &s, NULL);
	return s.pos;
}

/* Bytes of the .f32 rendering of tensor i; the parser bounded n_elements by 2^63, and a
 * known layout bounds it by 8 x the file size, so x4 cannot overflow. */
static uint64_t f32_size(const struct gguf_tensor *g)
{
	return g->n_elements * sizeof(float);
}

/* Bytes that every file name takes, NULs included: names are escaped twice at mount
 * rather than reserving the worst case for each, so memory follows the header. */
static uint64_t names_bytes(const struct ggufs_model *m)
{
	char buf[NAMES_BUF];
	uint64_t total = 1;
	for (uint64_t k = 0; k < m->meta->n_kv; k++)
		total += names_encode(m->meta->kv[k].key.ptr, m->meta->kv[k].key.len, false, buf) + 1;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *g = m->tensors[i].t;
		uint64_t len = names_encode(g->name.ptr, g->name.len, true, buf);
		/* NAME, and with a dequantizer NAME.f32, NAME.npy and stats/NAME */
		total += len + 1 + (g->has_f32 ? 2 * (len + 5) + len + 1 : 0);
	}
	return total;
}

/* The fixed nodes: the root and the directories and files in it; model.gguf has a
 * number of its own in each edit state (tree_ino.h). */
static void add_fixed(struct tree *t, const struct ov_state *s)
{
	for (uint64_t ino = TREE_ROOT_INO; ino <= LAST_FIXED_INO; ino++) {
		struct tree_node *n = &t->nodes[ino];
		*n = (struct tree_node){ .ino = ino, .parent = TREE_ROOT_INO,
		                         .kind = fixed_kinds[ino], .name = fixed_names[ino] };
		if (ino != TREE_ROOT_INO)
			slot_add(t, n);
	}
	t->nodes[TREE_MODEL_INO].size = t->mf.size;
	if (s && s->gen)
		t->nodes[TREE_MODEL_INO].ino = TREE_MODEL_STATE_INO + s->gen;
}

/* metadata/KEY of every key, numbered by its id in state s (or its place in the file),
 * its name written at w: the end of the names written. */
static char *add_keys(struct tree *t, const struct ov_state *s, char *w)
{
	const struct ggufs_model *m = t->m;
	for (uint64_t k = 0; k < m->meta->n_kv; k++) {
		uint64_t ino = tree_ino_key(t->n_orig, m->n_tensors, s ? s->keys[k].id : k);
		struct tree_node *n = &t->nodes[ino];
		const struct gguf_str *key = &m->meta->kv[k].key;
		t->meta_ino[k] = ino;
		*n = (struct tree_node){ .ino = ino, .parent = TREE_METADATA_DIR_INO,
		                         .kind = TREE_META, .index = k, .name = w };
		w += names_encode(key->ptr, key->len, false, w) + 1;
		slot_add(t, n);
	}
	return w;
}

/* The files of tensor i: tensors/NAME, and with a dequantizer NAME.f32, NAME.npy and
 * stats/NAME, their names written at w: the end of the names written. */
static char *add_tensor(struct tree *t, uint64_t i, char *w)
{
	const struct gguf_tensor *g = t->m->tensors[i].t;
	uint64_t base_ino = tree_ino_tensor(t->n_orig, i, 0);
	const char *base_name = w;
	size_t len = names_encode(g->name.ptr, g->name.len, true, w);
	for (uint64_t j = 0; j < (g->has_f32 ? 3u : 1u); j++) {
		static const char *const suffix[] = { "", ".f32", ".npy" };
		static const enum tree_kind kinds[] = { TREE_RAW, TREE_F32, TREE_NPY };
		struct tree_node *n = &t->nodes[base_ino + j];
		if (j)
			memmove(w, base_name, len);
		strcpy(w + len, suffix[j]);
		*n = (struct tree_node){ .ino = base_ino + j, .parent = TREE_TENSORS_DIR_INO,
		                         .kind = kinds[j], .index = i, .name = w };
		w += len + strlen(suffix[j]) + 1;
		t->tensor_children[t->n_tensor_children++] = n->ino;
		slot_add(t, n);
	}
	t->nodes[base_ino].size = g->size;
	if (!g->has_f32)
		return w;
	char hdr[NPY_HEADER_MAX];
	t->npy_header_len[i] = (uint32_t)npy_header(g, hdr);
	t->nodes[base_ino + 1].size = f32_size(g);
	t->nodes[base_ino + 2].size = t->npy_header_len[i] + f32_size(g);

	uint64_t sino = tree_ino_stats(t->n_orig, t->m->n_tensors, i);
	struct tree_node *sn = &t->nodes[sino];
	memmove(w, base_name, len);
	w[len] = 0;
	*sn = (struct tree_node){ .ino = sino, .parent = TREE_STATS_DIR_INO, .kind = TREE_STATS,
	                          .index = i, .name = w, .size = render_stats_size(g) };
	w += len + 1;
	t->stats_children[t->n_stats_children++] = sn->ino;
	slot_add(t, sn);
	return w;
}

/* The node in prev (the tree of the state before s) of the key at position k of s when
 * that key is unchanged (same id and the very same value: an edit copies the keys it
 * leaves alone), else NULL. Keys are in id order in both states, so *j, where the last
 * call stopped in prev, only moves forward. */
static const struct tree_node *kept_key(const struct tree *prev, const struct ov_state *s,
                                        uint64_t k, uint64_t *j)
{
	const struct ov_state *ps = prev->state;
	const struct ov_key *key = &s->keys[k];
	while (*j < ps->n && ps->keys[*j].id < key->id)
		(*j)++;
	if (*j >= ps->n)
		return NULL;
	const struct ov_key *was = &ps->keys[*j];
	bool same = was->id == key->id && was->kv.value.data == key->kv.value.data &&
	            was->kv.value.size == key->kv.value.size &&
	            was->kv.value.type == key->kv.value.type;
	return same ? &prev->nodes[prev->meta_ino[*j]] : NULL;
}

/* A copy of marks from into to (empty): false out of memory. */
static bool copy_marks(struct render_marks *to, const struct render_marks *from)
{
	if (!from->n)
		return true;
	to->v = malloc(from->n * sizeof *to->v);
	if (!to->v)
		return false;
	memcpy(to->v, from->v, from->n * sizeof *to->v);
	to->n = to->cap = from->n;
	return true;
}

/* Builds the tree of m, whose keys have the ids of state s (or are the file's own, s
 * NULL), sharing base's statistics when base is given. With prev, the tree of the state
 * s was made from, a key left unchanged takes its size and marks from there instead of
 * being rendered again (a 262,144-token vocabulary is megabytes of text). */
static struct tree *build(const struct ggufs_model *m, struct ov_state *s,
                          const struct tree *base, const struct tree *prev,
                          char err[GGUF_ERR_MAX])
{
	struct tree *t = calloc(1, sizeof *t);
	uint64_t n_kv = m->meta->n_kv, n_t = m->n_tensors;
	uint64_t n_orig = s ? s->n_orig : n_kv, ids = s ? s->next_id : n_kv;
	char *w;

	guard_install();
	if (!t)
		goto oom;
	t->m = m;
	t->state = s ? ov_get(s) : NULL;
	t->base = base;
	atomic_init(&t->refs, 1);
	t->n_orig = n_orig;
	t->n_nodes = tree_ino_key(n_orig, n_t, ids);
	t->nodes = calloc(t->n_nodes, sizeof *t->nodes);
	t->meta_ino = calloc(n_kv + 1, sizeof *t->meta_ino);
	t->names = malloc(names_bytes(m));
	t->tensor_children = calloc(3 * n_t + 1, sizeof *t->tensor_children);
	t->npy_header_len = calloc(n_t + 1, sizeof *t->npy_header_len);
	uint64_t cap = 16;
	while (cap < 2 * t->n_nodes)
		cap <<= 1;
	t->slots = calloc(cap, sizeof *t->slots);
	t->slot_mask = cap - 1;
	t->n_marks = t->n_nodes;
	t->marks = calloc(t->n_marks, sizeof *t->marks);
	t->stats = base ? base->stats : tree_stats_new(n_t);
	t->stats_children = calloc(n_t + 1, sizeof *t->stats_children);
	t->tsv_line = calloc(n_t + 1, sizeof *t->tsv_line);
	if (!t->nodes || !t->meta_ino || !t->names || !t->tensor_children || !t->npy_header_len ||
	    !t->slots || !t->marks || !t->stats || !t->stats_children || !t->tsv_line)
		goto oom;
	/* a state that holds the model's own metadata is the model's own file, byte for
	 * byte (its padding need not be zeros, as a rebuilt header's is) */
	bool own = s && base && ov_unchanged(s, base->m);
	if (modelfile_build(own ? base->m : m, &t->mf, err) < 0) {
		tree_free(t);
		return NULL;
	}

	add_fixed(t, s);
	w = add_keys(t, s, t->names);
	for (uint64_t i = 0; i < n_t; i++)
		w = add_tensor(t, i, w);

	tree_stats_layout(t);

	/* sized last: the renderers see a complete tree */
	t->nodes[TREE_JSON_INO].size = rendered_size(t, &t->nodes[TREE_JSON_INO]);
	t->nodes[TREE_SUMMARY_INO].size = rendered_size(t, &t->nodes[TREE_SUMMARY_INO]);
	uint64_t j = 0;
	for (uint64_t k = 0; k < n_kv; k++) {
		struct tree_node *n = &t->nodes[t->meta_ino[k]];
		const struct tree_node *was = prev && prev->state && s ? kept_key(prev, s, k, &j) : NULL;
		if (was && copy_marks(&t->marks[n->ino], &prev->marks[was->ino]))
			n->size = was->size;
		else
			n->size = rendered_size(t, n);
	}
	return t;
oom:
	snprintf(err, GGUF_ERR_MAX, "%s: out of memory for the tree of %" PRIu64 " keys and %"
	         PRIu64 " tensors", m->path, n_kv, n_t);
	tree_free(t);
	return NULL;
}

struct tree *tree_build(const struct ggufs_model *m, char err[GGUF_ERR_MAX])
{
	return build(m, NULL, NULL, NULL, err);
}

struct tree *tree_build_state(const struct tree *base, struct ov_state *s,
                              const struct tree *prev, char err[GGUF_ERR_MAX])
{
	return build(&s->view, s, base, prev, err);
}

struct tree *tree_hold(struct tree *t)
{
	atomic_fetch_add(&t->refs, 1);
	return t;
}

void tree_release(struct tree *t)
{
	if (t && atomic_fetch_sub(&t->refs, 1) == 1)
		tree_free(t);
}

uint64_t tree_key_ino(const struct tree *t, uint64_t k)
{
	return k < t->m->meta->n_kv ? t->meta_ino[k] : 0;
}

const struct ov_state *tree_state(const struct tree *t)
{
	return t->state;
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	free(t->nodes);
	free(t->names);
	free(t->tensor_children);
	free(t->npy_header_len);
	free(t->slots);
	if (t->marks)
		for (uint64_t ino = 0; ino < t->n_marks; ino++)
			render_marks_free(&t->marks[ino]);
	free(t->marks);
	if (!t->base)
		tree_stats_free(t->stats, t->m->n_tensors);
	free(t->meta_ino);
	ov_put(t->state);
	free(t->stats_children);
	free(t->tsv_line);
	free(t->key_time);
	modelfile_free(&t->mf);
	free(t);
}

const struct ggufs_model *tree_model(const struct tree *t)
{
	return t->m;
}

const struct tree_node *tree_tensor_file(const struct tree *t, uint64_t i, enum tree_kind kind)
{
	const uint64_t n_t = t->m->n_tensors;
	if (i >= n_t)
		return NULL;
	switch (kind) {
	case TREE_RAW:
		return tree_node(t, tree_ino_tensor(t->n_orig, i, 0));
	case TREE_F32:
		return tree_node(t, tree_ino_tensor(t->n_orig, i, 1));
	case TREE_NPY:
		return tree_node(t, tree_ino_tensor(t->n_orig, i, 2));
	case TREE_STATS:
		return tree_node(t, tree_ino_stats(t->n_orig, n_t, i));
	default:
		return NULL;
	}
}

const struct tree_node *tree_node(const struct tree *t, uint64_t ino)
{
	if (ino == t->nodes[TREE_MODEL_INO].ino)
		return &t->nodes[TREE_MODEL_INO];
	if (ino == 0 || ino >= t->n_nodes || t->nodes[ino].ino != ino)
		return NULL;
	return &t->nodes[ino];
}

uint64_t tree_model_ino(const struct tree *t)
{
	return t->nodes[TREE_MODEL_INO].ino;
}

const struct tree_node *tree_lookup(const struct tree *t, uint64_t dir, const char *name)
{
	for (uint64_t i = hash_entry(dir, name) & t->slot_mask; t->slots[i];
	     i = (i + 1) & t->slot_mask) {
		const struct tree_node *n = &t->nodes[t->slots[i]];
		if (n->parent == dir && strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

uint64_t tree_dir_count(const struct tree *t, uint64_t dir)
{
	switch (dir) {
	case TREE_ROOT_INO:
		return LAST_FIXED_INO - 1;
	case TREE_METADATA_DIR_INO:
		return t->m->meta->n_kv;
	case TREE_TENSORS_DIR_INO:
		return t->n_tensor_children;
	case TREE_STATS_DIR_INO:
		return t->n_stats_children;
	default:
		return 0;
	}
}

const struct tree_node *tree_dir_child(const struct tree *t, uint64_t dir, uint64_t i)
{
	if (i >= tree_dir_count(t, dir))
		return NULL;
	switch (dir) {
	case TREE_ROOT_INO:   /* the fixed names after the root, in number order */
		return &t->nodes[TREE_METADATA_DIR_INO + i];
	case TREE_METADATA_DIR_INO:
		return &t->nodes[t->meta_ino[i]];
	case TREE_STATS_DIR_INO:
		return &t->nodes[t->stats_children[i]];
	default:
		return &t->nodes[t->tensor_children[i]];
	}
}

bool tree_is_dir(const struct tree_node *n)
{
	return n->kind == TREE_ROOT || n->kind == TREE_DIR_METADATA || n->kind == TREE_DIR_TENSORS ||
	       n->kind == TREE_DIR_STATS;
}

mode_t tree_mode(const struct tree_node *n, mode_t gguf_mode)
{
	mode_t r = gguf_mode & 0444;
	if (tree_is_dir(n))
		return S_IFDIR | r | (r >> 2);
	return S_IFREG | r;
}

/* Reads [off, off + len) of tensor file n (inside it) through the tensor reader: the
 * .npy header rendered here, the values and stored bytes read there. 0 or -errno. */
static int read_tensor(const struct tree *t, const struct tree_node *n, char *buf,
                       uint64_t len, uint64_t off)
{
	uint64_t i = n->index;
	if (n->kind == TREE_RAW)
		return reader_raw(t->m, i, off, len, buf);
	if (n->kind == TREE_NPY) {
		char hdr[NPY_HEADER_MAX];
		uint64_t h = npy_header(t->m->tensors[i].t, hdr);
		if (off < h) {
			uint64_t k = h - off < len ? h - off : len;
			memcpy(buf, hdr + off, k);
			buf += k;
			off += k;
			len -= k;
		}
		off -= h;
	}
	return reader_f32(t->m, i, off, len, buf);
}

/* A rendering of a file into a sink's window, as guard_call runs it. */
struct rendering {
	const struct tree *t;
	const struct tree_node *n;
	const struct render_mark *from;
	struct sink s;
};

static void run_render(void *ctx)
{
	struct rendering *r = ctx;
	render(r->t, r->n, &r->s, r->from);
}

/* Renders [off, off + len) of n (inside the file) with the SIGBUS guard armed: the
 * header it renders lies in the shards' mappings, and a page of one that has gone
 * makes it -EIO. */
static int64_t read_rendered(const struct tree *t, const struct tree_node *n, char *buf,
                             const uint64_t len, const uint64_t off)
{
	for (uint32_t s = 0; s < t->m->n_shards; s++)
		if (source_holds(t->m->shards[s].src, t->m->shards[s].gf.data_offset) < 0)
			return -EIO;
	/* start at the last mark before off */
	struct rendering r = { .t = t, .n = n, .from = render_mark_find(marks_of(t, n), off),
	                       .s = sink_window(buf, off, len) };
	if (r.from)
		r.s.pos = r.from->pos;
	int e = guard_call(run_render, &r);
	return e < 0 ? e : (int64_t)len;
}

int64_t tree_read(const struct tree *t, const struct tree_node *n, char *buf, uint64_t len,
                  uint64_t off)
{
	if (tree_is_dir(n))
		return -EISDIR;
	if (off >= n->size)
		return 0;
	if (len > n->size - off)
		len = n->size - off;
	if (len == 0)
		return 0;
	if (n->kind == TREE_STATS || n->kind == TREE_STATS_TSV)
		return tree_stats_read(t, n, buf, len, off);
	if (n->kind == TREE_MODEL) {   /* the sources guard and fetch (modelfile.h) */
		int r = modelfile_read(t->m, &t->mf, off, len, buf);
		return r < 0 ? r : (int64_t)len;
	}

	if (n->kind == TREE_RAW || n->kind == TREE_F32 || n->kind == TREE_NPY) {
		int r = read_tensor(t, n, buf, len, off);
		return r < 0 ? r : (int64_t)len;
	}
	return read_rendered(t, n, buf, len, off);
}

int tree_read_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                  struct iovec *iov, int max)
{
	if (n->kind == TREE_MODEL)
		return tree_model_iov(t, n, off, len, iov, max);
	if (n->kind != TREE_RAW || model_tensor_remote(t->m, n->index) || max < 1)
		return 0;
	int fd;
	uint64_t file_off, count;
	if (!tree_raw_span(t, n, off, len, &fd, &file_off, &count) || count < len)
		return -EIO;
	iov[0] = (struct iovec){ .iov_base = (void *)(model_tensor_data(t->m, n->index) + off),
	                         .iov_len = (size_t)len };
	return 1;
}

int tree_model_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   struct iovec *iov, int max)
{
	if (n->kind != TREE_MODEL || off > n->size || len > n->size - off || len == 0)
		return 0;
	return modelfile_iov(t->m, &t->mf, off, len, iov, max);
}

int tree_model_file_fd(const struct tree *t)
{
	const struct ggufs_model *m = t->m;
	const struct modelfile *mf = &t->mf;
	int fd = -1;
	uint64_t count;
	if (m->n_shards != 1 || m->remote || mf->header || mf->n_spans != 1 ||
	    mf->spans[0].off != 0 || mf->spans[0].shard_off != 0 ||
	    mf->spans[0].len != m->shards[0].size || mf->size != m->shards[0].size)
		return -1;
	if (!source_span(m->shards[0].src, 0, 0, &fd, &count))
		return -1;
	return fd;
}

bool tree_raw_span(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   int *fd, uint64_t *file_off, uint64_t *count)
{
	if (n->kind != TREE_RAW)
		return false;
	return reader_raw_span(t->m, n->index, off, len, fd, file_off, count);
}

bool tree_edit_time(const struct tree *t, const struct tree_node *n, struct timespec *ts)
{
	if (!t->key_time)
		return false;
	switch (n->kind) {
	case TREE_META:
		*ts = t->key_time[n->index];
		return true;
	case TREE_DIR_METADATA:
	case TREE_JSON:
	case TREE_SUMMARY:
	case TREE_MODEL:
		*ts = t->made;
		return true;
	default:
		return false;
	}
}
