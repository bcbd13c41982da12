#include "modelfile.h"
#include "model_impl.h"

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

/* The shards of a split model agree on what a merged file has one of (the GGUF version,
 * the alignment): 0, or -1 with err naming the first that does not. */
static int shards_agree(const struct ggufs_model *m, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g0 = m->files[0].gguf;
	for (uint32_t s = 1; s < m->n_files; s++) {
		const struct gguf_file *g = m->files[s].gguf;
		if (g->version != g0->version) {
			gguf_errf(err, "%s: GGUF version %" PRIu32 ", but the first shard's "
			         "is %" PRIu32 ": the shards do not merge into one model.gguf",
			         m->files[s].path, g->version, g0->version);
			return -1;
		}
		if (g->alignment != g0->alignment) {
			gguf_errf(err, "%s: alignment %" PRIu64 ", but the first shard's is "
			         "%" PRIu64 ": the shards do not merge into one model.gguf",
			         m->files[s].path, g->alignment, g0->alignment);
			return -1;
		}
	}
	return 0;
}

/* A split model's merged data section into mt: each tensor at the next multiple of the
 * alignment after the one before, its span, and the section's length. -1 past 2^64
 * (err) or out of memory. */
static int lay_out_merged(const struct ggufs_model *m, struct modelfile_tensors *mt,
                          char err[GGUF_ERR_MAX])
{
	const uint64_t align = m->files[0].gguf->alignment;
	mt->tensor_offset = calloc(m->n_tensors + 1, sizeof *mt->tensor_offset);
	mt->spans = calloc(m->n_tensors + 1, sizeof *mt->spans);
	if (!mt->tensor_offset || !mt->spans) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		return -1;
	}
	uint64_t data = 0;   /* the data section's length so far */
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *t = m->tensors[i].t;
		uint64_t end;
		mt->tensor_offset[i] = data;
		/* end rounded up: align is a power of two, so this overflows only past 2^64 */
		if (__builtin_add_overflow(data, t->size, &end) ||
		    __builtin_add_overflow(end, align - 1, &end)) {
			gguf_errf(err, "%s: the merged model.gguf would be larger than 2^63 bytes",
			          m->path);
			return -1;
		}
		if (t->size)
			mt->spans[mt->n_spans++] = (struct modelfile_span){
				.off = data, .len = t->size, .shard_off = t->offset,
				.shard = m->tensors[i].file };
		data = end & ~(align - 1);
	}
	mt->data_len = data;
	mt->n_tensors = m->n_tensors;
	return 0;
}

int modelfile_tensors_build(const struct ggufs_model *m, struct modelfile_tensors *mt,
                            char err[GGUF_ERR_MAX])
{
	memset(mt, 0, sizeof *mt);
	char why[GGUF_ERR_MAX];
	int rc = -1;
	const struct gguf_tensor **ts = calloc(m->n_tensors + 1, sizeof *ts);
	uint64_t *own_offsets = NULL;
	const uint64_t *offsets;
	if (!ts)
		goto oom;
	for (uint64_t i = 0; i < m->n_tensors; i++)
		ts[i] = m->tensors[i].t;
	if (m->n_files > 1) {
		if (shards_agree(m, err) < 0 || lay_out_merged(m, mt, err) < 0)
			goto out;
		offsets = mt->tensor_offset;
	} else {
		/* one file: each tensor where it is in the file's own data section */
		if (!(own_offsets = calloc(m->n_tensors + 1, sizeof *own_offsets)))
			goto oom;
		for (uint64_t i = 0; i < m->n_tensors; i++)
			own_offsets[i] = ts[i]->offset - m->files[0].gguf->data_offset;
		offsets = own_offsets;
	}
	if (gguf_tensor_infos_write(ts, offsets, m->n_tensors, NULL, 0, &mt->infos_len, why) < 0)
		goto bad;
	if (!(mt->infos = malloc(mt->infos_len ? mt->infos_len : 1)))
		goto oom;
	if (gguf_tensor_infos_write(ts, offsets, m->n_tensors, mt->infos, mt->infos_len,
	                            &mt->infos_len, why) < 0)
		goto bad;
	rc = 0;
	goto out;
bad:
	gguf_errf(err, "%s: model.gguf: %s", m->path, why);
	goto out;
oom:
	gguf_errf(err, "%s: out of memory for model.gguf", m->path);
out:
	free(ts);
	free(own_offsets);
	if (rc < 0)
		modelfile_tensors_free(mt);
	return rc;
}

void modelfile_tensors_free(struct modelfile_tensors *mt)
{
	free(mt->infos);
	free(mt->spans);
	free(mt->tensor_offset);
	memset(mt, 0, sizeof *mt);
}

uint64_t modelfile_tensors_bytes(const struct modelfile_tensors *mt)
{
	return mt->infos_len + mt->n_spans * sizeof *mt->spans +
	       (mt->tensor_offset ? mt->n_tensors * sizeof *mt->tensor_offset : 0);
}

/* Where key kv lies in file sh's header as a header holds it, when it lies there as
 * is (its name and value both the file's own, parsed there: a key an edit left alone),
 * into [*at, *at + *len) of the file. False for a key with a new name or value. */
static bool kv_in_file(const struct model_file *sh, const struct gguf_kv *kv, uint64_t *at,
                       uint64_t *len)
{
	/* addresses as numbers: name and value may be in blobs, apart from the header */
	const uintptr_t base = (uintptr_t)sh->head, name = (uintptr_t)kv->key.ptr;
	const uint64_t end = sh->gguf->data_offset;
	if (!base || name < base + 8 || name - base > end)
		return false;
	uint64_t from = (uint64_t)(name - base) - 8, data;
	/* the value's bytes follow the name, its type and (an array) element type and count */
	uint64_t fields = kv->key.len + 4 + (kv->value.type == GGUF_TYPE_ARRAY ? 12 : 0);
	if (__builtin_add_overflow(from + 8, fields, &data) || data > end ||
	    (uintptr_t)kv->value.data != base + data || kv->value.size > end - data)
		return false;
	*at = from;
	*len = data + kv->value.size - from;
	return true;
}

/* Little-endian v into p[0 .. n). */
static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* The header of m's keys (kv, n_kv of them) in front of mt's tensor infos into mf, and
 * where the data section starts (the next multiple of the alignment); the size with data
 * bytes of data section after it. The head is pieces: runs of keys an edit left alone,
 * as the file holds them (read from shard 0: nothing copied), and the bytes written here
 * for the preamble and every other key; the infos are borrowed. 0, or -1 with err. */
static int write_header(const struct ggufs_model *m, const struct gguf_kv *const *kv,
                        uint64_t n_kv, const struct modelfile_tensors *mt, uint64_t data,
                        struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	const struct model_file *sh = &m->files[0];
	const uint64_t align = sh->gguf->alignment;
	const bool mapped = source_mapped(sh->src);   /* else head is a fetched prefix */
	char why[GGUF_ERR_MAX];
	/* first the bytes to write and the pieces, counted as the loop below makes them (a
	 * key written runs on from written bytes, a key in the file from the file bytes
	 * just before it): they follow the keys an edit changed, not all keys */
	uint64_t own = 24, n_pieces = 1, at, len, file_end = 0;
	bool last_in_file = false;
	for (uint64_t i = 0; i < n_kv; i++) {
		if (kv_in_file(sh, kv[i], &at, &len)) {
			n_pieces += !(last_in_file && file_end == at);
			last_in_file = true;
			file_end = at + len;
			continue;
		}
		if (gguf_kv_write(kv[i], NULL, 0, &len, why) < 0 ||
		    __builtin_add_overflow(own, len, &own))
			goto bad;
		n_pieces += last_in_file;
		last_in_file = false;
	}
	mf->header = malloc(own);
	mf->head = calloc(n_pieces, sizeof *mf->head);
	if (!mf->header || !mf->head) {
		gguf_errf(err, "%s: out of memory for the header of model.gguf", m->path);
		return -1;
	}
	memcpy(mf->header, GGUF_MAGIC, 4);
	put_le(mf->header + 4, sh->gguf->version, 4);
	put_le(mf->header + 8, m->n_tensors, 8);
	put_le(mf->header + 16, n_kv, 8);
	mf->head[0] = (struct modelfile_piece){ .off = 0, .len = 24, .mem = mf->header };
	mf->n_head = 1;
	uint64_t pos = 24, w = 24;   /* in model.gguf; in mf->header */
	for (uint64_t i = 0; i < n_kv; i++) {
		struct modelfile_piece *last = &mf->head[mf->n_head - 1], p = { .off = pos };
		if (kv_in_file(sh, kv[i], &at, &len)) {
			p = (struct modelfile_piece){ .off = pos, .len = len, .from = at,
			                              .mem = mapped ? NULL : sh->head + at };
			bool runs_on = last->mem != mf->header && last->from + last->len == at;
			if (runs_on)
				last->len += len;
		} else {
			if (gguf_kv_write(kv[i], mf->header + w, own - w, &len, why) < 0)
				goto bad;
			p = (struct modelfile_piece){ .off = pos, .len = len, .from = w, .mem = mf->header };
			w += len;
			if (last->mem == mf->header)
				last->len += len;
		}
		if (last->off + last->len != pos + len) {   /* not run on: a piece of its own */
			if (mf->n_head == n_pieces) {   /* the count above missed one: never past it */
				gguf_errf(err, "%s: model.gguf: the header's pieces miscounted", m->path);
				return -1;
			}
			mf->head[mf->n_head++] = p;
		}
		pos += len;   /* no overflow: bounded by own and the file */
	}
	mf->own_len = own;
	mf->head_len = pos;
	mf->infos = mt->infos;
	/* align is a power of two (the parser checked); st_size is an off_t */
	if (__builtin_add_overflow(mf->head_len, mt->infos_len, &mf->header_len) ||
	    __builtin_add_overflow(mf->header_len, align - 1, &mf->data_offset) ||
	    __builtin_add_overflow(mf->data_offset & ~(align - 1), data, &mf->size) ||
	    mf->size > INT64_MAX) {
		gguf_errf(err, "%s: model.gguf would be larger than 2^63 bytes", m->path);
		return -1;
	}
	mf->data_offset &= ~(align - 1);
	return 0;
bad:
	gguf_errf(err, "%s: model.gguf: %s", m->path, why);
	return -1;
}

/* The merged layout of a split model: its header (the first shard's keys, or the edit
 * state's, less the split.* ones), then each tensor where mt put it. */
static int build_merged(const struct ggufs_model *m, const struct modelfile_tensors *mt,
                        struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g0 = m->meta;
	const struct gguf_kv **kv = calloc(g0->n_kv + 1, sizeof *kv);
	if (!kv) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		return -1;
	}
	uint64_t n_kv = 0;
	for (uint64_t k = 0; k < g0->n_kv; k++)
		if (!model_split_key(&g0->kv[k].key))
			kv[n_kv++] = &g0->kv[k];
	int rc = write_header(m, kv, n_kv, mt, mt->data_len, mf, err);
	free(kv);
	if (rc < 0)
		return -1;
	mf->spans = mt->spans;
	mf->n_spans = mt->n_spans;
	mf->span_base = mf->data_offset;
	mf->tensor_offset = mt->tensor_offset;
	return 0;
}

/* True when bytes [off, off + len) of shard sh are mem's, read through its source in
 * pieces so that the first difference ends the compare. False too when they cannot be
 * read or out of memory. */
static bool file_holds(const struct model_file *sh, uint64_t off, const uint8_t *mem,
                       uint64_t len)
{
	enum { PIECE = ZERO_BYTES };   /* zeros is as long */
	uint8_t *buf = malloc(PIECE);
	bool same = buf != NULL;
	for (uint64_t at = 0; same && at < len; at += PIECE) {
		uint64_t n = len - at < PIECE ? len - at : PIECE;
		same = source_read(sh->src, off + at, n, buf, NULL) == 0 &&
		       (mem ? memcmp(buf, mem + at, n) == 0 : memcmp(buf, zeros, n) == 0);
	}
	free(buf);
	return same;
}

/* True when bytes [a, a + len) and [b, b + len) of shard sh are the same, read in pieces
 * (the first difference ends the compare). */
static bool file_same(const struct model_file *sh, uint64_t a, uint64_t b, uint64_t len)
{
	enum { PIECE = ZERO_BYTES };
	uint8_t *buf = malloc(2 * PIECE);
	bool same = buf != NULL;
	for (uint64_t at = 0; same && at < len; at += PIECE) {
		uint64_t n = len - at < PIECE ? len - at : PIECE;
		same = source_read(sh->src, a + at, n, buf, NULL) == 0 &&
		       source_read(sh->src, b + at, n, buf + PIECE, NULL) == 0 &&
		       memcmp(buf, buf + PIECE, n) == 0;
	}
	free(buf);
	return same;
}

/* True when the header mf holds (its pieces, the infos, then zeros to its data section)
 * is byte for byte the start of the model's one file as it is now (read through its
 * source: never a touch of a mapping that may have shrunk); a run of keys that lies
 * where the file has it is the file's already, and the first difference ends the
 * compare, so an edit that changed a key reads the file only up to it. */
static bool same_as_file(const struct ggufs_model *m, const struct modelfile *mf)
{
	const struct model_file *sh = &m->files[0];
	if (mf->data_offset != sh->gguf->data_offset || mf->data_offset > sh->size)
		return false;
	for (uint64_t i = 0; i < mf->n_head; i++) {
		const struct modelfile_piece *p = &mf->head[i];
		bool same = p->mem ? file_holds(sh, p->off, p->mem == mf->header ? p->mem + p->from :
		                                p->mem, p->len) :
		            p->from == p->off || file_same(sh, p->off, p->from, p->len);
		if (!same)
			return false;
	}
	return file_holds(sh, mf->head_len, mf->infos, mf->header_len - mf->head_len) &&
	       file_holds(sh, mf->header_len, NULL, mf->data_offset - mf->header_len);
}

/* The layout of a single-file model seen with edited metadata (model_edited: the view
 * of an overlay state, overlay.h): a header written from m->meta's keys and every tensor
 * at its own offset in the data section, then the file's data section from its start
 * to the end of the file, unchanged, as one span; or, when that header is the file's own
 * byte for byte, the file itself as one span (as for a model not edited). */
static int build_edited(const struct ggufs_model *m, const struct modelfile_tensors *mt,
                        struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g = m->meta, *own = m->files[0].gguf;
	const uint64_t data_off = own->data_offset, data = m->files[0].size - data_off;
	const struct gguf_kv **kv = calloc(g->n_kv + 1, sizeof *kv);
	if (!kv) {
		gguf_errf(err, "%s: out of memory for model.gguf", m->path);
		return -1;
	}
	for (uint64_t k = 0; k < g->n_kv; k++)
		kv[k] = &g->kv[k];
	int rc = write_header(m, kv, g->n_kv, mt, data, mf, err);
	free(kv);
	if (rc < 0)
		return -1;
	mf->one = (struct modelfile_span){ .off = mf->data_offset, .len = data,
	                                   .shard_off = data_off, .shard = 0 };
	mf->n_spans = data ? 1 : 0;
	if (same_as_file(m, mf)) {
		/* edits that change nothing (none yet, or undone): model.gguf is the file
		 * itself, one span, so it may be handed to the kernel whole (passthrough) */
		free(mf->header);
		free(mf->head);
		mf->header = NULL;
		mf->head = NULL;
		mf->infos = NULL;
		mf->n_head = mf->own_len = mf->head_len = mf->header_len = 0;
		mf->one = (struct modelfile_span){ .off = 0, .len = mf->size, .shard_off = 0,
		                                   .shard = 0 };
		mf->n_spans = mf->size ? 1 : 0;
	}
	return 0;
}

int modelfile_build_with(const struct ggufs_model *m, const struct modelfile_tensors *mt,
                         struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	memset(mf, 0, sizeof *mf);
	if (m->n_files == 1 && !model_edited(m)) {
		/* the file itself */
		mf->size = m->files[0].size;
		mf->one = (struct modelfile_span){ .off = 0, .len = mf->size, .shard_off = 0,
		                                   .shard = 0 };
		mf->n_spans = mf->size ? 1 : 0;
		mf->data_offset = m->files[0].gguf->data_offset;
		return 0;
	}
	if (!mt) {
		if (!(mf->own = calloc(1, sizeof *mf->own))) {
			gguf_errf(err, "%s: out of memory for model.gguf", m->path);
			return -1;
		}
		if (modelfile_tensors_build(m, mf->own, err) < 0) {
			modelfile_free(mf);
			return -1;
		}
		mt = mf->own;
	}
	int rc = m->n_files > 1 ? build_merged(m, mt, mf, err) : build_edited(m, mt, mf, err);
	if (rc < 0)
		modelfile_free(mf);
	return rc;
}

int modelfile_build(const struct ggufs_model *m, struct modelfile *mf, char err[GGUF_ERR_MAX])
{
	return modelfile_build_with(m, NULL, mf, err);
}

bool modelfile_is_file(const struct modelfile *mf, const struct ggufs_model *m)
{
	return m->n_files == 1 && !mf->n_head && mf->n_spans == 1 && !mf->spans &&
	       mf->one.off == 0 && mf->one.shard_off == 0 && mf->one.len == m->files[0].size &&
	       mf->size == m->files[0].size;
}

uint64_t modelfile_bytes(const struct modelfile *mf)
{
	return mf->own_len + mf->n_head * sizeof *mf->head +
	       (mf->own ? sizeof *mf->own + modelfile_tensors_bytes(mf->own) : 0);
}

void modelfile_free(struct modelfile *mf)
{
	free(mf->header);
	free(mf->head);
	if (mf->own)
		modelfile_tensors_free(mf->own);
	free(mf->own);
	memset(mf, 0, sizeof *mf);
}

uint64_t modelfile_tensor_offset(const struct modelfile *mf, const struct ggufs_model *m,
                                 uint64_t i)
{
	if (mf->tensor_offset)
		return mf->data_offset + mf->tensor_offset[i];
	/* one file: its data section moved as a whole (model.gguf's own when unedited) */
	return mf->data_offset + (m->tensors[i].t->offset - m->files[0].gguf->data_offset);
}

/* mf's spans: its own one, or the shared part's. */
static const struct modelfile_span *spans_of(const struct modelfile *mf)
{
	return mf->spans ? mf->spans : &mf->one;
}

/* The first span that ends after pos (n_spans if none). */
static uint64_t span_after(const struct modelfile *mf, uint64_t pos)
{
	const struct modelfile_span *sp = spans_of(mf);
	uint64_t lo = 0, hi = mf->n_spans;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (mf->span_base + sp[mid].off + sp[mid].len <= pos)
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
	/* the header: its pieces, then the shared tensor infos */
	while (pos < mf->head_len && pos < end) {
		uint64_t lo = 0, hi = mf->n_head;   /* the last piece starting at or before pos */
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (mf->head[mid].off <= pos)
				lo = mid;
			else
				hi = mid;
		}
		const struct modelfile_piece *hp = &mf->head[lo];
		uint64_t in = pos - hp->off, stop = hp->off + hp->len < end ? hp->off + hp->len : end;
		struct piece p = { .len = stop - pos };
		if (hp->mem == mf->header)
			p.mem = mf->header + hp->from + in;
		else if (hp->mem)
			p.mem = hp->mem + in;
		else
			p.shard_off = hp->from + in;   /* shard 0 */
		if (!fn(ctx, &p))
			return false;
		pos = stop;
	}
	if (pos < mf->header_len && pos < end) {
		uint64_t stop = end < mf->header_len ? end : mf->header_len;
		struct piece p = { .mem = mf->infos + (pos - mf->head_len), .len = stop - pos };
		if (!fn(ctx, &p))
			return false;
		pos = stop;
	}
	const struct modelfile_span *spans = spans_of(mf);
	const uint64_t base = mf->span_base;
	for (uint64_t k = span_after(mf, pos); pos < end;) {
		const struct modelfile_span *sp = k < mf->n_spans ? &spans[k] : NULL;
		struct piece p = { 0 };
		if (sp && base + sp->off <= pos) {
			uint64_t sp_end = base + sp->off + sp->len;
			uint64_t stop = sp_end < end ? sp_end : end;
			p = (struct piece){ .shard = sp->shard,
			                    .shard_off = sp->shard_off + (pos - (base + sp->off)),
			                    .len = stop - pos };
			if (k + 1 < mf->n_spans && spans[k + 1].shard != sp->shard)
				p.next = &spans[k + 1];
			k++;
		} else {
			uint64_t stop = sp && base + sp->off < end ? base + sp->off : end;
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
	char *why;
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
	} else if (source_read(c->m->files[p->shard].src, p->shard_off, p->len, c->out,
	                       c->why) < 0) {
		c->rc = -EIO;
		return false;
	}
	if (p->next)
		source_expect(c->m->files[p->next->shard].src, p->next->shard_off,
		              c->m->files[p->shard].src);
	c->out += p->len;
	return true;
}

int modelfile_read(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                   uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	struct read_ctx c = { m, buf, 0, why };
	walk(mf, off, off + len, copy_piece, &c);
	return c.rc;
}

struct iov_ctx {
	const struct ggufs_model *m;
	struct iovec *iov;
	int n, max;
	bool gone;
	char *why;
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
		const struct model_file *f = &c->m->files[p->shard];
		if (source_holds(f->src, p->shard_off + p->len, c->why) < 0) {
			c->gone = true;
			return false;
		}
		base = f->head + p->shard_off;
	}
	c->iov[c->n++] = (struct iovec){ .iov_base = (void *)base, .iov_len = p->len };
	return true;
}

int modelfile_iov(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                  uint64_t len, struct iovec *iov, int max, char why[GGUF_ERR_MAX])
{
	for (uint32_t f = 0; f < m->n_files; f++)
		if (!m->files[f].head || !source_mapped(m->files[f].src))
			return 0;
	struct iov_ctx c = { m, iov, 0, max, false, why };
	if (walk(mf, off, off + len, add_iov, &c))
		return c.n;
	return c.gone ? -EIO : 0;
}
