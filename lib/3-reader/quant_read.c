#include "quant_read.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
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

/* The weights of one row's expert and that row's state, as a read goes along. */
struct row_state {
	const struct imatrix *im;
	const struct imatrix_entry *w;
	uint64_t ne0, rows_per_expert;
	float *weights;          /* ne0 of them: expert's (NULL: no matrix) */
	uint64_t expert;         /* whose they are (UINT64_MAX: none yet) */
	uint64_t row;            /* the row ctx is prepared for (UINT64_MAX: none) */
	struct quant_row_ctx ctx;
	float *row_values;       /* the whole row, where the type's preparation needs it */
};

/* Prepares rs for row (its expert's weights, its ctx): 0 or -errno. */
static int row_begin(const struct ggufs_model *m, uint64_t i, uint32_t to,
                     struct row_state *rs, uint64_t row, char why[GGUF_ERR_MAX])
{
	if (rs->row == row)
		return 0;
	const uint64_t expert = row / rs->rows_per_expert;
	if (rs->w && rs->expert != expert) {
		imatrix_values_range(rs->im, rs->w, expert * rs->ne0, rs->ne0, rs->weights);
		rs->expert = expert;
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

int reader_quant_weighted(const struct ggufs_model *m, uint64_t i, uint32_t to,
                          const struct imatrix *im, const struct imatrix_entry *w,
                          uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct gguf_tensor *t = model_tensor(m, i);
	const uint64_t size = reader_quant_size(m, i, to);
	if (!size || off > size || len > size - off)
		return -EINVAL;
	if (to == t->type)
		return len ? copy_checked(m, i, to, off, len, buf, why) : 0;
	const bool weighted = w != NULL;
	if (!t->has_f32 || (quant_requires_weights((enum ggml_type_id)to) && !weighted) ||
	    !(weighted ? quant_can_make_weighted((enum ggml_type_id)to) : quant_can_make(to)) ||
	    (w && (!im || w->n_values != t->ne[0] * t->ne[2])))
		return -EINVAL;
	if (!len)
		return 0;
	struct row_state rs = { .im = im, .w = w, .ne0 = t->ne[0], .rows_per_expert = t->ne[1],
	                        .expert = UINT64_MAX, .row = UINT64_MAX };
	if (w && !(rs.weights = malloc(rs.ne0 * sizeof(float))))
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
	free(rs.weights);
	free(rs.row_values);
	return r;
}
