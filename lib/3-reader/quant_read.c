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

int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t off,
                 uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	const struct gguf_tensor *t = model_tensor(m, i);
	const uint64_t size = reader_quant_size(m, i, to);
	if (!size || off > size || len > size - off)
		return -EINVAL;
	if (to == t->type)
		return len ? copy_checked(m, i, to, off, len, buf, why) : 0;
	if (!t->has_f32 || !quant_can_make(to))
		return -EINVAL;
	if (!len)
		return 0;
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
			r = quant_row(to, values, blocks, (int64_t)(nb * be));
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
	return r;
}
