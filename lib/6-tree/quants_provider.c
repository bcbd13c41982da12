/* quants/ as a provider (quants_provider.h). The plans are made at the first lookup
 * in, listing of or stat of a file in quants/, never at mount, and hold no tensor data:
 * a file's size is known without quantizing anything.
 *
 * A NAME.gguf is a computed file (computed.h), opened at its first read: its bytes are
 * made a block at a time by read_quant, ahead of a sequential reader on the mount's
 * workers, and assembled, never kept whole on disk (piece_store.h's design): the header
 * from the plan, the tensors whose type stays copied from the model, each converted
 * tensor from its piece in the mount's piece store, keyed by what it is made from
 * (tensor_key: its source bytes' content hash, made once per tree and tensor, its
 * source type and shape, its new type, QUANT_RULES_VERSION and its importance matrix
 * entry), so that every NAME and every model holding the same (tensor, type) shares
 * one copy, whatever path, inode or times lead to it.
 *
 * The plans are the model's parse at open: a local file written to since (in place: the
 * same inode, its bytes others under the mapping) has none. Whatever is made from the
 * mappings (the plans, a header read, a tensor's content hash, a block) is checked after
 * it is made against the identity recorded at open (model_changed) and, if the file
 * changed, is -EIO and kept nowhere; from then on every read of quants/ fails with EIO.
 *
 * It sees the tree through tree.h only (its model, the attributes helper): a feature,
 * to move above the tree core with the rest of quants/. */
#include "quants_provider.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "computed.h"
#include "evlog.h"
#include "guard.h"
#include "imatrix_file.h"
#include "piece_store.h"
#include "quant.h"
#include "quant_plan.h"
#include "quant_read.h"
#include "reader.h"
#include "recipe_file.h"
#include "render_quants.h"
#include "sink.h"
#include "tree.h"

/* The roles of its nodes. */
enum { QUANTS_DIR, QUANTS_FILE, QUANTS_TSV };

/* Files of one tree whose computed bytes stay open at once: past it, an idle one is
 * closed when another opens (each holds its read-ahead state and its blocks in the
 * pool's memory; the workers and memory are the pool's, the disk entries the piece
 * store's). */
#define QUANTS_OPEN_MAX 4
/* The most files one open closes (the rest, when all were read then, at a later one). */
#define QUANTS_CLOSE_MAX 8
/* A tensor's stored bytes are hashed for its pieces' keys in reads of this many. */
#define QUANTS_HASH_STEP (1u << 20)
/* A local tensor this big or more keeps its content identity in the disk cache, under
 * its file's version (tensor_id): a later mount of that version reads 16 bytes instead
 * of hashing it. Smaller ones are hashed again (cheaper than an entry). */
#define QUANTS_ID_KEEP_MIN (1u << 20)

struct quants_mount {
	bool requantize;
	const struct imatrix *imatrix;   /* the mount's matrix, or NULL */
	char *imatrix_file;
	const struct recipe_set *recipes;   /* the mount's recipes, or NULL */
	/* each matrix entry's identity (matrix_id), made at its first need */
	pthread_mutex_t ids_lock;
	char (*entry_ids)[33];           /* im->n_entries, "" until made */
	char *cache_dir;
	uint64_t cache_max;
	struct computed_pool *pool;
	struct piece_store *store;   /* the converted tensors' disk cache; NULL: none */
};

struct quants_tree;

/* One NAME.gguf's computed bytes (computed.h): opened at its first read, closed when
 * the tree goes or, idle, to make room for another (QUANTS_OPEN_MAX). */
struct quants_file {
	const struct quants_tree *q;  /* the fill function's: the model and the plan */
	const struct quant_plan *qp;
	struct source *src;           /* NULL until opened */
	bool opening;                 /* being opened (the lock dropped): wait on opened */
	bool closing;                 /* being closed (the lock dropped; its blocks being
	                               * made are waited for): wait on opened before opening */
	unsigned readers;             /* reads in src now: it is not closed under them */
	uint64_t last_use;            /* quants_tree.tick at the last read's start */
	uint64_t computed, from_disk, stored;   /* counters of its sources closed */
};

/* quants/ in one tree: every NAME's plan, made at the first lookup, listing or stat in
 * quants/ and kept; the nodes of the NAMEs made and quants.tsv, by j (a NAME's place in
 * quant_names() then quant_imatrix_names() then the recipes, quants.tsv's n_names). */
struct quants_tree {
	const struct ggufs_model *m;
	const struct quants_mount *qm;
	struct tree_node dir;
	uint64_t first;              /* the number of j = 0: the state's range */
	size_t n_names;              /* the candidate NAMEs */
	pthread_mutex_t lock;
	atomic_bool made;
	struct quant_set qs;
	struct tree_node *nodes;     /* n_names + 1, with the plans */
	char *names;                 /* their file names, back to back */
	size_t *children;            /* quants/'s listing: the NAMEs made, quants.tsv */
	uint64_t n_children;
	/* the files' computed bytes, under files_lock (apart from lock: a close waits for
	 * the blocks being made) */
	pthread_mutex_t files_lock;
	pthread_cond_t opened;         /* a file opened or closed */
	struct quants_file *files;     /* n_names, made at the first read */
	unsigned n_open;
	uint64_t tick;
	/* each model tensor's content identity (tensor_id), made at its first need */
	pthread_mutex_t ids_lock;
	uint8_t (*ids)[16];
	uint8_t *id_state;             /* per tensor: ID_NONE, ID_MADE, ID_NOT (none kept),
	                                * ID_MAKING (a thread makes it: the others wait) */
	pthread_cond_t id_made;        /* an ID_MAKING ended */
	atomic_uint_fast64_t ids_hashed;   /* identities made by hashing the tensor's bytes */
	atomic_uint_fast64_t ids_kept;     /* and read as kept by an earlier mount */
	/* under the mount's matrix, each model tensor's weighted reads' state (tensor_prep:
	 * its experts' weights, its rows' sums), made at its first need, under preps_lock */
	pthread_mutex_t preps_lock;
	struct quant_prep **preps;
};

enum { ID_NONE, ID_MADE, ID_NOT, ID_MAKING };

/* ---- the per-mount state ---- */

struct quants_mount *quants_mount_new(const struct quants_opts *o, struct leaving *leaving,
                                      char err[GGUF_ERR_MAX])
{
	struct quants_mount *qm = calloc(1, sizeof *qm);
	if (qm)
		pthread_mutex_init(&qm->ids_lock, NULL);
	if (!qm || (o->cache_dir && !(qm->cache_dir = strdup(o->cache_dir))) ||
	    (o->imatrix && !(qm->imatrix_file = strdup(o->imatrix_file ? o->imatrix_file : ""))) ||
	    (o->imatrix && !(qm->entry_ids = calloc(o->imatrix->n_entries ? o->imatrix->n_entries
	                                                                  : 1, 33)))) {
		gguf_errf(err, "out of memory");
		quants_mount_free(qm);
		return NULL;
	}
	qm->imatrix = o->imatrix;
	qm->recipes = o->recipes;
	qm->requantize = o->requantize;
	qm->cache_max = o->cache_max;
	const long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const unsigned long want = o->threads ? o->threads : cores > 0 ? (unsigned long)cores : 1;
	const struct computed_pool_opts po = {
		.threads = want < QUANTS_THREADS_MAX ? (unsigned)want : QUANTS_THREADS_MAX,
		.leaving = leaving,
	};
	if (!(qm->pool = computed_pool_new(&po, err))) {
		quants_mount_free(qm);
		return NULL;
	}
	char why[GGUF_ERR_MAX];
	if (qm->cache_dir && !(qm->store = piece_store_new(qm->cache_dir, qm->cache_max, leaving,
	                                                   why)))
		evlog(EVLOG_WARNING, "quants dc", "%s: the disk cache is not used: %s", qm->cache_dir,
		      why);
	return qm;
}

void quants_mount_free(struct quants_mount *qm)
{
	if (!qm)
		return;
	computed_pool_free(qm->pool);
	piece_store_free(qm->store);
	free(qm->cache_dir);
	free(qm->imatrix_file);
	free(qm->entry_ids);
	pthread_mutex_destroy(&qm->ids_lock);
	free(qm);
}

struct computed_pool *quants_mount_pool(const struct quants_mount *qm)
{
	return qm->pool;
}

/* ---- the plans and the nodes ---- */

/* quant_can_make (quant_can_make_weighted with a matrix's weights), as the plans ask
 * it. */
static bool can_make(uint32_t type, bool weighted)
{
	return weighted ? quant_can_make_weighted((enum ggml_type_id)type)
	                : quant_can_make((enum ggml_type_id)type);
}

/* What guard_call runs to make q's plans (they read names and keys in the mappings). */
static void run_plans(void *ctx)
{
	struct quants_tree *q = ctx;
	const struct quant_set_opts o = { .requantize = q->qm->requantize,
		.imatrix = q->qm->imatrix, .imatrix_file = q->qm->imatrix_file,
		.recipes = q->qm->recipes, .can_make = can_make };
	if (quant_set_build(q->m, &o, &q->qs) < 0)
		return;
	q->n_children = 0;
	char *w = q->names;
	for (size_t j = 0; j < q->qs.n && j < q->n_names; j++) {
		if (q->qs.why[j][0])
			continue;
		const size_t len = strlen(q->qs.names[j].name);
		memcpy(w, q->qs.names[j].name, len);
		memcpy(w + len, ".gguf", 6);
		q->nodes[j] = (struct tree_node){ .ino = q->first + j, .parent = q->dir.ino,
			.prov = q->dir.prov, .role = QUANTS_FILE, .index = j,
			.name = w, .size = q->qs.plans[j].size };
		w += len + 6;
		q->children[q->n_children++] = j;
	}
	struct sink c = sink_counter();
	render_quants_tsv(&c, &q->qs);
	if (model_changed(q->m, NULL))   /* made from the mappings of another version */
		return;
	q->nodes[q->n_names] = (struct tree_node){ .ino = q->first + q->n_names,
		.parent = q->dir.ino, .prov = q->dir.prov,
		.role = QUANTS_TSV, .index = q->n_names, .name = "quants.tsv", .size = c.pos };
	q->children[q->n_children++] = q->n_names;
	atomic_store_explicit(&q->made, true, memory_order_release);
}

/* The memory the nodes take: false out of memory (under lock). */
static bool nodes_made(struct quants_tree *q)
{
	if (q->nodes)
		return true;
	size_t n, n9;
	const struct quant_name *names = quant_names(&n), *weighted = quant_imatrix_names(&n9);
	const struct recipe_set *rs = q->qm->recipes;
	size_t len = 1;
	for (size_t j = 0; j < n + n9 + (rs ? rs->n : 0) && j < q->n_names; j++)
		len += strlen(j < n ? names[j].name : j < n + n9 ? weighted[j - n].name
		                                                 : rs->recipes[j - n - n9].name) + 6;
	q->nodes = calloc(q->n_names + 1, sizeof *q->nodes);
	q->names = malloc(len);
	q->children = calloc(q->n_names + 1, sizeof *q->children);
	if (q->nodes && q->names && q->children)
		return true;
	free(q->nodes);
	free(q->names);
	free(q->children);
	q->nodes = NULL, q->names = NULL, q->children = NULL;
	return false;
}

/* q's plans made (once, by the first caller; the others wait): false when they could
 * not be (out of memory, a page of the model's header has gone, or a local file changed
 * since the model parsed it: a later call tries again). */
static bool plans(const struct quants_tree *cq)
{
	struct quants_tree *q = (struct quants_tree *)cq;
	if (atomic_load_explicit(&q->made, memory_order_acquire))
		return true;
	pthread_mutex_lock(&q->lock);
	if (!atomic_load_explicit(&q->made, memory_order_relaxed)) {
		bool held = model_header_holds(q->m, NULL) == 0;
		quant_set_free(&q->qs);
		if (held && nodes_made(q))
			guard_call(run_plans, q);
	}
	pthread_mutex_unlock(&q->lock);
	return atomic_load_explicit(&q->made, memory_order_acquire);
}

/* Every candidate NAME and quants.tsv, in each state. */
static int quants_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                         char why[GGUF_ERR_MAX])
{
	(void)m, (void)why;
	const struct quants_mount *qm = ctx;
	size_t n, n9;
	quant_names(&n);
	quant_imatrix_names(&n9);
	w->per_state = (uint64_t)(n + n9 + (qm->recipes ? qm->recipes->n : 0)) + 1;
	return 0;
}

static void quants_free(void *inst)
{
	struct quants_tree *q = inst;
	if (!q)
		return;
	for (size_t j = 0; q->files && j < q->n_names; j++)
		source_close(q->files[j].src);
	free(q->files);
	quant_set_free(&q->qs);
	free(q->nodes);
	free(q->names);
	free(q->children);
	free(q->ids);
	free(q->id_state);
	for (uint64_t i = 0; q->preps && i < model_n_tensors(q->m); i++)
		reader_quant_prep_free(q->preps[i]);
	free(q->preps);
	pthread_mutex_destroy(&q->preps_lock);
	pthread_mutex_destroy(&q->ids_lock);
	pthread_cond_destroy(&q->id_made);
	pthread_cond_destroy(&q->opened);
	pthread_mutex_destroy(&q->files_lock);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static int quants_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                       void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)base, (void)prev, (void)why;
	struct quants_tree *q = calloc(1, sizeof *q);
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->files_lock, NULL);
	pthread_cond_init(&q->opened, NULL);
	pthread_mutex_init(&q->ids_lock, NULL);
	pthread_cond_init(&q->id_made, NULL);
	pthread_mutex_init(&q->preps_lock, NULL);
	atomic_init(&q->made, false);
	atomic_init(&q->ids_hashed, 0);
	atomic_init(&q->ids_kept, 0);
	q->m = tree_model(t);
	q->qm = ctx;
	q->dir = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO,
		.prov = (uint16_t)r->prov, .role = QUANTS_DIR,
		.flags = TREE_NODE_DIR, .name = "quants" };
	q->first = r->state;
	q->n_names = r->n_state ? (size_t)(r->n_state - 1) : 0;
	*inst = q;
	return 0;
}

static uint64_t quants_bytes(const void *inst)
{
	struct quants_tree *q = (struct quants_tree *)inst;
	pthread_mutex_lock(&q->files_lock);
	uint64_t b = sizeof *q + (q->files ? q->n_names * sizeof *q->files : 0);
	pthread_mutex_unlock(&q->files_lock);
	pthread_mutex_lock(&q->ids_lock);
	if (q->ids)   /* the tensors' content identities */
		b += model_n_tensors(q->m) * (sizeof *q->ids + 1);
	pthread_mutex_unlock(&q->ids_lock);
	pthread_mutex_lock(&q->preps_lock);
	for (uint64_t i = 0; q->preps && i < model_n_tensors(q->m); i++)
		b += sizeof *q->preps + reader_quant_prep_bytes(q->preps[i]);
	pthread_mutex_unlock(&q->preps_lock);
	if (atomic_load(&q->made))
		b += quant_set_bytes(&q->qs) + (q->n_names + 1) * (sizeof *q->nodes + sizeof *q->children);
	return b;
}

static const struct tree_node *quants_node(void *inst, uint64_t ino)
{
	const struct quants_tree *q = inst;
	if (ino == q->dir.ino)
		return &q->dir;
	if (ino < q->first || ino - q->first > q->n_names || !plans(q))
		return NULL;
	const struct tree_node *n = &q->nodes[ino - q->first];
	return n->ino == ino ? n : NULL;
}

static const struct tree_node *quants_lookup(const struct node_ref *dir, const char *name)
{
	const struct quants_tree *q = dir->inst;
	if (!plans(q))
		return NULL;
	for (uint64_t i = 0; i < q->n_children; i++) {
		const struct tree_node *n = &q->nodes[q->children[i]];
		if (strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

static uint64_t quants_count(const struct node_ref *dir, void *open)
{
	(void)open;
	const struct quants_tree *q = dir->inst;
	return plans(q) ? q->n_children : 0;
}

static bool quants_entry(const struct node_ref *dir, void *open, uint64_t i,
                         struct node_dirent *e)
{
	(void)open;
	const struct quants_tree *q = dir->inst;
	if (!plans(q) || i >= q->n_children)
		return false;
	const struct tree_node *n = &q->nodes[q->children[i]];
	*e = (struct node_dirent){ .name = n->name, .ino = n->ino };
	return true;
}

/* quants/ and its files are dated by the edit state (another header, other files). */
static void quants_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, true, a);
}

/* True for a file of a model no longer the file it parsed. */
static bool quants_stale(const struct node_ref *r)
{
	const struct quants_tree *q = r->inst;
	return r->n->role != QUANTS_DIR && model_changed(q->m, NULL) != 0;
}

/* ---- the bytes of NAME.gguf ---- */

/* A header read, as guard_call runs it (the keys lie in the mappings). */
struct header_read {
	const struct quant_plan *qp;
	uint64_t off, len;
	char *buf;
};

static void run_header(void *ctx)
{
	struct header_read *h = ctx;
	quant_plan_header_read(h->qp, h->off, h->len, (uint8_t *)h->buf);
}

/* XXH3_128's update, as model_identity feeds it (its arg a state). */
static void id_add(void *arg, const void *p, uint64_t n)
{
	XXH3_128bits_update(arg, p, (size_t)n);
}

/* Feeds h with model tensor i's stored bytes and their length: 0, or -errno with why
 * (-EIO: they could not be read, or the file is no longer the version parsed after). */
static int hash_stored(const struct ggufs_model *m, uint64_t i, XXH3_state_t *h,
                       char why[GGUF_ERR_MAX])
{
	const uint64_t size = model_tensor(m, i)->size;
	uint8_t *piece = malloc(QUANTS_HASH_STEP);
	if (!piece)
		return -ENOMEM;
	int r = 0;
	for (uint64_t off = 0; r == 0 && off < size; off += QUANTS_HASH_STEP) {
		const uint64_t k = size - off < QUANTS_HASH_STEP ? size - off : QUANTS_HASH_STEP;
		if (model_tensor_read(m, i, off, k, piece, why) < 0)
			r = -EIO;
		else
			XXH3_128bits_update(h, piece, (size_t)k);
	}
	free(piece);
	XXH3_128bits_update(h, &size, sizeof size);
	return r == 0 && model_changed(m, why) ? -EIO : r;
}

/* What make_id hashes: tensor i of m. */
struct id_of {
	const struct ggufs_model *m;
	uint64_t i;
};

/* piece_make_fn of a tensor's kept identity (16 bytes: the piece's whole): the XXH3-128
 * of its stored bytes, as tensor_id makes it, or -errno with why. */
static int make_id(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct id_of *o = ctx;
	if (off != 0 || len != 16)
		return -EINVAL;
	XXH3_state_t *h = XXH3_createState();
	if (!h)
		return -ENOMEM;
	XXH3_128bits_reset(h);
	const int r = hash_stored(o->m, o->i, h, why);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
	XXH3_freeState(h);
	if (r == 0)
		memcpy(buf, c.digest, 16);
	return r;
}

/* The key under which tensor i of local model m keeps its identity into key
 * (PIECE_KEY_MAX): its files' version as model_identity tells it (device, inode, size,
 * mtime and ctime: any write to the bytes moves the ctime, which nobody puts back) and
 * the tensor's place, type and shape. False when the version cannot be told. */
static bool id_key(const struct ggufs_model *m, uint64_t i, char key[PIECE_KEY_MAX])
{
	XXH3_state_t *h = XXH3_createState();
	if (!h)
		return false;
	XXH3_128bits_reset(h);
	const bool told = model_identity(m, id_add, h);
	const XXH128_hash_t v = XXH3_128bits_digest(h);
	XXH3_freeState(h);
	const struct gguf_tensor *t = model_tensor(m, i);
	snprintf(key, PIECE_KEY_MAX, "tensor xxh3-128 of version %016" PRIx64 "%016" PRIx64 " file %"
	         PRIu32 " offset %" PRIu64 " bytes %" PRIu64 " type %" PRIu32 " shape %" PRIu64
	         " %" PRIu64 " %" PRIu64 " %" PRIu64, (uint64_t)v.high64, (uint64_t)v.low64,
	         model_tensor_file(m, i), t->offset, t->size, t->type, t->ne[0], t->ne[1],
	         t->ne[2], t->ne[3]);
	return told;
}

/* The content identity of model tensor i of q's model into id, made at its first need
 * and kept for the tree: a local model's XXH3-128 of the tensor's stored bytes (read
 * from the version parsed, believed only when model_changed says after it that the file
 * is still that version: any write moves its ctime, which nobody puts back), a remote
 * one's of what names its files' bytes (model_identity: URL and ETag, already content)
 * and the tensor's place in them. A local tensor of QUANTS_ID_KEEP_MIN bytes or more
 * has its hash kept in the piece store under its file's version (id_key) and read from
 * there by a later mount of that version. 1 made; 0 when none can be told (a streamed
 * model, a server that names no version: nothing is kept); -errno with why. */
static int tensor_id(const struct quants_tree *cq, uint64_t i, uint8_t id[16],
                     char why[GGUF_ERR_MAX])
{
	struct quants_tree *q = (struct quants_tree *)cq;
	pthread_mutex_lock(&q->ids_lock);
	if (!q->ids) {
		const uint64_t n = model_n_tensors(q->m) ? model_n_tensors(q->m) : 1;
		q->ids = calloc(n, sizeof *q->ids);
		q->id_state = calloc(n, 1);
		if (!q->ids || !q->id_state) {
			free(q->ids);
			free(q->id_state);
			q->ids = NULL, q->id_state = NULL;
			pthread_mutex_unlock(&q->ids_lock);
			return -ENOMEM;
		}
	}
	while (q->id_state[i] == ID_MAKING)   /* another thread hashes it: its answer */
		pthread_cond_wait(&q->id_made, &q->ids_lock);
	const uint8_t state = q->id_state[i];
	if (state == ID_MADE)
		memcpy(id, q->ids[i], 16);
	if (state == ID_NONE)
		q->id_state[i] = ID_MAKING;
	pthread_mutex_unlock(&q->ids_lock);
	if (state != ID_NONE)
		return state == ID_MADE;
	int r = 1;
	bool kept = false;   /* read as an earlier mount kept it */
	char key[PIECE_KEY_MAX];
	if (model_streamed(q->m)) {
		r = 0;
	} else if (!model_fetched(q->m) && q->qm->store &&
	           model_tensor(q->m, i)->size >= QUANTS_ID_KEEP_MIN && id_key(q->m, i, key)) {
		const struct id_of o = { q->m, i };
		unsigned how;
		r = piece_read(q->qm->store, key, 16, 0, 16, id, make_id, (void *)&o, &how, why);
		r = r < 0 ? r : 1;
		kept = !(how & PIECE_MADE);
	} else {
		XXH3_state_t *h = XXH3_createState();
		if (!h) {
			r = -ENOMEM;
		} else {
			XXH3_128bits_reset(h);
			if (!model_fetched(q->m)) {
				r = hash_stored(q->m, i, h, why);
				r = r < 0 ? r : 1;
			} else {
				const struct gguf_tensor *t = model_tensor(q->m, i);
				const uint64_t place[3] = { model_tensor_file(q->m, i), t->offset, t->size };
				if (model_identity(q->m, id_add, h))
					XXH3_128bits_update(h, place, sizeof place);
				else
					r = 0;
			}
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
			XXH3_freeState(h);
			memcpy(id, c.digest, 16);
		}
	}
	pthread_mutex_lock(&q->ids_lock);
	if (r < 0) {   /* made again by the next need */
		q->id_state[i] = ID_NONE;
	} else {
		q->id_state[i] = r ? ID_MADE : ID_NOT;
		memcpy(q->ids[i], id, 16);
		if (r && !model_fetched(q->m))
			atomic_fetch_add(kept ? &q->ids_kept : &q->ids_hashed, 1);
	}
	pthread_cond_broadcast(&q->id_made);
	pthread_mutex_unlock(&q->ids_lock);
	return r;
}

/* The identity of importance matrix entry e of the mount's matrix into out (33 bytes):
 * XXH3-128 of its count and of its weights as llama-quantize hands them to the
 * quantizer (imatrix_values: normalised, so a GGUF matrix and a .dat of the same
 * weights share their pieces), made once per mount and entry; "none" for no entry. 0,
 * or -ENOMEM. */
static int matrix_id(const struct quants_mount *cqm, const struct imatrix_entry *e,
                     char out[33])
{
	struct quants_mount *qm = (struct quants_mount *)cqm;
	if (!e) {
		snprintf(out, 33, "none");
		return 0;
	}
	const uint64_t k = (uint64_t)(e - qm->imatrix->entries);
	pthread_mutex_lock(&qm->ids_lock);
	memcpy(out, qm->entry_ids[k], 33);
	pthread_mutex_unlock(&qm->ids_lock);
	if (out[0])
		return 0;
	/* n_values floats: imatrix_parse made each of them once, in memory */
	float *w = malloc(e->n_values ? e->n_values * sizeof *w : 1);
	XXH3_state_t *h = XXH3_createState();
	if (!w || !h) {
		free(w);
		XXH3_freeState(h);
		return -ENOMEM;
	}
	imatrix_values(qm->imatrix, e, w);
	XXH3_128bits_reset(h);
	XXH3_128bits_update(h, &e->n_values, sizeof e->n_values);
	XXH3_128bits_update(h, w, (size_t)e->n_values * sizeof *w);
	const XXH128_hash_t d = XXH3_128bits_digest(h);
	XXH3_freeState(h);
	free(w);
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, (uint64_t)d.high64, (uint64_t)d.low64);
	pthread_mutex_lock(&qm->ids_lock);
	memcpy(qm->entry_ids[k], out, 33);
	pthread_mutex_unlock(&qm->ids_lock);
	return 0;
}

/* The piece store's key of converted tensor qt of q's model into key (PIECE_KEY_MAX
 * bytes): what its bytes are made from (piece_store.h), never a path, time or NAME. 1;
 * 0 when its source's content cannot be told (computed, not kept); -errno with why. */
static int tensor_key(const struct quants_tree *q, const struct quant_tensor *qt,
                      char key[PIECE_KEY_MAX], char why[GGUF_ERR_MAX])
{
	uint8_t id[16];
	const int r = tensor_id(q, qt->src, id, why);
	if (r <= 0)
		return r;
	const struct gguf_tensor *t = model_tensor(q->m, qt->src);
	char hex[33], mx[33];
	for (int b = 0; b < 16; b++)
		snprintf(hex + 2 * b, 3, "%02x", id[b]);
	if (matrix_id(q->qm, qt->weights, mx) < 0)
		return -ENOMEM;
	snprintf(key, PIECE_KEY_MAX, "tensor %s %" PRIu64 " bytes type %" PRIu32 " shape %" PRIu64
	         " %" PRIu64 " %" PRIu64 " %" PRIu64 " to type %" PRIu32 " rules %d imatrix %s",
	         hex, t->size, t->type, t->ne[0], t->ne[1], t->ne[2], t->ne[3], qt->type,
	         QUANT_RULES_VERSION, mx);
	return 1;
}

/* The state of weighted reads of converted tensor qt (under the mount's matrix, with
 * weights) into *out, made at its first need for the tree: a tensor has the same entry
 * (its name's) in every NAME of a matrix. 0, or -ENOMEM, -EINVAL. */
static int tensor_prep(const struct quants_tree *cq, const struct quant_tensor *qt,
                       struct quant_prep **out)
{
	struct quants_tree *q = (struct quants_tree *)cq;
	int r = 0;
	pthread_mutex_lock(&q->preps_lock);
	if (!q->preps)
		q->preps = calloc(model_n_tensors(q->m) ? model_n_tensors(q->m) : 1, sizeof *q->preps);
	if (!q->preps)
		r = -ENOMEM;
	else if (!q->preps[qt->src])
		r = reader_quant_prep_new(q->m, qt->src, q->qm->imatrix, qt->weights,
		                          &q->preps[qt->src]);
	*out = r == 0 ? q->preps[qt->src] : NULL;
	pthread_mutex_unlock(&q->preps_lock);
	return r;
}

/* Bytes [off, off + len) of converted tensor qt of q's model quantized (under its
 * matrix entry, if it has one: reader_quant_weighted's bytes, with what tensor_prep
 * keeps) into buf: 0, or -errno with why. */
static int quantize_tensor(const struct quants_tree *q, const struct quant_tensor *qt,
                           uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	if (!qt->weights)
		return reader_quant_weighted(q->m, qt->src, qt->type, NULL, NULL, off, len, buf, why);
	struct quant_prep *p;
	const int r = tensor_prep(q, qt, &p);
	return r < 0 ? r : reader_quant_prepared(p, qt->type, off, len, buf, why);
}

/* What make_piece makes: tensor qt of q's model. */
struct piece_of {
	const struct quants_tree *q;
	const struct quant_tensor *qt;
};

/* piece_make_fn: [off, off + len) of the converted tensor, quantized from the model's
 * version parsed (checked after: model_changed), else -EIO with why. */
static int make_piece(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct piece_of *p = ctx;
	const int r = quantize_tensor(p->q, p->qt, off, len, buf, why);
	if (r < 0)   /* -EINVAL: a type this build does not make, as EIO */
		return r == -ENOMEM ? r : -EIO;
	return model_changed(p->q->m, why) ? -EIO : 0;
}

/* [off, off + len) (inside it) of tensor qt of f's file, whose bytes start at file
 * offset start, into buf: copied from the model when its type stays, else from its piece
 * (or quantized, without a piece store or key). 0 with *how added to (PIECE_*), or
 * -errno with why. */
static int read_tensor(const struct quants_file *f, const struct quant_tensor *qt,
                       uint64_t start, char *buf, uint64_t len, uint64_t off, unsigned *how,
                       char why[GGUF_ERR_MAX])
{
	const struct ggufs_model *m = f->q->m;
	const bool stays = qt->type == model_tensor(m, qt->src)->type;
	char key[PIECE_KEY_MAX];
	const int k = stays || !f->q->qm->store ? 0 : tensor_key(f->q, qt, key, why);
	if (k < 0)
		return k == -ENOMEM ? k : -EIO;
	if (k > 0) {
		const struct piece_of p = { f->q, qt };
		unsigned got;
		const int r = piece_read(f->q->qm->store, key, qt->size, off - start, len, buf,
		                         make_piece, (void *)&p, &got, why);
		*how |= got;
		return r;
	}
	const int r = stays ? reader_quant(m, qt->src, qt->type, off - start, len, buf, why)
	                    : quantize_tensor(f->q, qt, off - start, len, buf, why);
	if (r < 0)   /* -EINVAL: a type this build does not make, as EIO */
		return r == -ENOMEM ? r : -EIO;
	if (!stays)
		*how |= PIECE_MADE;
	return 0;
}

/* read_quant's bytes, as the plan of f lays them out from the mappings of its model now,
 * *how (PIECE_*) saying whether something was quantized or stored. */
static int read_planned(const struct quants_file *f, char *buf, uint64_t len, uint64_t off,
                        unsigned *how, char why[GGUF_ERR_MAX])
{
	const struct ggufs_model *m = f->q->m;
	const struct quant_plan *qp = f->qp;
	if (off < qp->data_offset) {
		if (model_header_holds(m, why) < 0)
			return -EIO;
		uint64_t k = qp->data_offset - off < len ? qp->data_offset - off : len;
		struct header_read h = { qp, off, k, buf };
		int e = guard_call(run_header, &h);
		if (e < 0) {   /* a page went while it was read: which file shrank */
			model_header_holds(m, why);
			return e;
		}
		buf += k, off += k, len -= k;
	}
	for (uint64_t i = len ? quant_plan_tensor_at(qp, off) : 0; len; i++) {
		const struct quant_tensor *qt = &qp->tensors[i];
		const uint64_t start = qp->data_offset + qt->offset;
		const uint64_t end = start + qt->size;
		if (off < end) {
			uint64_t k = end - off < len ? end - off : len;
			int r = read_tensor(f, qt, start, buf, k, off, how, why);
			if (r < 0)
				return r;
			buf += k, off += k, len -= k;
		}
		/* the zeros up to the next tensor (or the end) */
		const uint64_t next = i + 1 < qp->n_tensors ? qp->data_offset + qp->tensors[i + 1].offset
		                                            : qp->size;
		if (len && off < next) {
			uint64_t k = next - off < len ? next - off : len;
			memset(buf, 0, k);
			buf += k, off += k, len -= k;
		}
	}
	return 0;
}

/* [off, off + len) of NAME.gguf of file f (inside it): the header from the plan, then
 * each tensor's bytes (copied, or its piece's) and the zeros after it. 0 with *how set,
 * or -errno with why: -EIO too when a local file of the model is no longer the version
 * the plan was made from, checked after the bytes are had (model_changed: a write moves
 * ctime before it changes a byte, so bytes had before an unchanged check are the
 * recorded version's). */
static int read_quant(const struct quants_file *f, char *buf, uint64_t len, uint64_t off,
                      unsigned *how, char why[GGUF_ERR_MAX])
{
	*how = 0;
	int r = read_planned(f, buf, len, off, how, why);
	return r == 0 && model_changed(f->q->m, why) ? -EIO : r;
}

/* computed_fill_fn: bytes [off, off + len) of the file f is (a quants_file), counted as
 * computed when something in them was quantized now or there is no disk cache, else as
 * kept (read from the piece store and the model: blocks_from_disk). */
static int fill(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct quants_file *f = ctx;
	unsigned how;
	const int r = read_quant(f, buf, len, off, &how, why);
	if (r < 0)
		return r;
	return (how & PIECE_MADE || !f->q->qm->store ? 0 : COMPUTED_FILL_KEPT) |
	       (how & PIECE_STORED ? COMPUTED_FILL_STORED : 0);
}

/* Opens f's computed bytes in the mount's pool, into *src: 0 or -ENOMEM. The file is
 * kept in memory only: what is worth keeping on disk, its converted tensors, the piece
 * store keeps. */
static int open_file(const struct quants_tree *q, struct quants_file *f, struct source **src,
                     char why[GGUF_ERR_MAX])
{
	(void)why;
	const struct computed_opts o = {
		.size = f->qp->size, .fill = fill, .ctx = f, .pool = q->qm->pool,
	};
	char err[GGUF_ERR_MAX];
	*src = computed_open(&o, err);
	if (!*src) {
		evlog(EVLOG_WARNING, "quant open", "%s: quants/%s.gguf: %s", model_path(q->m),
		      q->qs.names[f->qp - q->qs.plans].name, err);
		return -ENOMEM;
	}
	return 0;
}

/* Adds c, the counters of a source of f that closed, to f's totals. */
static void keep_counters(struct quants_file *f, const struct computed_counters *c)
{
	f->computed += c->computed;
	f->from_disk += c->from_disk;
	f->stored += c->stored;
}

/* File j's computed bytes, opened if need be and held for one read (file_put lets go),
 * into *out: 0, or open_file's -errno with why. An open past QUANTS_OPEN_MAX closes the
 * least recently read idle files of the tree; a file being closed is opened again only
 * once its close is done. */
static int file_get(const struct quants_tree *cq, uint64_t j, struct source **out,
                    char why[GGUF_ERR_MAX])
{
	struct quants_tree *q = (struct quants_tree *)cq;
	struct quants_file *closing[QUANTS_CLOSE_MAX];
	struct source *closing_src[QUANTS_CLOSE_MAX];
	unsigned n_closing = 0;
	pthread_mutex_lock(&q->files_lock);
	if (!q->files)
		q->files = calloc(q->n_names, sizeof *q->files);
	*out = NULL;
	if (!q->files) {
		pthread_mutex_unlock(&q->files_lock);
		return -ENOMEM;
	}
	int r = 0;
	struct quants_file *f = &q->files[j];
	while (f->opening || f->closing)
		pthread_cond_wait(&q->opened, &q->files_lock);
	if (!f->src) {
		f->q = q;   /* the fill function's (no source of f is open to read them) */
		f->qp = &q->qs.plans[j];
		f->opening = true;
		pthread_mutex_unlock(&q->files_lock);
		struct source *src;
		r = open_file(q, f, &src, why);
		pthread_mutex_lock(&q->files_lock);
		f->opening = false;
		f->src = src;
		pthread_cond_broadcast(&q->opened);
		if (src)
			q->n_open++;
		while (q->n_open > QUANTS_OPEN_MAX && n_closing < QUANTS_CLOSE_MAX) {
			struct quants_file *idle = NULL;
			for (size_t i = 0; i < q->n_names; i++) {
				struct quants_file *g = &q->files[i];
				if (g != f && g->src && !g->readers && (!idle || g->last_use < idle->last_use))
					idle = g;
			}
			if (!idle)
				break;   /* all read now: closed when another opens */
			closing[n_closing] = idle;
			closing_src[n_closing++] = idle->src;
			idle->src = NULL;
			idle->closing = true;
			q->n_open--;
		}
	}
	struct source *src = f->src;
	if (src) {
		f->readers++;
		f->last_use = ++q->tick;
	}
	pthread_mutex_unlock(&q->files_lock);
	if (n_closing) {   /* outside the lock: a close waits for its blocks being made */
		struct computed_counters counted[QUANTS_CLOSE_MAX];
		for (unsigned i = 0; i < n_closing; i++)
			computed_close_counted(closing_src[i], &counted[i]);
		pthread_mutex_lock(&q->files_lock);
		for (unsigned i = 0; i < n_closing; i++) {
			keep_counters(closing[i], &counted[i]);
			closing[i]->closing = false;
		}
		pthread_cond_broadcast(&q->opened);
		pthread_mutex_unlock(&q->files_lock);
	}
	*out = src;
	return src ? 0 : r;
}

static void file_put(const struct quants_tree *cq, uint64_t j)
{
	struct quants_tree *q = (struct quants_tree *)cq;
	pthread_mutex_lock(&q->files_lock);
	q->files[j].readers--;
	pthread_mutex_unlock(&q->files_lock);
}

static int64_t quants_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                           uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	const struct tree_node *n = r->n;
	const struct quants_tree *q = r->inst;
	if (n->role == QUANTS_DIR)
		return -EISDIR;
	if (off >= n->size || len == 0)
		return 0;
	if (len > n->size - off)
		len = n->size - off;
	/* a local file that changed (shrank, or was written to in place) fails every
	 * read, quants.tsv's and the blocks made before too: the plans were made from the
	 * model parsed, which is no longer the file */
	if (model_changed(q->m, why) || !plans(q))
		return -EIO;
	if (n->role == QUANTS_TSV) {   /* from the plans alone, in memory */
		struct sink s = sink_window(buf, off, len);
		render_quants_tsv(&s, &q->qs);
		return (int64_t)len;
	}
	struct source *src;
	int e = file_get(q, n->index, &src, why);
	if (e < 0)
		return e;
	e = source_read(src, off, len, buf, why);
	file_put(q, n->index);
	return e < 0 ? e : (int64_t)len;
}

/* quants/'s user.ggufs.tensors_hashed and _hash_kept: the tensors whose content
 * identity the mount made by hashing their bytes, and read as an earlier mount kept it.
 * NAME.gguf's user.ggufs.blocks_*: how its blocks were had so far (made, read from the
 * disk cache, stored in it; a block had again after the memory let it go counts again),
 * and how many it has (COMPUTED_BLOCK_SIZE each, the last one shorter): progress. */
static int quants_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	struct quants_tree *q = (struct quants_tree *)r->inst;
	if (r->n->role == QUANTS_DIR) {   /* how the tensors' identities were had */
		const uint64_t v[2] = { atomic_load(&q->ids_hashed), atomic_load(&q->ids_kept) };
		static const char *const names[2] = { "user.ggufs.tensors_hashed",
			"user.ggufs.tensors_hash_kept" };
		for (int i = 0; i < 2; i++) {
			x[i].name = names[i];
			x[i].len = (uint64_t)snprintf(x[i].buf, sizeof x[i].buf, "%" PRIu64, v[i]);
			x[i].value = x[i].buf;
		}
		return 2;
	}
	if (r->n->role != QUANTS_FILE)
		return 0;
	uint64_t v[4] = { 0, 0, 0, r->n->size / COMPUTED_BLOCK_SIZE +
	                           (r->n->size % COMPUTED_BLOCK_SIZE != 0) };
	pthread_mutex_lock(&q->files_lock);
	const struct quants_file *f = q->files ? &q->files[r->n->index] : NULL;
	if (f) {
		v[0] = f->computed, v[1] = f->from_disk, v[2] = f->stored;
		if (f->src) {
			struct computed_counters c;
			computed_counters(f->src, &c);
			v[0] += c.computed, v[1] += c.from_disk, v[2] += c.stored;
		}
	}
	pthread_mutex_unlock(&q->files_lock);
	static const char *const names[4] = { "user.ggufs.blocks_computed",
		"user.ggufs.blocks_from_disk", "user.ggufs.blocks_stored", "user.ggufs.blocks_total" };
	for (int i = 0; i < 4; i++) {
		x[i].name = names[i];
		x[i].len = (uint64_t)snprintf(x[i].buf, sizeof x[i].buf, "%" PRIu64, v[i]);
		x[i].value = x[i].buf;
	}
	return 4;
}

static const struct tree_root quants_roots[] = { { "quants", true, false } };

const struct tree_provider quants_provider = {
	.name = "quants",
	.roots = quants_roots,
	.n_roots = 1,
	.widths = quants_widths,
	.make = quants_make,
	.free = quants_free,
	.bytes = quants_bytes,
	.node = quants_node,
	.lookup = quants_lookup,
	.count = quants_count,
	.entry = quants_entry,
	.attr = quants_attr,
	.read = quants_read,
	.stale = quants_stale,
	.xattrs = quants_xattrs,
};
