#include "gguf_writer.h"

#include "model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void gw_init(struct gw *w)
{
	*w = (struct gw){ 0 };
}

void gw_free(struct gw *w)
{
	free(w->buf);
	*w = (struct gw){ 0 };
}

uint8_t *gw_take(struct gw *w, size_t *len)
{
	uint8_t *p = w->buf;
	*len = w->len;
	*w = (struct gw){ 0 };
	return p;
}

bool gw_save(const struct gw *w, const char *path)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return false;
	bool whole = fwrite(w->buf, 1, w->len, f) == w->len;
	return fclose(f) == 0 && whole;
}

bool gw_save_temp(const struct gw *w, char *path_template)
{
	int fd = mkstemp(path_template);
	if (fd < 0)
		return false;
	close(fd);
	return gw_save(w, path_template);
}

struct ggufs_model *gw_open_temp(struct gw *w, char *path_template, uint8_t **img,
                                 size_t *len, char err[GGUF_ERR_MAX])
{
	*img = NULL;
	if (!gw_save_temp(w, path_template)) {
		snprintf(err, GGUF_ERR_MAX, "%s: %s", path_template, strerror(errno));
		return NULL;
	}
	*img = gw_take(w, len);
	return model_open(path_template, err);
}

/* Room for n more bytes; returns where they go. */
static uint8_t *grow(struct gw *w, size_t n)
{
	if (n > w->cap - w->len) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap - w->len < n)
			cap *= 2;
		uint8_t *p = realloc(w->buf, cap);
		if (!p) {
			fprintf(stderr, "gguf_writer: out of memory for %zu bytes\n", cap);
			abort();
		}
		w->buf = p;
		w->cap = cap;
	}
	w->len += n;
	return w->buf + w->len - n;
}

void gw_raw(struct gw *w, const void *p, size_t n)
{
	if (n)
		memcpy(grow(w, n), p, n);
}

void gw_fill(struct gw *w, uint8_t byte, size_t n)
{
	if (n)
		memset(grow(w, n), byte, n);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void gw_u8(struct gw *w, uint8_t v)
{
	*grow(w, 1) = v;
}

void gw_u16(struct gw *w, uint16_t v)
{
	put_le(grow(w, 2), v, 2);
}

void gw_u32(struct gw *w, uint32_t v)
{
	put_le(grow(w, 4), v, 4);
}

void gw_u64(struct gw *w, uint64_t v)
{
	put_le(grow(w, 8), v, 8);
}

void gw_f32(struct gw *w, float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	gw_u32(w, u);
}

void gw_f64(struct gw *w, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	gw_u64(w, u);
}

void gw_put_u32(struct gw *w, size_t at, uint32_t v)
{
	if (at > w->len || 4 > w->len - at)
		abort();
	put_le(w->buf + at, v, 4);
}

void gw_put_u64(struct gw *w, size_t at, uint64_t v)
{
	if (at > w->len || 8 > w->len - at)
		abort();
	put_le(w->buf + at, v, 8);
}

void gw_str(struct gw *w, const char *s)
{
	gw_strn(w, s, strlen(s));
}

void gw_strn(struct gw *w, const void *s, uint64_t n)
{
	gw_u64(w, n);
	gw_raw(w, s, (size_t)n);
}

void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	gw_raw(w, GGUF_MAGIC, 4);
	gw_u32(w, version);
	gw_u64(w, n_tensors);
	gw_u64(w, n_kv);
}

void gw_key(struct gw *w, const char *key, uint32_t type)
{
	gw_str(w, key);
	gw_u32(w, type);
}

void gw_array(struct gw *w, uint32_t elem_type, uint64_t count)
{
	gw_u32(w, elem_type);
	gw_u64(w, count);
}

void gw_kv_u32(struct gw *w, const char *key, uint32_t v)
{
	gw_key(w, key, GGUF_TYPE_UINT32);
	gw_u32(w, v);
}

void gw_kv_u64(struct gw *w, const char *key, uint64_t v)
{
	gw_key(w, key, GGUF_TYPE_UINT64);
	gw_u64(w, v);
}

void gw_kv_str(struct gw *w, const char *key, const char *v)
{
	gw_key(w, key, GGUF_TYPE_STRING);
	gw_str(w, v);
}

void gw_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
               uint32_t type, uint64_t offset)
{
	gw_str(w, name);
	gw_u32(w, n_dims);
	for (uint32_t d = 0; d < n_dims; d++)
		gw_u64(w, ne ? ne[d] : 1);
	gw_u32(w, type);
	gw_u64(w, offset);
}

void gw_align(struct gw *w, uint64_t alignment)
{
	if (alignment && w->len % alignment)
		gw_fill(w, 0, (size_t)(alignment - w->len % alignment));
}

void gw_flat_model(struct gw *w, int n_tensors, gw_flat_tensor_fn tensor, void *ctx)
{
	struct gw data;
	gw_init(&data);
	gw_header(w, 3, (uint64_t)n_tensors, 1);
	gw_kv_str(w, "general.architecture", "test");
	for (int k = 0; k < n_tensors; k++) {
		const char *name;
		uint32_t type;
		uint64_t ne[1];
		const size_t at = data.len;
		tensor(ctx, k, &name, &type, &ne[0], &data);
		gw_tensor(w, name, 1, ne, type, at);
		gw_fill(&data, 0, (32 - data.len % 32) % 32);
	}
	gw_align(w, 32);
	gw_raw(w, data.buf, data.len);
	gw_free(&data);
}
