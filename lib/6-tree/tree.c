#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "modelfile.h"
#include "names.h"
#include "reader.h"
#include "render_json.h"
#include "render_mark.h"
#include "render_npy.h"
#include "render_summary.h"
#include "render_value.h"
#include "sink.h"
#include "sorted_find.h"

static const char *const fixed_names[] = {
	[TREE_ROOT_INO] = "", [TREE_METADATA_DIR_INO] = "metadata",
	[TREE_TENSORS_DIR_INO] = "tensors", [TREE_JSON_INO] = "gguf.json",
	[TREE_SUMMARY_INO] = "summary.txt", [TREE_STATS_DIR_INO] = "stats",
	[TREE_STATS_TSV_INO] = "stats.tsv",
	[TREE_MODEL_INO] = "model.gguf", [TREE_QUANTS_DIR_INO] = "quants",
};
static const enum tree_kind fixed_kinds[] = {
	[TREE_ROOT_INO] = TREE_ROOT, [TREE_METADATA_DIR_INO] = TREE_DIR_METADATA,
	[TREE_TENSORS_DIR_INO] = TREE_DIR_TENSORS, [TREE_JSON_INO] = TREE_JSON,
	[TREE_SUMMARY_INO] = TREE_SUMMARY, [TREE_STATS_DIR_INO] = TREE_DIR_STATS,
	[TREE_STATS_TSV_INO] = TREE_STATS_TSV, [TREE_MODEL_INO] = TREE_MODEL,
	[TREE_QUANTS_DIR_INO] = TREE_DIR_QUANTS,
};
#define LAST_FIXED_INO TREE_QUANTS_DIR_INO

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
			render_value_from(s, &model_meta(m)->kv[n->index].value, from);
		else
			render_value(s, &model_meta(m)->kv[n->index].value);
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

/* The marks of the key at position k of t, or NULL when it has none (most keys: a
 * value's text gets one per RENDER_MARK_STRIDE bytes). */
static struct render_marks *key_marks_of(const struct tree *t, uint64_t k)
{
	uint64_t i = sorted_find_u64(t->marked, t->n_marked, sizeof *t->marked,
	                             offsetof(struct key_marks, k), k);
	return i < t->n_marked ? &t->marked[i].ms : NULL;
}

/* Keeps ms (taken) as the marks of the key at position k of t, after those of every key
 * before it (the tree is sized in key order). Out of memory they are dropped: marks
 * only save time. */
static void keep_key_marks(struct tree *t, uint64_t k, struct render_marks *ms)
{
	if (t->n_marked == t->cap_marked) {
		uint64_t cap = t->cap_marked ? 2 * t->cap_marked : 4;
		struct key_marks *v = realloc(t->marked, cap * sizeof *v);
		if (!v) {
			render_marks_free(ms);
			return;
		}
		t->marked = v;
		t->cap_marked = cap;
	}
	t->marked[t->n_marked++] = (struct key_marks){ .k = k, .ms = *ms };
}

/* The marks of n, when its renderer can start again from one (gguf.json and
 * metadata/KEY; summary.txt is small and cannot) and has them, else NULL. */
static const struct render_marks *marks_of(const struct tree *t, const struct tree_node *n)
{
	if (n->kind == TREE_JSON)
		return &t->json_marks;
	return n->kind == TREE_META ? key_marks_of(t, n->index) : NULL;
}

uint64_t tree_render_marks(const struct tree *t, const struct tree_node *n)
{
	const struct render_marks *ms = marks_of(t, n);
	return ms ? ms->n : 0;
}

/* Runs a renderer into a counting sink: the exact size of the file it renders. The
 * marks of gguf.json and of a key are kept for the reads (a key's, when it has any, by
 * keep_key_marks: t is being built or sized, so nobody reads them yet). */
static uint64_t rendered_size(struct tree *t, const struct tree_node *n)
{
	struct sink s = sink_counter();
	struct render_marks key = { 0 };
	if (n->kind == TREE_JSON)
		render_marks_record(&s, &t->json_marks);
	else if (n->kind == TREE_META)
		render_marks_record(&s, &key);
	render(t, n, &s, NULL);
	if (key.n)
		keep_key_marks(t, n->index, &key);
	else
		render_marks_free(&key);
	return s.pos;
}

/* Bytes that every key's file name takes, NULs included: names are escaped twice
 * rather than reserving the worst case for each, so memory follows the header. */
static uint64_t key_names_bytes(const struct ggufs_model *m)
{
	char buf[NAMES_BUF];
	uint64_t total = 1;
	const struct gguf_file *g = model_meta(m);
	for (uint64_t k = 0; k < g->n_kv; k++)
		total += names_encode(g->kv[k].key.ptr, g->kv[k].key.len, false, buf) + 1;
	return total;
}

/* The fixed nodes: the root and the directories and files in it; model.gguf has a
 * number of its own in each edit state (tree_ino.h). */
static void add_fixed(struct tree *t, const struct ov_state *s)
{
	for (uint64_t ino = TREE_ROOT_INO; ino <= LAST_FIXED_INO; ino++)
		t->fixed[ino] = (struct tree_node){ .ino = ino, .parent = TREE_ROOT_INO,
		                                    .kind = fixed_kinds[ino], .name = fixed_names[ino] };
	const struct tree_tensors *tt = t->tensors;
	t->fixed[TREE_STATS_TSV_INO].size = tt->tsv_line[tt->n_stats_children];
	t->fixed[TREE_MODEL_INO].size = t->mf.size;
	if (s && s->gen)
		t->fixed[TREE_MODEL_INO].ino = TREE_MODEL_STATE_INO + s->gen;
}

/* Lets go of a reference to kn (NULL too); the last frees it. */
static void names_put(struct key_names *kn)
{
	if (!kn || atomic_fetch_sub(&kn->refs, 1) != 1)
		return;
	free(kn->names);
	free(kn->index.slots);
	free(kn->nodes);
	free(kn);
}

/* True when the keys of a and b have the same ids and names (the very same bytes, as
 * an edit copies what it leaves alone) at every position. */
static bool same_names(const struct ov_state *a, const struct ov_state *b)
{
	if (a->n != b->n)
		return false;
	for (uint64_t k = 0; k < a->n; k++)
		if (a->keys[k].id != b->keys[k].id || a->keys[k].kv.key.ptr != b->keys[k].kv.key.ptr ||
		    a->keys[k].kv.key.len != b->keys[k].kv.key.len)
			return false;
	return true;
}

/* metadata/KEY of the key at position k of t (below n_keys). */
static const struct tree_node *key_at(const struct tree *t, uint64_t k)
{
	if (t->keys)
		return &t->keys[k];
	/* the overrides, by position */
	uint64_t i = sorted_find_u64(t->over, t->n_over, sizeof *t->over,
	                             offsetof(struct key_override, k), k);
	return i < t->n_over ? &t->over[i].node : &t->names->nodes[k];
}

/* metadata/KEY of every key, numbered by its id in state s (or its place in the file),
 * in the order of the keys: prev's names, index and nodes when s's keys are prev's
 * state's (sizes to be set by set_key_size), else made for t (sizes to be set too).
 * False out of memory. */
static bool add_keys(struct tree *t, const struct ov_state *s, const struct tree *prev)
{
	const struct ggufs_model *m = t->m;
	if (prev && prev->state && s && same_names(prev->state, s)) {
		t->names = prev->names;
		atomic_fetch_add(&t->names->refs, 1);
		return true;
	}
	struct key_names *kn = calloc(1, sizeof *kn);
	if (!kn)
		return false;
	atomic_init(&kn->refs, 1);
	t->names = kn;
	t->names_made = true;
	kn->len = key_names_bytes(m);
	kn->names = malloc(kn->len);
	kn->nodes = calloc(t->n_keys + 1, sizeof *kn->nodes);
	if (!kn->names || !kn->nodes || !name_index_init(&kn->index, t->n_keys))
		return false;
	char *w = kn->names;
	for (uint64_t k = 0; k < t->n_keys; k++) {
		uint64_t ino = tree_ino_key(t->n_orig, model_n_tensors(m), s ? s->keys[k].id : k);
		const struct gguf_str *key = &model_meta(m)->kv[k].key;
		kn->nodes[k] = (struct tree_node){ .ino = ino, .parent = TREE_METADATA_DIR_INO,
		                                   .kind = TREE_META, .index = k, .name = w };
		w += names_encode(key->ptr, key->len, false, w) + 1;
		name_index_add(&kn->index, kn->nodes, k);
	}
	return true;
}

/* Sets the size of the key at position k of t, being built in key order: in the nodes
 * made for it, or, sharing another tree's, as an override when it differs from theirs
 * (past n_keys / 8 of them, the nodes are copied and the tree's own). False out of
 * memory. */
static bool set_key_size(struct tree *t, uint64_t k, uint64_t size)
{
	struct key_names *kn = t->names;
	if (t->names_made) {
		kn->nodes[k].size = size;
		return true;
	}
	if (!t->keys && kn->nodes[k].size == size)
		return true;
	if (!t->keys && t->n_over >= t->n_keys / 8 + 16) {
		if (!(t->keys = malloc((t->n_keys + 1) * sizeof *t->keys)))
			return false;
		memcpy(t->keys, kn->nodes, t->n_keys * sizeof *t->keys);
		for (uint64_t i = 0; i < t->n_over; i++)
			t->keys[t->over[i].k] = t->over[i].node;
		free(t->over);
		t->over = NULL;
		t->n_over = 0;
	}
	if (t->keys) {
		t->keys[k].size = size;
		return true;
	}
	if (!(t->n_over & (t->n_over - 1)) || !t->over) {   /* 0, 1, 2, 4, ...: grow */
		struct key_override *v = realloc(t->over, (t->n_over ? 2 * t->n_over : 1) * sizeof *v);
		if (!v)
			return false;
		t->over = v;
	}
	t->over[t->n_over] = (struct key_override){ .k = k, .node = kn->nodes[k] };
	t->over[t->n_over++].node.size = size;
	return true;
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
	return same ? key_at(prev, *j) : NULL;
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

/* Sizes gguf.json and summary.txt of t (rendered: they describe every key and
 * tensor), so a node handed out has its size. */
static void run_sizing(void *ctx)
{
	struct tree *t = ctx;
	t->fixed[TREE_JSON_INO].size = rendered_size(t, &t->fixed[TREE_JSON_INO]);
	t->fixed[TREE_SUMMARY_INO].size = rendered_size(t, &t->fixed[TREE_SUMMARY_INO]);
}

/* Makes sure gguf.json's and summary.txt's sizes are known (done once per tree, by the
 * first caller; the others wait). They render the header, which lies in the shards'
 * mappings: under the SIGBUS guard, and when a page has gone the sizes stay unknown (0)
 * for a later call to try again. */
static void size_rendered(const struct tree *t)
{
	struct tree *w = (struct tree *)t;
	if (atomic_load_explicit(&w->sized, memory_order_acquire))
		return;
	pthread_mutex_lock(&w->size_lock);
	if (!atomic_load_explicit(&w->sized, memory_order_relaxed)) {
		bool held = model_header_holds(t->m, NULL) == 0;
		render_marks_free(&w->json_marks);
		if (held && guard_call(run_sizing, w) == 0)
			atomic_store_explicit(&w->sized, true, memory_order_release);
	}
	pthread_mutex_unlock(&w->size_lock);
}

/* n, a node of t, ready to be handed out: gguf.json and summary.txt sized. */
static const struct tree_node *complete(const struct tree *t, const struct tree_node *n)
{
	if (n && (n->kind == TREE_JSON || n->kind == TREE_SUMMARY))
		size_rendered(t);
	return n;
}

/* Builds the tree of m, whose keys have the ids of state s (or are the file's own, s
 * NULL), sharing base's tensor part when base is given. With prev, the tree of the state
 * s was made from, a key left unchanged takes its size and marks from there instead of
 * being rendered again (a 262,144-token vocabulary is megabytes of text). */
static struct tree *build(const struct ggufs_model *m, struct ov_state *s,
                          const struct tree *base, const struct tree *prev,
                          char err[GGUF_ERR_MAX])
{
	struct tree *t = calloc(1, sizeof *t);
	uint64_t n_kv = model_meta(m)->n_kv, n_t = model_n_tensors(m);
	uint64_t n_orig = s ? s->n_orig : n_kv;

	guard_install();
	if (!t)
		goto oom;
	tree_quants_init(t);
	/* a state's quants/ are made as its model's are */
	t->quants.requantize = base && base->quants.requantize;
	t->m = m;
	t->state = s ? ov_get(s) : NULL;
	t->base = base;
	atomic_init(&t->refs, 1);
	atomic_init(&t->sized, false);
	pthread_mutex_init(&t->size_lock, NULL);
	t->n_orig = n_orig;
	t->n_keys = n_kv;
	t->tensors = base ? base->tensors : tree_tensors_build(m, n_orig);
	if (!t->tensors || !add_keys(t, s, prev))
		goto oom;
	/* a state that holds the model's own metadata is the model's own file, byte for
	 * byte (its padding need not be zeros, as a rebuilt header's is) */
	bool own = s && base && ov_unchanged(s, base->m);
	const struct ggufs_model *shown = own ? base->m : m;
	const struct modelfile_tensors *mt = NULL;
	if ((model_n_files(shown) > 1 || model_edited(shown)) &&
	    !(mt = tree_tensor_layout(t->tensors, shown, err))) {
		tree_free(t);
		return NULL;
	}
	if (modelfile_build_with(shown, mt, &t->mf, err) < 0) {
		tree_free(t);
		return NULL;
	}

	add_fixed(t, s);

	/* sized last: the renderers see a complete tree */
	uint64_t j = 0;
	for (uint64_t k = 0; k < n_kv; k++) {
		const struct tree_node *was = prev && prev->state && s ? kept_key(prev, s, k, &j) : NULL;
		const struct render_marks *from = was ? key_marks_of(prev, was->index) : NULL;
		struct render_marks copy = { 0 };
		uint64_t size;
		if (was && (!from || copy_marks(&copy, from))) {
			size = was->size;
			if (copy.n)
				keep_key_marks(t, k, &copy);
		} else {
			struct tree_node n = t->names->nodes[k];   /* its name and place */
			size = rendered_size(t, &n);
		}
		if (!set_key_size(t, k, size))
			goto oom;
	}
	/* the model's own tree, made at mount, sizes gguf.json and summary.txt now; a
	 * state's when they are first asked for */
	if (!s)
		size_rendered(t);
	return t;
oom:
	snprintf(err, GGUF_ERR_MAX, "%s: out of memory for the tree of %" PRIu64 " keys and %"
	         PRIu64 " tensors", model_path(m), n_kv, n_t);
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
	return build(s->view, s, base, prev, err);
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
	return k < t->n_keys ? key_at(t, k)->ino : 0;
}

const struct ov_state *tree_state(const struct tree *t)
{
	return t->state;
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	free(t->keys);
	free(t->over);
	names_put(t->names);
	for (uint64_t i = 0; i < t->n_marked; i++)
		render_marks_free(&t->marked[i].ms);
	free(t->marked);
	render_marks_free(&t->json_marks);
	if (!t->base)
		tree_tensors_free(t->tensors, model_n_tensors(t->m));
	ov_put(t->state);
	free(t->key_time);
	modelfile_free(&t->mf);
	tree_quants_free(t);
	pthread_mutex_destroy(&t->size_lock);
	free(t);
}

uint64_t tree_held_bytes(const struct tree *t)
{
	uint64_t over_cap = 1;   /* set_key_size grows over by doubling */
	while (over_cap < t->n_over)
		over_cap <<= 1;
	uint64_t b = sizeof *t + (t->keys ? (t->n_keys + 1) * sizeof *t->keys : 0) +
	             (t->over ? over_cap * sizeof *t->over : 0) +
	             t->cap_marked * sizeof *t->marked +
	             modelfile_bytes(&t->mf) + t->json_marks.cap * sizeof *t->json_marks.v;
	b += tree_quants_bytes(t);
	if (t->names_made)   /* shared names are counted once, by the tree that made them */
		b += sizeof *t->names + t->names->len + (t->n_keys + 1) * sizeof *t->names->nodes +
		     (t->names->index.mask + 1) * sizeof *t->names->index.slots;
	for (uint64_t i = 0; i < t->n_marked; i++)
		b += t->marked[i].ms.cap * sizeof *t->marked[i].ms.v;
	if (t->key_time)
		b += t->n_keys * sizeof *t->key_time;
	if (t->state)
		b += ov_state_bytes(t->state);
	if (!t->base) {
		const struct tree_tensors *tt = t->tensors;
		uint64_t n_t = model_n_tensors(t->m);
		b += sizeof *tt + (tt->n_nodes + 1) * sizeof *tt->nodes + tt->names_len +
		     (tt->index.mask + 1) * sizeof *tt->index.slots +
		     (3 * n_t + 1) * sizeof *tt->tensor_children + (n_t + 1) * sizeof(uint32_t) +
		     (n_t + 1) * 2 * sizeof(uint64_t) +
		     (tt->layout ? modelfile_tensors_bytes(tt->layout) : 0);
	}
	return b;
}

const struct ggufs_model *tree_model(const struct tree *t)
{
	return t->m;
}

/* The node of key file ino (tree_ino.h: the file's keys below the tensors, created ones
 * above), found by its key's id, or NULL. */
static const struct tree_node *key_node(const struct tree *t, uint64_t ino)
{
	const struct tree_tensors *tt = t->tensors;
	uint64_t id, k;
	if (ino >= TREE_FIRST_META && ino < tt->first_ino)
		id = ino - TREE_FIRST_META;
	else if (ino >= tt->first_ino + tt->n_nodes && ino < TREE_MODEL_STATE_INO)
		id = t->n_orig + (ino - (tt->first_ino + tt->n_nodes));
	else
		return NULL;
	k = t->state ? ov_find_id(t->state, id) : id;
	return k < t->n_keys && key_at(t, k)->ino == ino ? key_at(t, k) : NULL;
}

const struct tree_node *tree_node(const struct tree *t, uint64_t ino)
{
	const struct tree_tensors *tt = t->tensors;
	if (ino == t->fixed[TREE_MODEL_INO].ino)
		return &t->fixed[TREE_MODEL_INO];
	if (ino == 0)
		return NULL;
	if (ino <= LAST_FIXED_INO)
		return t->fixed[ino].ino == ino ? complete(t, &t->fixed[ino]) : NULL;
	if (ino >= TREE_QUANT_INO && ino < TREE_MODEL_STATE_INO)
		return tree_quants_node(t, ino);
	if (ino >= tt->first_ino && ino - tt->first_ino < tt->n_nodes) {
		const struct tree_node *n = &tt->nodes[ino - tt->first_ino];
		return n->ino == ino ? n : NULL;
	}
	return key_node(t, ino);
}

uint64_t tree_model_ino(const struct tree *t)
{
	return t->fixed[TREE_MODEL_INO].ino;
}

const struct tree_node *tree_lookup(const struct tree *t, uint64_t dir, const char *name)
{
	switch (dir) {
	case TREE_ROOT_INO:
		for (uint64_t ino = TREE_ROOT_INO + 1; ino <= LAST_FIXED_INO; ino++)
			if (strcmp(t->fixed[ino].name, name) == 0)
				return complete(t, &t->fixed[ino]);
		return NULL;
	case TREE_METADATA_DIR_INO:
	{
		const struct tree_node *n = name_index_find(&t->names->index, t->names->nodes, dir, name);
		return n ? key_at(t, n->index) : NULL;
	}
	case TREE_TENSORS_DIR_INO:
	case TREE_STATS_DIR_INO:
		return name_index_find(&t->tensors->index, t->tensors->nodes, dir, name);
	case TREE_QUANTS_DIR_INO:
		return tree_quants_lookup(t, name);
	default:
		return NULL;
	}
}

uint64_t tree_dir_count(const struct tree *t, uint64_t dir)
{
	switch (dir) {
	case TREE_ROOT_INO:
		return LAST_FIXED_INO - 1;
	case TREE_METADATA_DIR_INO:
		return t->n_keys;
	case TREE_TENSORS_DIR_INO:
		return t->tensors->n_tensor_children;
	case TREE_STATS_DIR_INO:
		return t->tensors->n_stats_children;
	case TREE_QUANTS_DIR_INO:
		return tree_quants_count(t);
	default:
		return 0;
	}
}

const struct tree_node *tree_dir_child(const struct tree *t, uint64_t dir, uint64_t i)
{
	const struct tree_tensors *tt = t->tensors;
	if (i >= tree_dir_count(t, dir))
		return NULL;
	switch (dir) {
	case TREE_ROOT_INO:   /* the fixed names after the root, in number order */
		return complete(t, &t->fixed[TREE_METADATA_DIR_INO + i]);
	case TREE_METADATA_DIR_INO:
		return key_at(t, i);
	case TREE_STATS_DIR_INO:
		return &tt->nodes[tt->stats_children[i] - tt->first_ino];
	case TREE_QUANTS_DIR_INO:
		return tree_quants_child(t, i);
	default:
		return &tt->nodes[tt->tensor_children[i] - tt->first_ino];
	}
}

bool tree_is_dir(const struct tree_node *n)
{
	return n->kind == TREE_ROOT || n->kind == TREE_DIR_METADATA || n->kind == TREE_DIR_TENSORS ||
	       n->kind == TREE_DIR_STATS || n->kind == TREE_DIR_QUANTS;
}

mode_t tree_mode(const struct tree_node *n, mode_t gguf_mode)
{
	mode_t r = gguf_mode & 0444;
	if (tree_is_dir(n))
		return S_IFDIR | r | (r >> 2);
	return S_IFREG | r;
}

/* Reads [off, off + len) of tensor file n (inside it) through the tensor reader: the
 * .npy header rendered here, the values and stored bytes read there. 0 or -errno with
 * the reader's why. */
static int read_tensor(const struct tree *t, const struct tree_node *n, char *buf,
                       uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	uint64_t i = n->index;
	if (n->kind == TREE_RAW)
		return reader_raw(t->m, i, off, len, buf, why);
	if (n->kind == TREE_NPY) {
		char hdr[NPY_HEADER_MAX];
		uint64_t h = npy_header(model_tensor(t->m, i), hdr);
		if (off < h) {
			uint64_t k = h - off < len ? h - off : len;
			memcpy(buf, hdr + off, k);
			buf += k;
			off += k;
			len -= k;
		}
		off -= h;
	}
	return reader_f32(t->m, i, off, len, buf, why);
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
 * makes it -EIO, with why (model_header_holds's). */
static int64_t read_rendered(const struct tree *t, const struct tree_node *n, char *buf,
                             const uint64_t len, const uint64_t off, char why[GGUF_ERR_MAX])
{
	if (model_header_holds(t->m, why) < 0)
		return -EIO;
	/* start at the last mark before off */
	struct rendering r = { .t = t, .n = n, .from = render_mark_find(marks_of(t, n), off),
	                       .s = sink_window(buf, off, len) };
	if (r.from)
		r.s.pos = r.from->pos;
	int e = guard_call(run_render, &r);
	if (e < 0)   /* a page went while it rendered: which file shrank under it */
		model_header_holds(t->m, why);
	return e < 0 ? e : (int64_t)len;
}

int64_t tree_read(const struct tree *t, const struct tree_node *n, char *buf, uint64_t len,
                  uint64_t off, char why[GGUF_ERR_MAX])
{
	if (why)
		why[0] = 0;
	if (tree_is_dir(n))
		return -EISDIR;
	if (off >= n->size)
		return 0;
	if (len > n->size - off)
		len = n->size - off;
	if (len == 0)
		return 0;
	if (n->kind == TREE_STATS || n->kind == TREE_STATS_TSV)
		return tree_stats_read(t, n, buf, len, off, why);
	if (n->kind == TREE_QUANT || n->kind == TREE_QUANTS_TSV)
		return tree_quants_read(t, n, buf, len, off, why);
	if (n->kind == TREE_MODEL) {   /* the sources guard and fetch (modelfile.h) */
		int r = modelfile_read(t->m, &t->mf, off, len, buf, why);
		return r < 0 ? r : (int64_t)len;
	}

	if (n->kind == TREE_RAW || n->kind == TREE_F32 || n->kind == TREE_NPY) {
		int r = read_tensor(t, n, buf, len, off, why);
		return r < 0 ? r : (int64_t)len;
	}
	return read_rendered(t, n, buf, len, off, why);
}

int tree_read_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                  struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	if (why)
		why[0] = 0;
	if (n->kind == TREE_MODEL)
		return tree_model_iov(t, n, off, len, iov, max, why);
	const uint8_t *mapped = n->kind == TREE_RAW ? model_tensor_mapped(t->m, n->index) : NULL;
	if (!mapped || max < 1)
		return 0;
	int fd;
	uint64_t file_off, count;
	if (!reader_raw_span(t->m, n->index, off, len, &fd, &file_off, &count, why) || count < len)
		return -EIO;
	iov[0] = (struct iovec){ .iov_base = (void *)(mapped + off),
	                         .iov_len = (size_t)len };
	return 1;
}

int tree_model_iov(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	if (n->kind != TREE_MODEL || off > n->size || len > n->size - off || len == 0)
		return 0;
	return modelfile_iov(t->m, &t->mf, off, len, iov, max, why);
}

int tree_model_file_fd(const struct tree *t)
{
	if (!modelfile_is_file(&t->mf, t->m))
		return -1;
	return model_file_fd(t->m, NULL);
}

bool tree_raw_span(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len,
                   int *fd, uint64_t *file_off, uint64_t *count)
{
	if (n->kind != TREE_RAW)
		return false;
	return reader_raw_span(t->m, n->index, off, len, fd, file_off, count, NULL);
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
	case TREE_DIR_QUANTS:
	case TREE_QUANT:
	case TREE_QUANTS_TSV:
		*ts = t->made;
		return true;
	default:
		return false;
	}
}
