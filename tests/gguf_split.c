#include "gguf_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

static void put(FILE *f, const void *p, size_t n)
{
	fwrite(p, 1, n, f);
}

static void put_u16(FILE *f, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	put(f, b, 2);
}

static void put_u32(FILE *f, uint32_t v)
{
	uint8_t b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(f, b, 4);
}

static void put_u64(FILE *f, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(f, b, 8);
}

static void put_key(FILE *f, const char *key, uint32_t type)
{
	put_u64(f, strlen(key));
	put(f, key, strlen(key));
	put_u32(f, type);
}

static void pad(FILE *f, uint64_t align)
{
	long pos = ftell(f);
	static const char zeros[64];
	while (pos % (long)align) {
		size_t n = (size_t)(align - (uint64_t)pos % align);
		put(f, zeros, n > sizeof zeros ? sizeof zeros : n);
		pos = ftell(f);
	}
}

int gguf_split(const char *src, const char *prefix, unsigned count,
               void (*tweak)(unsigned shard, struct split_keys *k))
{
	FILE *in = fopen(src, "rb");
	if (!in)
		return -1;
	fseek(in, 0, SEEK_END);
	uint64_t size = (uint64_t)ftell(in);
	fseek(in, 0, SEEK_SET);
	uint8_t *img = malloc(size);
	if (!img || fread(img, 1, size, in) != size) {
		fclose(in);
		free(img);
		return -1;
	}
	fclose(in);
	struct gguf_file gf;
	char err[GGUF_ERR_MAX];
	if (gguf_parse(img, size, &gf, err) < 0) {
		free(img);
		return -1;
	}
	int rc = 0;
	uint64_t first = 0;
	for (unsigned s = 0; s < count && rc == 0; s++) {
		uint64_t last = gf.n_tensors * (s + 1) / count;
		char path[4096];
		snprintf(path, sizeof path, "%s-%05u-of-%05u.gguf", prefix, s + 1, count);
		FILE *f = fopen(path, "wb");
		if (!f) {
			rc = -1;
			break;
		}
		struct split_keys k = { (uint16_t)s, (uint16_t)count, (int32_t)gf.n_tensors, first };
		if (tweak)
			tweak(s, &k);
		first = k.first;
		uint64_t n_kv = (s == 0 ? gf.n_kv : 0) + 3;
		put(f, "GGUF", 4);
		put_u32(f, 3);
		put_u64(f, last - first);
		put_u64(f, n_kv);
		if (s == 0) {
			for (uint64_t i = 0; i < gf.n_kv; i++) {
				/* a kv's bytes run from its key's length field to its value's end */
				const uint8_t *a = (const uint8_t *)gf.kv[i].key.ptr - 8;
				const uint8_t *b = gf.kv[i].value.data + gf.kv[i].value.size;
				put(f, a, (size_t)(b - a));
			}
		}
		put_key(f, "split.no", GGUF_TYPE_UINT16);
		put_u16(f, k.no);
		put_key(f, "split.count", GGUF_TYPE_UINT16);
		put_u16(f, k.count);
		put_key(f, "split.tensors.count", GGUF_TYPE_INT32);
		put_u32(f, (uint32_t)k.tensors_count);
		uint64_t off = 0;
		for (uint64_t i = first; i < last; i++) {
			const struct gguf_tensor *t = &gf.tensors[i];
			put_u64(f, t->name.len);
			put(f, t->name.ptr, t->name.len);
			put_u32(f, t->n_dims);
			for (uint32_t d = 0; d < t->n_dims; d++)
				put_u64(f, t->ne[d]);
			put_u32(f, t->type);
			put_u64(f, off);
			off += (t->size + gf.alignment - 1) / gf.alignment * gf.alignment;
		}
		pad(f, gf.alignment);
		for (uint64_t i = first; i < last; i++) {
			put(f, img + gf.tensors[i].offset, gf.tensors[i].size);
			pad(f, gf.alignment);
		}
		if (fclose(f) != 0)
			rc = -1;
		first = last;
	}
	gguf_file_free(&gf);
	free(img);
	return rc;
}
