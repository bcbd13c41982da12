/* The tokenizer keys around a sentencepiece vocabulary (st_special.h). */
#include "st_special.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "st_json.h"

/* f as a JSON object, or NULL with err naming the file. flags: jansson's, besides
 * refusing a key twice (JSON_DECODE_INT_AS_REAL for a file where real ones hold integers
 * past 64 bits, and no integer is read). */
static json_t *load_object(const struct st_text *f, const char *name, size_t flags,
                           char err[GGUF_ERR_MAX])
{
	json_error_t je;
	json_t *j = json_loadb(f->p, f->n, JSON_REJECT_DUPLICATES | flags, &je);
	if (!j) {
		gguf_errf(err, "%s: not JSON: %.200s (at byte %d)", name, je.text, je.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		gguf_errf(err, "%s: not a JSON object", name);
		json_decref(j);
		return NULL;
	}
	return j;
}

int st_special_write_prefix(const struct st_special_files *f, struct st_kv *kv,
                            char err[GGUF_ERR_MAX])
{
	if (!f->tokenizer_config.p)
		return 0;
	json_t *tc = load_object(&f->tokenizer_config, "tokenizer_config.json",
	                      JSON_DECODE_INT_AS_REAL, err);
	if (!tc)
		return -1;
	const json_t *v = json_object_get(tc, "add_prefix_space");
	if (v && !json_is_null(v))
		st_kv_bool(kv, "tokenizer.ggml.add_space_prefix", st_json_truthy(v));
	json_decref(tc);
	return 0;
}

/* SpecialVocab's types, in its order, with the key each id is written as (NULL: gguf-py
 * has no writer for it, and skips it) and whether an add_TYPE_token key exists. */
static const struct {
	const char *type;
	const char *id_key;
	const char *add_key;
} types[] = {
	{ "bos", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token" },
	{ "eos", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_eos_token" },
	{ "unk", "tokenizer.ggml.unknown_token_id", NULL },
	{ "sep", "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.add_sep_token" },
	{ "pad", "tokenizer.ggml.padding_token_id", NULL },
	{ "cls", NULL, NULL },
	{ "mask", "tokenizer.ggml.mask_token_id", NULL },
};

/* A chat template file read as Python's open(encoding="utf-8").read() reads it: UTF-8
 * (else refused), "\r\n" and "\r" made "\n". A copy, its length into *len, or NULL with
 * err. */
static char *read_text(const struct st_text *f, const char *name, size_t *len,
                       char err[GGUF_ERR_MAX])
{
	json_t *check = json_stringn(f->p, f->n);   /* NULL unless UTF-8 */
	if (!check) {
		gguf_errf(err, "%s: not UTF-8 text", name);
		return NULL;
	}
	json_decref(check);
	char *t = malloc(f->n + 1);
	if (!t) {
		gguf_errf(err, "%s: out of memory", name);
		return NULL;
	}
	size_t k = 0;
	for (size_t i = 0; i < f->n; i++) {
		if (f->p[i] == '\r') {
			t[k++] = '\n';
			if (i + 1 < f->n && f->p[i + 1] == '\n')
				i++;
		} else {
			t[k++] = f->p[i];
		}
	}
	*len = k;
	return t;
}

int st_special_write(const struct st_special_files *f, uint64_t n_vocab, struct st_kv *kv,
                     char err[GGUF_ERR_MAX])
{
	const size_t n_types = sizeof types / sizeof types[0];
	json_t *config = NULL, *tc = NULL, *tj = NULL;
	char *alt = NULL;
	size_t alt_len = 0;
	int rc = -1;
	/* the ids config.json names (there is no tokenizer.json to name them first) */
	if (f->config.p && !(config = load_object(&f->config, "config.json", 0, err)))
		goto out;
	for (size_t i = 0; i < n_types; i++) {
		char key[32];
		snprintf(key, sizeof key, "%s_token_id", types[i].type);
		const json_t *v = json_object_get(config, key);
		/* an int (a bool is one to Python); anything else is not an id */
		json_int_t id;
		if (json_is_integer(v))
			id = json_integer_value(v);
		else if (json_is_boolean(v))
			id = json_is_true(v);
		else
			continue;
		if (id < 0) {
			gguf_errf(err, "config.json: %s is %" PRId64 ", a negative token id", key,
			          (int64_t)id);
			goto out;
		}
		if ((uint64_t)id >= n_vocab || !types[i].id_key)
			continue;
		st_kv_u32(kv, types[i].id_key, (uint32_t)id);
	}
	if (!f->tokenizer_config.p) {
		rc = 0;   /* "if not tokenizer_config: return True": nothing more */
		goto out;
	}
	if (!(tc = load_object(&f->tokenizer_config, "tokenizer_config.json",
	                      JSON_DECODE_INT_AS_REAL, err)))
		goto out;
	if (json_object_size(tc) == 0) {
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < n_types; i++) {
		char key[32];
		snprintf(key, sizeof key, "add_%s_token", types[i].type);
		const json_t *v = json_object_get(tc, key);
		if (json_is_boolean(v) && types[i].add_key)
			st_kv_bool(kv, types[i].add_key, json_is_true(v));
	}
	const json_t *tmpl = json_object_get(tc, "chat_template");
	if (!tmpl) {
		if (f->jinja.p) {
			if (!(alt = read_text(&f->jinja, "chat_template.jinja", &alt_len, err)))
				goto out;
		} else if (f->template_json.p) {
			if (!(tj = load_object(&f->template_json, "chat_template.json",
			                       JSON_DECODE_INT_AS_REAL, err)))
				goto out;
			tmpl = json_object_get(tj, "chat_template");
			if (json_is_array(tmpl)) {
				gguf_errf(err, "chat_template.json: a list of templates is not "
				          "converted by ggufs yet");
				goto out;
			}
		}
	} else if (json_is_array(tmpl)) {
		gguf_errf(err, "tokenizer_config.json: a list of chat templates is not converted "
		          "by ggufs yet");
		goto out;
	}
	if (alt)
		st_kv_strn(kv, "tokenizer.chat_template", alt, alt_len);
	else if (json_is_string(tmpl))
		st_kv_strn(kv, "tokenizer.chat_template", json_string_value(tmpl),
		           json_string_length(tmpl));
	rc = 0;
out:
	free(alt);
	json_decref(tj);
	json_decref(tc);
	json_decref(config);
	return rc;
}
