/* The statistics files of the tensors provider (tree_tensors.c): stats/NAME and
 * stats.tsv, each tensor's statistics computed at most once by the reads that need them. */
#include "tree_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "render_stats.h"
#include "sink.h"
#include "stats.h"

/* The statistics of one tensor, computed by the first read of its stats/NAME or its
 * line of stats.tsv and kept for the life of the tree; lock makes a second reader wait
 * for the first one's result instead of computing it again. */
struct stats_slot {
	pthread_mutex_t lock;
	atomic_bool done;
	struct tensor_stats s;
};

struct stats_slot *tree_stats_new(uint64_t n_tensors)
{
	struct stats_slot *slots = calloc(n_tensors + 1, sizeof *slots);
	if (slots)
		for (uint64_t i = 0; i < n_tensors; i++)
			pthread_mutex_init(&slots[i].lock, NULL);
	return slots;
}

void tree_stats_free(struct stats_slot *slots, uint64_t n_tensors)
{
	if (!slots)
		return;
	for (uint64_t i = 0; i < n_tensors; i++)
		pthread_mutex_destroy(&slots[i].lock);
	free(slots);
}

void tree_stats_layout(const struct ggufs_model *m, struct tree_tensors *tt)
{
	/* the header, then one line per stats/ file, each of a size known now */
	struct sink hs = sink_counter();
	render_stats_tsv_header(&hs);
	tt->tsv_line[0] = hs.pos;
	for (uint64_t k = 0; k < tt->n_stats_children; k++) {
		const struct tree_node *sn = &tt->nodes[tt->stats_children[k] - tt->first_ino];
		tt->tsv_line[k + 1] = tt->tsv_line[k] +
		                      render_stats_tsv_line_size(model_tensor(m, sn->index), sn->name);
	}
}

/* The statistics of tensor i of m into *out: the kept result, or computed now by the
 * first caller while any other waits for it. A failed computation keeps nothing, so that
 * a later read tries again. 0 or -errno with a read's why. */
static int tensor_stats_once(struct tree_tensors *tt, const struct ggufs_model *m, uint64_t i,
                             struct tensor_stats *out, char why[GGUF_ERR_MAX])
{
	struct stats_slot *slot = &tt->stats[i];
	int r = 0;
	if (!atomic_load_explicit(&slot->done, memory_order_acquire)) {
		pthread_mutex_lock(&slot->lock);
		if (!atomic_load_explicit(&slot->done, memory_order_relaxed)) {
			r = stats_tensor(m, i, &slot->s, why);
			if (r == 0) {
				atomic_fetch_add(&tt->stats_computed, 1);
				atomic_store_explicit(&slot->done, true, memory_order_release);
			}
		}
		pthread_mutex_unlock(&slot->lock);
	}
	if (r == 0)
		*out = slot->s;
	return r;
}

int64_t tree_stats_read(struct tree_tensors *tt, const struct ggufs_model *m,
                        const struct tree_node *n, char *buf, uint64_t len, uint64_t off,
                        char why[GGUF_ERR_MAX])
{
	struct tensor_stats st;
	struct sink s = sink_window(buf, off, len);
	int r;
	if (n->role == TENSORS_STATS) {
		r = tensor_stats_once(tt, m, n->index, &st, why);
		if (r < 0)
			return r;
		render_stats(&s, model_tensor(m, n->index), &st);
		return (int64_t)len;
	}
	if (off < tt->tsv_line[0])
		render_stats_tsv_header(&s);
	/* each line as long as its figures: where one starts depends on the figures of
	 * every line before it, so those are computed too (readers read the file in order;
	 * a read of the header alone computes nothing) */
	s.pos = tt->tsv_line[0];
	uint64_t k = 0;
	for (; k < tt->n_stats_children && s.pos < off + len; k++) {
		const struct tree_node *sn = &tt->nodes[tt->stats_children[k] - tt->first_ino];
		r = tensor_stats_once(tt, m, sn->index, &st, why);
		if (r < 0)
			return r;
		render_stats_tsv_line(&s, model_tensor(m, sn->index), sn->name, &st);
	}
	/* then empty lines up to the size laid out for the widest figures */
	if (k == tt->n_stats_children && s.pos < off + len) {
		if (s.pos < off)
			s.pos = off;   /* what lies before the window is newlines too */
		uint64_t end = n->size < off + len ? n->size : off + len;
		if (end > s.pos)
			render_stats_tsv_fill(&s, end - s.pos);
	}
	return (int64_t)len;
}
