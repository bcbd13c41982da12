#include "quant_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	const struct gguf_tensor *t = m->tensors[i].t;
	if (to == t->type)
		return t->size;
	if (!ty || !ty->block_elems || !ty->block_bytes || t->ne[0] % ty->block_elems)
		return 0;
	/* n_elements / block_elems blocks: the parser bounded n_elements, and a block's
	 * bytes never exceed its values' floats, so the product fits */
	return t->n_elements / ty->block_elems * ty->block_bytes;
}

int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t to, uint64_t off,
                 uint64_t len, void *buf)
{
	const struct gguf_tensor *t = m->tensors[i].t;
	const uint64_t size = reader_quant_size(m, i, to);
	if (!size || off > size || len > size - off)
		return -EINVAL;
	if (to == t->type)
		return reader_raw(m, i, off, len, buf);
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
		r = reader_f32(m, i, b0 * be * sizeof(float), nb * be * sizeof(float), values);
		if (r < 0)
			break;
		r = quant_row(to, values, blocks, (int64_t)(nb * be));
		if (r < 0)
			break;
		const uint64_t stop = (b0 + nb) * bb < end ? (b0 + nb) * bb : end;
		memcpy((uint8_t *)buf + (pos - off), blocks + (pos - b0 * bb), stop - pos);
		pos = stop;
	}
	thread_buf_put(values, values_owned);
	thread_buf_put(blocks, blocks_owned);
	return r;
}
