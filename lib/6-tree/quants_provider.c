/* quants/ as a provider (quants_provider.h). The plans are made at the first lookup
 * in, listing of or stat of a file in quants/, never at mount, and hold no tensor data:
 * a file's size is known without quantizing anything.
 *
 * A NAME.gguf is a computed file (computed.h), opened at its first read: its bytes are
 * made a block at a time by read_quant (the header from the plan, the tensors whose type
 * stays copied, the others quantized for the blocks a range touches: quant_read.h),
 * ahead of a sequential reader on the mount's workers, and kept in the disk cache under
 * a key that says what they were made from: the model's files (a local file's device,
 * inode, size and times as the model recorded them when it parsed the file; a remote
 * one's URL, size and ETag), the header (so an edit of the metadata is another file) and
 * QUANT_RULES_VERSION (so a change of rules or quantizers is); never a path, so that
 * one file is one entry whatever names lead to it.
 *
 * The plans are the model's parse at open: a local file written to since (in place: the
 * same inode, its bytes others under the mapping) has none. Whatever is made from the
 * mappings (the plans, a header read, a block) is checked after it is made against the
 * identity recorded at open (model_changed) and, if the file changed, is -EIO and kept
 * nowhere; from then on every read of quants/ fails with EIO.
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

#include "computed.h"
#include "evlog.h"
#include "guard.h"
#include "hash.h"
#include "quant.h"
#include "quant_plan.h"
#include "quant_read.h"
#include "reader.h"
#include "render_quants.h"
#include "sink.h"
#include "tree.h"

/* The roles of its nodes. */
enum { QUANTS_DIR, QUANTS_FILE, QUANTS_TSV };

/* Files of one tree whose computed bytes stay open at once: past it, an idle one is
 * closed when another opens (each holds its disk cache entry: its lock, two files and
 * a record of the blocks it keeps; the workers and memory are the pool's). */
#define QUANTS_OPEN_MAX 4
/* The most files one open closes (the rest, when all were read then, at a later one). */
#define QUANTS_CLOSE_MAX 8
/* The header is hashed for the disk cache's key in pieces of this many bytes. */
#define QUANTS_HASH_STEP (64u << 10)

struct quants_mount {
	bool requantize;
	char *cache_dir;
	uint64_t cache_max;
	struct computed_pool *pool;
};

struct quants_tree;

/* One NAME.gguf's computed bytes (computed.h): opened at its first read, closed when
 * the tree goes or, idle, to make room for another (QUANTS_OPEN_MAX). */
struct quants_file {
	const struct quants_tree *q;  /* the fill function's: the model and the plan */
	const struct quant_plan *qp;
	struct source *src;           /* NULL until opened */
	bool opening;                 /* being opened (the lock dropped): wait on opened */
	bool closing;                 /* being closed (the lock dropped; it still holds its
	                               * disk cache entry): wait on opened before opening */
	unsigned readers;             /* reads in src now: it is not closed under them */
	uint64_t last_use;            /* quants_tree.tick at the last read's start */
	uint64_t computed, from_disk, stored;   /* counters of its sources closed */
};

/* quants/ in one tree: every NAME's plan, made at the first lookup, listing or stat in
 * quants/ and kept; the nodes of the NAMEs made and quants.tsv, by j (a NAME's place in
 * quant_names(), quants.tsv's n_names). */
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
	/* the files' computed bytes, under files_lock (apart from lock: an open may wait
	 * for a disk cache entry another mount lets go) */
	pthread_mutex_t files_lock;
	pthread_cond_t opened;         /* a file opened or closed */
	struct quants_file *files;     /* n_names, made at the first read */
	unsigned n_open;
	uint64_t tick;
};

/* ---- the per-mount state ---- */

struct quants_mount *quants_mount_new(const struct quants_opts *o, struct leaving *leaving,
                                      char err[GGUF_ERR_MAX])
{
	struct quants_mount *qm = calloc(1, sizeof *qm);
	if (!qm || (o->cache_dir && !(qm->cache_dir = strdup(o->cache_dir)))) {
		gguf_errf(err, "out of memory");
		quants_mount_free(qm);
		return NULL;
	}
	qm->requantize = o->requantize;
	qm->cache_max = o->cache_max;
	const long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const struct computed_pool_opts po = {
		.threads = o->threads ? o->threads : cores > 0 && cores < 65536 ? (unsigned)cores : 1,
		.leaving = leaving,
	};
	if (!(qm->pool = computed_pool_new(&po, err))) {
		quants_mount_free(qm);
		return NULL;
	}
	return qm;
}

void quants_mount_free(struct quants_mount *qm)
{
	if (!qm)
		return;
	computed_pool_free(qm->pool);
	free(qm->cache_dir);
	free(qm);
}

struct computed_pool *quants_mount_pool(const struct quants_mount *qm)
{
	return qm->pool;
}

/* ---- the plans and the nodes ---- */

/* quant_can_make, as the plans ask it. */
static bool can_make(uint32_t type)
{
	return quant_can_make((enum ggml_type_id)type);
}

/* What guard_call runs to make q's plans (they read names and keys in the mappings). */
static void run_plans(void *ctx)
{
	struct quants_tree *q = ctx;
	if (quant_set_build(q->m, q->qm->requantize, can_make, &q->qs) < 0)
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
			.kind = TREE_QUANT, .prov = q->dir.prov, .role = QUANTS_FILE, .index = j,
			.name = w, .size = q->qs.plans[j].size };
		w += len + 6;
		q->children[q->n_children++] = j;
	}
	struct sink c = sink_counter();
	render_quants_tsv(&c, &q->qs);
	if (model_changed(q->m, NULL))   /* made from the mappings of another version */
		return;
	q->nodes[q->n_names] = (struct tree_node){ .ino = q->first + q->n_names,
		.parent = q->dir.ino, .kind = TREE_QUANTS_TSV, .prov = q->dir.prov,
		.role = QUANTS_TSV, .index = q->n_names, .name = "quants.tsv", .size = c.pos };
	q->children[q->n_children++] = q->n_names;
	atomic_store_explicit(&q->made, true, memory_order_release);
}

/* The memory the nodes take: false out of memory (under lock). */
static bool nodes_made(struct quants_tree *q)
{
	if (q->nodes)
		return true;
	size_t n;
	const struct quant_name *names = quant_names(&n);
	size_t len = 1;
	for (size_t j = 0; j < n && j < q->n_names; j++)
		len += strlen(names[j].name) + 6;
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
	(void)ctx, (void)m, (void)why;
	size_t n;
	quant_names(&n);
	w->per_state = (uint64_t)n + 1;
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
	atomic_init(&q->made, false);
	q->m = tree_model(t);
	q->qm = ctx;
	q->dir = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO,
		.kind = TREE_DIR_QUANTS, .prov = (uint16_t)r->prov, .role = QUANTS_DIR,
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

/* read_quant's bytes, as the plan lays them out from the mappings of m now. */
static int read_planned(const struct ggufs_model *m, const struct quant_plan *qp, char *buf,
                        uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
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
			/* copied or quantized, each block as llama.cpp checks it */
			int r = reader_quant(m, qt->src, qt->type, off - start, k, buf, why);
			if (r < 0)   /* -EINVAL: a type this build does not make, as EIO */
				return r == -ENOMEM ? r : -EIO;
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

/* [off, off + len) of NAME.gguf of plan qp of m (inside it): the header from the plan,
 * then each tensor's bytes (copied, or quantized from the blocks the range touches) and
 * the zeros after it. 0 or -errno with why: -EIO too when a local file of the model is
 * no longer the version the plan was made from, checked after the bytes are made
 * (model_changed: a write moves ctime before it changes a byte, so bytes made before an
 * unchanged check are the recorded version's). */
static int read_quant(const struct ggufs_model *m, const struct quant_plan *qp, char *buf,
                      uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	int r = read_planned(m, qp, buf, len, off, why);
	return r == 0 && model_changed(m, why) ? -EIO : r;
}

/* computed_fill_fn: bytes [off, off + len) of the file f is (a quants_file). */
static int fill(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct quants_file *f = ctx;
	return read_quant(f->q->m, f->qp, buf, len, off, why);
}

/* Two FNV-1a hashes, one 128-bit name for what went into them. */
struct id_hash {
	uint64_t a, b;
};

static void id_add(struct id_hash *h, const void *p, uint64_t n)
{
	h->a = hash_fnv1a(p, n, h->a);
	h->b = hash_fnv1a(p, n, h->b);
}

/* model_identity's add: into the hashes at arg. */
static void id_model(void *arg, const void *p, uint64_t n)
{
	id_add(arg, p, n);
}

/* The disk cache's key and version of file f of m: key names it for people by the
 * model's first file, never by a path (one file is one entry, whatever names lead to
 * it: "quant Q4_K_M of file 2049:1835018", a remote one "quant Q4_K_M of URL"), version
 * is what it was made from (model_identity's, its header's bytes, QUANT_RULES_VERSION). 0;
 * -EIO with why when the header cannot be read, or the model changed since it was
 * parsed; 1 when the file has no version to keep it under (nothing goes to disk). */
static int disk_key(const struct ggufs_model *m, const struct quants_file *f, char *key,
                    size_t key_size, char *version, size_t version_size,
                    char why[GGUF_ERR_MAX])
{
	struct id_hash h = { HASH_FNV1A_BASIS, 0x84222325cbf29ce4ull };
	char head[64];
	int n = snprintf(head, sizeof head, "ggufs quant rules %d %s\n", QUANT_RULES_VERSION,
	                 f->qp->name->name);
	id_add(&h, head, (uint64_t)n);
	if (!model_identity(m, id_model, &h))
		return 1;
	uint8_t *piece = malloc(QUANTS_HASH_STEP);
	if (!piece)
		return -ENOMEM;
	for (uint64_t off = 0; off < f->qp->data_offset; off += QUANTS_HASH_STEP) {
		uint64_t k = f->qp->data_offset - off;
		if (k > QUANTS_HASH_STEP)
			k = QUANTS_HASH_STEP;
		int r = read_quant(m, f->qp, (char *)piece, k, off, why);
		if (r < 0) {
			free(piece);
			return r;
		}
		id_add(&h, piece, k);
	}
	free(piece);
	char name[1040];
	model_cache_name(m, name, sizeof name);
	snprintf(key, key_size, "quant %s of %s", f->qp->name->name, name);
	snprintf(version, version_size, "rules %d %016" PRIx64 "%016" PRIx64, QUANT_RULES_VERSION,
	         h.a, h.b);
	return 0;
}

/* Opens f's computed bytes with the mount's way (its disk cache, its pool), into *src:
 * 0, or -EIO (its header could not be read: why says so) or -ENOMEM. */
static int open_file(const struct quants_tree *q, struct quants_file *f, struct source **src,
                     char why[GGUF_ERR_MAX])
{
	const struct quants_mount *qm = q->qm;
	char key[1200], version[80];
	const int k = qm->cache_dir ? disk_key(q->m, f, key, sizeof key, version, sizeof version,
	                                       why) : 1;
	*src = NULL;
	if (k < 0)
		return k;
	const struct computed_opts o = {
		.size = f->qp->size, .fill = fill, .ctx = f, .pool = qm->pool,
		.cache_dir = k == 0 ? qm->cache_dir : NULL, .cache_max = qm->cache_max,
		.key = k == 0 ? key : NULL, .version = k == 0 ? version : NULL,
	};
	char err[GGUF_ERR_MAX];
	*src = computed_open(&o, err);
	if (!*src) {
		evlog(EVLOG_WARNING, "quant open", "%s: quants/%s.gguf: %s", model_path(q->m),
		      f->qp->name->name, err);
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
 * once its close is done, so that its disk cache entry is let go first. */
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

/* NAME.gguf's user.ggufs.blocks_*: how its blocks were had so far (made, read from the
 * disk cache, stored in it). */
static int quants_xattrs(const struct node_ref *r, struct node_xattr x[NODE_XATTR_MAX])
{
	if (r->n->role != QUANTS_FILE)
		return 0;
	struct quants_tree *q = (struct quants_tree *)r->inst;
	uint64_t v[3] = { 0, 0, 0 };
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
	static const char *const names[3] = { "user.ggufs.blocks_computed",
		"user.ggufs.blocks_from_disk", "user.ggufs.blocks_stored" };
	for (int i = 0; i < 3; i++) {
		x[i].name = names[i];
		x[i].len = (uint64_t)snprintf(x[i].buf, sizeof x[i].buf, "%" PRIu64, v[i]);
		x[i].value = x[i].buf;
	}
	return 3;
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
