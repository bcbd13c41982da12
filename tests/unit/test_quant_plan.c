/* The quant files' rules and plan (quant_rules.h, quant_plan.h) and quants.tsv
 * (render_quants.h) on models written here: what llama.cpp's quirks make of names, the
 * header read in any pieces, the cases where no file is made, hostile metadata. The
 * plan against llama.cpp itself is tests/quant/test_quant_plan.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "model.h"
#include "quant_plan.h"
#include "recipe_file.h"
#include "render_quants.h"
#include "scratch_dir.h"

/* A tensor of the models below: name, dims, F32 values (zeros). */
struct mt {
	const char *name;
	uint32_t n_dims;
	uint64_t ne[3];
};

/* Writes a GGUF v3 model of F32 tensors ts with the keys kv() writes (n_kv of them)
 * to scratch_dir/name, opens it. */
static struct ggufs_model *model_with(const char *name, void (*kv)(struct gw *), uint64_t n_kv,
                                      const struct mt *ts, size_t n)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, n, n_kv);
	kv(&w);
	uint64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t bytes = 4;
		for (uint32_t d = 0; d < ts[i].n_dims; d++)
			bytes *= ts[i].ne[d];
		gw_tensor(&w, ts[i].name, ts[i].n_dims, ts[i].ne, GGML_TYPE_F32, off);
		off += (bytes + 31) / 32 * 32;
	}
	gw_align(&w, 32);
	gw_fill(&w, 0, off);
	char path[128], err[GGUF_ERR_MAX];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, name);
	assert_true(gw_save(&w, path));
	gw_free(&w);
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		fail_msg("%s", err);
	return m;
}

/* general.architecture arch and the two keys every architecture but clip needs before
 * its block count (3 keys) */
static void arch_keys(struct gw *w, const char *arch)
{
	char key[64];
	gw_kv_str(w, "general.architecture", arch);
	snprintf(key, sizeof key, "%s.context_length", arch);
	gw_kv_u32(w, key, 64);
	snprintf(key, sizeof key, "%s.embedding_length", arch);
	gw_kv_u32(w, key, 64);
}

static void llama_keys(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "general.file_type", 0);
	gw_kv_u32(w, "llama.block_count", 2);
	gw_key(w, "llama.attention.layer_norm_rms_epsilon", GGUF_TYPE_FLOAT32);
	gw_f32(w, 1e-5f);
	gw_key(w, "test.flag", GGUF_TYPE_BOOL);
	gw_u8(w, 2);   /* a boolean byte that is neither 0 nor 1 */
	gw_key(w, "test.flags", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_BOOL, 3);
	gw_u8(w, 0), gw_u8(w, 7), gw_u8(w, 1);
	gw_kv_u32(w, "split.no", 0);
	gw_kv_str(w, "general.name", "t");
}

static const struct mt small[] = {
	{ "blk.1.ffn_down.weight", 2, { 64, 32 } },
	{ "token_embd.weight", 2, { 64, 10 } },
	{ "blk.0.attn_v.weight", 2, { 64, 32 } },
	{ "output_norm.weight", 1, { 64 } },
	{ "blk.0.row.weight", 2, { 64, 1 } },
	{ "abcde", 2, { 64, 2 } },
	{ "abcdef", 2, { 64, 2 } },
};

static const struct quant_plan *plan_of(const struct quant_set *qs, const char *name)
{
	for (size_t i = 0; i < qs->n; i++)
		if (!strcmp(qs->names[i].name, name))
			return qs->why[i][0] ? NULL : &qs->plans[i];
	fail_msg("no %s", name);
	return NULL;
}

/* The header: keys in the model's order less the replaced and split ones, the two
 * set last, booleans as 0 or 1; tensors by layer then name, a one-row 2-D tensor
 * written as 1-D; any piece of it reads as the same bytes as the whole. */
static void test_header(void **state)
{
	(void)state;
	struct ggufs_model *m = model_with("h.gguf", llama_keys, 10, small, 7);
	struct quant_set qs;
	assert_int_equal(quant_set_build(m, &(struct quant_set_opts){ 0 }, &qs), 0);
	const struct quant_plan *qp = plan_of(&qs, "Q8_0");
	assert_non_null(qp);
	uint8_t *whole = malloc(qp->data_offset);
	quant_plan_header_read(qp, 0, qp->data_offset, whole);
	assert_memory_equal(whole, "GGUF\3\0\0\0", 8);
	assert_int_equal(gguf_le64(whole + 8), 7);
	assert_int_equal(gguf_le64(whole + 16), 10);   /* 10 - file_type - split.no + 2 */
	struct gguf_file gf;
	char err[GGUF_ERR_MAX];
	/* the header parses as a file whose data section is all there (zeros) */
	uint8_t *img = calloc(1, qp->size);
	memcpy(img, whole, qp->data_offset);
	assert_int_equal(gguf_parse(img, qp->size, &gf, err), 0);
	static const char *const keys[] = { "general.architecture", "llama.context_length",
		"llama.embedding_length", "llama.block_count",
		"llama.attention.layer_norm_rms_epsilon", "test.flag", "test.flags",
		"general.name", "general.quantization_version", "general.file_type" };
	for (int i = 0; i < 10; i++)
		assert_memory_equal(gf.kv[i].key.ptr, keys[i], strlen(keys[i]));
	assert_int_equal(gf.kv[5].value.data[0], 1);
	assert_memory_equal(gf.kv[6].value.data, "\0\1\1", 3);
	assert_int_equal(gguf_le32(gf.kv[8].value.data), QUANT_VERSION);
	assert_int_equal(gguf_le32(gf.kv[9].value.data), QUANT_FTYPE_Q8_0);
	/* order: names without a layer (-1) first, then blk.0, blk.1 */
	static const char *const order[] = { "abcde", "abcdef", "output_norm.weight",
		"token_embd.weight", "blk.0.attn_v.weight", "blk.0.row.weight",
		"blk.1.ffn_down.weight" };
	for (int i = 0; i < 7; i++)
		assert_memory_equal(gf.tensors[i].name.ptr, order[i], strlen(order[i]));
	/* a 5-byte name counts as ending in "weight" (llama.cpp's rfind), a 6-byte one not */
	assert_int_equal(gf.tensors[0].type, GGML_TYPE_Q8_0);
	assert_int_equal(gf.tensors[1].type, GGML_TYPE_F32);
	assert_int_equal(gf.tensors[5].n_dims, 1);
	assert_int_equal(gf.tensors[5].type, GGML_TYPE_F32);
	/* tied embeddings (no output.weight): token_embd gets the output's Q8_0 */
	assert_int_equal(gf.tensors[3].type, GGML_TYPE_Q8_0);
	gguf_file_free(&gf);
	/* every window reads as the whole does */
	uint8_t *piece = malloc(qp->data_offset);
	for (uint64_t off = 0; off < qp->data_offset; off += 7)
		for (uint64_t len = 1; off + len <= qp->data_offset && len < 200; len += 13) {
			quant_plan_header_read(qp, off, len, piece);
			assert_memory_equal(piece, whole + off, len);
		}
	free(piece);
	free(img);
	free(whole);
	quant_set_free(&qs);
	model_close(m);
}

/* sscanf("blk.%d.")'s reading of layers: white space and signs, saturation, none. */
static void test_order(void **state)
{
	(void)state;
	static const char *const names[] = { "blk.10.a", "blk.9.a", "blk.-1.b", "blk.+3.a",
		"blk. 2.a", "blk.x", "output.weight", "blk.99999999999999999999.a", "blk.2.b",
		"blk.4294967297.c", "blk.-99999999999999999999.c" };
	/* layers 10, 9, -1, 3, 2, -1 (none), -1, -1 (LONG_MAX as int), 2, 1 (2^32 + 1 as
	 * int), 0 (LONG_MIN as int): by layer, then by bytes */
	static const uint64_t want[] = { 2, 7, 5, 6, 10, 9, 4, 8, 3, 1, 0 };
	enum { N = sizeof names / sizeof names[0] };
	struct gguf_tensor t[N];
	const struct gguf_tensor *tp[N];
	for (int i = 0; i < N; i++) {
		t[i] = (struct gguf_tensor){ .name = { names[i], strlen(names[i]) } };
		tp[i] = &t[i];
	}
	uint64_t order[N];
	char err[GGUF_ERR_MAX];
	assert_int_equal(quant_rules_order(tp, N, order, err), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(order[i], want[i]);
	/* a name ggml cannot hold */
	static const char long_name[] = "blk.0.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	t[0].name = (struct gguf_str){ long_name, strlen(long_name) };
	assert_int_equal(quant_rules_order(tp, N, order, err), -1);
	assert_non_null(strstr(err, "63 bytes"));
}

static void keys_no_blocks(struct gw *w)
{
	arch_keys(w, "llama");
}

static void keys_string_blocks(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_str(w, "llama.block_count", "2");
}

static void keys_many_blocks(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 513);
}

static void keys_bad_heads(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_key(w, "llama.attention.head_count", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_UINT32, 3);
	gw_u32(w, 1), gw_u32(w, 1), gw_u32(w, 1);
}

static void keys_nested(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_key(w, "test.nested", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_ARRAY, 1);
	gw_array(w, GGUF_TYPE_UINT8, 1);
	gw_u8(w, 1);
}

static void keys_experts(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "llama.expert_count", 4);
}

static void keys_unknown_arch(struct gw *w)
{
	gw_kv_str(w, "general.architecture", "nosucharch");
	gw_kv_u32(w, "nosucharch.block_count", 2);
}

/* named in llama.cpp's LLM_ARCH_NAMES, but llama_model_create makes no model of it */
static void keys_gptj(struct gw *w)
{
	gw_kv_str(w, "general.architecture", "gptj");
	gw_kv_u32(w, "gptj.block_count", 2);
}

/* LLM_ARCH_UNKNOWN's own name */
static void keys_unknown_name(struct gw *w)
{
	gw_kv_str(w, "general.architecture", "(unknown)");
	gw_kv_u32(w, "(unknown).block_count", 2);
}

static void keys_no_context(struct gw *w)
{
	gw_kv_str(w, "general.architecture", "llama");
	gw_kv_u32(w, "llama.block_count", 2);
}

static void keys_no_embedding(struct gw *w)
{
	gw_kv_str(w, "general.architecture", "llama");
	gw_kv_u32(w, "llama.context_length", 64);
	gw_kv_u32(w, "llama.block_count", 2);
}

static void keys_name_u32(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "general.name", 1);
}

static void keys_freq_base_u32(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "llama.rope.freq_base", 10000);
}

static void keys_rope_type(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_str(w, "llama.rope.scaling.type", "cubic");
}

/* 4 heads of 64 values: heads of 16, which a llama's rotation must span */
static void keys_n_rot(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "llama.attention.head_count", 4);
	gw_kv_u32(w, "llama.rope.dimension_count", 8);
}

static void keys_groups(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "llama.expert_count", 4);
	gw_kv_u32(w, "llama.expert_used_count", 2);
	gw_kv_u32(w, "llama.expert_group_count", 4);
}

static void keys_labels_f32(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_key(w, "llama.classifier.output_labels", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_FLOAT32, 1);
	gw_f32(w, 0);
}

/* a llama without its norm's epsilon, which llama's load_arch_hparams requires */
static void keys_no_eps(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
}

static void keys_eps_u32(struct gw *w)
{
	arch_keys(w, "llama");
	gw_kv_u32(w, "llama.block_count", 2);
	gw_kv_u32(w, "llama.attention.layer_norm_rms_epsilon", 0);
}

/* Metadata llama.cpp does not load makes no file, each NAME saying why. */
static void test_no_file(void **state)
{
	(void)state;
	static const struct {
		void (*kv)(struct gw *);
		uint64_t n_kv;
		const char *why;
	} cases[] = {
		{ keys_no_blocks, 3, "key not found in model: llama.block_count" },
		{ keys_string_blocks, 4, "key llama.block_count has wrong type str but expected "
		                         "type u32" },
		{ keys_many_blocks, 4, "llama.block_count is 513: llama.cpp asserts 1 to 512" },
		{ keys_bad_heads, 5, "key llama.attention.head_count has wrong array length; "
		                     "expected 2, got 3" },
		{ keys_nested, 5, "array of arrays" },
		{ keys_experts, 5, "do not agree" },
		{ keys_unknown_arch, 2, "unknown model architecture: 'nosucharch'" },
		{ keys_gptj, 2, "unsupported model architecture: 'gptj'" },
		{ keys_unknown_name, 2, "unknown model architecture: '(unknown)'" },
		{ keys_no_context, 2, "key not found in model: llama.context_length" },
		{ keys_no_embedding, 3, "key not found in model: llama.embedding_length" },
		{ keys_name_u32, 5, "key general.name has wrong type u32 but expected type str" },
		{ keys_freq_base_u32, 5, "key llama.rope.freq_base has wrong type u32 but "
		                         "expected type f32" },
		{ keys_rope_type, 5, "llama.rope.scaling.type is not none, linear, yarn or "
		                     "longrope" },
		{ keys_n_rot, 6, "invalid n_rot: 8, expected 16" },
		{ keys_groups, 7, "expert_group_count below expert_count" },
		{ keys_labels_f32, 5, "llama.classifier.output_labels has wrong array element "
		                      "type f32" },
		{ keys_no_eps, 4, "key not found in model: llama.attention.layer_norm_rms_epsilon" },
		{ keys_eps_u32, 5, "key llama.attention.layer_norm_rms_epsilon has wrong type u32 "
		                   "but expected type f32" },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		struct ggufs_model *m = model_with("n.gguf", cases[c].kv, cases[c].n_kv, small, 7);
		struct quant_set qs;
		assert_int_equal(quant_set_build(m, &(struct quant_set_opts){ 0 }, &qs), 0);
		for (size_t i = 0; i < qs.n; i++) {
			if (!strstr(qs.why[i], cases[c].why))
				fail_msg("case %zu %s: '%s'", c, qs.names[i].name, qs.why[i]);
		}
		quant_set_free(&qs);
		model_close(m);
	}
}

/* A recipe's plan: BASE's with its overrides (the first pattern that matches), and a
 * refusal, naming the tensor, where a pattern's search gives up. */
static void test_recipe(void **state)
{
	(void)state;
	static const struct mt ts[] = {
		{ "token_embd.weight", 2, { 256, 10 } },
		{ "blk.0.attn_v.weight", 2, { 256, 32 } },
		{ "blk.1.ffn_down.weight", 2, { 256, 32 } },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.weight", 2, { 256, 2 } },
	};
	struct ggufs_model *m = model_with("r.gguf", llama_keys, 10, ts, 4);
	const char *text = "A Q8_0 --tensor-type attn_v=q4_0 --tensor-type attn=q5_0 "
	                   "--tensor-type ^a=q4_k\n"
	                   "B Q8_0 --tensor-type \"^(a|a)*[bc]=q4_0\"\n";
	struct recipe_set rs;
	char err[GGUF_ERR_MAX];
	assert_int_equal(recipes_parse(text, strlen(text), "f", &rs, err), 0);
	struct quant_params p;
	recipe_params(recipe_find(&rs, "A"), &p);
	struct quant_plan qp;
	if (quant_plan_build(m, &p, &qp, err) != 0)
		fail_msg("%s", err);
	assert_int_equal(qp.ftype, QUANT_FTYPE_Q8_0);
	for (uint64_t i = 0; i < qp.n_tensors; i++) {
		const struct gguf_tensor *t = model_tensor(m, qp.tensors[i].src);
		const uint32_t want = t->name.ptr[0] == 'a' ? GGML_TYPE_Q4_K
		                    : memmem(t->name.ptr, t->name.len, "attn_v", 6) ? GGML_TYPE_Q4_0
		                    : GGML_TYPE_Q8_0;
		assert_int_equal(qp.tensors[i].type, want);
	}
	quant_plan_free(&qp);
	recipe_params(recipe_find(&rs, "B"), &p);
	assert_int_equal(quant_plan_build(m, &p, &qp, err), -1);
	assert_string_equal(err, "a --tensor-type regex took too many steps on tensor "
	                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.weight");
	quant_plan_free(&qp);
	recipes_free(&rs);
	model_close(m);
}

/* quants.tsv of a model of an architecture llama.cpp does not know: no NAME, each
 * one's comment line giving llama.cpp's reason. */
static void test_tsv_unknown_arch(void **state)
{
	(void)state;
	struct ggufs_model *m = model_with("u.gguf", keys_unknown_arch, 2, small, 7);
	struct quant_set qs;
	assert_int_equal(quant_set_build(m, &(struct quant_set_opts){ 0 }, &qs), 0);
	struct sink c = sink_counter();
	render_quants_tsv(&c, &qs);
	char *text = calloc(1, c.pos + 1);
	struct sink s = sink_window(text, 0, c.pos);
	render_quants_tsv(&s, &qs);
	const char *head = "name\tftype\tbytes\tbits_per_weight\ttensor_types\n";
	assert_int_equal(strncmp(text, head, strlen(head)), 0);
	/* after the header, comment lines only: one per NAME */
	size_t lines = 0;
	for (const char *l = text + strlen(head); *l; l = strchr(l, '\n') + 1, lines++)
		assert_int_equal(*l, '#');
	assert_int_equal(lines, qs.n);
	assert_non_null(strstr(text, "\n# Q4_K_M: not made: unknown model architecture: "
	                             "'nosucharch'\n"));
	free(text);
	quant_set_free(&qs);
	model_close(m);
}

/* quants.tsv: a header, one line per NAME made with its exact size, bits per weight
 * and types; Q1_0 (128-value blocks, no fallback) not made from 64-value rows. */
static void test_tsv(void **state)
{
	(void)state;
	struct ggufs_model *m = model_with("t.gguf", llama_keys, 10, small, 7);
	struct quant_set qs;
	assert_int_equal(quant_set_build(m, &(struct quant_set_opts){ 0 }, &qs), 0);
	struct sink c = sink_counter();
	render_quants_tsv(&c, &qs);
	char *text = calloc(1, c.pos + 1);
	struct sink s = sink_window(text, 0, c.pos);
	render_quants_tsv(&s, &qs);
	assert_int_equal(strncmp(text, "name\tftype\tbytes\tbits_per_weight\ttensor_types\n", 46), 0);
	char line[256];
	/* F32: every tensor stays f32: 32 bits a value, the size the plan's */
	snprintf(line, sizeof line, "\nF32\t0\t%llu\t32.0000\tf32:7\n",
	         (unsigned long long)plan_of(&qs, "F32")->size);
	assert_non_null(strstr(text, line));
	/* Q8_0: abcde, token_embd, attn_v, ffn_down in q8_0; 34 bytes a 32 values */
	const struct quant_plan *q8 = plan_of(&qs, "Q8_0");
	uint64_t q8_vals = 64 * 2 + 64 * 10 + 64 * 32 * 2, f32_vals = 64 * 2 + 64 + 64;
	double bpw = (double)(q8_vals / 32 * 34 + f32_vals * 4) * 8 / (double)(q8_vals + f32_vals);
	snprintf(line, sizeof line, "\nQ8_0\t7\t%llu\t%.4f\tf32:3,q8_0:4\n",
	         (unsigned long long)q8->size, bpw);
	assert_non_null(strstr(text, line));
	assert_null(strstr(text, "\nQ1_0\t"));
	assert_non_null(strstr(text, "\n# Q1_0: not made: no tensor type fallback is defined "
	                             "for type q1_0\n"));
	free(text);
	quant_set_free(&qs);
	model_close(m);
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_header),
	cmocka_unit_test(test_order),
	cmocka_unit_test(test_no_file), cmocka_unit_test(test_recipe),
	cmocka_unit_test(test_tsv),
	cmocka_unit_test(test_tsv_unknown_arch))
