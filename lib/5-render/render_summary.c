#include "render_summary.h"
#include "render_size.h"
#include "render_value.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *summary_ftype_name(uint64_t ftype)
{
	/* llama.h's enum llama_ftype and llama_ftype_name(); the gaps are ids llama.cpp
	 * has removed */
	switch (ftype) {
	case 0: return "all F32";
	case 1: return "F16";
	case 2: return "Q4_0";
	case 3: return "Q4_1";
	case 7: return "Q8_0";
	case 8: return "Q5_0";
	case 9: return "Q5_1";
	case 10: return "Q2_K - Medium";
	case 11: return "Q3_K - Small";
	case 12: return "Q3_K - Medium";
	case 13: return "Q3_K - Large";
	case 14: return "Q4_K - Small";
	case 15: return "Q4_K - Medium";
	case 16: return "Q5_K - Small";
	case 17: return "Q5_K - Medium";
	case 18: return "Q6_K";
	case 19: return "IQ2_XXS - 2.0625 bpw";
	case 20: return "IQ2_XS - 2.3125 bpw";
	case 21: return "Q2_K - Small";
	case 22: return "IQ3_XS - 3.3 bpw";
	case 23: return "IQ3_XXS - 3.0625 bpw";
	case 24: return "IQ1_S - 1.5625 bpw";
	case 25: return "IQ4_NL - 4.5 bpw";
	case 26: return "IQ3_S - 3.4375 bpw";
	case 27: return "IQ3_S mix - 3.66 bpw";
	case 28: return "IQ2_S - 2.5 bpw";
	case 29: return "IQ2_M - 2.7 bpw";
	case 30: return "IQ4_XS - 4.25 bpw";
	case 31: return "IQ1_M - 1.75 bpw";
	case 32: return "BF16";
	case 36: return "TQ1_0 - 1.69 bpw ternary";
	case 37: return "TQ2_0 - 2.06 bpw ternary";
	case 38: return "MXFP4 MoE";
	case 39: return "NVFP4";
	case 40: return "Q1_0";
	case 41: return "Q2_0";
	default: return NULL;
	}
}

size_t summary_count_text(uint64_t n, char buf[32])
{
	double d = (double)n;
	int len;
	if (d >= 1e12)
		len = snprintf(buf, 32, "%.2f T", d * 1e-12);
	else if (d >= 1e9)
		len = snprintf(buf, 32, "%.2f B", d * 1e-9);
	else if (d >= 1e6)
		len = snprintf(buf, 32, "%.2f M", d * 1e-6);
	else
		len = snprintf(buf, 32, "%.2f K", d * 1e-3);
	return (size_t)len;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void putf(struct sink *s, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	sink_put(s, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void label(struct sink *s, const char *name)
{
	putf(s, "%-18s", name);
}

/* Arrays longer than this are summarized by type and count, not listed. */
#define SUMMARY_ARRAY_LIST_MAX 64

/* Any metadata value on one line: scalars as in metadata/, strings escaped, short
 * arrays (per-layer head counts) as JSON; "n/a" when the key is absent. */
static void summary_value(struct sink *s, const struct gguf_kv *kv)
{
	if (!kv) {
		sink_puts(s, "n/a");
		return;
	}
	const struct gguf_value *v = &kv->value;
	char buf[RENDER_SCALAR_MAX];
	if (v->type == GGUF_TYPE_STRING) {
		render_escaped(s, (const char *)v->data + 8, gguf_le64(v->data));
	} else if (v->type == GGUF_TYPE_ARRAY) {
		if (v->count <= SUMMARY_ARRAY_LIST_MAX) {
			render_value_json(s, v);
		} else {
			char type[RENDER_TYPE_MAX];
			render_value_type(v, type);
			putf(s, "%s, %" PRIu64 " elements", type, v->count);
		}
	} else {
		size_t n = render_scalar(v->type, v->data, buf);
		sink_put(s, buf, n);
	}
}

/* The kv "ARCH.suffix" (llama.cpp's per-architecture keys), or NULL. */
static const struct gguf_kv *arch_kv(const struct gguf_file *f, const struct gguf_str *arch,
                                     const char *suffix)
{
	char key[256];
	if (!arch || arch->len > 200 || memchr(arch->ptr, '\0', arch->len))
		return NULL;
	snprintf(key, sizeof key, "%.*s.%s", (int)arch->len, arch->ptr, suffix);
	return gguf_find_kv(f, key);
}

/* general.architecture of f as a string, or false. */
static bool arch_of(const struct gguf_file *f, struct gguf_str *arch)
{
	const struct gguf_kv *kv = gguf_find_kv(f, "general.architecture");
	if (!kv || kv->value.type != GGUF_TYPE_STRING)
		return false;
	arch->len = gguf_le64(kv->value.data);
	arch->ptr = (const char *)kv->value.data + 8;
	return true;
}

bool summary_arch_uint(const struct gguf_file *f, const char *suffix, uint64_t *out)
{
	struct gguf_str arch;
	return arch_of(f, &arch) && gguf_kv_uint(arch_kv(f, &arch, suffix), out);
}

/* Element l of a per-layer integer key (an integer array of one element per layer),
 * or its one value for every layer (a scalar): false when absent or not integers. */
static bool layer_uint(const struct gguf_kv *kv, uint64_t layers, uint64_t l, uint64_t *out)
{
	if (!kv)
		return false;
	if (kv->value.type != GGUF_TYPE_ARRAY)
		return gguf_kv_uint(kv, out);
	size_t es = gguf_vtype_size(kv->value.elem_type);
	if (kv->value.count != layers || es == 0 || l >= layers)
		return false;
	/* the element as a value of its own */
	struct gguf_kv elem = { .value = { .type = kv->value.elem_type,
	                                   .data = kv->value.data + l * es, .size = es } };
	return gguf_kv_uint(&elem, out);
}

/* ARCH.attention.SUFFIX (key_length or value_length), else embedding_length divided by
 * head_count (as llama.cpp defaults both): false when neither is there. */
static bool head_dim(const struct gguf_file *f, const struct gguf_str *arch, const char *suffix,
                     uint64_t *out)
{
	if (gguf_kv_uint(arch_kv(f, arch, suffix), out))
		return true;
	uint64_t embd, heads;
	if (!gguf_kv_uint(arch_kv(f, arch, "embedding_length"), &embd) ||
	    !gguf_kv_uint(arch_kv(f, arch, "attention.head_count"), &heads) || heads == 0)
		return false;
	*out = embd / heads;
	return true;
}

bool summary_kv_bytes(const struct gguf_file *f, uint64_t *per_token)
{
	struct gguf_str arch;
	uint64_t layers, k_dim, v_dim;
	if (!arch_of(f, &arch) || !gguf_kv_uint(arch_kv(f, &arch, "block_count"), &layers) ||
	    layers == 0 || layers > (UINT64_C(1) << 20) ||
	    !head_dim(f, &arch, "attention.key_length", &k_dim) ||
	    !head_dim(f, &arch, "attention.value_length", &v_dim))
		return false;
	const struct gguf_kv *kv_heads = arch_kv(f, &arch, "attention.head_count_kv");
	if (!kv_heads)   /* llama.cpp: as many KV heads as heads */
		kv_heads = arch_kv(f, &arch, "attention.head_count");
	uint64_t total = 0, dims;
	if (__builtin_add_overflow(k_dim, v_dim, &dims))
		return false;
	for (uint64_t l = 0; l < layers; l++) {
		uint64_t heads, layer;
		/* 2 bytes a value: f16, llama.cpp's default cache type */
		if (!layer_uint(kv_heads, layers, l, &heads) ||
		    __builtin_mul_overflow(heads, dims, &layer) ||
		    __builtin_mul_overflow(layer, 2, &layer) ||
		    __builtin_add_overflow(total, layer, &total))
			return false;
	}
	*per_token = total;
	return true;
}

/* A byte count as every line of ggufs gives one (render_size: MB of 10^6 bytes, as
 * --check's summary says the same tensors' bytes). */
static void put_bytes(struct sink *s, double bytes)
{
	char buf[RENDER_SIZE_MAX];
	putf(s, "%s", render_size(bytes, buf));
}

/* Tensor counts per ggml type. Known ids have a row each; ids ggufs does not know get
 * a row each for the first UNKNOWN_ROWS of them and share one "other" row after that,
 * so a hostile file cannot make the table (or the work) grow with its tensor count. */
#define UNKNOWN_ROWS 8
struct type_row {
	uint32_t id;
	uint64_t count;
	uint64_t bytes;
};
struct type_table {
	struct type_row known[GGML_TYPE_COUNT];
	struct type_row unknown[UNKNOWN_ROWS];
	uint32_t n_unknown;
	struct type_row other;
};

static void table_add(struct type_table *tt, uint32_t id, uint64_t bytes)
{
	struct type_row *r = NULL;
	if (id < GGML_TYPE_COUNT) {
		r = &tt->known[id];
	} else {
		for (uint32_t i = 0; i < tt->n_unknown && !r; i++)
			if (tt->unknown[i].id == id)
				r = &tt->unknown[i];
		if (!r && tt->n_unknown < UNKNOWN_ROWS) {
			r = &tt->unknown[tt->n_unknown++];
			r->id = id;
		}
		if (!r)
			r = &tt->other;
	}
	r->count++;
	r->bytes += bytes;
}

static void table_row(struct sink *s, const char *name, const struct type_row *r)
{
	putf(s, "%-12s %8" PRIu64 " %16" PRIu64 "\n", name, r->count, r->bytes);
}

/* The lines about the model's files: its name, where it came from, its shards, what
 * model.gguf is, the GGUF version. */
static void summary_files(struct sink *s, const struct ggufs_model *m)
{
	label(s, "file:");
	const char *file_name = model_file_name(m), *url = model_url(m);
	const uint32_t n_files = model_n_files(m);
	render_escaped(s, file_name, strlen(file_name));
	sink_putc(s, '\n');
	if (url) {
		label(s, "source:");
		render_escaped(s, url, strlen(url));
		sink_putc(s, '\n');
	}
	if (n_files > 1) {
		/* every shard, in order, whichever one the mount was given */
		label(s, "shards:");
		putf(s, "%" PRIu32 "\n", n_files);
		for (uint32_t i = 0; i < n_files; i++) {
			struct model_file_info f;
			model_file(m, i, &f);
			const char *slash = strrchr(f.path, '/');
			const char *name = slash ? slash + 1 : f.path;
			putf(s, "  ");
			render_escaped(s, name, strlen(name));
			putf(s, " (%" PRIu64 " bytes)\n", f.size);
		}
	}
	/* the file a GGUF tool loads (modelfile.h): this one, or the shards merged */
	label(s, "model file:");
	/* a model seen with edited metadata (overlay.h): its meta is not the file's own */
	bool edited = model_edited(m);
	if (n_files > 1)
		putf(s, "model.gguf (the %" PRIu32 " shards merged into one GGUF%s)\n", n_files,
		     edited ? ", with the metadata edits" : "");
	else if (edited)
		putf(s, "model.gguf (this file with the metadata edits)\n");
	else
		putf(s, "model.gguf (this file as it is)\n");
	label(s, "GGUF version:");
	putf(s, "%" PRIu32 "\n", model_meta(m)->version);
}

/* The lines about the model itself, from its metadata and tensors: architecture, name,
 * file type, sizes, hyperparameters, vocabulary, chat template. */
static void summary_model(struct sink *s, const struct ggufs_model *m, uint64_t n_elements,
                          uint64_t n_bytes)
{
	const struct gguf_file *f = model_meta(m);
	const struct gguf_kv *arch = gguf_find_kv(f, "general.architecture");
	const struct gguf_str *arch_str = NULL;
	struct gguf_str arch_s;
	if (arch && arch->value.type == GGUF_TYPE_STRING) {
		arch_s.len = gguf_le64(arch->value.data);
		arch_s.ptr = (const char *)arch->value.data + 8;
		arch_str = &arch_s;
	}
	label(s, "architecture:");
	summary_value(s, arch);
	sink_putc(s, '\n');
	label(s, "name:");
	summary_value(s, gguf_find_kv(f, "general.name"));
	sink_putc(s, '\n');

	label(s, "file type:");
	const struct gguf_kv *ft = gguf_find_kv(f, "general.file_type");
	uint64_t ftv;
	if (gguf_kv_uint(ft, &ftv) && summary_ftype_name(ftv))
		putf(s, "%s\n", summary_ftype_name(ftv));
	else if (gguf_kv_uint(ft, &ftv))
		putf(s, "unknown (%" PRIu64 ")\n", ftv);
	else
		putf(s, "n/a\n");

	char cnt[32];
	summary_count_text(n_elements, cnt);
	label(s, "parameters:");
	putf(s, "%s\n", cnt);
	label(s, "tensor data:");
	put_bytes(s, (double)n_bytes);
	if (n_elements)
		putf(s, " (%.2f bits per weight)\n", (double)n_bytes * 8.0 / (double)n_elements);
	else
		putf(s, "\n");
	label(s, "tensors:");
	putf(s, "%" PRIu64 "\n", model_n_tensors(m));

	static const struct { const char *label, *suffix; } hparams[] = {
		{ "context length:", "context_length" },
		{ "embedding length:", "embedding_length" },
		{ "layers:", "block_count" },
		{ "heads:", "attention.head_count" },
		{ "kv heads:", "attention.head_count_kv" },
	};
	for (size_t i = 0; i < sizeof hparams / sizeof hparams[0]; i++) {
		label(s, hparams[i].label);
		summary_value(s, arch_kv(f, arch_str, hparams[i].suffix));
		sink_putc(s, '\n');
	}

	/* what a context costs beside the weights: the f16 K and V of every layer */
	uint64_t kv_bytes, ctx;
	label(s, "kv cache (f16):");
	if (summary_kv_bytes(f, &kv_bytes)) {
		putf(s, "%" PRIu64 " bytes per token", kv_bytes);
		if (summary_arch_uint(f, "context_length", &ctx)) {
			putf(s, ", ");
			put_bytes(s, (double)kv_bytes * (double)ctx);
			putf(s, " at the context length (%" PRIu64 ")", ctx);
		}
		sink_putc(s, '\n');
	} else {
		putf(s, "n/a\n");
	}

	const struct gguf_kv *tok = gguf_find_kv(f, "tokenizer.ggml.tokens");
	label(s, "vocabulary size:");
	if (tok && tok->value.type == GGUF_TYPE_ARRAY)
		putf(s, "%" PRIu64 "\n", tok->value.count);
	else
		putf(s, "n/a\n");
	label(s, "chat template:");
	putf(s, "%s\n", gguf_find_kv(f, "tokenizer.chat_template") ? "yes" : "no");
}

void render_summary(struct sink *s, const struct ggufs_model *m)
{
	struct type_table tt;
	memset(&tt, 0, sizeof tt);
	uint64_t n_elements = 0, n_bytes = 0;
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *t = model_tensor(m, i);
		n_elements += t->n_elements;
		n_bytes += t->size;
		table_add(&tt, t->type, t->size);
	}

	summary_files(s, m);
	summary_model(s, m, n_elements, n_bytes);

	putf(s, "\n%-12s %8s %16s\n", "type", "tensors", "bytes");
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		if (tt.known[id].count) {
			char nb[16];
			table_row(s, ggml_type_name(id, nb), &tt.known[id]);
		}
	}
	for (uint32_t i = 0; i < tt.n_unknown; i++) {
		char nb[16];
		table_row(s, ggml_type_name(tt.unknown[i].id, nb), &tt.unknown[i]);
	}
	if (tt.other.count)
		table_row(s, "other", &tt.other);
}
