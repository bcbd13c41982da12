#include "quant_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_check.h"
#include "evlog.h"
#include "quant.h"
#include "reader.h"
#include "thread_buf.h"
#include "types.h"

/* Source values per step of a read (64 KiB of floats), in whole blocks of the type
 * made: they and their blocks' bytes are the read's memory, in buffers each thread
 * keeps (a malloc per read costs more than a small quantization). A step of blocks
 * rather than values would make an F32 or Q8_0 read a thousand tiny steps, each a
 * check of the model's file. */
#define QUANT_READ_STEP_VALUES 16384u

static struct thread_buf values_buf = THREAD_BUF(QUANT_READ_STEP_VALUES * sizeof(float), false);
static struct thread_buf blocks_buf = THREAD_BUF(QUANT_READ_STEP_VALUES * sizeof(float), false);

uint64_t reader_quant_size(const struct ggufs_model *m, uint64_t i, uint32_t to)
{
	const struct ggml_type *ty = ggml_type_get(to);
	const struct gguf_tensor *t = model_tensor(m, i);
	if (to == t->type)
		return t->size;
	if (!ty || !ty->block_elems || !ty->block_bytes || t->ne[0] % ty->block_elems)
		return 0;
	/* n_elements / block_elems blocks: the parser bounded n_elements, and a block's
	 * bytes never exceed its values' floats, so the product fits */
	return t->n_elements / ty->block_elems * ty->block_bytes;
}

/* Says once per tensor and type that block b of tensor i, as type to, is one that
 * llama.cpp's checks refuse (what says why); returns -EIO (said: no why more). */
static int refused(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t b,
                   const char *what)
{
	const struct gguf_tensor *t = model_tensor(m, i);
	const struct ggml_type *ty = ggml_type_get(to);
	const int n = t->name.len > 200 ? 200 : (int)t->name.len;
	char key[256];
	snprintf(key, sizeof key, "quant-refused %.*s %" PRIu32, n, t->name.ptr, to);
	evlog(EVLOG_ERR, key, "%s: tensor '%.*s' as %s: block %" PRIu64 " %s, which llama.cpp's "
	      "quantizer refuses (llama_model_quantize writes no file of this model): EIO for "
	      "its bytes in quants/", model_path(m), n, t->name.ptr, ty ? ty->name : "?", b, what);
	return -EIO;
}

/* The stored bytes [off, off + len) of tensor i (to is its type) into buf, by whole
 * blocks through the thread's blocks_buf (64 KiB) so that each is checked as llama.cpp
 * checks the tensors it reads: -EIO for a block it refuses. */
static int copy_checked(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t off,
                        uint64_t len, uint8_t *buf, char why[GGUF_ERR_MAX])
{
	const struct ggml_type *ty = ggml_type_get(to);
	const uint64_t bb = ty && ty->block_bytes ? ty->block_bytes : 0;
	if (!bb || !block_check_looks(to))
		return reader_raw(m, i, off, len, buf, why);
	/* blocks are a few hundred bytes at most, but never less than one a step */
	const uint64_t room = QUANT_READ_STEP_VALUES * sizeof(float);
	const uint64_t step = bb < room ? room / bb : 1;
	bool owned;
	uint8_t *tmp = thread_buf_get(&blocks_buf, step * bb, &owned);
	int r = tmp ? 0 : -ENOMEM;
	for (uint64_t pos = off, end = off + len; r == 0 && pos < end;) {
		const uint64_t b0 = pos / bb;
		uint64_t nb = (end - 1) / bb + 1 - b0;
		if (nb > step)
			nb = step;
		r = reader_raw(m, i, b0 * bb, nb * bb, tmp, why);
		if (r < 0)
			break;
		const uint64_t bad = block_check_first_bad(to, tmp, nb);
		if (bad < nb) {
			r = refused(m, i, to, b0 + bad, "is not finite (a NaN or infinity)");
			break;
		}
		const uint64_t stop = (b0 + nb) * bb < end ? (b0 + nb) * bb : end;
		memcpy(buf + (pos - off), tmp + (pos - b0 * bb), stop - pos);
		pos = stop;
	}
	thread_buf_put(tmp, owned);
	return r;
}

/* The types whose rows under a matrix take a value of the whole row (quant_row_needs_
 * values): a slot each in a quant_prep. */
static const uint32_t whole_row_types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                            GGML_TYPE_Q5_1 };
#define WHOLE_ROW_TYPES (sizeof whole_row_types / sizeof whole_row_types[0])

/* What weighted reads of one tensor keep (quant_read.h). */
struct quant_prep {
	const struct ggufs_model *m;
	uint64_t i;
	const struct imatrix *im;
	const struct imatrix_entry *w;
	float *weights;                /* ne0 x n_expert: every expert's */
	uint64_t n_rows;
	/* per type of whole_row_types, made at its first read: per row 0 when not made
	 * yet, else ~ the bits of its quant_row_ctx.sigma2 (never a NaN: never ~0) */
	_Atomic uint32_t *_Atomic sigma2[WHOLE_ROW_TYPES];
};

/* The rows' values p keeps for type to: made (zeros) at the first call, NULL when to
 * takes none or out of memory (nothing kept then). */
static _Atomic uint32_t *prep_rows(struct quant_prep *p, uint32_t to)
{
	for (size_t k = 0; p && k < WHOLE_ROW_TYPES; k++) {
		if (whole_row_types[k] != to)
			continue;
		_Atomic uint32_t *rows = atomic_load(&p->sigma2[k]);
		if (rows)
			return rows;
		_Atomic uint32_t *made = calloc(p->n_rows ? p->n_rows : 1, sizeof *made);
		if (made && !atomic_compare_exchange_strong(&p->sigma2[k], &rows, made)) {
			free((void *)made);   /* another read made them first */
			return rows;
		}
		return made;
	}
	return NULL;
}

/* The weights of one row's expert and that row's state, as a read goes along. */
struct row_state {
	const struct imatrix *im;
	const struct imatrix_entry *w;
	struct quant_prep *prep;  /* what is kept between reads, or NULL: made here */
	_Atomic uint32_t *rows;   /* prep's rows' values for this type, or NULL */
	uint64_t ne0, rows_per_expert;
	const float *weights;    /* ne0 of them: the row's expert's (NULL: no matrix) */
	float *own_weights;      /* where they are made without prep */
	uint64_t expert;         /* whose they are (UINT64_MAX: none yet) */
	uint64_t row;            /* the row ctx is prepared for (UINT64_MAX: none) */
	struct quant_row_ctx ctx;
	float *row_values;       /* the whole row, where the type's preparation needs it */
};

/* The row's value kept in rows (a q4_0..q5_1 row under a matrix; NULL: none) into *ctx:
 * true when made before. */
static bool row_kept(_Atomic uint32_t *rows, uint32_t to, uint64_t ne0, uint64_t row,
                     struct quant_row_ctx *ctx)
{
	if (!rows)
		return false;
	const uint32_t kept = atomic_load_explicit(&rows[row], memory_order_relaxed);
	if (!kept)
		return false;
	const uint32_t bits = ~kept;
	float v;
	memcpy(&v, &bits, sizeof v);
	*ctx = (struct quant_row_ctx){ .type = to, .n_per_row = (int64_t)ne0, .weighted = true,
	                               .sigma2 = v };
	return true;
}

/* Prepares rs for row (its expert's weights, its ctx): 0 or -errno. */
static int row_begin(const struct ggufs_model *m, uint64_t i, uint32_t to,
                     struct row_state *rs, uint64_t row, char why[GGUF_ERR_MAX])
{
	if (rs->row == row)
		return 0;
	const uint64_t expert = row / rs->rows_per_expert;
	if (rs->w && rs->expert != expert) {
		if (rs->prep && rs->prep->weights) {
			rs->weights = rs->prep->weights + expert * rs->ne0;
		} else {
			imatrix_values_range(rs->im, rs->w, expert * rs->ne0, rs->ne0, rs->own_weights);
			rs->weights = rs->own_weights;
		}
		rs->expert = expert;
	}
	if (row_kept(rs->rows, to, rs->ne0, row, &rs->ctx)) {
		rs->row = row;
		return 0;
	}
	const bool needs = quant_row_needs_values((enum ggml_type_id)to, rs->w != NULL);
	if (needs) {
		if (!rs->row_values && !(rs->row_values = malloc(rs->ne0 * sizeof(float))))
			return -ENOMEM;
		int r = reader_f32(m, i, row * rs->ne0 * sizeof(float), rs->ne0 * sizeof(float),
		                   rs->row_values, why);
		if (r < 0)
			return r;
		/* the row's sum takes every value: one NaN or infinity refuses its block */
		const uint64_t be = ggml_type_get(to)->block_elems;
		for (uint64_t v = 0; v < rs->ne0; v++)
			if (!isfinite(rs->row_values[v]))
				return refused(m, i, to, (row * rs->ne0 + v) / be,
				               "is made from a NaN or infinity");
	}
	if (quant_row_prepare((enum ggml_type_id)to, needs ? rs->row_values : NULL,
	                      (int64_t)rs->ne0, rs->w ? rs->weights : NULL, &rs->ctx) < 0)
		return -EINVAL;
	if (needs && rs->rows && !isnan(rs->ctx.sigma2)) {
		uint32_t bits;
		memcpy(&bits, &rs->ctx.sigma2, sizeof bits);
		atomic_store_explicit(&rs->rows[row], ~bits, memory_order_relaxed);
	}
	rs->row = row;
	return 0;
}

/* Quantizes nb blocks from block b0 (values at x) into y under rs, a row's run at a
 * time. */
static int weighted_blocks(const struct ggufs_model *m, uint64_t i, uint32_t to,
                           struct row_state *rs, uint64_t b0, uint64_t nb, const float *x,
                           uint8_t *y, char why[GGUF_ERR_MAX])
{
	const struct ggml_type *ty = ggml_type_get(to);
	const uint64_t be = ty->block_elems, bb = ty->block_bytes, per_row = rs->ne0 / be;
	for (uint64_t b = b0; b < b0 + nb;) {
		const uint64_t row = b / per_row, col = (b % per_row) * be;
		uint64_t run = per_row - b % per_row;
		if (run > b0 + nb - b)
			run = b0 + nb - b;
		int r = row_begin(m, i, to, rs, row, why);
		if (r < 0)
			return r;
		if (quant_blocks_weighted((enum ggml_type_id)to, x + (b - b0) * be, y + (b - b0) * bb,
		                          (int64_t)(run * be), rs->w ? rs->weights + col : NULL,
		                          &rs->ctx) < 0)
			return -EINVAL;
		b += run;
	}
	return 0;
}

int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t off,
                 uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	return reader_quant_weighted(m, i, to, NULL, NULL, off, len, buf, why);
}

/* Whether tensor i of m is made as type to under entry w of im (NULL: no matrix):
 * 0, or -EINVAL. */
static int quant_read_fits(const struct ggufs_model *m, uint64_t i, uint32_t to,
                           const struct imatrix *im, const struct imatrix_entry *w)
{
	const struct gguf_tensor *t = model_tensor(m, i);
	if (!reader_quant_size(m, i, to))
		return -EINVAL;
	if (to == t->type)
		return 0;
	const bool weighted = w != NULL;
	if (!t->has_f32 || (quant_requires_weights((enum ggml_type_id)to) && !weighted) ||
	    !(weighted ? quant_can_make_weighted((enum ggml_type_id)to) : quant_can_make(to)) ||
	    (w && (!im || w->n_values != t->ne[0] * t->ne[2])))
		return -EINVAL;
	return 0;
}

int reader_quant_prep_new(const struct ggufs_model *m, uint64_t i, const struct imatrix *im,
                          const struct imatrix_entry *w, struct quant_prep **out)
{
	*out = NULL;
	const struct gguf_tensor *t = model_tensor(m, i);
	if (!im || !w || !t->ne[0] || w->n_values != t->ne[0] * t->ne[2])
		return -EINVAL;
	struct quant_prep *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	*p = (struct quant_prep){ .m = m, .i = i, .im = im, .w = w,
	                          .n_rows = t->n_elements / t->ne[0] };
	for (size_t k = 0; k < WHOLE_ROW_TYPES; k++)
		atomic_init(&p->sigma2[k], NULL);
	/* n_values = ne0 x ne2, a tensor's values at most: their floats fit */
	p->weights = malloc(w->n_values * sizeof *p->weights);
	if (!p->weights) {
		reader_quant_prep_free(p);
		return -ENOMEM;
	}
	imatrix_values(im, w, p->weights);
	*out = p;
	return 0;
}

void reader_quant_prep_free(struct quant_prep *p)
{
	if (!p)
		return;
	free(p->weights);
	for (size_t k = 0; k < WHOLE_ROW_TYPES; k++)
		free((void *)atomic_load(&p->sigma2[k]));
	free(p);
}

uint64_t reader_quant_prep_bytes(const struct quant_prep *p)
{
	if (!p)
		return 0;
	uint64_t b = sizeof *p + p->w->n_values * sizeof *p->weights;
	for (size_t k = 0; k < WHOLE_ROW_TYPES; k++)
		if (atomic_load(&p->sigma2[k]))
			b += p->n_rows * sizeof(uint32_t);
	return b;
}

/* reader_quant_weighted's read, with what prep keeps (NULL: nothing kept). */
static int quant_read_run(const struct ggufs_model *m, uint64_t i, uint32_t to,
                          const struct imatrix *im, const struct imatrix_entry *w,
                          struct quant_prep *prep, uint64_t off, uint64_t len, void *buf,
                          char why[GGUF_ERR_MAX])
{
	const struct gguf_tensor *t = model_tensor(m, i);
	const uint64_t size = reader_quant_size(m, i, to);
	if (quant_read_fits(m, i, to, im, w) < 0 || off > size || len > size - off)
		return -EINVAL;
	if (to == t->type)
		return len ? copy_checked(m, i, to, off, len, buf, why) : 0;
	const bool weighted = w != NULL;
	if (!len)
		return 0;
	struct row_state rs = { .im = im, .w = w, .prep = prep, .ne0 = t->ne[0],
	                        .rows_per_expert = t->ne[1], .expert = UINT64_MAX,
	                        .row = UINT64_MAX };
	if (prep && quant_row_needs_values((enum ggml_type_id)to, true))
		rs.rows = prep_rows(prep, to);
	if (w && !(prep && prep->weights) && !(rs.own_weights = malloc(rs.ne0 * sizeof(float))))
		return -ENOMEM;
	const struct ggml_type *ty = ggml_type_get(to);
	const uint64_t bb = ty->block_bytes, be = ty->block_elems;
	const uint64_t step = be < QUANT_READ_STEP_VALUES ? QUANT_READ_STEP_VALUES / be : 1;
	bool values_owned, blocks_owned;
	float *values = thread_buf_get(&values_buf, step * be * sizeof *values, &values_owned);
	uint8_t *blocks = thread_buf_get(&blocks_buf, step * bb, &blocks_owned);
	int r = values && blocks ? 0 : -ENOMEM;
	uint64_t pos = off;
	const uint64_t end = off + len;
	while (r == 0 && pos < end) {
		/* the blocks of [pos, end), a step at most */
		const uint64_t b0 = pos / bb;
		uint64_t nb = (end - 1) / bb + 1 - b0;
		if (nb > step)
			nb = step;
		r = reader_f32(m, i, b0 * be * sizeof(float), nb * be * sizeof(float), values, why);
		if (r < 0)
			break;
		/* llama.cpp checks what it reads: a NaN or infinity among the values (or, in
		 * a quantized source, a scale that is one, which makes its values so) */
		for (uint64_t v = 0; v < nb * be; v++) {
			if (!isfinite(values[v])) {
				r = refused(m, i, to, b0 + v / be, "is made from a NaN or infinity");
				break;
			}
		}
		if (r == 0)
			r = weighted ? weighted_blocks(m, i, to, &rs, b0, nb, values, blocks, why)
			             : quant_row(to, values, blocks, (int64_t)(nb * be));
		if (r < 0)
			break;
		/* and what it writes: a scale (or, for f16 and bf16, a value) that came out
		 * infinite, from values beyond what the type's scale can hold */
		const uint64_t bad = block_check_first_bad(to, blocks, nb);
		if (bad < nb) {
			r = refused(m, i, to, b0 + bad, "comes out with a scale or value beyond its type's range");
			break;
		}
		const uint64_t stop = (b0 + nb) * bb < end ? (b0 + nb) * bb : end;
		memcpy((uint8_t *)buf + (pos - off), blocks + (pos - b0 * bb), stop - pos);
		pos = stop;
	}
	thread_buf_put(values, values_owned);
	thread_buf_put(blocks, blocks_owned);
	free(rs.own_weights);
	free(rs.row_values);
	return r;
}

int reader_quant_weighted(const struct ggufs_model *m, uint64_t i, uint32_t to,
                          const struct imatrix *im, const struct imatrix_entry *w,
                          uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	return quant_read_run(m, i, to, im, w, NULL, off, len, buf, why);
}

int reader_quant_prepared(struct quant_prep *p, uint32_t to, uint64_t off, uint64_t len,
                          void *buf, char why[GGUF_ERR_MAX])
{
	return quant_read_run(p->m, p->i, to, p->im, p->w, p, off, len, buf, why);
}
