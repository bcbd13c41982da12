#include "stats.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "block_check.h"
#include "blocks.h"
#include "dequant.h"
#include "stats_kernel.h"
#include "stats_quant.h"
#include "reader.h"

/* The part of no values. */
static void part_init(struct stats_part *p)
{
	memset(p, 0, sizeof *p);
	p->s.min = INFINITY;
	p->s.max = -INFINITY;
}

void stats_merge(struct stats_part *into, const struct stats_part *next)
{
	struct tensor_stats *a = &into->s;
	const struct tensor_stats *b = &next->s;
	a->elements += b->elements;
	a->nan += b->nan;
	a->pos_inf += b->pos_inf;
	a->neg_inf += b->neg_inf;
	a->zeros += b->zeros;
	a->subnormals += b->subnormals;
	a->bad_blocks += b->bad_blocks;
	a->min = b->min < a->min ? b->min : a->min;
	a->max = b->max > a->max ? b->max : a->max;
	if (b->finite == 0)
		return;
	const uint64_t na = a->finite, nb = b->finite, nt = na + nb;
	const double delta = b->mean - a->mean;
	a->mean += delta * ((double)nb / (double)nt);
	into->m2 += next->m2 + delta * delta * ((double)na * (double)nb / (double)nt);
	a->finite = nt;
}

void stats_finish(const struct stats_part *p, struct tensor_stats *out)
{
	*out = p->s;
	if (out->finite == 0) {
		out->min = out->max = out->absmax = NAN;
		out->mean = out->std = NAN;
		return;
	}
	/* -0.0 and +0.0 compare equal, and which one a lane kept depends on where each
	 * lies: a zero min or max is written 0, whatever the sign of its zeros */
	if (out->min == 0.0f)
		out->min = 0.0f;
	if (out->max == 0.0f)
		out->max = 0.0f;
	out->absmax = fabsf(out->min) > fabsf(out->max) ? fabsf(out->min) : fabsf(out->max);
	out->std = sqrt(p->m2 / (double)out->finite);
}

void stats_acc_init(struct stats_acc *a)
{
	part_init(&a->p);
	a->n_pending = 0;
}

/* The first finite value of x[0..n), or 0 when there is none. */
static double first_finite(const float *x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (isfinite(x[i]))
			return x[i];
	return 0.0;
}

/* s1 and s2 of lane_add, skipping the non-finite values instead of adding 0 - shift:
 * for the rare block that has any, in the same lane order as the kernels. */
static void exact_sums(struct stats_lanes *l, const float *x, uint64_t n, double shift)
{
	for (int j = 0; j < STATS_LANES; j++)
		l->s1[j] = l->s2[j] = 0.0;
	for (uint64_t i = 0; i < n; i++) {
		if (!isfinite(x[i]))
			continue;
		const double d = (double)x[i] - shift;
		l->s1[i % STATS_LANES] += d;
		l->s2[i % STATS_LANES] += d * d;
	}
}

/* Folds the lanes of the tensor's next block of n values, summed about shift, into
 * the running part: the block's count, mean and squared deviations merged into the
 * running ones. x, the block's values, is read only when a lane counted a non-finite
 * one (NULL where none can be). */
static void fold_block(struct stats_acc *a, struct stats_lanes *l, const float *x, uint64_t n,
                       double shift)
{
	struct stats_part b;
	part_init(&b);
	uint64_t nonfinite = 0;
	for (int j = 0; j < STATS_LANES; j++) {
		nonfinite += l->nonfinite[j];
		b.s.zeros += l->zero[j];
		b.s.subnormals += l->sub[j];
		b.s.min = l->lo[j] < b.s.min ? l->lo[j] : b.s.min;
		b.s.max = l->hi[j] > b.s.max ? l->hi[j] : b.s.max;
	}
	b.s.elements = n;
	if (nonfinite) {
		for (uint64_t i = 0; i < n; i++) {
			b.s.nan += isnan(x[i]) != 0;
			b.s.pos_inf += isinf(x[i]) && x[i] > 0;
			b.s.neg_inf += isinf(x[i]) && x[i] < 0;
		}
		exact_sums(l, x, n, shift);
	}
	b.s.finite = n - nonfinite;
	if (b.s.finite) {
		const double nb = (double)b.s.finite;
		const double s1 = stats_lanes_sum(l->s1, STATS_LANES);
		const double s2 = stats_lanes_sum(l->s2, STATS_LANES);
		b.s.mean = shift + s1 / nb;
		b.m2 = s2 - s1 * (s1 / nb);
		if (b.m2 < 0.0)
			b.m2 = 0.0;
	}
	stats_merge(&a->p, &b);
}

/* One block of at most STATS_BLOCK values, the next of the tensor. The block's sums are
 * taken about a shift near the mean (the running mean, or for the first block its own
 * first finite value), so that the sum of squares keeps its digits. */
static void add_block(struct stats_acc *a, const float *x, uint64_t n)
{
	struct stats_lanes l;
	const double shift = a->p.s.finite ? a->p.s.mean : first_finite(x, n);

	stats_lanes_init(&l);
	stats_kernel()(&l, x, n, shift);
	fold_block(a, &l, x, n, shift);
}

void stats_acc_add_blocks(struct stats_acc *a, uint32_t type, const uint8_t *p,
                          uint64_t nblocks)
{
	struct stats_lanes l;
	const uint64_t n = nblocks * ggml_type_get(type)->block_elems;
	const double shift = a->p.s.finite ? a->p.s.mean : stats_quant_first(type, p);

	stats_lanes_init(&l);
	stats_quant_lanes(type, &l, p, nblocks, shift);
	fold_block(a, &l, NULL, n, shift);
}

void stats_acc_add(struct stats_acc *a, const float *x, uint64_t n)
{
	if (a->n_pending) {
		uint64_t k = STATS_BLOCK - a->n_pending;
		if (k > n)
			k = n;
		memcpy(a->pending + a->n_pending, x, k * sizeof *x);
		a->n_pending += (uint32_t)k;
		x += k;
		n -= k;
		if (a->n_pending < STATS_BLOCK)
			return;
		add_block(a, a->pending, STATS_BLOCK);
		a->n_pending = 0;
	}
	for (; n >= STATS_BLOCK; x += STATS_BLOCK, n -= STATS_BLOCK)
		add_block(a, x, STATS_BLOCK);
	memcpy(a->pending, x, n * sizeof *x);
	a->n_pending = (uint32_t)n;
}

void stats_acc_part(struct stats_acc *a, struct stats_part *out)
{
	if (a->n_pending)
		add_block(a, a->pending, a->n_pending);
	a->n_pending = 0;
	*out = a->p;
}

void stats_acc_finish(struct stats_acc *a, struct tensor_stats *out)
{
	struct stats_part p;
	stats_acc_part(a, &p);
	stats_finish(&p, out);
}

bool stats_type_has_scales(uint32_t type)
{
	return block_check_has_scales(type);
}

uint64_t stats_bad_blocks(uint32_t type, const uint8_t *p, uint64_t n)
{
	return block_check_bad_scales(type, p, n);
}

bool stats_unhealthy(const struct tensor_stats *s)
{
	return s->nan || s->pos_inf || s->neg_inf || s->bad_blocks;
}

/* Values per chunk: whole STATS_BLOCKs (so that chunks never change the sums), about
 * 256 KiB of float32, small enough to stay in cache between the dequantizer writing it
 * and the kernel reading it; a segment is a whole number of chunks. */
enum { CHUNK_VALUES = 16 * STATS_BLOCK };
_Static_assert(STATS_SEGMENT % CHUNK_VALUES == 0, "segments are whole chunks");

/* A scan of raw blocks of a type that stats_quant_has, as the accumulation's blocks of
 * STATS_BLOCK values: summed from the blocks where every scale is finite, and otherwise
 * dequantized into buf as .f32 serves them (to_float is what reader_f32 calls) and
 * summed as floats, which counts the NaNs and infinities. */
struct raw_scan {
	struct stats_acc *a;
	const struct ggml_type *ty;
	dequant_fn to_float; /* the type's, as reader_f32's */
	float *buf;          /* STATS_BLOCK floats */
	uint64_t bad;        /* blocks with a bad scale so far */
};

/* The source_visit_fn of a raw_scan: len bytes of whole blocks, starting a STATS_BLOCK. */
static void scan_raw(void *ctx, const uint8_t *raw, uint64_t len)
{
	struct raw_scan *sc = ctx;
	const struct ggml_type *ty = sc->ty;
	const uint64_t per = STATS_BLOCK / ty->block_elems, nblocks = len / ty->block_bytes;
	for (uint64_t b = 0; b < nblocks; b += per) {
		const uint64_t nb = nblocks - b < per ? nblocks - b : per;
		const uint8_t *p = raw + b * ty->block_bytes;
		const uint64_t bad = stats_bad_blocks(ty->id, p, nb);
		sc->bad += bad;
		if (bad == 0) {
			stats_acc_add_blocks(sc->a, ty->id, p, nb);
		} else {
			sc->to_float(p, sc->buf, nb);
			stats_acc_add(sc->a, sc->buf, nb * ty->block_elems);
		}
	}
}

/* Segment [first, end) of tensor i through scan (a source_visit_fn on whole blocks that
 * start a STATS_BLOCK) from its raw blocks: straight from the mapping for a local model
 * (one visit), through rawbuf a chunk at a time for a remote one. 0, or a read's -errno
 * with why (NULL: not wanted). */
static int segment_quant(const struct ggufs_model *m, uint64_t i, uint64_t first,
                         uint64_t end, source_visit_fn scan, void *sc, uint8_t *rawbuf,
                         _Atomic uint64_t *progress, char why[GGUF_ERR_MAX])
{
	const struct ggml_type *ty = model_tensor(m, i)->ti;
	const uint64_t step = !model_tensor_mapped(m, i) ? CHUNK_VALUES : end - first;
	for (uint64_t done = first; done < end; done += step) {
		const uint64_t n = end - done < step ? end - done : step;
		const uint64_t bytes = n / ty->block_elems * ty->block_bytes;
		int r = reader_visit_raw(m, i, done / ty->block_elems * ty->block_bytes, bytes,
		                         rawbuf, scan, sc, why);
		if (r < 0)
			return r;
		if (progress)
			atomic_fetch_add(progress, bytes);
	}
	return 0;
}

uint64_t stats_segments(const struct gguf_tensor *g)
{
	uint64_t n = (g->n_elements + STATS_SEGMENT - 1) / STATS_SEGMENT;
	return n ? n : 1;
}

/* stats_segment, with a read's why (NULL: not wanted). */
static int segment(const struct ggufs_model *m, uint64_t i, uint64_t seg,
                   struct stats_part *out, _Atomic uint64_t *progress, char why[GGUF_ERR_MAX])
{
	if (i >= model_n_tensors(m) || !model_tensor(m, i)->has_f32)
		return -ENOENT;
	const struct gguf_tensor *g = model_tensor(m, i);
	const struct ggml_type *ty = g->ti;
	const bool scales = stats_type_has_scales(g->type);
	/* summed from the raw blocks (stats_quant.h), which are read anyway */
	const bool quant = scales && stats_quant_has(g->type);
	/* CHUNK_VALUES is a multiple of every block size (at most 256 values) */
	const uint64_t chunk_blocks = CHUNK_VALUES / ty->block_elems;
	const uint64_t first = seg * STATS_SEGMENT;
	const uint64_t end = g->n_elements - first < STATS_SEGMENT ? g->n_elements
	                                                           : first + STATS_SEGMENT;
	float *buf = malloc(CHUNK_VALUES * sizeof *buf);
	uint8_t *rawbuf = scales ? malloc(chunk_blocks * ty->block_bytes) : NULL;
	struct stats_acc *a = malloc(sizeof *a);
	int ret = 0;
	uint64_t bad = 0;

	if (!buf || !a || (scales && !rawbuf)) {
		ret = -ENOMEM;
		goto out;
	}
	stats_acc_init(a);
	if (quant) {
		struct raw_scan sc = { .a = a, .ty = ty, .to_float = dequant_get(ty->id)->to_float,
		                       .buf = buf };
		ret = segment_quant(m, i, first, end, scan_raw, &sc, rawbuf, progress, why);
		if (ret < 0)
			goto out;
		bad = sc.bad;
	}
	for (uint64_t done = first; !quant && done < end; done += CHUNK_VALUES) {
		const uint64_t n = end - done < CHUNK_VALUES ? end - done : CHUNK_VALUES;
		const uint64_t blocks = n / ty->block_elems;
		int r = reader_f32(m, i, done * sizeof *buf, n * sizeof *buf, buf, why);
		if (r >= 0 && scales) {
			const uint64_t off = done / ty->block_elems * ty->block_bytes;
			r = reader_raw(m, i, off, blocks * ty->block_bytes, rawbuf, why);
			if (r >= 0)
				bad += stats_bad_blocks(g->type, rawbuf, blocks);
		}
		if (r < 0) {
			ret = r;
			goto out;
		}
		stats_acc_add(a, buf, n);
		if (progress)
			atomic_fetch_add(progress, blocks * ty->block_bytes);
	}
	stats_acc_part(a, out);
	out->s.has_scales = scales;
	out->s.bad_blocks = bad;
out:
	free(buf);
	free(rawbuf);
	free(a);
	return ret;
}

int stats_segment(const struct ggufs_model *m, uint64_t i, uint64_t seg,
                  struct stats_part *out, _Atomic uint64_t *progress)
{
	return segment(m, i, seg, out, progress, NULL);
}

/* A health scan of raw blocks of a type that stats_quant_has (stats_segment_health). */
struct health_scan {
	const struct ggml_type *ty;
	dequant_fn to_float;     /* the type's, as reader_f32's */
	float *buf;              /* STATS_BLOCK floats */
	struct stats_health h;
	bool nonzero;            /* a value that is not zero has been seen */
};

/* The source_visit_fn of a health_scan. A block with finite scales holds only finite
 * values, none subnormal (stats_quant.c says why), so only a group with a bad scale is
 * dequantized and its values counted; the others are summed from their blocks only
 * until one value that is not zero turns up, which is at once in a model's weights. */
static void scan_health(void *ctx, const uint8_t *raw, uint64_t len)
{
	struct health_scan *hs = ctx;
	const struct ggml_type *ty = hs->ty;
	const uint64_t per = STATS_BLOCK / ty->block_elems, nblocks = len / ty->block_bytes;
	for (uint64_t b = 0; b < nblocks; b += per) {
		const uint64_t nb = nblocks - b < per ? nblocks - b : per, n = nb * ty->block_elems;
		const uint8_t *p = raw + b * ty->block_bytes;
		const uint64_t bad = stats_bad_blocks(ty->id, p, nb);
		hs->h.bad_blocks += bad;
		if (bad) {
			hs->to_float(p, hs->buf, nb);
			for (uint64_t k = 0; k < n; k++) {
				const float x = hs->buf[k];
				hs->h.nan += isnan(x) != 0;
				hs->h.pos_inf += isinf(x) && x > 0;
				hs->h.neg_inf += isinf(x) && x < 0;
				hs->h.subnormals += fpclassify(x) == FP_SUBNORMAL;
				hs->nonzero |= x != 0.0f;   /* NaN too: it is not zero */
			}
		} else if (!hs->nonzero) {
			struct stats_lanes l;
			uint64_t zeros = 0;
			stats_lanes_init(&l);
			stats_quant_lanes(ty->id, &l, p, nb, 0.0);
			for (int j = 0; j < STATS_LANES; j++)
				zeros += l.zero[j];
			hs->nonzero = zeros < n;
		}
	}
}

int stats_segment_health(const struct ggufs_model *m, uint64_t i, uint64_t seg,
                         struct stats_health *out, _Atomic uint64_t *progress)
{
	const struct gguf_tensor *g = model_tensor(m, i);
	const uint64_t first = seg * STATS_SEGMENT;
	const uint64_t end = g->n_elements - first < STATS_SEGMENT ? g->n_elements
	                                                           : first + STATS_SEGMENT;
	if (!stats_type_has_scales(g->type) || !stats_quant_has(g->type) || !g->has_f32) {
		struct stats_part p;
		int r = stats_segment(m, i, seg, &p, progress);
		if (r < 0)
			return r;
		*out = (struct stats_health){
			.elements = p.s.elements, .nan = p.s.nan, .pos_inf = p.s.pos_inf,
			.neg_inf = p.s.neg_inf, .subnormals = p.s.subnormals,
			.bad_blocks = p.s.bad_blocks,
			.all_zero = p.s.elements && p.s.zeros == p.s.elements,
		};
		return 0;
	}
	const struct ggml_type *ty = g->ti;
	struct health_scan hs = { .ty = ty, .to_float = dequant_get(ty->id)->to_float,
	                          .buf = malloc(STATS_BLOCK * sizeof(float)) };
	uint8_t *rawbuf = malloc(CHUNK_VALUES / ty->block_elems * ty->block_bytes);
	int r = -ENOMEM;
	if (hs.buf && rawbuf)
		r = segment_quant(m, i, first, end, scan_health, &hs, rawbuf, progress, NULL);
	free(hs.buf);
	free(rawbuf);
	if (r < 0)
		return r;
	*out = hs.h;
	out->elements = end - first;
	out->all_zero = out->elements && !hs.nonzero;
	return 0;
}

void stats_health_merge(struct stats_health *into, const struct stats_health *next)
{
	if (!next->elements)
		return;
	into->all_zero = (into->all_zero || !into->elements) && next->all_zero;
	into->elements += next->elements;
	into->nan += next->nan;
	into->pos_inf += next->pos_inf;
	into->neg_inf += next->neg_inf;
	into->subnormals += next->subnormals;
	into->bad_blocks += next->bad_blocks;
}

int stats_tensor(const struct ggufs_model *m, uint64_t i, struct tensor_stats *out,
                 char why[GGUF_ERR_MAX])
{
	const struct gguf_tensor *g = model_tensor(m, i);
	struct stats_part all, part;
	for (uint64_t seg = 0; seg < stats_segments(g); seg++) {
		int r = segment(m, i, seg, seg ? &part : &all, NULL, why);
		if (r < 0)
			return r;
		if (seg)
			stats_merge(&all, &part);
	}
	stats_finish(&all, out);
	return 0;
}
