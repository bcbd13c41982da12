/* A sentencepiece tokenizer as the converter reads it (lib/3-safetensors: st_spm.h,
 * st_vocab.h): llama-spm-f32's tokenizer keys (model, pre, tokens, scores, token types)
 * byte for byte the converter's (its output's header, in tests/data/st); added tokens
 * and added_tokens_decoder as the converter applies them; the keys around the
 * vocabulary (add_space_prefix; special ids, add_*, the chat template, byte for byte
 * the reference's too); the protobuf reader's
 * refusals of hostile bytes, each one line naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_special.h"
#include "st_spm.h"
#include "st_vocab.h"

#define ST_DATA TEST_DATA "/st"

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

static void test_reference_vocab(void **state)
{
	(void)state;
	size_t n_model, n_config, n_head;
	char *model = slurp(ST_DATA "/llama-spm-f32/tokenizer.model", &n_model);
	char *config = slurp(ST_DATA "/llama-spm-f32/tokenizer_config.json", &n_config);
	char *head = slurp(ST_DATA "/llama-spm-f32.auto.gguf", &n_head);
	struct st_spm spm;
	char err[GGUF_ERR_MAX];
	assert_int_equal(st_spm_parse((const uint8_t *)model, n_model, "tokenizer.model", &spm,
	                              err), 0);
	assert_int_equal(spm.n, 1024);
	assert_int_equal(spm.pieces[0].type, ST_SPM_UNKNOWN);
	assert_int_equal(spm.pieces[1].type, ST_SPM_CONTROL);
	assert_int_equal(spm.pieces[3].type, ST_SPM_BYTE);
	struct st_vocab v;
	assert_int_equal(st_vocab_spm(&spm, 1024, NULL, 0, config, n_config, &v, err), 0);
	assert_int_equal(v.type[0], ST_SPM_CONTROL);   /* <unk>: special in the decoder */
	assert_true(v.score[0] == -1000.0f);
	struct st_kv kv = { 0 };
	st_vocab_write_spm(&v, &kv);
	assert_false(kv.b.failed);
	assert_int_equal(kv.n, 5);
	static const char first[] = "\x14\0\0\0\0\0\0\0tokenizer.ggml.model";
	const char *at = memmem(head, n_head, first, sizeof first - 1);
	assert_non_null(at);
	assert_true(kv.b.len <= n_head - (uint64_t)(at - head));
	assert_memory_equal(kv.b.p, at, kv.b.len);
	static const char next[] = "\x1b\0\0\0\0\0\0\0tokenizer.ggml.bos_token_id";
	assert_memory_equal(at + kv.b.len, next, sizeof next - 1);
	free(kv.b.p);
	st_vocab_free(&v);
	st_spm_free(&spm);
	free(model);
	free(config);
	free(head);
}

/* A protobuf piece: text, score bits, type (0: no type field). */
static size_t piece(uint8_t *out, const char *text, float score, int type)
{
	size_t n = 0, t = strlen(text);
	uint8_t body[128];
	body[n++] = 0x0a;
	body[n++] = (uint8_t)t;
	memcpy(body + n, text, t);
	n += t;
	body[n++] = 0x15;
	memcpy(body + n, &score, 4);
	n += 4;
	if (type) {
		body[n++] = 0x18;
		body[n++] = (uint8_t)type;
	}
	out[0] = 0x0a;
	out[1] = (uint8_t)n;
	memcpy(out + 2, body, n);
	return n + 2;
}

static void test_added_tokens(void **state)
{
	(void)state;
	uint8_t m[512];
	size_t n = 0;
	n += piece(m + n, "<unk>", 0, 2);
	n += piece(m + n, "a", -1.5f, 0);        /* no type: normal */
	n += piece(m + n, "<x>", 0, 4);          /* user-defined: normal to the converter */
	n += piece(m + n, "b", -2, 5);
	m[n++] = 0x12;                           /* a trainer spec (field 2): skipped */
	m[n++] = 2;
	m[n++] = 0x08;
	m[n++] = 0x01;
	struct st_spm spm;
	char err[GGUF_ERR_MAX];
	assert_int_equal(st_spm_parse(m, n, "t", &spm, err), 0);
	assert_int_equal(spm.n, 4);
	static const char added[] = "{\"<y>\": 4, \"far\": 99}";
	static const char config[] = "{\"model_max_length\": 1000000000000000019884624838656,"
		"\"added_tokens_decoder\": {\"5\": {\"content\": \"\xe2\x96\x81hi\xe2\x96\x81\"},"
		"\"6\": {\"content\": \"<|im|>\", \"special\": false},"
		"\"1\": {\"content\": \"A\", \"special\": 1}, \"70\": {\"content\": \"z\"}}}";
	struct st_vocab v;
	assert_int_equal(st_vocab_spm(&spm, 8, added, strlen(added), config, strlen(config),
	                              &v, err), 0);
	assert_int_equal(v.n, 8);
	static const char *const text[8] = { "<unk>", "A", "<x>", "b", "<y>", " hi ",
	                                     "<|im|>", "[PAD7]" };
	static const int32_t type[8] = { 2, 3, 1, 5, 4, 4, 3, 5 };
	static const float score[8] = { 0, -1000, 0, -2, -1000, -1000, -1000, -10000 };
	for (int i = 0; i < 8; i++) {
		assert_int_equal(v.len[i], strlen(text[i]));
		assert_memory_equal(v.text.p + v.off[i], text[i], v.len[i]);
		assert_int_equal(v.type[i], type[i]);
		assert_true(v.score[i] == score[i]);
	}
	st_vocab_free(&v);
	/* vocab_size 0: the model's count; fewer than the model: its first pieces */
	assert_int_equal(st_vocab_spm(&spm, 0, NULL, 0, NULL, 0, &v, err), 0);
	assert_int_equal(v.n, 4);
	st_vocab_free(&v);
	assert_int_equal(st_vocab_spm(&spm, 2, NULL, 0, NULL, 0, &v, err), 0);
	assert_int_equal(v.n, 2);
	st_vocab_free(&v);
	/* refusals: a negative id, one not a number, a malformed key, not JSON */
	static const char *const bad_added[] = { "{\"x\": -1}", "{\"x\": \"1\"}", "{\"x\": 1.5}",
	                                         "[]", "{" };
	for (size_t i = 0; i < sizeof bad_added / sizeof bad_added[0]; i++) {
		assert_int_equal(st_vocab_spm(&spm, 8, bad_added[i], strlen(bad_added[i]), NULL,
		                              0, &v, err), -1);
		assert_non_null(strstr(err, "added_tokens.json: "));
	}
	static const char *const bad_config[] = {
		"{\"added_tokens_decoder\": {\"-1\": {\"content\": \"x\"}}}",
		"{\"added_tokens_decoder\": {\"1\": {}}}",
		"{\"added_tokens_decoder\": []}", "7",
	};
	for (size_t i = 0; i < sizeof bad_config / sizeof bad_config[0]; i++) {
		assert_int_equal(st_vocab_spm(&spm, 8, NULL, 0, bad_config[i],
		                              strlen(bad_config[i]), &v, err), -1);
		assert_non_null(strstr(err, "tokenizer_config.json: "));
	}
	assert_int_equal(st_vocab_spm(&spm, ST_VOCAB_MAX + 1ull, NULL, 0, NULL, 0, &v, err), -1);
	assert_non_null(strstr(err, "more than the"));
	st_spm_free(&spm);
}

/* bytes are refused as a sentencepiece model with a line holding why. */
static void spm_refused(const void *bytes, size_t n, const char *why)
{
	struct st_spm spm;
	char err[GGUF_ERR_MAX] = "";
	if (st_spm_parse(bytes, n, "tokenizer.model", &spm, err) == 0)
		fail_msg("accepted %zu bytes", n);
	if (strncmp(err, "tokenizer.model: ", 17) != 0 || !strstr(err, why) ||
	    strchr(err, '\n'))
		fail_msg("'%s', wanted '%s'", err, why);
}

static void test_spm_refusals(void **state)
{
	(void)state;
	spm_refused("", 0, "without pieces");
	spm_refused("\x12\x00", 2, "without pieces");               /* a trainer spec only */
	spm_refused("\x0a", 1, "not a sentencepiece model");        /* a key, no length */
	spm_refused("\x0a\x05\x0a\x01", 4, "not a sentencepiece model");   /* length past */
	spm_refused("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12, "not a sentence");
	spm_refused("\x0b\x00", 2, "not a sentencepiece model");    /* wire type 3: a group */
	spm_refused("\x00\x00", 2, "not a sentencepiece model");    /* field 0 */
	spm_refused("\x08\x01", 2, "a piece of the wrong wire type 0");
	spm_refused("\x0a\x03\x0a\x01\xff", 5, "piece 0 is not UTF-8");
	spm_refused("\x0a\x04\x0a\x02\xed\xa0", 6, "piece 0 is not UTF-8");   /* cut short */
	spm_refused("\x0a\x05\x0a\x03\xed\xa0\x80", 7, "not UTF-8");          /* a surrogate */
	spm_refused("\x0a\x04\x0a\x02\xc0\x80", 6, "not UTF-8");              /* overlong */
	spm_refused("\x0a\x02\x18\x07", 4, "type 7, which sentencepiece does not define");
	spm_refused("\x0a\x02\x18\x00", 4, "type 0");
	spm_refused("\x0a\x02\x10\x01", 4, "field 2 of the wrong wire type 0");
	spm_refused("\x0a\x02\x0a\x05", 4, "piece 0 is no protobuf message");
	/* fields of every wire type elsewhere are skipped */
	static const uint8_t ok[] = { 0x11, 1, 2, 3, 4, 5, 6, 7, 8,   /* field 2, fixed64 */
	                              0x1d, 1, 2, 3, 4,              /* field 3, fixed32 */
	                              0x20, 0x80, 0x01,              /* field 4, varint */
	                              0x0a, 0x05, 0x0a, 0x01, 'a', 0x28, 0x01 };
	struct st_spm spm;
	char err[GGUF_ERR_MAX];
	assert_int_equal(st_spm_parse(ok, sizeof ok, "t", &spm, err), 0);
	assert_int_equal(spm.n, 1);
	assert_int_equal(spm.pieces[0].len, 1);
	st_spm_free(&spm);
}


/* The reference's bytes of the keys around the vocabulary: add_space_prefix just
 * before tokenizer.ggml.model, and from bos_token_id to the end of the keys (the first
 * tensor's name follows). */
static void test_reference_special(void **state)
{
	(void)state;
	size_t n_head;
	char *head = slurp(ST_DATA "/llama-spm-f32.auto.gguf", &n_head);
	struct st_special_files f;
	f.config.p = slurp(ST_DATA "/llama-spm-f32/config.json", &f.config.n);
	f.tokenizer_config.p = slurp(ST_DATA "/llama-spm-f32/tokenizer_config.json",
	                             &f.tokenizer_config.n);
	f.jinja.p = slurp(ST_DATA "/llama-spm-f32/chat_template.jinja", &f.jinja.n);
	f.template_json.p = NULL;
	char err[GGUF_ERR_MAX];
	struct st_kv kv = { 0 };
	assert_int_equal(st_special_write_prefix(&f, &kv, err), 0);
	assert_int_equal(kv.n, 1);
	static const char model[] = "\x14\0\0\0\0\0\0\0tokenizer.ggml.model";
	const char *at = memmem(head, n_head, model, sizeof model - 1);
	assert_non_null(at);
	assert_true((uint64_t)(at - head) >= kv.b.len);
	assert_memory_equal(kv.b.p, at - kv.b.len, kv.b.len);
	free(kv.b.p);
	kv = (struct st_kv){ 0 };
	assert_int_equal(st_special_write(&f, 1024, &kv, err), 0);
	assert_int_equal(kv.n, 5);
	static const char bos[] = "\x1b\0\0\0\0\0\0\0tokenizer.ggml.bos_token_id";
	at = memmem(head, n_head, bos, sizeof bos - 1);
	assert_non_null(at);
	assert_true(kv.b.len <= n_head - (uint64_t)(at - head));
	assert_memory_equal(kv.b.p, at, kv.b.len);
	static const char tensor[] = "\x0d\0\0\0\0\0\0\0output.weight";
	assert_memory_equal(at + kv.b.len, tensor, sizeof tensor - 1);
	free(kv.b.p);
	free((char *)f.config.p);
	free((char *)f.tokenizer_config.p);
	free((char *)f.jinja.p);
	free(head);
}

/* The keys SpecialVocab writes for config, tokenizer_config and a jinja template (NULL:
 * no such file) into *kv (freed by the caller): the return. */
static int special(const char *config, const char *tc, const char *jinja, size_t jinja_len,
                   struct st_kv *kv, char err[GGUF_ERR_MAX])
{
	struct st_special_files f = {
		{ config, config ? strlen(config) : 0 }, { tc, tc ? strlen(tc) : 0 },
		{ jinja, jinja_len }, { NULL, 0 },
	};
	*kv = (struct st_kv){ 0 };
	return st_special_write(&f, 10, kv, err);
}

static void test_special(void **state)
{
	(void)state;
	struct st_kv kv;
	char err[GGUF_ERR_MAX];
	/* ids: past the vocabulary skipped, a list skipped, a bool an int, cls unwritten;
	 * no tokenizer_config.json: no add_* and no template */
	assert_int_equal(special("{\"bos_token_id\": 10, \"eos_token_id\": [1, 2],"
	                         "\"pad_token_id\": true, \"cls_token_id\": 3,"
	                         "\"mask_token_id\": 4}", NULL, "x", 1, &kv, err), 0);
	assert_int_equal(kv.n, 2);
	assert_non_null(memmem(kv.b.p, kv.b.len, "padding_token_id\x04\0\0\0\x01\0\0\0", 24));
	assert_null(memmem(kv.b.p, kv.b.len, "chat_template", 13));
	free(kv.b.p);
	/* the template: tokenizer_config's first (a NUL-free string), else the jinja file's
	 * with its line ends as Python reads them, NULs kept */
	assert_int_equal(special("{}", "{\"chat_template\": \"T\", \"add_eos_token\": true,"
	                         "\"add_unk_token\": true, \"add_bos_token\": 1}", "J", 1, &kv,
	                         err), 0);
	assert_int_equal(kv.n, 2);
	assert_non_null(memmem(kv.b.p, kv.b.len, "add_eos_token\x07\0\0\0\x01", 18));
	assert_non_null(memmem(kv.b.p, kv.b.len, "chat_template\x08\0\0\0\x01\0\0\0\0\0\0\0T", 26));
	free(kv.b.p);
	assert_int_equal(special(NULL, "{\"x\": 1}", "a\r\nb\rc\n\r\0d", 10, &kv, err), 0);
	assert_int_equal(kv.n, 1);
	assert_non_null(memmem(kv.b.p, kv.b.len, "\x08\0\0\0\x09\0\0\0\0\0\0\0a\nb\nc\n\n\0d", 21));
	free(kv.b.p);
	/* an empty tokenizer_config.json is none; a null template is none */
	assert_int_equal(special(NULL, "{}", "J", 1, &kv, err), 0);
	assert_int_equal(kv.n, 0);
	free(kv.b.p);
	assert_int_equal(special(NULL, "{\"chat_template\": null}", "J", 1, &kv, err), 0);
	assert_int_equal(kv.n, 0);
	free(kv.b.p);
	/* refusals, each naming its file */
	assert_int_equal(special("{\"bos_token_id\": -1}", NULL, NULL, 0, &kv, err), -1);
	assert_non_null(strstr(err, "config.json: bos_token_id is -1, a negative token id"));
	free(kv.b.p);
	assert_int_equal(special(NULL, "{\"x\": 1}", "\xff", 1, &kv, err), -1);
	assert_non_null(strstr(err, "chat_template.jinja: not UTF-8"));
	free(kv.b.p);
	assert_int_equal(special(NULL, "{\"chat_template\": [{}]}", NULL, 0, &kv, err), -1);
	assert_non_null(strstr(err, "tokenizer_config.json: a list of chat templates"));
	free(kv.b.p);
	assert_int_equal(special("[", NULL, NULL, 0, &kv, err), -1);
	assert_non_null(strstr(err, "config.json: not JSON"));
	free(kv.b.p);
	assert_int_equal(special(NULL, "[]", NULL, 0, &kv, err), -1);
	assert_non_null(strstr(err, "tokenizer_config.json: not a JSON object"));
	free(kv.b.p);
}

UNIT_TESTS(
	cmocka_unit_test(test_reference_vocab),
	cmocka_unit_test(test_reference_special),
	cmocka_unit_test(test_special),
	cmocka_unit_test(test_added_tokens),
	cmocka_unit_test(test_spm_refusals),
)
