/* diff_pair IN OUT f32|f16 [--vary]: writes OUT, a copy of the model IN whose tensors
 * hold IN's dequantized values (its .f32 files, read through the tensor reader) stored
 * as float32 or float16, with the test GGUF writer: the same weights at another
 * precision, as a quantization's source or a re-encode of it. The metadata is IN's,
 * but general.file_type is 0 or 1 as the precision says, general.quantization_version
 * is left out, and test.precision is added (so --diff has keys to show changed, removed
 * and added). --vary also leaves out IN's largest tensor (the first of the largest), stores its first 1-D one with
 * dims (n/2, 2), and adds a tensor extra.weight of 64 zeros: one of each kind that does
 * not pair. Tensors without a dequantizer are left out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_writer.h"
#include "model.h"
#include "reader.h"
#include "tool_model.h"

/* IEEE half of f, rounded to nearest even (the compiler's conversion). */
static uint16_t to_f16(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;
	memcpy(&u, &h, sizeof u);
	return u;
}

/* The raw bytes of key/value pair k: from its key's length field to its value's end. */
static void copy_kv(struct gw *w, const struct gguf_kv *kv)
{
	const uint8_t *start = (const uint8_t *)kv->key.ptr - 8;
	gw_raw(w, start, (size_t)(kv->value.data + kv->value.size - start));
}

static bool key_is(const struct gguf_kv *kv, const char *key)
{
	return kv->key.len == strlen(key) && memcmp(kv->key.ptr, key, kv->key.len) == 0;
}

int main(int argc, char **argv)
{
	if (argc < 4 || (strcmp(argv[3], "f32") && strcmp(argv[3], "f16"))) {
		fprintf(stderr, "usage: diff_pair IN OUT f32|f16 [--vary]\n");
		return 2;
	}
	const bool f16 = strcmp(argv[3], "f16") == 0;
	const bool vary = argc > 4 && strcmp(argv[4], "--vary") == 0;
	struct ggufs_model *m = tool_model_open("diff_pair", argv[1]);
	if (!m)
		return 1;
	/* which tensors go, and how */
	uint64_t n_out = 0, reshaped = UINT64_MAX, last = 0;
	for (uint64_t i = 0; i < model_n_tensors(m); i++)
		if (model_tensor(m, i)->size > model_tensor(m, last)->size)
			last = i;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		if (vary && reshaped == UINT64_MAX && g->n_dims == 1 && g->ne[0] % 2 == 0)
			reshaped = i;
		n_out += g->has_f32 && !(vary && i == last);
	}
	uint64_t n_kv = 1;
	for (uint64_t k = 0; k < model_meta(m)->n_kv; k++)
		n_kv += !key_is(&model_meta(m)->kv[k], "general.quantization_version");

	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, n_out + vary, n_kv);
	for (uint64_t k = 0; k < model_meta(m)->n_kv; k++) {
		const struct gguf_kv *kv = &model_meta(m)->kv[k];
		if (key_is(kv, "general.quantization_version"))
			continue;
		if (key_is(kv, "general.file_type"))
			gw_kv_u32(&w, "general.file_type", f16 ? 1 : 0);
		else if (key_is(kv, "general.alignment"))
			gw_kv_u32(&w, "general.alignment", 32);
		else
			copy_kv(&w, kv);
	}
	gw_kv_str(&w, "test.precision", argv[3]);
	const uint32_t type = f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
	const uint64_t width = f16 ? 2 : 4;
	uint64_t off = 0;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		if (!g->has_f32 || (vary && i == last))
			continue;
		char name[512];
		snprintf(name, sizeof name, "%.*s", (int)g->name.len, g->name.ptr);
		uint64_t ne[GGUF_MAX_DIMS];
		memcpy(ne, g->ne, sizeof ne);
		uint32_t n_dims = g->n_dims;
		if (i == reshaped) {
			ne[0] = g->ne[0] / 2;
			ne[1] = 2;
			n_dims = 2;
		}
		gw_tensor(&w, name, n_dims, ne, type, off);
		off += (g->n_elements * width + 31) / 32 * 32;
	}
	if (vary) {
		const uint64_t ne[1] = { 64 };
		gw_tensor(&w, "extra.weight", 1, ne, type, off);
	}
	gw_align(&w, 32);
	float *buf = malloc(1 << 20);
	if (!buf)
		return 1;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		if (!g->has_f32 || (vary && i == last))
			continue;
		for (uint64_t at = 0; at < g->n_elements; at += (1 << 18)) {
			const uint64_t n = g->n_elements - at < (1 << 18) ? g->n_elements - at : (1 << 18);
			if (reader_f32(m, i, at * 4, n * 4, buf, NULL) < 0) {
				fprintf(stderr, "diff_pair: %s: cannot read a tensor\n", argv[1]);
				return 1;
			}
			for (uint64_t k = 0; k < n; k++) {
				if (f16)
					gw_u16(&w, to_f16(buf[k]));
				else
					gw_f32(&w, buf[k]);
			}
		}
		gw_align(&w, 32);
	}
	if (vary)
		gw_fill(&w, 0, 64 * width);
	free(buf);
	if (!gw_save(&w, argv[2])) {
		fprintf(stderr, "diff_pair: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	gw_free(&w);
	model_close(m);
	return 0;
}
