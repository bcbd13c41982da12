/* A model folder's config.json and tensor names as the converter reads them
 * (lib/3-safetensors: st_config.h, st_names.h, st_permute.h): llama-spm-f32's
 * hyperparameter keys byte for byte the converter's (its output's header, in
 * tests/data/st), its tensor names mapped to the reference's, transformers' defaults
 * and the converter's key lists, the q/k permute's rows, and every refusal in one line
 * naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_config.h"
#include "st_header.h"
#include "st_names.h"
#include "st_permute.h"

#define ST_DATA TEST_DATA "/st"

/* The whole file at path, its length into *len (a NUL after it). */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	char *p = malloc((size_t)n + 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	p[n] = '\0';
	*len = (size_t)n;
	return p;
}

static void test_reference_hparams(void **state)
{
	(void)state;
	size_t len, head_len;
	char *json = slurp(ST_DATA "/llama-spm-f32/config.json", &len);
	char *head = slurp(ST_DATA "/llama-spm-f32.auto.gguf", &head_len);
	struct st_config c;
	char err[GGUF_ERR_MAX];
	assert_int_equal(st_config_parse(json, len, "config.json", &c, err), 0);
	assert_string_equal(c.hf_arch, "LlamaForCausalLM");
	assert_string_equal(c.names->arch, "llama");
	assert_int_equal(c.block_count, 2);
	assert_int_equal(c.n_head, 4);
	assert_int_equal(c.n_head_kv, 2);
	assert_int_equal(c.rope_dim, 16);
	struct st_kv kv = { 0 };
	st_config_write_hparams(&c, ST_FTYPE_F16, &kv);
	assert_false(kv.b.failed);
	assert_int_equal(kv.n, 13);
	/* the converter's keys from llama.block_count on: the same bytes */
	static const char first[] = "\x11\0\0\0\0\0\0\0llama.block_count";
	const char *at = memmem(head, head_len, first, sizeof first - 1);
	assert_non_null(at);
	assert_true(kv.b.len <= head_len - (uint64_t)(at - head));
	assert_memory_equal(kv.b.p, at, kv.b.len);
	/* and the next key is the converter's next (general.quantization_version) */
	static const char next[] = "\x1c\0\0\0\0\0\0\0general.quantization_version";
	assert_memory_equal(at + kv.b.len, next, sizeof next - 1);
	free(kv.b.p);
	st_config_free(&c);
	free(json);
	free(head);
}

/* json parses; its fields into *c (freed by the caller). */
static void parsed(const char *json, struct st_config *c)
{
	char err[GGUF_ERR_MAX];
	if (st_config_parse(json, strlen(json), "config.json", c, err) != 0)
		fail_msg("refused: %s", err);
}

static void test_defaults_and_key_lists(void **state)
{
	(void)state;
	struct st_config c;
	/* LlamaConfig's defaults, head_dim and num_key_value_heads as it fills them */
	parsed("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\"}", &c);
	assert_int_equal(c.block_count, 32);
	assert_int_equal(c.n_embd, 4096);
	assert_int_equal(c.n_head, 32);
	assert_int_equal(c.n_head_kv, 32);
	assert_int_equal(c.rope_dim, 128);
	assert_int_equal(c.vocab_size, 32000);
	struct st_kv kv = { 0 };
	st_config_write_hparams(&c, ST_FTYPE_F32, &kv);
	assert_int_equal(kv.n, 13);
	assert_non_null(memmem(kv.b.p, kv.b.len, "llama.context_length\x04\0\0\0\x00\x08\0\0", 28));
	free(kv.b.p);
	st_config_free(&c);
	/* MistralConfig's: eight key/value heads; a null head_dim stays null (no key and
	 * value lengths: as the converter's mistral-spm reference has none), the rope
	 * dimension hidden / heads */
	parsed("{\"architectures\":[\"MistralForCausalLM\"],\"model_type\":\"mistral\","
	       "\"hidden_size\":64,\"num_attention_heads\":4,\"head_dim\":null}", &c);
	assert_int_equal(c.n_head_kv, 8);
	assert_int_equal(c.rope_dim, 16);
	assert_string_equal(c.names->arch, "llama");
	kv = (struct st_kv){ 0 };
	st_config_write_hparams(&c, ST_FTYPE_F32, &kv);
	assert_int_equal(kv.n, 11);
	assert_null(memmem(kv.b.p, kv.b.len, "key_length", 10));
	free(kv.b.p);
	st_config_free(&c);
	/* the converter's lists: n_layers before num_hidden_layers; a null is absent (no
	 * context length: every name of its list null or missing), is_causal false */
	parsed("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
	       "\"n_layers\":3,\"num_hidden_layers\":5,\"max_position_embeddings\":null,"
	       "\"is_causal\":false}", &c);
	assert_int_equal(c.block_count, 3);
	kv = (struct st_kv){ 0 };
	st_config_write_hparams(&c, ST_FTYPE_F32, &kv);
	assert_int_equal(kv.n, 13);   /* one less (context), one more (causal) */
	assert_null(memmem(kv.b.p, kv.b.len, "context_length", 14));
	assert_non_null(memmem(kv.b.p, kv.b.len, "llama.attention.causal\x07\0\0\0\0", 27));
	free(kv.b.p);
	st_config_free(&c);
}

/* json is refused with a line naming the file and holding why. */
static void refused(const char *json, const char *why)
{
	struct st_config c;
	char err[GGUF_ERR_MAX] = "";
	if (st_config_parse(json, strlen(json), "config.json", &c, err) == 0)
		fail_msg("accepted: %s", json);
	if (strncmp(err, "config.json: ", 13) != 0 || !strstr(err, why) || strchr(err, '\n'))
		fail_msg("'%s' for %s, wanted '%s'", err, json, why);
}

#define LLAMA "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","

static void test_refusals(void **state)
{
	(void)state;
	refused("", "not JSON");
	refused("[1]", "not a JSON object");
	refused("{}", "no architecture");
	refused("{\"architectures\":[]}", "no architecture");
	refused("{\"architectures\":[7]}", "no architecture");
	refused("{\"architectures\":[\"Qwen2ForCausalLM\"]}",
	        "architecture 'Qwen2ForCausalLM' is not one ggufs converts");
	refused("{\"architectures\":[\"LlamaForCausalLM\"]}", "model_type '(none)'");
	refused("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"qwen2\"}",
	        "model_type 'qwen2' (architecture LlamaForCausalLM)");
	refused(LLAMA "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2}}",
	        "'rope_scaling' (architecture LlamaForCausalLM) is not converted by ggufs yet");
	refused(LLAMA "\"num_local_experts\":4}", "'num_local_experts'");
	refused(LLAMA "\"num_hidden_layers\":0}", "'num_hidden_layers' is not a count from 1");
	refused(LLAMA "\"num_hidden_layers\":5000}", "5000 blocks, more than the 4096");
	refused(LLAMA "\"num_hidden_layers\":null}", "lacks 'n_layers'");
	/* a null is the converter's None: the next name of the list is not looked at */
	refused(LLAMA "\"num_hidden_layers\":null,\"n_layer\":2}", "lacks 'n_layers'");
	refused(LLAMA "\"n_layers\":2.0}", "'n_layers' is not a count");
	refused(LLAMA "\"num_attention_heads\":0}", "'num_attention_heads' is not a count");
	refused(LLAMA "\"hidden_size\":-64}", "'hidden_size' is not a count");
	refused(LLAMA "\"vocab_size\":4294967296}", "'vocab_size' is not a count");
	refused(LLAMA "\"head_dim\":\"16\"}", "'head_dim' is not a count");
	refused(LLAMA "\"max_position_embeddings\":true}", "'max_position_embeddings' is not");
	refused(LLAMA "\"rope_theta\":\"1e4\"}", "'rope_theta' is not a number");
	refused(LLAMA "\"rms_norm_eps\":[1]}", "'rms_norm_eps' is not a number");
	refused(LLAMA "\"layer_norm_epsilon\":{}}", "'layer_norm_epsilon' is not a number");
	refused(LLAMA "\"is_causal\":0}", "'is_causal' is not true or false");
	refused(LLAMA "\"vocab_size\":1,\"vocab_size\":2}", "duplicate");
	char *big = malloc(ST_CONFIG_MAX + 2);
	assert_non_null(big);
	memset(big, ' ', ST_CONFIG_MAX + 1);
	big[ST_CONFIG_MAX + 1] = '\0';
	refused(big, "more than the 1024 KiB");
	free(big);
}

/* The checkpoint's tensor names, in its order (by name), and the reference's names. */
static void test_reference_names(void **state)
{
	(void)state;
	static const char *const want[] = {
		"output.weight", "token_embd.weight", "blk.0.attn_norm.weight",
		"blk.0.ffn_down.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
		"blk.0.ffn_norm.weight", "blk.0.attn_k.weight", "blk.0.attn_output.weight",
		"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.1.attn_norm.weight",
		"blk.1.ffn_down.weight", "blk.1.ffn_gate.weight", "blk.1.ffn_up.weight",
		"blk.1.ffn_norm.weight", "blk.1.attn_k.weight", "blk.1.attn_output.weight",
		"blk.1.attn_q.weight", "blk.1.attn_v.weight", "output_norm.weight",
	};
	size_t len;
	char *file = slurp(ST_DATA "/llama-spm-f32/model.safetensors", &len);
	uint64_t need;
	char err[GGUF_ERR_MAX];
	assert_true(st_header_size((const uint8_t *)file, len, "m", &need, err));
	struct st_header h;
	assert_int_equal(st_header_parse((const uint8_t *)file, need, len, "m", &h, err), 0);
	assert_int_equal(h.n, sizeof want / sizeof want[0]);
	const struct st_names_arch *a = st_names_find("llama");
	assert_non_null(a);
	for (size_t i = 0; i < h.n; i++) {
		char out[128];
		assert_true(st_names_map(a, h.t[i].name, strlen(h.t[i].name), 2, out, sizeof out));
		assert_string_equal(out, want[i]);
		assert_false(st_names_always_f32(a, out, UINT64_MAX));
	}
	st_header_free(&h);
	free(file);
}

static void test_names(void **state)
{
	(void)state;
	const struct st_names_arch *a = st_names_find("llama");
	char out[64];
	const char *n = "model.layers.1.self_attn.q_proj.bias";
	assert_true(st_names_map(a, n, strlen(n), 2, out, sizeof out));
	assert_string_equal(out, "blk.1.attn_q.bias");
	n = "model.layers.2.self_attn.q_proj.weight";     /* block 2 of 2 */
	assert_false(st_names_map(a, n, strlen(n), 2, out, sizeof out));
	n = "model.layers.01.self_attn.q_proj.weight";    /* no block of Python's */
	assert_false(st_names_map(a, n, strlen(n), 2, out, sizeof out));
	n = "model.layers.99999999999999999999999.mlp.up_proj.weight";
	assert_false(st_names_map(a, n, strlen(n), 2, out, sizeof out));
	n = "model.layers.1.mlp.up_proj.scales";          /* no such suffix */
	assert_false(st_names_map(a, n, strlen(n), 2, out, sizeof out));
	n = "model.norm.weight";
	assert_false(st_names_map(a, n, strlen(n), 2, out, 12));   /* too small */
	assert_true(st_names_map(a, n, 10, 2, out, sizeof out));   /* len, not the NUL */
	assert_string_equal(out, "output_norm");
	assert_null(st_names_find("mamba"));
	uint64_t bid;
	assert_true(st_names_match("blk.{bid}.ffn_gate_inp", ".weight",
	                           "blk.12.ffn_gate_inp.weight", &bid));
	assert_int_equal(bid, 12);
	assert_true(st_names_always_f32(a, "blk.3.ffn_gate_inp.weight", 3));
	assert_false(st_names_always_f32(a, "blk.3.ffn_gate_inp.weight", 4));
}

static void test_permute(void **state)
{
	(void)state;
	/* numpy: arange(8).reshape(2, 2, 2).swapaxes(1, 2).reshape(8) */
	static const uint64_t two_heads[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
	for (uint64_t r = 0; r < 8; r++)
		assert_int_equal(st_permute_row(8, 2, r), two_heads[r]);
	/* arange(12).reshape(2, 2, 3).swapaxes(1, 2).reshape(12) */
	static const uint64_t six[12] = { 0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11 };
	for (uint64_t r = 0; r < 12; r++)
		assert_int_equal(st_permute_row(12, 2, r), six[r]);
	/* a permutation: every row once */
	uint8_t seen[64] = { 0 };
	for (uint64_t r = 0; r < 64; r++)
		seen[st_permute_row(64, 4, r)]++;
	for (int r = 0; r < 64; r++)
		assert_int_equal(seen[r], 1);
	assert_true(st_permute_fits(64, 4));
	assert_false(st_permute_fits(12, 4));   /* heads of 3 rows: no halves */
	assert_false(st_permute_fits(10, 4));
	assert_false(st_permute_fits(8, 0));
	assert_int_equal(st_permute_heads(false, 4, 2), 4);
	assert_int_equal(st_permute_heads(true, 4, 2), 2);
	assert_int_equal(st_permute_heads(true, 4, 4), 4);
}

UNIT_TESTS(
	cmocka_unit_test(test_reference_hparams),
	cmocka_unit_test(test_defaults_and_key_lists),
	cmocka_unit_test(test_refusals),
	cmocka_unit_test(test_reference_names),
	cmocka_unit_test(test_names),
	cmocka_unit_test(test_permute),
)
