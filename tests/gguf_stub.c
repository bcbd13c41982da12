/* TEMPORARY: the parser functions the renderers call, until lib/gguf.c lands on main
 * and is merged; then this file goes. A plain bounded walk over a value's payload. */
#include <string.h>

#include "gguf.h"

size_t gguf_vtype_size(uint32_t t)
{
	switch (t) {
	case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
	case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
	case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
	case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
	default: return 0;
	}
}

const char *gguf_vtype_name(uint32_t t)
{
	static const char *const names[GGUF_TYPE_COUNT] = {
		"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
		"string", "array", "uint64", "int64", "float64",
	};
	return t < GGUF_TYPE_COUNT ? names[t] : NULL;
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
	size_t n = strlen(key);
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (f->kv[i].key.len == n && memcmp(f->kv[i].key.ptr, key, n) == 0)
			return &f->kv[i];
	return NULL;
}

struct rd {
	const uint8_t *p, *end;
};

static int walk_elems(struct rd *r, uint32_t type, uint64_t count, const struct gguf_walk *w,
                      int depth)
{
	for (uint64_t i = 0; i < count; i++) {
		if (type == GGUF_TYPE_STRING) {
			if (r->end - r->p < 8)
				return -1;
			uint64_t len = gguf_le64(r->p);
			r->p += 8;
			if ((uint64_t)(r->end - r->p) < len)
				return -1;
			if (w->string && !w->string(w->ctx, (const char *)r->p, len))
				return 0;
			r->p += len;
		} else if (type == GGUF_TYPE_ARRAY) {
			if (depth >= GGUF_MAX_ARRAY_DEPTH || r->end - r->p < 12)
				return -1;
			uint32_t et = gguf_le32(r->p);
			uint64_t n = gguf_le64(r->p + 4);
			r->p += 12;
			if (w->array_begin && !w->array_begin(w->ctx, et, n))
				return 0;
			int rc = walk_elems(r, et, n, w, depth + 1);
			if (rc <= 0)
				return rc;
			if (w->array_end && !w->array_end(w->ctx))
				return 0;
		} else {
			size_t sz = gguf_vtype_size(type);
			if (!sz || (uint64_t)(r->end - r->p) < sz)
				return -1;
			if (w->scalar && !w->scalar(w->ctx, type, r->p))
				return 0;
			r->p += sz;
		}
	}
	return 1;
}

bool gguf_value_walk(const struct gguf_value *v, const struct gguf_walk *w)
{
	struct rd r = { v->data, v->data + v->size };
	if (v->type == GGUF_TYPE_ARRAY)
		return walk_elems(&r, v->elem_type, v->count, w, 1) > 0;
	return walk_elems(&r, v->type, 1, w, 0) > 0;
}
