/* quants/: every quantization llama.cpp makes of the model without an importance
 * matrix, as NAME.gguf (quant_plan.h: byte for byte llama_model_quantize()'s file), and
 * quants.tsv (render_quants.h). The plans are made at the first lookup in, listing of or
 * stat of a file in quants/, never at mount, and hold no tensor data: a file's size is
 * known without quantizing anything.
 *
 * A NAME.gguf is a computed file (computed.h), opened at its first read: its bytes are
 * made a block at a time by read_quant (the header from the plan, the tensors whose type
 * stays copied, the others quantized for the blocks a range touches: quant_read.h),
 * ahead of a sequential reader on workers, and kept in the disk cache under a key that
 * says what they were made from: the model's files (a local file's device, inode, size
 * and times as the model recorded them when it parsed the file; a remote one's URL, size
 * and ETag), the header (so an edit of the metadata is another file) and
 * QUANT_RULES_VERSION (so a change of rules or quantizers is); never a path, so that
 * one file is one entry whatever names lead to it.
 *
 * The plans are the model's parse at open: a local file written to since (in place: the
 * same inode, its bytes others under the mapping) has none. Whatever is made from the
 * mappings (the plans, a header read, a block) is checked after it is made against the
 * identity recorded at open (model_changed) and, if the file changed, is -EIO and kept
 * nowhere; from then on every read of quants/ fails with EIO. */
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "computed.h"
#include "evlog.h"
#include "guard.h"
#include "hash.h"
#include "quant.h"
#include "reader.h"
#include "quant_read.h"
#include "render_quants.h"
#include "sink.h"

/* The name a NAME's file has: "Q4_K_M.gguf". */
static void file_name(const struct quant_name *qn, char out[TREE_QUANT_NAME_MAX])
{
	snprintf(out, TREE_QUANT_NAME_MAX, "%s.gguf", qn->name);
}

/* quant_can_make, as the plans ask it. */
static bool can_make(uint32_t type)
{
	return quant_can_make((enum ggml_type_id)type);
}

/* What guard_call runs to make t's plans (they read names and keys in the mappings). */
static void run_plans(void *ctx)
{
	struct tree *t = ctx;
	struct tree_quants *q = &t->quants;
	if (quant_set_build(t->m, q->requantize, can_make, &q->qs) < 0)
		return;
	const uint64_t gen = t->state ? t->state->gen : 0;
	q->n_children = 0;
	for (size_t j = 0; j < q->qs.n && j < TREE_QUANT_TSV_SLOT; j++) {
		if (q->qs.why[j][0])
			continue;
		file_name(&q->qs.names[j], q->names[j]);
		q->nodes[j] = (struct tree_node){ .ino = tree_ino_quant(gen, (unsigned)j),
			.parent = TREE_QUANTS_DIR_INO, .kind = TREE_QUANT, .index = j,
			.name = q->names[j], .size = q->qs.plans[j].size };
		q->children[q->n_children++] = (unsigned)j;
	}
	struct sink c = sink_counter();
	render_quants_tsv(&c, &q->qs);
	if (model_changed(t->m, NULL))   /* made from the mappings of another version */
		return;
	q->nodes[TREE_QUANT_TSV_SLOT] = (struct tree_node){
		.ino = tree_ino_quant(gen, TREE_QUANT_TSV_SLOT), .parent = TREE_QUANTS_DIR_INO,
		.kind = TREE_QUANTS_TSV, .index = TREE_QUANT_TSV_SLOT, .name = "quants.tsv",
		.size = c.pos };
	q->children[q->n_children++] = TREE_QUANT_TSV_SLOT;
	atomic_store_explicit(&q->made, true, memory_order_release);
}

/* t's plans made (once, by the first caller; the others wait): false when they could
 * not be (out of memory, a page of the model's header has gone, or a local file changed
 * since the model parsed it: a later call tries again). */
static bool plans(const struct tree *t)
{
	struct tree *w = (struct tree *)t;
	struct tree_quants *q = &w->quants;
	if (atomic_load_explicit(&q->made, memory_order_acquire))
		return true;
	pthread_mutex_lock(&q->lock);
	if (!atomic_load_explicit(&q->made, memory_order_relaxed)) {
		bool held = model_header_holds(t->m, NULL) == 0;
		quant_set_free(&q->qs);
		if (held)
			guard_call(run_plans, w);
	}
	pthread_mutex_unlock(&q->lock);
	return atomic_load_explicit(&q->made, memory_order_acquire);
}

void tree_quants_init(struct tree *t)
{
	pthread_mutex_init(&t->quants.lock, NULL);
	pthread_mutex_init(&t->quants.files_lock, NULL);
	pthread_cond_init(&t->quants.opened, NULL);
	atomic_init(&t->quants.made, false);
}

void tree_quants_free(struct tree *t)
{
	for (size_t j = 0; t->quants.files && j < TREE_QUANT_TSV_SLOT; j++)
		source_close(t->quants.files[j].src);
	computed_pool_free(t->quants.own_pool);   /* after its files */
	free(t->quants.files);
	quant_set_free(&t->quants.qs);
	free((char *)t->quants.cache.dir);
	pthread_cond_destroy(&t->quants.opened);
	pthread_mutex_destroy(&t->quants.files_lock);
	pthread_mutex_destroy(&t->quants.lock);
}

void tree_set_requantize(struct tree *t, bool on)
{
	t->quants.requantize = on;
}

struct computed_pool *tree_quant_pool_new(unsigned threads, struct leaving *leaving,
                                          char err[GGUF_ERR_MAX])
{
	const long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const struct computed_pool_opts o = {
		.threads = threads ? threads : cores > 0 && cores < 65536 ? (unsigned)cores : 1,
		.leaving = leaving,
	};
	return computed_pool_new(&o, err);
}

bool tree_set_quant_cache(struct tree *t, const struct tree_quant_cache *c)
{
	char *dir = c->dir ? strdup(c->dir) : NULL;
	if (c->dir && !dir)
		return false;
	free((char *)t->quants.cache.dir);
	t->quants.cache = *c;
	t->quants.cache.dir = dir;
	return true;
}

uint64_t tree_quants_bytes(const struct tree *t)
{
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	pthread_mutex_lock(&q->files_lock);
	uint64_t b = q->files ? TREE_QUANT_TSV_SLOT * sizeof *q->files : 0;
	pthread_mutex_unlock(&q->files_lock);
	return b + (atomic_load(&t->quants.made) ? quant_set_bytes(&t->quants.qs) : 0);
}

const struct tree_node *tree_quants_node(const struct tree *t, uint64_t ino)
{
	const uint64_t gen = t->state ? t->state->gen : 0;
	if (ino < tree_ino_quant(gen, 0) || ino > tree_ino_quant(gen, TREE_QUANT_TSV_SLOT) || !plans(t))
		return NULL;
	const struct tree_node *n = &t->quants.nodes[ino - tree_ino_quant(gen, 0)];
	return n->ino == ino ? n : NULL;
}

const struct tree_node *tree_quants_lookup(const struct tree *t, const char *name)
{
	if (!plans(t))
		return NULL;
	for (uint64_t i = 0; i < t->quants.n_children; i++) {
		const struct tree_node *n = &t->quants.nodes[t->quants.children[i]];
		if (strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

uint64_t tree_quants_count(const struct tree *t)
{
	return plans(t) ? t->quants.n_children : 0;
}

const struct tree_node *tree_quants_child(const struct tree *t, uint64_t i)
{
	return plans(t) && i < t->quants.n_children ? &t->quants.nodes[t->quants.children[i]]
	                                            : NULL;
}

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

/* read_quant's bytes, as the plan lays them out from the mappings now. */
static int read_planned(const struct tree *t, const struct quant_plan *qp, char *buf,
                        uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	if (off < qp->data_offset) {
		if (model_header_holds(t->m, why) < 0)
			return -EIO;
		uint64_t k = qp->data_offset - off < len ? qp->data_offset - off : len;
		struct header_read h = { qp, off, k, buf };
		int e = guard_call(run_header, &h);
		if (e < 0) {   /* a page went while it was read: which file shrank */
			model_header_holds(t->m, why);
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
			int r = reader_quant(t->m, qt->src, qt->type, off - start, k, buf, why);
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

/* [off, off + len) of NAME.gguf n (inside it): the header from the plan, then each
 * tensor's bytes (copied, or quantized from the blocks the range touches) and the zeros
 * after it. 0 or -errno with why: -EIO too when a local file of the model is no longer
 * the version the plan was made from, checked after the bytes are made (model_changed:
 * a write moves ctime before it changes a byte, so bytes made before an unchanged check
 * are the recorded version's). */
static int read_quant(const struct tree *t, const struct quant_plan *qp, char *buf,
                      uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	int r = read_planned(t, qp, buf, len, off, why);
	return r == 0 && model_changed(t->m, why) ? -EIO : r;
}

/* Files of one tree whose computed bytes stay open at once: past it, an idle one is
 * closed when another opens (each holds its disk cache entry: its lock, two files and
 * a record of the blocks it keeps; the workers and memory are the pool's). */
#define TREE_QUANT_OPEN_MAX 4
/* The header is hashed for the disk cache's key in pieces of this many bytes. */
#define TREE_QUANT_HASH_STEP (64u << 10)

/* computed_fill_fn: bytes [off, off + len) of the file f is (a tree_quant_file). */
static int fill(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct tree_quant_file *f = ctx;
	return read_quant(f->t, f->qp, buf, len, off, why);
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

/* The disk cache's key and version of file f of t: key names it for people by the
 * model's first file, never by a path (one file is one entry, whatever names lead to
 * it: "quant Q4_K_M of file 2049:1835018", a remote one "quant Q4_K_M of URL"), version
 * is what it was made from (model_identity's, its header's bytes, QUANT_RULES_VERSION). 0;
 * -EIO with why when the header cannot be read, or the model changed since it was
 * parsed; 1 when the file has no version to keep it under (nothing goes to disk). */
static int disk_key(const struct tree *t, const struct tree_quant_file *f, char *key,
                    size_t key_size, char *version, size_t version_size,
                    char why[GGUF_ERR_MAX])
{
	struct id_hash h = { HASH_FNV1A_BASIS, 0x84222325cbf29ce4ull };
	char head[64];
	int n = snprintf(head, sizeof head, "ggufs quant rules %d %s\n", QUANT_RULES_VERSION,
	                 f->qp->name->name);
	id_add(&h, head, (uint64_t)n);
	if (!model_identity(t->m, id_model, &h))
		return 1;
	uint8_t *piece = malloc(TREE_QUANT_HASH_STEP);
	if (!piece)
		return -ENOMEM;
	for (uint64_t off = 0; off < f->qp->data_offset; off += TREE_QUANT_HASH_STEP) {
		uint64_t k = f->qp->data_offset - off;
		if (k > TREE_QUANT_HASH_STEP)
			k = TREE_QUANT_HASH_STEP;
		int r = read_quant(t, f->qp, (char *)piece, k, off, why);
		if (r < 0) {
			free(piece);
			return r;
		}
		id_add(&h, piece, k);
	}
	free(piece);
	char name[1040];
	model_cache_name(t->m, name, sizeof name);
	snprintf(key, key_size, "quant %s of %s", f->qp->name->name, name);
	snprintf(version, version_size, "rules %d %016" PRIx64 "%016" PRIx64, QUANT_RULES_VERSION,
	         h.a, h.b);
	return 0;
}

/* Opens f's computed bytes with t's way (its base's in an edit state's tree) in pool,
 * into *src: 0, or -EIO (its header could not be read: why says so) or -ENOMEM. */
static int open_file(const struct tree *t, struct tree_quant_file *f,
                     struct computed_pool *pool, struct source **src, char why[GGUF_ERR_MAX])
{
	const struct tree_quant_cache *c = t->base ? &t->base->quants.cache : &t->quants.cache;
	char key[1200], version[80];
	const int k = c->dir ? disk_key(t, f, key, sizeof key, version, sizeof version, why) : 1;
	*src = NULL;
	if (k < 0)
		return k;
	const struct computed_opts o = {
		.size = f->qp->size, .fill = fill, .ctx = f, .pool = pool,
		.cache_dir = k == 0 ? c->dir : NULL, .cache_max = c->max,
		.key = k == 0 ? key : NULL, .version = k == 0 ? version : NULL,
	};
	char err[GGUF_ERR_MAX];
	*src = computed_open(&o, err);
	if (!*src) {
		evlog(EVLOG_WARNING, "quant open", "%s: quants/%s.gguf: %s", model_path(t->m),
		      f->qp->name->name, err);
		return -ENOMEM;
	}
	return 0;
}

/* The pool t's files are made in: the mount's (its base's in an edit state's tree), or
 * else t's own, made now (under files_lock); NULL out of memory. */
static struct computed_pool *pool_of(const struct tree *t)
{
	const struct tree_quant_cache *c = t->base ? &t->base->quants.cache : &t->quants.cache;
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	if (c->pool)
		return c->pool;
	char err[GGUF_ERR_MAX];
	if (!q->own_pool && !(q->own_pool = tree_quant_pool_new(c->threads, NULL, err)))
		evlog(EVLOG_WARNING, "quant pool", "%s: quants/: %s", model_path(t->m), err);
	return q->own_pool;
}

/* Adds c, the counters of a source of f that closed, to f's totals. */
static void keep_counters(struct tree_quant_file *f, const struct computed_counters *c)
{
	f->computed += c->computed;
	f->from_disk += c->from_disk;
	f->stored += c->stored;
}

/* File j's computed bytes, opened if need be and held for one read (file_put lets go),
 * into *out: 0, or open_file's -errno with why. An open past TREE_QUANT_OPEN_MAX closes
 * the least recently read idle files of the tree; a file being closed is opened again
 * only once its close is done, so that its disk cache entry is let go first. */
static int file_get(const struct tree *t, uint64_t j, struct source **out,
                    char why[GGUF_ERR_MAX])
{
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	struct tree_quant_file *closing[TREE_QUANT_TSV_SLOT];
	struct source *closing_src[TREE_QUANT_TSV_SLOT];
	unsigned n_closing = 0;
	pthread_mutex_lock(&q->files_lock);
	if (!q->files)
		q->files = calloc(TREE_QUANT_TSV_SLOT, sizeof *q->files);
	struct computed_pool *pool = q->files ? pool_of(t) : NULL;
	*out = NULL;
	if (!pool) {
		pthread_mutex_unlock(&q->files_lock);
		return -ENOMEM;
	}
	int r = 0;
	struct tree_quant_file *f = &q->files[j];
	while (f->opening || f->closing)
		pthread_cond_wait(&q->opened, &q->files_lock);
	if (!f->src) {
		f->t = t;   /* the fill function's (no source of f is open to read them) */
		f->qp = &q->qs.plans[j];
		f->opening = true;
		pthread_mutex_unlock(&q->files_lock);
		struct source *src;
		r = open_file(t, f, pool, &src, why);
		pthread_mutex_lock(&q->files_lock);
		f->opening = false;
		f->src = src;
		pthread_cond_broadcast(&q->opened);
		if (src)
			q->n_open++;
		while (q->n_open > TREE_QUANT_OPEN_MAX) {
			struct tree_quant_file *idle = NULL;
			for (size_t i = 0; i < TREE_QUANT_TSV_SLOT; i++) {
				struct tree_quant_file *g = &q->files[i];
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
		struct computed_counters counted[TREE_QUANT_TSV_SLOT];
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

static void file_put(const struct tree *t, uint64_t j)
{
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	pthread_mutex_lock(&q->files_lock);
	q->files[j].readers--;
	pthread_mutex_unlock(&q->files_lock);
}

void tree_quants_counters(const struct tree *t, const struct tree_node *n, uint64_t *computed,
                          uint64_t *from_disk, uint64_t *stored)
{
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	pthread_mutex_lock(&q->files_lock);
	const struct tree_quant_file *f = q->files ? &q->files[n->index] : NULL;
	*computed = f ? f->computed : 0, *from_disk = f ? f->from_disk : 0;
	*stored = f ? f->stored : 0;
	if (f && f->src) {
		struct computed_counters c;
		computed_counters(f->src, &c);
		*computed += c.computed, *from_disk += c.from_disk, *stored += c.stored;
	}
	pthread_mutex_unlock(&q->files_lock);
}

bool tree_quants_changed(const struct tree *t, const struct tree_node *n)
{
	return (n->kind == TREE_QUANT || n->kind == TREE_QUANTS_TSV) &&
	       model_changed(t->m, NULL) != 0;
}

int64_t tree_quants_read(const struct tree *t, const struct tree_node *n, char *buf,
                         uint64_t len, uint64_t off, char why[GGUF_ERR_MAX])
{
	/* a local file that changed (shrank, or was written to in place) fails every
	 * read, quants.tsv's and the blocks made before too: the plans were made from the
	 * model parsed, which is no longer the file */
	if (model_changed(t->m, why) || !plans(t))
		return -EIO;
	struct tree_quants *q = (struct tree_quants *)&t->quants;
	if (n->kind == TREE_QUANTS_TSV) {   /* from the plans alone, in memory */
		struct sink s = sink_window(buf, off, len);
		render_quants_tsv(&s, &q->qs);
		return (int64_t)len;
	}
	struct source *src;
	int r = file_get(t, n->index, &src, why);
	if (r < 0)
		return r;
	r = source_read(src, off, len, buf, why);
	file_put(t, n->index);
	return r < 0 ? r : (int64_t)len;
}
