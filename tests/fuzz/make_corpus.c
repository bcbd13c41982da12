/* Writes the seed corpus of fuzz_parse: make_corpus MODEL DIR. Small hand-made files
 * from the test writer, the model's header cut at its data section, and a miniature of
 * the model that parses whole (every key, arrays cut to 8 elements, every tensor info
 * cut to one short row of its type, and that many bytes of its data). Not run by the
 * test suite: its output is committed under tests/fuzz/corpus/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "types.h"

static const char *out_dir;

static void save(const char *name, const uint8_t *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", out_dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void save_gw(const char *name, struct gw *w)
{
	save(name, w->buf, w->len);
	gw_free(w);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	rewind(f);
	uint8_t *p = malloc(*len);
	if (!p || fread(p, 1, *len, f) != *len) {
		perror(path);
		exit(1);
	}
	fclose(f);
	return p;
}

static void all_types(void)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 17);
	gw_key(&w, "u8", GGUF_TYPE_UINT8); gw_u8(&w, 200);
	gw_key(&w, "i8", GGUF_TYPE_INT8); gw_u8(&w, 0xfb);
	gw_key(&w, "u16", GGUF_TYPE_UINT16); gw_u16(&w, 65535);
	gw_key(&w, "i16", GGUF_TYPE_INT16); gw_u16(&w, 0x8000);
	gw_key(&w, "u32", GGUF_TYPE_UINT32); gw_u32(&w, 4000000000u);
	gw_key(&w, "i32", GGUF_TYPE_INT32); gw_u32(&w, 0x80000000u);
	gw_key(&w, "f32", GGUF_TYPE_FLOAT32); gw_f32(&w, 1e-5f);
	gw_key(&w, "bool", GGUF_TYPE_BOOL); gw_u8(&w, 1);
	gw_kv_str(&w, "str", "a string\nwith a newline");
	gw_key(&w, "u64", GGUF_TYPE_UINT64); gw_u64(&w, UINT64_MAX);
	gw_key(&w, "i64", GGUF_TYPE_INT64); gw_u64(&w, 1ull << 63);
	gw_key(&w, "f64", GGUF_TYPE_FLOAT64); gw_f64(&w, 0.1);
	gw_key(&w, "arr.u16", GGUF_TYPE_ARRAY); gw_array(&w, GGUF_TYPE_UINT16, 3);
	gw_u16(&w, 1); gw_u16(&w, 2); gw_u16(&w, 3);
	gw_key(&w, "arr.str", GGUF_TYPE_ARRAY); gw_array(&w, GGUF_TYPE_STRING, 3);
	gw_str(&w, "<s>"); gw_str(&w, ""); gw_str(&w, "\xe2\x96\x81the");
	gw_key(&w, "arr.arr", GGUF_TYPE_ARRAY); gw_array(&w, GGUF_TYPE_ARRAY, 2);
	gw_array(&w, GGUF_TYPE_INT32, 1); gw_u32(&w, 7);
	gw_array(&w, GGUF_TYPE_STRING, 1); gw_str(&w, "x");
	gw_key(&w, "arr.empty", GGUF_TYPE_ARRAY); gw_array(&w, GGUF_TYPE_FLOAT64, 0);
	gw_key(&w, "arr.f32", GGUF_TYPE_ARRAY); gw_array(&w, GGUF_TYPE_FLOAT32, 2);
	gw_f32(&w, -0.0f); gw_f32(&w, 3.5f);
	save_gw("all_types.gguf", &w);

	gw_init(&w);
	gw_header(&w, 2, 0, 0);
	save_gw("empty_v2.gguf", &w);
}

static void nested(void)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "deep", GGUF_TYPE_ARRAY);
	for (int i = 1; i < GGUF_MAX_ARRAY_DEPTH; i++)
		gw_array(&w, GGUF_TYPE_ARRAY, 1);
	gw_array(&w, GGUF_TYPE_STRING, 2);
	gw_str(&w, "bottom");
	gw_str(&w, "");
	save_gw("nested.gguf", &w);
}

/* One tensor of each of a spread of types, a zero-sized one and an unknown id, with
 * pseudo-random data, at alignment 64. */
static void tensors(void)
{
	static const uint32_t types[] = {
		GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1,
		GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ2_XXS,
		GGML_TYPE_IQ4_NL, GGML_TYPE_I8, GGML_TYPE_F64, GGML_TYPE_TQ1_0, GGML_TYPE_MXFP4,
		99, 4,
	};
	const size_t n = sizeof types / sizeof types[0];
	struct gw w;
	uint64_t offset = 0, sizes[32];
	gw_init(&w);
	gw_header(&w, 3, n + 1, 2);
	gw_kv_u32(&w, "general.alignment", 64);
	gw_kv_str(&w, "general.architecture", "llama");
	for (size_t i = 0; i < n; i++) {
		const struct ggml_type *ti = ggml_type_get(types[i]);
		uint64_t ne[2] = { ti && ti->block_elems ? ti->block_elems : 32, 2 };
		if (ne[0] < 32)
			ne[0] = 32;
		sizes[i] = ti && ti->block_elems ? ne[0] / ti->block_elems * ti->block_bytes * 2 : 40;
		char name[32];
		snprintf(name, sizeof name, "t.%u", types[i]);
		gw_tensor(&w, name, 2, ne, types[i], offset);
		offset += (sizes[i] + 63) / 64 * 64;
	}
	uint64_t zero[2] = { 0, 7 };
	gw_tensor(&w, "empty", 2, zero, GGML_TYPE_F32, offset);
	gw_align(&w, 64);
	uint64_t rng = 0x2545f4914f6cdd1dull;
	for (size_t i = 0; i < n; i++) {
		for (uint64_t b = 0; b < sizes[i]; b++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			gw_u8(&w, (uint8_t)rng);
		}
		gw_align(&w, 64);
	}
	save_gw("tensors.gguf", &w);
}

/* Bytes of the first k elements of an array value. */
static uint64_t prefix_bytes(const struct gguf_value *v, uint64_t k)
{
	size_t es = gguf_vtype_size(v->elem_type);
	if (es)
		return k * es;
	if (v->elem_type != GGUF_TYPE_STRING)
		return v->size;   /* arrays of arrays: kept whole */
	const uint8_t *p = v->data;
	for (uint64_t i = 0; i < k; i++)
		p += 8 + gguf_le64(p);
	return (uint64_t)(p - v->data);
}

static void model(const char *path)
{
	size_t size;
	uint8_t *img = slurp(path, &size);
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	if (gguf_parse(img, size, &f, err) != 0) {
		fprintf(stderr, "%s: %s\n", path, err);
		exit(1);
	}
	save("model_header.gguf", img, f.data_offset);

	struct gw w;
	gw_init(&w);
	gw_header(&w, f.version, f.n_tensors, f.n_kv);
	for (uint64_t i = 0; i < f.n_kv; i++) {
		const struct gguf_kv *kv = &f.kv[i];
		gw_strn(&w, kv->key.ptr, kv->key.len);
		gw_u32(&w, kv->value.type);
		if (kv->value.type == GGUF_TYPE_ARRAY) {
			uint64_t k = kv->value.count < 8 || kv->value.elem_type == GGUF_TYPE_ARRAY ?
			             kv->value.count : 8;
			gw_array(&w, kv->value.elem_type, k);
			gw_raw(&w, kv->value.data, prefix_bytes(&kv->value, k));
		} else {
			gw_raw(&w, kv->value.data, kv->value.size);
		}
	}
	uint64_t offset = 0, *sizes = calloc(f.n_tensors + 1, sizeof *sizes);
	for (uint64_t i = 0; i < f.n_tensors; i++) {
		const struct gguf_tensor *t = &f.tensors[i];
		uint64_t ne[GGUF_MAX_DIMS] = { 32, 1, 1, 1 };
		if (t->ti && t->ti->block_elems > 32)
			ne[0] = t->ti->block_elems;
		sizes[i] = t->ti && t->ti->block_elems ?
		           ne[0] / t->ti->block_elems * t->ti->block_bytes : 64;
		if (sizes[i] > t->size)
			sizes[i] = t->size;
		gw_strn(&w, t->name.ptr, t->name.len);
		gw_u32(&w, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			gw_u64(&w, ne[d]);
		gw_u32(&w, t->type);
		gw_u64(&w, offset);
		offset += (sizes[i] + f.alignment - 1) / f.alignment * f.alignment;
	}
	gw_align(&w, f.alignment);
	for (uint64_t i = 0; i < f.n_tensors; i++) {
		gw_raw(&w, img + f.tensors[i].offset, sizes[i]);
		gw_align(&w, f.alignment);
	}
	free(sizes);
	/* it must parse, or it seeds nothing but the error paths */
	struct gguf_file check;
	if (gguf_parse(w.buf, w.len, &check, err) != 0) {
		fprintf(stderr, "model_mini.gguf: %s\n", err);
		exit(1);
	}
	gguf_file_free(&check);
	save_gw("model_mini.gguf", &w);
	gguf_file_free(&f);
	free(img);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: make_corpus MODEL DIR\n");
		return 2;
	}
	out_dir = argv[2];
	all_types();
	nested();
	tensors();
	model(argv[1]);
	return 0;
}
