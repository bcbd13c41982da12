#include "quant_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "reader.h"
#include "types.h"

/* Blocks made per step of a read: their source values (at most 64 x 256 floats, 64 KiB)
 * and their bytes are the read's memory. */
#define QUANT_READ_STEP_BLOCKS 64

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
	float *values = malloc(QUANT_READ_STEP_BLOCKS * be * sizeof *values);
	uint8_t *blocks = malloc(QUANT_READ_STEP_BLOCKS * bb);
	int r = values && blocks ? 0 : -ENOMEM;
	uint64_t pos = off;
	const uint64_t end = off + len;
	while (r == 0 && pos < end) {
		/* the blocks of [pos, end), QUANT_READ_STEP_BLOCKS at most */
		const uint64_t b0 = pos / bb;
		uint64_t nb = (end - 1) / bb + 1 - b0;
		if (nb > QUANT_READ_STEP_BLOCKS)
			nb = QUANT_READ_STEP_BLOCKS;
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
	free(values);
	free(blocks);
	return r;
}
