#include "render_json.h"
#include "names.h"
#include "render_mark.h"
#include "render_value.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void put_u64(struct sink *s, uint64_t v)
{
	char buf[24];
	int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
	sink_put(s, buf, (uint64_t)n);
}

static void put_cstr_json(struct sink *s, const char *str)
{
	render_json_string(s, str, strlen(str));
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* The path of a file in the tree, relative to the mount root, as a JSON string: dir,
 * the file name of name (escaped by the same rules as the tree's, names.h), suffix.
 * Bytes of the name that are not UTF-8 come out as U+FFFD, as in "name". */
static void put_path(struct sink *s, const char *dir, const struct gguf_str *name, bool tensor,
                     const char *suffix)
{
	char path[sizeof "metadata/" + NAMES_BUF + sizeof ".npy"];
	size_t n = strlen(dir);
	memcpy(path, dir, n);
	n += names_encode(name->ptr, name->len, tensor, path + n);
	size_t k = strlen(suffix);
	memcpy(path + n, suffix, k);
	render_json_string(s, path, n + k);
}

/* kv number i, from its start, or from a mark inside its value. */
static void render_kv(struct sink *s, const struct gguf_kv *kv, uint64_t i,
                      const struct render_mark *from)
{
	if (!from) {
		char type[RENDER_TYPE_MAX];
		size_t tn = render_value_type(&kv->value, type);
		render_json_string(s, kv->key.ptr, kv->key.len);
		sink_puts(s, ": {\"type\": \"");
		sink_put(s, type, tn);   /* letters, digits and brackets only */
		sink_puts(s, "\", \"value\": ");
	}
	render_value_json_from(s, &kv->value, i, from);
	sink_puts(s, ", \"file\": ");
	put_path(s, "metadata/", &kv->key, false, "");
	sink_putc(s, '}');
}

static void render_tensor(struct sink *s, const struct ggufs_model *m,
                          const struct modelfile *mf, uint64_t i)
{
	const struct gguf_tensor *t = model_tensor(m, i);
	char tbuf[16];
	sink_puts(s, "{\"name\": ");
	render_json_string(s, t->name.ptr, t->name.len);
	sink_puts(s, ", \"type\": ");
	put_cstr_json(s, ggml_type_name(t->type, tbuf));
	sink_puts(s, ", \"dims\": [");
	for (uint32_t d = 0; d < t->n_dims && d < GGUF_MAX_DIMS; d++) {
		if (d)
			sink_puts(s, ", ");
		put_u64(s, t->ne[d]);
	}
	sink_puts(s, "], \"offset\": ");
	put_u64(s, t->offset);
	if (mf) {
		sink_puts(s, ", \"model_offset\": ");
		put_u64(s, modelfile_tensor_offset(mf, m, i));
	}
	sink_puts(s, ", \"size\": ");
	put_u64(s, t->size);
	sink_puts(s, ", \"file\": ");
	put_path(s, "tensors/", &t->name, true, "");
	if (t->has_f32) {
		sink_puts(s, ", \"f32\": ");
		put_path(s, "tensors/", &t->name, true, ".f32");
		sink_puts(s, ", \"npy\": ");
		put_path(s, "tensors/", &t->name, true, ".npy");
	} else {
		sink_puts(s, ", \"f32\": null, \"npy\": null");
	}
	if (model_n_files(m) > 1) {
		struct model_file_info f;
		model_file(m, model_tensor_file(m, i), &f);
		sink_puts(s, ", \"shard\": ");
		put_cstr_json(s, base_name(f.path));
	}
	sink_putc(s, '}');
}

void render_json(struct sink *s, const struct ggufs_model *m, const struct modelfile *mf)
{
	render_json_from(s, m, mf, NULL);
}

/* A mark between two kvs or tensors, when one is due. */
static void mark_boundary(struct sink *s, uint64_t kv, uint64_t tensor)
{
	if (render_mark_due(s))
		render_mark_add(s, (struct render_mark){ .kv = kv, .tensor = tensor,
		                                         .elem = RENDER_MARK_NO_ELEM });
}

void render_json_from(struct sink *s, const struct ggufs_model *m, const struct modelfile *mf,
                      const struct render_mark *from)
{
	const struct gguf_file *f = model_meta(m);
	uint64_t i = 0, j = 0;
	if (!from) {
		sink_puts(s, "{\"file\": ");
		put_cstr_json(s, model_file_name(m));
		/* the model as one GGUF file, relative to the mount root (modelfile.h) */
		sink_puts(s, ", \"model\": \"model.gguf\", \"version\": ");
		put_u64(s, f->version);
		sink_puts(s, ", \"alignment\": ");
		put_u64(s, f->alignment);
		sink_puts(s, ", \"data_offset\": ");
		put_u64(s, f->data_offset);
		if (mf) {   /* where model.gguf's own data section starts */
			sink_puts(s, ", \"model_data_offset\": ");
			put_u64(s, mf->data_offset);
		}
		sink_puts(s, ",\n \"metadata\": {");
	} else if (from->kv < f->n_kv) {
		i = from->kv;
		if (from->elem != RENDER_MARK_NO_ELEM)   /* inside kv i's value */
			render_kv(s, &f->kv[i++], from->kv, from);
	} else {
		i = f->n_kv;
		j = from->tensor;
	}
	if (!from || from->kv < f->n_kv) {
		for (; i < f->n_kv; i++) {
			if (sink_done(s))
				return;
			mark_boundary(s, i, 0);
			sink_puts(s, i ? ",\n  " : "\n  ");
			render_kv(s, &f->kv[i], i, NULL);
		}
		sink_puts(s, f->n_kv ? "\n },\n \"tensors\": [" : "},\n \"tensors\": [");
	}
	for (; j < model_n_tensors(m); j++) {
		if (sink_done(s))
			return;
		mark_boundary(s, f->n_kv, j);
		sink_puts(s, j ? ",\n  " : "\n  ");
		render_tensor(s, m, mf, j);
	}
	sink_puts(s, model_n_tensors(m) ? "\n ]}\n" : "]}\n");
}
