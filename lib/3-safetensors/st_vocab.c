/* A sentencepiece vocabulary as the converter makes it (st_vocab.h). */
#include "st_vocab.h"

#include "st_json.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token id's text set to s[0 .. n) (appended to the text arena). */
static void set_text(struct st_vocab *v, uint64_t id, const void *s, uint64_t n)
{
	v->off[id] = v->text.len;
	v->len[id] = (uint32_t)n;
	vbytes_put(&v->text, s, n);
}

/* The converter's does_token_look_special. */
static bool looks_special(const char *t)
{
	static const char *const exact[] = { "<pad>", "<mask>", "<2mass>", "[@BOS@]" };
	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (strcmp(t, exact[i]) == 0)
			return true;
	static const char *const around[][2] = {
		{ "<|", "|>" },
		{ "<\xef\xbd\x9c", "\xef\xbd\x9c>" },   /* fullwidth vertical bars */
		{ "<unused", ">" },
	};
	const size_t n = strlen(t);
	for (size_t i = 0; i < sizeof around / sizeof around[0]; i++) {
		const size_t a = strlen(around[i][0]), b = strlen(around[i][1]);
		if (n >= a && n >= b && memcmp(t, around[i][0], a) == 0 &&
		    memcmp(t + n - b, around[i][1], b) == 0)
			return true;
	}
	return false;
}

/* A token id from a JSON key of added_tokens_decoder ("12"), as Python's int() takes
 * it here: decimal digits only (ggufs refuses the rest). true with *id. */
static bool id_of_key(const char *s, uint64_t *id)
{
	uint64_t x = 0;
	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*id = x;
	return true;
}

/* A JSON number that is a whole id >= 0: true with *id. */
static bool id_of_number(const json_t *j, uint64_t *id)
{
	if (json_is_integer(j)) {
		if (json_integer_value(j) < 0)
			return false;
		*id = (uint64_t)json_integer_value(j);
		return true;
	}
	const double d = json_real_value(j);
	if (!json_is_real(j) || !(d >= 0) || d >= 9007199254740992.0 || d != (double)(uint64_t)d)
		return false;
	*id = (uint64_t)d;
	return true;
}

/* added_tokens.json: each key the text of the token its value numbers. */
static int apply_added(struct st_vocab *v, const char *added, size_t n,
                       char err[GGUF_ERR_MAX])
{
	json_error_t je;
	json_t *j = json_loadb(added, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	if (!j || !json_is_object(j)) {
		gguf_errf(err, "added_tokens.json: not a JSON object%s%.200s", j ? "" : ": ",
		          j ? "" : je.text);
		json_decref(j);
		return -1;
	}
	const char *key;
	json_t *val;
	json_object_foreach(j, key, val) {
		uint64_t id;
		if (!id_of_number(val, &id)) {
			gguf_errf(err, "added_tokens.json: '%.64s' is not numbered by a token id",
			          key);
			json_decref(j);
			return -1;
		}
		if (id >= v->n)
			continue;   /* the converter: "ignore token ...: id is out of range" */
		set_text(v, id, key, strlen(key));
		v->score[id] = -1000.0f;
		v->type[id] = ST_SPM_USER_DEFINED;
	}
	json_decref(j);
	return 0;
}

/* tokenizer_config.json's added_tokens_decoder, in its order. */
static int apply_decoder(struct st_vocab *v, const char *config, size_t n,
                         char err[GGUF_ERR_MAX])
{
	json_error_t je;
	json_t *j = json_loadb(config, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
	if (!j || !json_is_object(j)) {
		gguf_errf(err, "tokenizer_config.json: not a JSON object%s%.200s", j ? "" : ": ",
		          j ? "" : je.text);
		json_decref(j);
		return -1;
	}
	int rc = 0;
	const json_t *dec = json_object_get(j, "added_tokens_decoder");
	if (dec && !json_is_object(dec)) {
		gguf_errf(err, "tokenizer_config.json: added_tokens_decoder is not an object");
		rc = -1;
	}
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)dec, key, val) {
		uint64_t id;
		const char *content = json_string_value(json_object_get(val, "content"));
		if (!id_of_key(key, &id) || !content) {
			gguf_errf(err, "tokenizer_config.json: added token '%.32s' is not an id with "
			          "a content", key);
			rc = -1;
			break;
		}
		if (id >= v->n)
			continue;
		const json_t *sp = json_object_get(val, "special");
		if ((sp && st_json_truthy(sp)) || looks_special(content)) {
			v->type[id] = ST_SPM_CONTROL;
			set_text(v, id, content, strlen(content));
		} else {
			/* user-defined: its U+2581 (the sentencepiece space) made a space */
			v->type[id] = ST_SPM_USER_DEFINED;
			v->off[id] = v->text.len;
			uint64_t len = 0;
			for (const char *c = content; *c;) {
				if (memcmp(c, "\xe2\x96\x81", 3) == 0) {
					vbytes_put(&v->text, " ", 1);
					c += 3;
					len++;
				} else {
					vbytes_put(&v->text, c++, 1);
					len++;
				}
			}
			v->len[id] = (uint32_t)len;
		}
		v->score[id] = -1000.0f;
	}
	json_decref(j);
	return rc;
}

int st_vocab_spm(const struct st_spm *spm, uint64_t vocab_size, const char *added,
                 size_t n_added, const char *config, size_t n_config, struct st_vocab *v,
                 char err[GGUF_ERR_MAX])
{
	memset(v, 0, sizeof *v);
	const uint64_t n = vocab_size ? vocab_size : spm->n;
	if (n > ST_VOCAB_MAX) {
		gguf_errf(err, "config.json: a vocabulary of %" PRIu64 " tokens, more than the %u "
		          "ggufs converts", n, ST_VOCAB_MAX);
		return -1;
	}
	v->n = n;
	v->off = calloc(n, sizeof *v->off);
	v->len = calloc(n, sizeof *v->len);
	v->score = calloc(n, sizeof *v->score);
	v->type = calloc(n, sizeof *v->type);
	if (!v->off || !v->len || !v->score || !v->type)
		goto oom;
	for (uint64_t id = 0; id < n; id++) {
		char pad[32];
		const int k = snprintf(pad, sizeof pad, "[PAD%" PRIu64 "]", id);
		set_text(v, id, pad, (uint64_t)k);
		v->score[id] = -10000.0f;
		v->type[id] = ST_SPM_UNUSED;
	}
	for (uint64_t id = 0; id < spm->n && id < n; id++) {
		const struct st_spm_piece *p = &spm->pieces[id];
		set_text(v, id, p->text, p->len);
		v->score[id] = p->score;
		v->type[id] = p->type == ST_SPM_USER_DEFINED ? ST_SPM_NORMAL : (int32_t)p->type;
	}
	if (added && apply_added(v, added, n_added, err) < 0)
		goto fail;
	if (config && apply_decoder(v, config, n_config, err) < 0)
		goto fail;
	if (v->text.failed)
		goto oom;
	return 0;
oom:
	gguf_errf(err, "tokenizer.model: out of memory");
fail:
	st_vocab_free(v);
	return -1;
}

void st_vocab_free(struct st_vocab *v)
{
	free(v->off);
	free(v->len);
	free(v->score);
	free(v->type);
	free(v->text.p);
	memset(v, 0, sizeof *v);
}

void st_vocab_write_spm(const struct st_vocab *v, struct st_kv *kv)
{
	st_kv_str(kv, "tokenizer.ggml.model", "llama");
	st_kv_str(kv, "tokenizer.ggml.pre", "default");
	st_kv_array(kv, "tokenizer.ggml.tokens", 8, v->n);
	for (uint64_t i = 0; i < v->n; i++)
		st_kv_put_str(kv, (const char *)v->text.p + v->off[i], v->len[i]);
	st_kv_array(kv, "tokenizer.ggml.scores", 6, v->n);
	for (uint64_t i = 0; i < v->n; i++)
		st_kv_put_f32(kv, v->score[i]);
	st_kv_array(kv, "tokenizer.ggml.token_type", 5, v->n);
	for (uint64_t i = 0; i < v->n; i++)
		st_kv_put_i32(kv, v->type[i]);
}
