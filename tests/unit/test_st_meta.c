/* A converted folder's general.* keys (lib/3-safetensors/st_meta.h) as gguf-py's
 * Metadata makes them from the folder's name: llama-spm-f32's general.name and
 * size_label are the reference's bytes; get_model_id_components, id_to_title and
 * size_label agree with gguf-py's own functions on the vectors below (printed by
 * running the pinned gguf-py's metadata.py and utility.py functions on these names and
 * counts), and a name ggufs does not read is refused in one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_meta.h"

#define ST_DATA TEST_DATA "/st"

/* name, total parameters, then gguf-py's: title, org, basename, finetune, version,
 * size label (NULL: None) */
static const struct {
	const char *id;
	int64_t total;
	const char *title, *org, *basename, *finetune, *version, *size_label;
} ids[] = {
	{ "Mistral-7B-Instruct-v0.3", 205120, "Mistral 7B Instruct v0.3", NULL, "Mistral", "7b-Instruct", "v0.3", NULL },
	{ "Llama-3.2-1B-Instruct", 205120, "Llama 3.2 1B Instruct", NULL, "Llama-3.2", "1b-Instruct", NULL, NULL },
	{ "bloom-7b1", 205120, "Bloom 7b1", NULL, "bloom", "7.1b", NULL, NULL },
	{ "Qwen3-0.6B", 205120, "Qwen3 0.6B", NULL, "Qwen3", "0.6b", NULL, NULL },
	{ "mixtral-8x7B-v0.1", 205120, "Mixtral 8x7B v0.1", NULL, "mixtral", NULL, "v0.1", "8x7B" },
	{ "TinyLlama-1.1B-Chat-v1.0", 205120, "TinyLlama 1.1B Chat v1.0", NULL, "TinyLlama", "1.1b-Chat", "v1.0", NULL },
	{ "gemma-2-2b-it", 205120, "Gemma 2 2b It", NULL, "gemma-2", "2b-it", NULL, NULL },
	{ "model-small-7B", 205120, "Model Small 7B", NULL, "model", "7b", NULL, "small" },
	{ "7B", 205120, "7B", NULL, NULL, "7B", NULL, NULL },
	{ "x-128k-instruct", 205120, "X 128k Instruct", NULL, "x", "instruct", NULL, "128K" },
	{ "foo-q4_k_m-lora", 205120, "Foo Q4_K_M Lora", NULL, "foo", "lora", NULL, NULL },
	{ "org/Name-13B", 205120, "Name 13B", "org", "Name", "13b", NULL, NULL },
	{ "Yi-34B-200K", 205120, "Yi 34B 200K", NULL, "Yi", "34b", NULL, "200K" },
	{ "iter3-chat-xl-medium", 205120, "Iter3 Chat Xl Medium", NULL, "iter3", "chat", NULL, "xl-medium" },
	{ "m-A3B-bf16", 205120, "M A3B Bf16", NULL, "m", NULL, NULL, "A3B" },
	{ "smol-1_7B", 205120, "Smol 1_7B", NULL, "smol", "1.7b", NULL, NULL },
	{ "Mistral-7B-Instruct-v0.3", 7000000000, "Mistral 7B Instruct v0.3", NULL, "Mistral", "Instruct", "v0.3", "7B" },
	{ "Llama-3.2-1B-Instruct", 7000000000, "Llama 3.2 1B Instruct", NULL, "Llama-3.2", "Instruct", NULL, "1B" },
	{ "bloom-7b1", 7000000000, "Bloom 7b1", NULL, "bloom", NULL, NULL, "7.1B" },
	{ "Qwen3-0.6B", 7000000000, "Qwen3 0.6B", NULL, "Qwen3", "0.6b", NULL, NULL },
	{ "mixtral-8x7B-v0.1", 7000000000, "Mixtral 8x7B v0.1", NULL, "mixtral", NULL, "v0.1", "8x7B" },
	{ "TinyLlama-1.1B-Chat-v1.0", 7000000000, "TinyLlama 1.1B Chat v1.0", NULL, "TinyLlama", "Chat", "v1.0", "1.1B" },
	{ "gemma-2-2b-it", 7000000000, "Gemma 2 2b It", NULL, "gemma-2", "it", NULL, "2B" },
	{ "model-small-7B", 7000000000, "Model Small 7B", NULL, "model-small", NULL, NULL, "7B" },
	{ "7B", 7000000000, "7B", NULL, NULL, "7B", NULL, NULL },
	{ "x-128k-instruct", 7000000000, "X 128k Instruct", NULL, "x", "128k-instruct", NULL, NULL },
	{ "foo-q4_k_m-lora", 7000000000, "Foo Q4_K_M Lora", NULL, "foo", "lora", NULL, NULL },
	{ "org/Name-13B", 7000000000, "Name 13B", "org", "Name", NULL, NULL, "13B" },
	{ "Yi-34B-200K", 7000000000, "Yi 34B 200K", NULL, "Yi", "34b-200k", NULL, NULL },
	{ "iter3-chat-xl-medium", 7000000000, "Iter3 Chat Xl Medium", NULL, "iter3", "chat", NULL, "xl-medium" },
	{ "m-A3B-bf16", 7000000000, "M A3B Bf16", NULL, "m", NULL, NULL, "A3B" },
	{ "smol-1_7B", 7000000000, "Smol 1_7B", NULL, "smol", NULL, NULL, "1.7B" },
};

static const struct {
	uint64_t total;
	const char *label;
} labels[] = {
	{ 205120ull, "205K" },
	{ 999ull, "1.0K" },
	{ 1000ull, "1.0K" },
	{ 1500ull, "1.5K" },
	{ 999999ull, "1000K" },
	{ 1000001ull, "1.0M" },
	{ 1100048384ull, "1.1B" },
	{ 7241732096ull, "7.2B" },
	{ 46702792704ull, "47B" },
	{ 1500000000000ull, "1.5T" },
	{ 0ull, "0.00K" },
};

static void same(const char *what, const char *id, const char *got, const char *want)
{
	if ((got == NULL) != (want == NULL) || (got && strcmp(got, want) != 0))
		fail_msg("%s of '%s': '%s', gguf-py's '%s'", what, id, got ? got : "None",
		         want ? want : "None");
}

static void test_components(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		struct st_name_parts p;
		char err[GGUF_ERR_MAX], title[128];
		assert_int_equal(st_meta_id_components(ids[i].id, ids[i].total, &p, err), 0);
		assert_true(st_meta_title(p.full, title, sizeof title));
		same("title", ids[i].id, title, ids[i].title);
		same("org", ids[i].id, p.org, ids[i].org);
		same("basename", ids[i].id, p.basename, ids[i].basename);
		same("finetune", ids[i].id, p.finetune, ids[i].finetune);
		same("version", ids[i].id, p.version, ids[i].version);
		same("size label", ids[i].id, p.size_label, ids[i].size_label);
		st_meta_parts_free(&p);
	}
	for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
		char label[32];
		st_meta_size_label(labels[i].total, label);
		assert_string_equal(label, labels[i].label);
	}
}

static void test_reference(void **state)
{
	(void)state;
	FILE *f = fopen(ST_DATA "/llama-spm-f32.auto.gguf", "rb");
	assert_non_null(f);
	char head[4096];
	assert_int_equal(fread(head, 1, sizeof head, f), sizeof head);
	fclose(f);
	struct st_kv kv = { 0 };
	char err[GGUF_ERR_MAX];
	/* the checkpoint's 21 tensors hold 205,120 parameters */
	assert_int_equal(st_meta_write("llama-spm-f32", 205120, &kv, err), 0);
	assert_int_equal(kv.n, 2);
	static const char name[] = "\x0c\0\0\0\0\0\0\0general.name";
	const char *at = memmem(head, sizeof head, name, sizeof name - 1);
	assert_non_null(at);
	assert_memory_equal(kv.b.p, at, kv.b.len);
	static const char next[] = "\x11\0\0\0\0\0\0\0llama.block_count";
	assert_memory_equal(at + kv.b.len, next, sizeof next - 1);
	free(kv.b.p);
	/* found parts are written in gguf-py's order */
	kv = (struct st_kv){ 0 };
	assert_int_equal(st_meta_write("TinyLlama-1.1B-Chat-v1.0", 1100048384, &kv, err), 0);
	assert_int_equal(kv.n, 5);
	const char *v = memmem(kv.b.p, kv.b.len, "general.version", 15);
	const char *ft = memmem(kv.b.p, kv.b.len, "general.finetune", 16);
	const char *b = memmem(kv.b.p, kv.b.len, "general.basename", 16);
	const char *s = memmem(kv.b.p, kv.b.len, "general.size_label", 18);
	assert_true(v && ft && b && s && v < ft && ft < b && b < s);
	free(kv.b.p);
	kv = (struct st_kv){ 0 };
	assert_int_equal(st_meta_write("mod\xc3\xa8le", 1, &kv, err), -1);
	assert_non_null(strstr(err, "is not ASCII"));
	free(kv.b.p);
}

UNIT_TESTS(
	cmocka_unit_test(test_components),
	cmocka_unit_test(test_reference),
)
