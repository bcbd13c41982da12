#include "reader_quant.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "reader.h"
#include "types.h"

/* Values quantized at a time: 64 Ki floats (256 KiB) and their blocks, whatever the
 * range asked for. */
#define CHUNK_VALUES (UINT64_C(1) << 16)

int reader_quant(const struct ggufs_model *m, uint64_t i, uint32_t type, uint64_t off,
                 uint64_t len, void *buf)
{
	const struct gguf_tensor *t = m->tensors[i].t;
	const struct ggml_type *ti = ggml_type_get(type);
	if (!ti || !ti->block_bytes || !ti->block_elems || !quant_can_make(type) || !t->has_f32)
		return -EINVAL;
	const uint64_t be = ti->block_elems, bb = ti->block_bytes;
	const uint64_t n_blocks = t->n_elements / be;
	if (len == 0)
		return 0;
	if (t->n_elements % be || off / bb >= n_blocks || len > n_blocks * bb - off)
		return -EINVAL;
	const uint64_t per = be >= CHUNK_VALUES ? 1 : CHUNK_VALUES / be;   /* blocks a chunk */
	float *x = malloc(per * be * sizeof *x);
	uint8_t *y = malloc(per * bb);
	int r = 0;
	if (!x || !y)
		r = -ENOMEM;
	uint8_t *out = buf;
	for (uint64_t b = off / bb, end = (off + len - 1) / bb + 1; r == 0 && b < end; b += per) {
		const uint64_t k = end - b < per ? end - b : per;
		r = reader_f32(m, i, b * be * sizeof(float), k * be * sizeof(float), x);
		if (r == 0 && quant_row(type, x, y, (int64_t)(k * be)) != 0)
			r = -EINVAL;
		if (r)
			break;
		/* the part of these blocks' bytes [b*bb, (b+k)*bb) inside [off, off + len) */
		const uint64_t lo = b * bb > off ? b * bb : off;
		const uint64_t hi = (b + k) * bb < off + len ? (b + k) * bb : off + len;
		memcpy(out + (lo - off), y + (lo - b * bb), hi - lo);
	}
	free(x);
	free(y);
	return r;
}
