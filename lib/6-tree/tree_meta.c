/* metadata/ as a provider, its read side: a file per key, numbered by the key's id
 * (tree_ino.h: the file's own keys in its stable range, keys created by edits in the
 * open-ended one), its text the key's value rendered (render_value.h), each sized when
 * its tree is built. An edit state's tree shares what its state leaves as it was with
 * the tree of the state before (prev): the key names and their index when every name is
 * kept, the size and marks of each key left unchanged, so an edit renders only what it
 * changed (a 262,144-token vocabulary is megabytes of text). */
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "render_value.h"
#include "sorted_find.h"

/* The roles of its nodes. */
enum { META_DIR, META_KEY };

/* metadata/'s file names and their index, shared by the trees of states whose keys have
 * the same names and ids in the same places (an edit of a value, the commonest, changes
 * none of them, and rebuilding the index was most of an edit of 100,000 keys). */
struct key_names {
	atomic_uint_fast64_t refs;
	char *names;                 /* every key's file name, NUL-terminated, back to back */
	uint64_t len;
	struct name_index index;     /* metadata/ by name: positions of keys */
	struct tree_node *nodes;     /* metadata/KEY by position, with the sizes of the tree
	                              * that made them; a tree sharing them differs in the
	                              * sizes of the keys edited since (struct tree_meta) */
};

/* metadata/ in one tree. */
struct tree_meta {
	const struct tree *t;
	struct tree_node dir;        /* metadata/ */
	uint64_t first, n_orig;      /* the file's keys: numbers [first, first + n_orig) */
	uint64_t open, n_open;       /* keys created by edits: [open, open + n_open) */
	uint64_t n_keys;             /* the keys of t's metadata */
	/* metadata/KEY of the key at each position (key_at): names->nodes, but for the keys
	 * whose size differs from there, in over (by position); or, when those are many,
	 * keys: all of them, the tree's own */
	struct tree_node *keys;
	struct key_override { uint64_t k; struct tree_node node; } *over;
	uint64_t n_over;
	struct key_names *names;     /* the keys' names and index (held): made for this
	                              * tree, or the tree before's when they are its */
	bool names_made;             /* made for this tree (bytes counts them) */
	struct key_marks {           /* the restart points (render_mark.h) of the keys that
	                              * have any, by position */
		uint64_t k;
		struct render_marks ms;
	} *marked;
	uint64_t n_marked, cap_marked;
};

/* The marks of the key at position k, or NULL when it has none (most keys: a value's
 * text gets one per RENDER_MARK_STRIDE bytes). */
static struct render_marks *key_marks_of(const struct tree_meta *mi, uint64_t k)
{
	uint64_t i = sorted_find_u64(mi->marked, mi->n_marked, sizeof *mi->marked,
	                             offsetof(struct key_marks, k), k);
	return i < mi->n_marked ? &mi->marked[i].ms : NULL;
}

/* Keeps ms (taken) as the marks of the key at position k, after those of every key
 * before it (the tree is sized in key order). Out of memory they are dropped: marks
 * only save time. */
static void keep_key_marks(struct tree_meta *mi, uint64_t k, struct render_marks *ms)
{
	if (mi->n_marked == mi->cap_marked) {
		uint64_t cap = mi->cap_marked ? 2 * mi->cap_marked : 4;
		struct key_marks *v = realloc(mi->marked, cap * sizeof *v);
		if (!v) {
			render_marks_free(ms);
			return;
		}
		mi->marked = v;
		mi->cap_marked = cap;
	}
	mi->marked[mi->n_marked++] = (struct key_marks){ .k = k, .ms = *ms };
}

/* The text of key k (a position of m's metadata) into s, from mark from or its start. */
struct key_text {
	const struct ggufs_model *m;
	uint64_t k;
};

static void emit_key(const void *arg, struct sink *s, const struct render_mark *from)
{
	const struct key_text *kt = arg;
	const struct gguf_value *v = &model_meta(kt->m)->kv[kt->k].value;
	if (from)
		render_value_from(s, v, from);
	else
		render_value(s, v);
}

/* The size of key k's text, its marks kept when it has any. */
static uint64_t key_size(struct tree_meta *mi, uint64_t k)
{
	struct sink s = sink_counter();
	struct render_marks marks = { 0 };
	render_marks_record(&s, &marks);
	const struct key_text kt = { mi->t->m, k };
	emit_key(&kt, &s, NULL);
	if (marks.n)
		keep_key_marks(mi, k, &marks);
	else
		render_marks_free(&marks);
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

/* metadata/KEY of the key at position k (below n_keys). */
static const struct tree_node *key_at(const struct tree_meta *mi, uint64_t k)
{
	if (mi->keys)
		return &mi->keys[k];
	/* the overrides, by position */
	uint64_t i = sorted_find_u64(mi->over, mi->n_over, sizeof *mi->over,
	                             offsetof(struct key_override, k), k);
	return i < mi->n_over ? &mi->over[i].node : &mi->names->nodes[k];
}

/* The number of the key of id: the file's own keys' in the stable range, created ones'
 * in the open-ended one; 0 for one past it (after about 2^30 keys created). */
static uint64_t key_ino(const struct tree_meta *mi, uint64_t id)
{
	if (id < mi->n_orig)
		return mi->first + id;
	return id - mi->n_orig < mi->n_open ? mi->open + (id - mi->n_orig) : 0;
}

/* metadata/KEY of every key, numbered by its id in state s (or its place in the file),
 * in the order of the keys: prev's names, index and nodes when s's keys are prev's
 * state's (sizes to be set by set_key_size), else made (sizes to be set too). False out
 * of memory. */
static bool add_keys(struct tree_meta *mi, const struct ov_state *s,
                     const struct tree_meta *prev)
{
	const struct ggufs_model *m = mi->t->m;
	if (prev && prev->t->state && s && same_names(prev->t->state, s)) {
		mi->names = prev->names;
		atomic_fetch_add(&mi->names->refs, 1);
		return true;
	}
	struct key_names *kn = calloc(1, sizeof *kn);
	if (!kn)
		return false;
	atomic_init(&kn->refs, 1);
	mi->names = kn;
	mi->names_made = true;
	kn->len = key_names_bytes(m);
	kn->names = malloc(kn->len);
	kn->nodes = calloc(mi->n_keys + 1, sizeof *kn->nodes);
	if (!kn->names || !kn->nodes || !name_index_init(&kn->index, mi->n_keys))
		return false;
	char *w = kn->names;
	for (uint64_t k = 0; k < mi->n_keys; k++) {
		const struct gguf_str *key = &model_meta(m)->kv[k].key;
		kn->nodes[k] = (struct tree_node){ .ino = key_ino(mi, s ? s->keys[k].id : k),
		                                   .parent = mi->dir.ino, .kind = TREE_META,
		                                   .prov = mi->dir.prov, .role = META_KEY,
		                                   .index = k, .name = w };
		w += names_encode(key->ptr, key->len, false, w) + 1;
		name_index_add(&kn->index, kn->nodes, k);
	}
	return true;
}

/* Sets the size of the key at position k, being built in key order: in the nodes made
 * for it, or, sharing another tree's, as an override when it differs from theirs (past
 * n_keys / 8 of them, the nodes are copied and the tree's own). False out of memory. */
static bool set_key_size(struct tree_meta *mi, uint64_t k, uint64_t size)
{
	struct key_names *kn = mi->names;
	if (mi->names_made) {
		kn->nodes[k].size = size;
		return true;
	}
	if (!mi->keys && kn->nodes[k].size == size)
		return true;
	if (!mi->keys && mi->n_over >= mi->n_keys / 8 + 16) {
		if (!(mi->keys = malloc((mi->n_keys + 1) * sizeof *mi->keys)))
			return false;
		memcpy(mi->keys, kn->nodes, mi->n_keys * sizeof *mi->keys);
		for (uint64_t i = 0; i < mi->n_over; i++)
			mi->keys[mi->over[i].k] = mi->over[i].node;
		free(mi->over);
		mi->over = NULL;
		mi->n_over = 0;
	}
	if (mi->keys) {
		mi->keys[k].size = size;
		return true;
	}
	if (!(mi->n_over & (mi->n_over - 1)) || !mi->over) {   /* 0, 1, 2, 4, ...: grow */
		struct key_override *v = realloc(mi->over, (mi->n_over ? 2 * mi->n_over : 1) * sizeof *v);
		if (!v)
			return false;
		mi->over = v;
	}
	mi->over[mi->n_over] = (struct key_override){ .k = k, .node = kn->nodes[k] };
	mi->over[mi->n_over++].node.size = size;
	return true;
}

/* The node in prev (metadata/ of the state before s) of the key at position k of s when
 * that key is unchanged (same id and the very same value: an edit copies the keys it
 * leaves alone), else NULL. Keys are in id order in both states, so *j, where the last
 * call stopped in prev, only moves forward. */
static const struct tree_node *kept_key(const struct tree_meta *prev, const struct ov_state *s,
                                        uint64_t k, uint64_t *j)
{
	const struct ov_state *ps = prev->t->state;
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

static void meta_free(void *inst)
{
	struct tree_meta *mi = inst;
	if (!mi)
		return;
	free(mi->keys);
	free(mi->over);
	names_put(mi->names);
	for (uint64_t i = 0; i < mi->n_marked; i++)
		render_marks_free(&mi->marked[i].ms);
	free(mi->marked);
	free(mi);
}

/* The file's keys: the numbers of its stable range. */
static int meta_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                       char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)why;
	w->stable = model_meta(m)->n_kv;
	return 0;
}

/* Fills mi, metadata/ of t over numbers r, lent what prev (or NULL) has the same:
 * false out of memory. */
static bool meta_fill(struct tree_meta *mi, const struct tree *t, const struct tree_range *r,
                      const struct tree_meta *prev)
{
	mi->t = t;
	mi->dir = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO,
	                              .kind = TREE_DIR_METADATA, .prov = (uint16_t)r->prov,
	                              .role = META_DIR, .flags = TREE_NODE_DIR,
	                              .name = "metadata" };
	mi->first = r->stable;
	mi->n_orig = r->n_stable;
	mi->open = r->open;
	mi->n_open = r->n_open;
	mi->n_keys = model_meta(t->m)->n_kv;
	const struct ov_state *s = t->state;
	if (!add_keys(mi, s, prev))
		return false;
	uint64_t j = 0;
	for (uint64_t k = 0; k < mi->n_keys; k++) {
		const struct tree_node *was = prev && prev->t->state && s ? kept_key(prev, s, k, &j)
		                                                          : NULL;
		const struct render_marks *from = was ? key_marks_of(prev, was->index) : NULL;
		struct render_marks copy = { 0 };
		uint64_t size;
		if (was && (!from || copy_marks(&copy, from))) {
			size = was->size;
			if (copy.n)
				keep_key_marks(mi, k, &copy);
		} else {
			size = key_size(mi, k);
		}
		if (!set_key_size(mi, k, size))
			return false;
	}
	return true;
}

static int meta_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                     void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)ctx, (void)base, (void)why;
	struct tree_meta *mi = calloc(1, sizeof *mi);
	if (!mi || !meta_fill(mi, t, r, prev)) {
		meta_free(mi);
		return -ENOMEM;
	}
	*inst = mi;
	return 0;
}

static uint64_t meta_bytes(const void *inst)
{
	const struct tree_meta *mi = inst;
	uint64_t over_cap = 1;   /* set_key_size grows over by doubling */
	while (over_cap < mi->n_over)
		over_cap <<= 1;
	uint64_t b = sizeof *mi + (mi->keys ? (mi->n_keys + 1) * sizeof *mi->keys : 0) +
	             (mi->over ? over_cap * sizeof *mi->over : 0) +
	             mi->cap_marked * sizeof *mi->marked;
	if (mi->names_made)   /* shared names are counted once, by the tree that made them */
		b += sizeof *mi->names + mi->names->len + (mi->n_keys + 1) * sizeof *mi->names->nodes +
		     (mi->names->index.mask + 1) * sizeof *mi->names->index.slots;
	for (uint64_t i = 0; i < mi->n_marked; i++)
		b += mi->marked[i].ms.cap * sizeof *mi->marked[i].ms.v;
	return b;
}

/* The node of key file ino, found by its key's id, or NULL. */
static const struct tree_node *meta_node(void *inst, uint64_t ino)
{
	const struct tree_meta *mi = inst;
	uint64_t id;
	if (ino == mi->dir.ino)
		return &mi->dir;
	if (ino >= mi->first && ino - mi->first < mi->n_orig)
		id = ino - mi->first;
	else if (mi->n_open && ino >= mi->open && ino - mi->open < mi->n_open)
		id = mi->n_orig + (ino - mi->open);
	else
		return NULL;
	const struct ov_state *s = mi->t->state;
	const uint64_t k = s ? ov_find_id(s, id) : id;
	return k < mi->n_keys && key_at(mi, k)->ino == ino ? key_at(mi, k) : NULL;
}

static const struct tree_node *meta_lookup(const struct node_ref *dir, const char *name)
{
	const struct tree_meta *mi = dir->inst;
	const struct tree_node *n = name_index_find(&mi->names->index, mi->names->nodes,
	                                            dir->n->ino, name);
	return n ? key_at(mi, n->index) : NULL;
}

static uint64_t meta_count(const struct node_ref *dir, void *open)
{
	(void)open;
	const struct tree_meta *mi = dir->inst;
	return mi->n_keys;
}

static bool meta_entry(const struct node_ref *dir, void *open, uint64_t i,
                       struct node_dirent *e)
{
	(void)open;
	const struct tree_meta *mi = dir->inst;
	if (i >= mi->n_keys)
		return false;
	const struct tree_node *n = key_at(mi, i);
	*e = (struct node_dirent){ .name = n->name, .ino = n->ino };
	return true;
}

/* metadata/ and each key dated by the edit state (the key's last edit), a key's bytes
 * the state's. */
static void meta_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	const struct tree *t = r->tree;
	tree_node_attr(t, r->n, true, a);
	if (r->n->role != META_KEY)
		return;
	if (t->key_time)
		a->mtim = a->ctim = t->key_time[r->n->index];
	a->flags = NODE_BYTES_FOLLOW_EDITS;
}

static int64_t meta_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                         uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	if (r->n->role != META_KEY)
		return -EISDIR;
	if (!tree_clamp(r->n, off, &len))
		return 0;
	const struct key_text kt = { r->tree->m, r->n->index };
	return tree_read_rendered(r->tree, emit_key, &kt, key_marks_of(r->inst, r->n->index),
	                          buf, len, off, why);
}

/* A key's user.gguf.type, and an array's user.gguf.count. */
static int meta_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	if (r->n->role != META_KEY)
		return 0;
	const struct gguf_value *v = &model_meta(r->tree->m)->kv[r->n->index].value;
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

const struct tree_node *tree_meta_key(const struct tree *t, uint64_t k)
{
	const struct tree_meta *mi = t->inst[KIT_META];
	return k < mi->n_keys ? key_at(mi, k) : NULL;
}

const struct render_marks *tree_meta_marks(const struct tree *t, const struct tree_node *n)
{
	return n->role == META_KEY ? key_marks_of(t->inst[KIT_META], n->index) : NULL;
}

static const struct tree_root meta_roots[] = { { "metadata", true, false } };

const struct tree_provider tree_meta_provider = {
	.name = "metadata",
	.flags = TREE_P_OPEN_END,
	.roots = meta_roots,
	.n_roots = 1,
	.widths = meta_widths,
	.make = meta_make,
	.free = meta_free,
	.bytes = meta_bytes,
	.node = meta_node,
	.lookup = meta_lookup,
	.count = meta_count,
	.entry = meta_entry,
	.attr = meta_attr,
	.read = meta_read,
	.xattrs = meta_xattrs,
};
