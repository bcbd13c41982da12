#include "reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "thread_buf.h"

int reader_raw(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
               void *buf, char why[GGUF_ERR_MAX])
{
	return model_tensor_read(m, i, off, len, buf, why);
}

/* Dequantizes bytes [off, off + len) of the .f32 rendering of a tensor of type ty into
 * buf: only the blocks that the range touches, whole blocks straight into buf when it is
 * float-aligned, the ragged ends through a small bounce buffer. data holds the tensor's
 * stored blocks from block b0 on, as far as the range needs. */
static void dequant_range(const struct ggml_type *ty, const uint8_t *data, uint64_t b0,
                          char *buf, uint64_t len, uint64_t off)
{
	const uint64_t block_out = (uint64_t)ty->block_elems * sizeof(float);
	const dequant_fn to_float = dequant_get(ty->id)->to_float;
	enum { BOUNCE_FLOATS = 4096 };
	float bounce[BOUNCE_FLOATS];
	uint64_t pos = off, end = off + len;

	while (pos < end) {
		uint64_t b = pos / block_out;
		uint64_t bstart = b * block_out;
		char *dst = buf + (pos - off);
		if (pos == bstart && ((uintptr_t)dst % sizeof(float)) == 0) {
			uint64_t nb = (end - pos) / block_out;
			if (nb) {
				to_float(data + (b - b0) * ty->block_bytes, (float *)(void *)dst, nb);
				pos += nb * block_out;
				continue;
			}
		}
		uint64_t nb = (end - bstart + block_out - 1) / block_out;
		uint64_t room = BOUNCE_FLOATS / ty->block_elems;
		if (nb > room)
			nb = room;
		to_float(data + (b - b0) * ty->block_bytes, bounce, nb);
		uint64_t stop = bstart + nb * block_out < end ? bstart + nb * block_out : end;
		memcpy(dst, (const char *)bounce + (pos - bstart), stop - pos);
		pos = stop;
	}
}

/* Stored bytes fetched per slice of a .f32 read from a source that is not mapped: the
 * read's memory, whatever the tensor's size. */
#define REMOTE_SLICE_BYTES (128u << 10)

/* Each thread's slice buffer (a buffer per read would come and go through malloc
 * arenas that keep it). */
static struct thread_buf slice_buf = THREAD_BUF(REMOTE_SLICE_BYTES, false);

/* A slice of a .f32 read: its stored blocks, from block b0 on, are dequantized into
 * out, the bytes [off, off + len) of the .f32 rendering. */
struct f32_slice {
	const struct ggml_type *ty;
	uint64_t b0;
	char *out;
	uint64_t len, off;
};

/* The source_visit_fn of a slice: p holds its blocks (no lock, no allocation). */
static void dequant_slice(void *ctx, const uint8_t *p, uint64_t len)
{
	const struct f32_slice *sl = ctx;
	(void)len;
	dequant_range(sl->ty, p, sl->b0, sl->out, sl->len, sl->off);
}

int reader_f32(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
               void *buf, char why[GGUF_ERR_MAX])
{
	if (len == 0)
		return 0;
	uint64_t at;
	struct source *src = model_tensor_bytes(m, i, &at);
	const struct ggml_type *ty = model_tensor(m, i)->ti;
	const uint64_t block_out = (uint64_t)ty->block_elems * sizeof(float);
	const uint64_t end = off + len, first = off / block_out;
	const uint64_t last = (end + block_out - 1) / block_out;
	/* a mapping is visited in one piece; fetched bytes come slice by slice */
	uint64_t slice_blocks = last - first;
	uint8_t *slice = NULL;
	bool owned = false;
	if (!source_mapped(src)) {
		uint64_t most = REMOTE_SLICE_BYTES / ty->block_bytes;
		if (most == 0)
			most = 1;
		if (slice_blocks > most)
			slice_blocks = most;
		slice = thread_buf_get(&slice_buf, slice_blocks * ty->block_bytes, &owned);
		if (!slice) {
			if (why)
				gguf_errf(why, "out of memory");
			return -EIO;
		}
	}
	int r = 0;
	for (uint64_t pos = off; pos < end;) {
		uint64_t b0 = pos / block_out;
		uint64_t b1 = b0 + slice_blocks < last ? b0 + slice_blocks : last;
		uint64_t stop = b1 * block_out < end ? b1 * block_out : end;
		struct f32_slice sl = { .ty = ty, .b0 = b0, .out = (char *)buf + (pos - off),
		                        .len = stop - pos, .off = pos };
		r = source_visit(src, at + b0 * ty->block_bytes,
		                 (b1 - b0) * ty->block_bytes, slice, dequant_slice, &sl, why);
		if (r < 0)
			break;
		pos = stop;
	}
	thread_buf_put(slice, owned);
	return r < 0 ? -EIO : 0;
}

int reader_visit_raw(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                     void *buf, source_visit_fn fn, void *ctx, char why[GGUF_ERR_MAX])
{
	const uint64_t size = model_tensor(m, i)->size;
	if (off > size || len > size - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	uint64_t at;
	struct source *src = model_tensor_bytes(m, i, &at);
	return source_visit(src, at + off, len, buf, fn, ctx, why);
}

bool reader_raw_span(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                     int *fd, uint64_t *file_off, uint64_t *count, char why[GGUF_ERR_MAX])
{
	const uint64_t size = model_tensor(m, i)->size;
	uint64_t at;
	struct source *src = model_tensor_bytes(m, i, &at);
	*file_off = at + off;
	const uint64_t asked = off >= size ? 0 : (len < size - off ? len : size - off);
	if (!source_span(src, *file_off, asked, fd, count))
		return false;
	if (*count < asked && why)   /* the file shrank under them: as a read says it */
		source_holds(src, *file_off + asked, why);
	return true;
}
