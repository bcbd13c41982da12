/* quants/: every quantization llama.cpp makes of the model without an importance
 * matrix, as NAME.gguf (quant_plan.h: byte for byte llama_model_quantize()'s file), and
 * quants.tsv (render_quants.h). The plans are made at the first lookup in, listing of or
 * stat of a file in quants/, never at mount, and hold no tensor data: a file's size is
 * known without quantizing anything. A read makes its header from the plan, copies the
 * tensors whose type stays, and quantizes only the blocks of the others its range
 * touches (quant_read.h). */
#include "tree_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "guard.h"
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
	q->nodes[TREE_QUANT_TSV_SLOT] = (struct tree_node){
		.ino = tree_ino_quant(gen, TREE_QUANT_TSV_SLOT), .parent = TREE_QUANTS_DIR_INO,
		.kind = TREE_QUANTS_TSV, .index = TREE_QUANT_TSV_SLOT, .name = "quants.tsv",
		.size = c.pos };
	q->children[q->n_children++] = TREE_QUANT_TSV_SLOT;
	atomic_store_explicit(&q->made, true, memory_order_release);
}

/* t's plans made (once, by the first caller; the others wait): false when they could
 * not be (out of memory, or a page of the model's header has gone: a later call tries
 * again). */
static bool plans(const struct tree *t)
{
	struct tree *w = (struct tree *)t;
	struct tree_quants *q = &w->quants;
	if (atomic_load_explicit(&q->made, memory_order_acquire))
		return true;
	pthread_mutex_lock(&q->lock);
	if (!atomic_load_explicit(&q->made, memory_order_relaxed)) {
		bool held = true;
		for (uint32_t s = 0; s < t->m->n_shards; s++)
			held = held && source_holds(t->m->shards[s].src,
			                            t->m->shards[s].gf.data_offset) == 0;
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
	atomic_init(&t->quants.made, false);
}

void tree_quants_free(struct tree *t)
{
	quant_set_free(&t->quants.qs);
	pthread_mutex_destroy(&t->quants.lock);
}

void tree_set_requantize(struct tree *t, bool on)
{
	t->quants.requantize = on;
}

uint64_t tree_quants_bytes(const struct tree *t)
{
	return atomic_load(&t->quants.made) ? quant_set_bytes(&t->quants.qs) : 0;
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

/* [off, off + len) of NAME.gguf n (inside it): the header from the plan, then each
 * tensor's bytes (copied, or quantized from the blocks the range touches) and the zeros
 * after it. 0 or -errno. */
static int read_quant(const struct tree *t, const struct quant_plan *qp, char *buf,
                      uint64_t len, uint64_t off)
{
	if (off < qp->data_offset) {
		for (uint32_t s = 0; s < t->m->n_shards; s++)
			if (source_holds(t->m->shards[s].src, t->m->shards[s].gf.data_offset) < 0)
				return -EIO;
		uint64_t k = qp->data_offset - off < len ? qp->data_offset - off : len;
		struct header_read h = { qp, off, k, buf };
		int e = guard_call(run_header, &h);
		if (e < 0)
			return e;
		buf += k, off += k, len -= k;
	}
	for (uint64_t i = len ? quant_plan_tensor_at(qp, off) : 0; len; i++) {
		const struct quant_tensor *qt = &qp->tensors[i];
		const uint64_t start = qp->data_offset + qt->offset;
		const uint64_t end = start + qt->size;
		if (off < end) {
			uint64_t k = end - off < len ? end - off : len;
			/* copied or quantized, each block as llama.cpp checks it */
			int r = reader_quant(t->m, qt->src, qt->type, off - start, k, buf);
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

int64_t tree_quants_read(const struct tree *t, const struct tree_node *n, char *buf,
                         uint64_t len, uint64_t off)
{
	if (!plans(t))
		return -EIO;
	const struct tree_quants *q = &t->quants;
	if (n->kind == TREE_QUANTS_TSV) {   /* from the plans alone, in memory */
		struct sink s = sink_window(buf, off, len);
		render_quants_tsv(&s, &q->qs);
		return (int64_t)len;
	}
	int r = read_quant(t, &q->qs.plans[n->index], buf, len, off);
	return r < 0 ? r : (int64_t)len;
}
