#include "gguf_write.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* A bounded writer: counts every byte, stores those that fit in out (none when out is
 * NULL), and remembers an overflow of the count instead of wrapping. */
struct hw {
	uint8_t *out;
	uint64_t cap;
	uint64_t pos;
	bool overflow;
};

/* Appends n bytes of p (or zeros when p is NULL). */
static void hw_put(struct hw *w, const void *p, uint64_t n)
{
	uint64_t end;
	if (w->overflow || __builtin_add_overflow(w->pos, n, &end)) {
		w->overflow = true;
		return;
	}
	if (w->out && end <= w->cap) {
		if (p)
			memcpy(w->out + w->pos, p, n);
		else
			memset(w->out + w->pos, 0, n);
	}
	w->pos = end;
}

static void hw_u32(struct hw *w, uint32_t v)
{
	uint8_t b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	hw_put(w, b, 4);
}

static void hw_u64(struct hw *w, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	hw_put(w, b, 8);
}

static void hw_str(struct hw *w, const struct gguf_str *s)
{
	hw_u64(w, s->len);
	hw_put(w, s->ptr, s->len);
}

/* One key and its value into w, as a header holds them. */
static void put_kv(struct hw *w, const struct gguf_kv *kv)
{
	const struct gguf_value *v = &kv->value;
	hw_str(w, &kv->key);
	hw_u32(w, v->type);
	/* an array's payload starts after its element type and count (gguf.h) */
	if (v->type == GGUF_TYPE_ARRAY) {
		hw_u32(w, v->elem_type);
		hw_u64(w, v->count);
	}
	hw_put(w, v->data, v->size);
}

/* The header's first part, "GGUF" through the last key, into w. */
static void put_head(struct hw *w, uint32_t version, uint64_t n_t,
                     const struct gguf_kv *const *kv, uint64_t n_kv)
{
	hw_put(w, GGUF_MAGIC, 4);
	hw_u32(w, version);
	hw_u64(w, n_t);
	hw_u64(w, n_kv);
	for (uint64_t i = 0; i < n_kv; i++)
		put_kv(w, kv[i]);
}

/* The tensor infos into w: 0, or -1 with err for a tensor of too many dimensions. */
static int put_infos(struct hw *w, const struct gguf_tensor *const *tensors,
                     const uint64_t *offsets, uint64_t n_t, char err[GGUF_ERR_MAX])
{
	for (uint64_t i = 0; i < n_t; i++) {
		const struct gguf_tensor *t = tensors[i];
		if (t->n_dims > GGUF_MAX_DIMS) {
			char q[80];
			snprintf(err, GGUF_ERR_MAX, "tensor '%s' has %" PRIu32 " dimensions, more than %d",
			         gguf_quote(&t->name, q), t->n_dims, GGUF_MAX_DIMS);
			return -1;
		}
		hw_str(w, &t->name);
		hw_u32(w, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			hw_u64(w, t->ne[d]);
		hw_u32(w, t->type);
		hw_u64(w, offsets[i]);
	}
	return 0;
}

/* The end of a write: its length into *len, or -1 with err when it overflowed or did
 * not fit in the cap given. */
static int finish(const struct hw *w, uint64_t *len, char err[GGUF_ERR_MAX])
{
	if (w->overflow) {
		snprintf(err, GGUF_ERR_MAX, "the header would be larger than 2^64 bytes");
		return -1;
	}
	*len = w->pos;
	if (w->out && w->pos > w->cap) {
		snprintf(err, GGUF_ERR_MAX, "the header takes %" PRIu64 " bytes, %" PRIu64
		         " were given", w->pos, w->cap);
		return -1;
	}
	return 0;
}

int gguf_header_write(uint32_t version, const struct gguf_kv *const *kv, uint64_t n_kv,
                      const struct gguf_tensor *const *tensors, const uint64_t *offsets,
                      uint64_t n_t, uint64_t alignment, uint8_t *out, uint64_t cap,
                      uint64_t *len, char err[GGUF_ERR_MAX])
{
	struct hw w = { .out = out, .cap = cap };
	if (alignment == 0 || (alignment & (alignment - 1))) {
		snprintf(err, GGUF_ERR_MAX, "alignment %" PRIu64 " is not a power of two", alignment);
		return -1;
	}
	put_head(&w, version, n_t, kv, n_kv);
	if (put_infos(&w, tensors, offsets, n_t, err) < 0)
		return -1;
	if (w.pos % alignment)
		hw_put(&w, NULL, alignment - w.pos % alignment);
	return finish(&w, len, err);
}

int gguf_header_head_write(uint32_t version, uint64_t n_t, const struct gguf_kv *const *kv,
                           uint64_t n_kv, uint8_t *out, uint64_t cap, uint64_t *len,
                           char err[GGUF_ERR_MAX])
{
	struct hw w = { .out = out, .cap = cap };
	put_head(&w, version, n_t, kv, n_kv);
	return finish(&w, len, err);
}

int gguf_tensor_infos_write(const struct gguf_tensor *const *tensors, const uint64_t *offsets,
                            uint64_t n_t, uint8_t *out, uint64_t cap, uint64_t *len,
                            char err[GGUF_ERR_MAX])
{
	struct hw w = { .out = out, .cap = cap };
	if (put_infos(&w, tensors, offsets, n_t, err) < 0)
		return -1;
	return finish(&w, len, err);
}

int gguf_kv_write(const struct gguf_kv *kv, uint8_t *out, uint64_t cap, uint64_t *len,
                  char err[GGUF_ERR_MAX])
{
	struct hw w = { .out = out, .cap = cap };
	put_kv(&w, kv);
	return finish(&w, len, err);
}
