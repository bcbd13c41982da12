#include "modelfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"

/* The zeros that padding iovecs point at: gaps are shorter than the alignment, so most
 * take one iovec; a longer one takes several. */
#define ZERO_BYTES (64u << 10)
static const uint8_t zeros[ZERO_BYTES];

/* The merged layout of a split model: header, then each tensor at the next multiple of
 * the alignment after the one before. */
static int build_merged(const struct ggufs_model *m, struct modelfile *mf,
                        char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g0 = m->meta;
	const uint64_t align = g0->alignment;
	char why[GGUF_ERR_MAX];
	for (uint32_t s = 1; s < m->n_shards; s++) {
		const struct gguf_file *g = &m->shards[s].gf;
		if (g->version != g0->version) {
			gguf_errf(err, "%s: GGUF version %" PRIu32 ", but the first shard's "
			         "is %" PRIu32 ": the shards do not merge into one model.gguf",
			         m->shards[s].path, g->version, g0->version);
			return -1;
		}
		if (g->alignment != align) {
			gguf_errf(err, "%s: alignment %" PRIu64 ", but the first shard's is "
			         "%" PRIu64 ": the shards do not merge into one model.gguf",
			         m->shards[s].path, g->alignment, align);
			return -1;
		}
	}

	int rc = -1;
	const struct gguf_kv **kv = calloc(g0->n_kv + 1, sizeof *kv);
	const struct gguf_tensor **ts = calloc(m->n_tensors + 1, sizeof *ts);
	uint64_t *offsets = calloc(m->n_tensors + 1, sizeof *offsets);
	mf->spans = calloc(m->n_tensors + 1, sizeof *mf->spans);
	if (!kv || !ts || !offsets || !mf->spans) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		goto out;
	}
	uint64_t n_kv = 0;
	for (uint64_t k = 0; k < g0->n_kv; k++)
		if (!model_split_key(&g0->kv[k].key))
			kv[n_kv++] = &g0->kv[k];
	uint64_t data = 0;   /* the data section's length so far */
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *t = m->tensors[i].t;
		uint64_t end;
		ts[i] = t;
		offsets[i] = data;
		/* end rounded up: align is a power of two, so this overflows only past 2^64 */
		if (__builtin_add_overflow(data, t->size, &end) ||
		    __builtin_add_overflow(end, align - 1, &end))
			goto too_large;
		data = end & ~(align - 1);
	}
	if (gguf_header_write(g0->version, kv, n_kv, ts, offsets, m->n_tensors, align, NULL, 0,
	                      &mf->header_len, why) < 0) {
		gguf_errf(err, "%s: model.gguf: %s", m->path, why);
		goto out;
	}
	/* st_size is an off_t */
	if (__builtin_add_overflow(mf->header_len, data, &mf->size) || mf->size > INT64_MAX)
		goto too_large;
	mf->header = malloc(mf->header_len ? mf->header_len : 1);
	if (!mf->header) {
		gguf_errf(err, "%s: out of memory for the %" PRIu64 "-byte header of "
		         "model.gguf", m->path, mf->header_len);
		goto out;
	}
	if (gguf_header_write(g0->version, kv, n_kv, ts, offsets, m->n_tensors, align,
	                      mf->header, mf->header_len, &mf->header_len, why) < 0) {
		gguf_errf(err, "%s: model.gguf: %s", m->path, why);
		goto out;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		if (ts[i]->size == 0)
			continue;
		mf->spans[mf->n_spans++] = (struct modelfile_span){
			.off = mf->header_len + offsets[i], .len = ts[i]->size,
			.shard_off = ts[i]->offset, .shard = m->tensors[i].shard };
	}
	mf->data_offset = mf->header_len;
	mf->tensor_offset = offsets;
	offsets = NULL;
	rc = 0;
	goto out;
too_large:
	gguf_errf(err, "%s: the merged model.gguf would be larger than 2^63 bytes", m->path);
out:
	free(kv);
	free(ts);
	free(offsets);
	return rc;
}

/* True when the len bytes of header are byte for byte the first len bytes of the
 * model's one file as it is now (read through its source: never a touch of a mapping
 * that may have shrunk). False too when they cannot be read or out of memory. */
static bool same_as_file(const struct ggufs_model *m, const uint8_t *header, uint64_t len)
{
	if (len > m->shards[0].size)
		return false;
	uint8_t *own = malloc(len ? len : 1);
	bool same = own && source_read(m->shards[0].src, 0, len, own) == 0 &&
	            memcmp(own, header, len) == 0;
	free(own);
	return same;
}

/* The layout of a single-file model seen with edited metadata (m->meta is not the
 * file's own parse: overlay.h): a header written from m->meta's keys and every tensor
 * at its own offset in the data section, then the file's data section from its start
 * to the end of the file, unchanged, as one span; or, when that header is the file's own
 * byte for byte, the file itself as one span (as for a model not edited). */
static int build_edited(const struct ggufs_model *m, struct modelfile *mf,
                        char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g = m->meta, *own = &m->shards[0].gf;
	const uint64_t data_off = own->data_offset, data = m->shards[0].size - data_off;
	char why[GGUF_ERR_MAX];
	int rc = -1;
	const struct gguf_kv **kv = calloc(g->n_kv + 1, sizeof *kv);
	const struct gguf_tensor **ts = calloc(m->n_tensors + 1, sizeof *ts);
	uint64_t *offsets = calloc(m->n_tensors + 1, sizeof *offsets);
	mf->spans = calloc(1, sizeof *mf->spans);
	if (!kv || !ts || !offsets || !mf->spans) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		goto out;
	}
	for (uint64_t k = 0; k < g->n_kv; k++)
		kv[k] = &g->kv[k];
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		ts[i] = m->tensors[i].t;
		offsets[i] = ts[i]->offset - data_off;
	}
	if (gguf_header_write(g->version, kv, g->n_kv, ts, offsets, m->n_tensors, own->alignment,
	                      NULL, 0, &mf->header_len, why) < 0)
		goto bad;
	if (__builtin_add_overflow(mf->header_len, data, &mf->size) || mf->size > INT64_MAX) {
		gguf_errf(err, "%s: the edited model.gguf would be larger than 2^63 bytes", m->path);
		goto out;
	}
	mf->header = malloc(mf->header_len ? mf->header_len : 1);
	if (!mf->header) {
		gguf_errf(err, "%s: out of memory for the header of model.gguf", m->path);
		goto out;
	}
	if (gguf_header_write(g->version, kv, g->n_kv, ts, offsets, m->n_tensors, own->alignment,
	                      mf->header, mf->header_len, &mf->header_len, why) < 0)
		goto bad;
	mf->spans[0] = (struct modelfile_span){ .off = mf->header_len, .len = data,
	                                        .shard_off = data_off, .shard = 0 };
	mf->n_spans = data ? 1 : 0;
	mf->data_offset = mf->header_len;
	if (mf->header_len == data_off && same_as_file(m, mf->header, mf->header_len)) {
		/* edits that change nothing (none yet, or undone): model.gguf is the file
		 * itself, one span, so it may be handed to the kernel whole (passthrough) */
		free(mf->header);
		mf->header = NULL;
		mf->header_len = 0;
		mf->spans[0] = (struct modelfile_span){ .off = 0, .len = mf->size, .shard_off = 0,
		                                        .shard = 0 };
		mf->n_spans = mf->size ? 1 : 0;
	}
	rc = 0;
	goto out;
bad:
	gguf_errf(err, "%s: model.gguf: %s", m->path, why);
out:
	free(kv);
	free(ts);
	free(offsets);
	return rc;
}

int modelfile_build(const struct ggufs_model *m, struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	memset(mf, 0, sizeof *mf);
	if (m->n_shards == 1 && m->meta != &m->shards[0].gf) {
		if (build_edited(m, mf, err) == 0)
			return 0;
		modelfile_free(mf);
		return -1;
	}
	if (m->n_shards > 1) {
		if (build_merged(m, mf, err) == 0)
			return 0;
		modelfile_free(mf);
		return -1;
	}
	mf->spans = malloc(sizeof *mf->spans);
	if (!mf->spans) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		return -1;
	}
	mf->size = m->shards[0].size;
	mf->spans[0] = (struct modelfile_span){ .off = 0, .len = mf->size, .shard_off = 0,
	                                        .shard = 0 };
	mf->n_spans = mf->size ? 1 : 0;
	mf->data_offset = m->shards[0].gf.data_offset;
	return 0;
}

void modelfile_free(struct modelfile *mf)
{
	free(mf->header);
	free(mf->spans);
	free(mf->tensor_offset);
	memset(mf, 0, sizeof *mf);
}

uint64_t modelfile_tensor_offset(const struct modelfile *mf, const struct ggufs_model *m,
                                 uint64_t i)
{
	if (mf->tensor_offset)
		return mf->data_offset + mf->tensor_offset[i];
	/* one file: its data section moved as a whole (model.gguf's own when unedited) */
	return mf->data_offset + (m->tensors[i].t->offset - m->shards[0].gf.data_offset);
}

/* The first span that ends after pos (n_spans if none). */
static uint64_t span_after(const struct modelfile *mf, uint64_t pos)
{
	uint64_t lo = 0, hi = mf->n_spans;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (mf->spans[mid].off + mf->spans[mid].len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* One piece of a range of model.gguf: bytes of memory (header or zeros: mem set) or of
 * shard bytes [shard_off, shard_off + len). next: the span that follows this piece's
 * when that one is in another shard (the last tensor of a shard), else NULL. */
struct piece {
	const uint8_t *mem;
	uint32_t shard;
	uint64_t shard_off;
	uint64_t len;
	const struct modelfile_span *next;
};

/* Cuts [pos, end) into pieces in order, calling fn on each until it returns false;
 * zero runs come in pieces of at most ZERO_BYTES. False when fn stopped it. */
static bool walk(const struct modelfile *mf, uint64_t pos, uint64_t end,
                 bool (*fn)(void *ctx, const struct piece *p), void *ctx)
{
	if (pos < mf->header_len) {
		uint64_t stop = end < mf->header_len ? end : mf->header_len;
		struct piece p = { .mem = mf->header + pos, .len = stop - pos };
		if (!fn(ctx, &p))
			return false;
		pos = stop;
	}
	for (uint64_t k = span_after(mf, pos); pos < end;) {
		const struct modelfile_span *sp = k < mf->n_spans ? &mf->spans[k] : NULL;
		struct piece p = { 0 };
		if (sp && sp->off <= pos) {
			uint64_t stop = sp->off + sp->len < end ? sp->off + sp->len : end;
			p = (struct piece){ .shard = sp->shard, .shard_off = sp->shard_off + (pos - sp->off),
			                    .len = stop - pos };
			if (k + 1 < mf->n_spans && mf->spans[k + 1].shard != sp->shard)
				p.next = &mf->spans[k + 1];
			k++;
		} else {
			uint64_t stop = sp && sp->off < end ? sp->off : end;
			p = (struct piece){ .mem = zeros, .len = stop - pos < ZERO_BYTES ? stop - pos :
			                                          ZERO_BYTES };
		}
		if (!fn(ctx, &p))
			return false;
		pos += p.len;
	}
	return true;
}

struct read_ctx {
	const struct ggufs_model *m;
	uint8_t *out;
	int rc;
};

/* Copies one piece: memory, or the shard's bytes through its source (which guards a
 * mapping and fetches a remote file). A read of a shard's last tensor tells the next
 * shard that its reader may go on there: model.gguf runs on from one into the other,
 * and a remote shard's read-ahead then carries on instead of starting small. */
static bool copy_piece(void *ctx, const struct piece *p)
{
	struct read_ctx *c = ctx;
	if (p->mem) {
		memcpy(c->out, p->mem, p->len);
	} else if (source_read(c->m->shards[p->shard].src, p->shard_off, p->len, c->out) < 0) {
		c->rc = -EIO;
		return false;
	}
	if (p->next)
		source_expect(c->m->shards[p->next->shard].src, p->next->shard_off,
		              c->m->shards[p->shard].src);
	c->out += p->len;
	return true;
}

int modelfile_read(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                   uint64_t len, void *buf)
{
	struct read_ctx c = { m, buf, 0 };
	walk(mf, off, off + len, copy_piece, &c);
	return c.rc;
}

struct iov_ctx {
	const struct ggufs_model *m;
	struct iovec *iov;
	int n, max;
	bool gone;
};

/* One piece as an iovec: memory, or a mapped shard's bytes once the file is known to
 * still hold them (the kernel then copies them; see modelfile.h). */
static bool add_iov(void *ctx, const struct piece *p)
{
	struct iov_ctx *c = ctx;
	if (c->n == c->max)
		return false;
	const uint8_t *base = p->mem;
	if (!base) {
		const struct model_shard *s = &c->m->shards[p->shard];
		if (source_holds(s->src, p->shard_off + p->len) < 0) {
			c->gone = true;
			return false;
		}
		base = s->map + p->shard_off;
	}
	c->iov[c->n++] = (struct iovec){ .iov_base = (void *)base, .iov_len = p->len };
	return true;
}

int modelfile_iov(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                  uint64_t len, struct iovec *iov, int max)
{
	for (uint32_t s = 0; s < m->n_shards; s++)
		if (!source_mapped(m->shards[s].src))
			return 0;
	struct iov_ctx c = { m, iov, 0, max, false };
	if (walk(mf, off, off + len, add_iov, &c))
		return c.n;
	return c.gone ? -EIO : 0;
}
