/* config.json as the converter reads it (st_config.h). */
#include "st_config.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A transformers config class, by the model_type its file names: its defaults (the
 * attributes every config of it has, as to_dict gives them before the file's keys), and
 * whether its constructor fills a null head_dim (LlamaConfig does, MistralConfig keeps
 * it None). The values are transformers 4.57's (the converter's environment). */
static const struct {
	const char *model_type;
	bool fills_head_dim;   /* its constructor makes a null head_dim hidden / heads */
	const char *defaults;
} config_classes[] = {
	{ "llama", true, "{\"vocab_size\":32000,\"hidden_size\":4096,\"intermediate_size\":11008,"
	           "\"num_hidden_layers\":32,\"num_attention_heads\":32,"
	           "\"num_key_value_heads\":null,\"max_position_embeddings\":2048,"
	           "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"rope_scaling\":null,"
	           "\"head_dim\":null,\"tie_word_embeddings\":false}" },
	{ "mistral", false, "{\"vocab_size\":32000,\"hidden_size\":4096,\"intermediate_size\":14336,"
	             "\"num_hidden_layers\":32,\"num_attention_heads\":32,"
	             "\"num_key_value_heads\":8,\"max_position_embeddings\":131072,"
	             "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"sliding_window\":4096,"
	             "\"head_dim\":null,\"tie_word_embeddings\":false}" },
};

/* The converter's model classes ggufs converts, by the architecture config.json names:
 * the GGUF architecture each writes. */
static const struct {
	const char *hf_arch;
	const char *gguf_arch;
} model_classes[] = {
	{ "LlamaForCausalLM", "llama" },
	{ "MistralForCausalLM", "llama" },
};

/* The value of the first of keys (NULL-ended) that h holds, or NULL (none, or null):
 * the converter's find_hparam. Its key into *found when found is not NULL. */
static const json_t *find_hparam_key(const json_t *h, const char *const *keys,
                                     const char **found)
{
	for (; *keys; keys++) {
		const json_t *v = json_object_get(h, *keys);
		if (v) {
			if (found)
				*found = *keys;
			return json_is_null(v) ? NULL : v;
		}
	}
	return NULL;
}

/* find_hparam_key without the key. */
static const json_t *find_hparam(const json_t *h, const char *const *keys)
{
	return find_hparam_key(h, keys, NULL);
}

static const char *const BLOCK_KEYS[] = { "n_layers", "num_hidden_layers", "n_layer",
                                          "num_layers", NULL };
static const char *const CTX_KEYS[] = { "max_position_embeddings", "n_ctx", "n_positions",
                                        "max_length", "max_sequence_length",
                                        "model_max_length", NULL };
static const char *const EMBD_KEYS[] = { "hidden_size", "n_embd", "dim", NULL };
static const char *const FF_KEYS[] = { "prefix_dense_intermediate_size",
                                       "dense_intermediate_size", "intermediate_size",
                                       "n_inner", "hidden_dim", NULL };
static const char *const HEAD_KEYS[] = { "num_attention_heads", "n_head", "n_heads", NULL };
static const char *const HEAD_KV_KEYS[] = { "num_key_value_heads", "n_kv_heads", NULL };
static const char *const ROPE_THETA_KEYS[] = { "global_rope_theta", "rope_global_theta",
                                               "rope_theta_global", "rope_theta",
                                               "rotary_emb_base", NULL };
static const char *const RMS_EPS_KEYS[] = { "rms_norm_eps", "norm_eps", NULL };
static const char *const NORM_EPS_KEYS[] = { "layer_norm_eps", "layer_norm_epsilon",
                                             "norm_epsilon", NULL };

/* Keys that would change what the converter writes in ways ggufs does not convert yet:
 * a config holding any of them (not null) is refused rather than converted wrongly. */
static const char *const UNSUPPORTED[] = {
	"text_config", "rope_parameters", "rope_scaling", "local_rope_theta",
	"rope_local_theta", "rope_theta_local", "swa_rope_theta", "rope_local_base_freq",
	"num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
	"num_experts_per_token", "top_k_experts", "n_group", "topk_group", "score_function",
	"scoring_func", "score_func", "moe_router_activation", "moe_router_activation_func",
	"expert_selection_fn", "draft_vocab_size", "nextn_predict_layers",
	"num_nextn_predict_layers", "partial_rotary_factor",
};

/* v as a count GGUF's u32 holds, at least min: true with *out, else false. */
static bool as_u32(const json_t *v, uint32_t min, uint32_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    json_integer_value(v) > (json_int_t)UINT32_MAX)
		return false;
	*out = (uint32_t)json_integer_value(v);
	return true;
}

/* The hyperparameter under keys as a u32 of at least min: 1 with *out, 0 when absent
 * (or null), -1 with err when it is no such count. */
static int hparam_u32(const json_t *h, const char *const *keys, uint32_t min,
                      const char *shown, uint32_t *out, char err[GGUF_ERR_MAX])
{
	const char *key = keys[0];
	const json_t *v = find_hparam_key(h, keys, &key);
	if (!v)
		return 0;
	if (!as_u32(v, min, out)) {
		gguf_errf(err, "%s: '%s' is not a count from %" PRIu32 " to 2^32-1", shown,
		          key, min);
		return -1;
	}
	return 1;
}

/* Checks that every hyperparameter the converter writes is of the kind it writes:
 * 0, or -1 with err. */
static int check_kinds(const json_t *h, const char *shown, char err[GGUF_ERR_MAX])
{
	const char *const *u32s[] = { CTX_KEYS, FF_KEYS, HEAD_KV_KEYS };
	uint32_t u;
	for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++)
		if (hparam_u32(h, u32s[i], 0, shown, &u, err) < 0)
			return -1;
	const char *const *reals[] = { ROPE_THETA_KEYS, RMS_EPS_KEYS, NORM_EPS_KEYS };
	for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
		const char *key = reals[i][0];
		const json_t *v = find_hparam_key(h, reals[i], &key);
		if (v && !json_is_number(v)) {
			gguf_errf(err, "%s: '%s' is not a number", shown, key);
			return -1;
		}
	}
	const json_t *causal = json_object_get(h, "is_causal");
	if (causal && !json_is_null(causal) && !json_is_boolean(causal)) {
		gguf_errf(err, "%s: 'is_causal' is not true or false", shown);
		return -1;
	}
	return 0;
}

int st_config_parse(const char *json, size_t len, const char *shown, struct st_config *c,
                    char err[GGUF_ERR_MAX])
{
	memset(c, 0, sizeof *c);
	if (len > ST_CONFIG_MAX) {
		gguf_errf(err, "%s: %zu bytes, more than the %u KiB ggufs reads", shown, len,
		          ST_CONFIG_MAX >> 10);
		return -1;
	}
	json_error_t je;
	json_t *file = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!file) {
		gguf_errf(err, "%s: not JSON: %.200s (at byte %d)", shown, je.text, je.position);
		return -1;
	}
	json_t *h = NULL;
	if (!json_is_object(file)) {
		gguf_errf(err, "%s: not a JSON object", shown);
		goto fail;
	}
	const json_t *archs = json_object_get(file, "architectures");
	const char *arch = json_string_value(json_array_get(archs, 0));
	if (!arch) {
		gguf_errf(err, "%s: no architecture (\"architectures\": [NAME])", shown);
		goto fail;
	}
	size_t m;
	for (m = 0; m < sizeof model_classes / sizeof model_classes[0]; m++)
		if (strcmp(arch, model_classes[m].hf_arch) == 0)
			break;
	if (m == sizeof model_classes / sizeof model_classes[0]) {
		char known[256] = "";
		for (size_t i = 0; i < sizeof model_classes / sizeof model_classes[0]; i++)
			snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
			         i ? ", " : "", model_classes[i].hf_arch);
		gguf_errf(err, "%s: architecture '%.64s' is not one ggufs converts (it converts "
		          "%s)", shown, arch, known);
		goto fail;
	}
	const char *type = json_string_value(json_object_get(file, "model_type"));
	size_t k;
	for (k = 0; type && k < sizeof config_classes / sizeof config_classes[0]; k++)
		if (strcmp(type, config_classes[k].model_type) == 0)
			break;
	if (!type || k == sizeof config_classes / sizeof config_classes[0]) {
		gguf_errf(err, "%s: model_type '%.64s' (architecture %s) is not one ggufs "
		          "converts", shown, type ? type : "(none)", arch);
		goto fail;
	}
	h = json_loads(config_classes[k].defaults, 0, NULL);
	if (!h || json_object_update(h, file) < 0) {
		gguf_errf(err, "%s: out of memory", shown);
		goto fail;
	}
	for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++) {
		const json_t *v = json_object_get(h, UNSUPPORTED[i]);
		if (v && !json_is_null(v)) {
			gguf_errf(err, "%s: '%s' (architecture %s) is not converted by ggufs yet",
			          shown, UNSUPPORTED[i], arch);
			goto fail;
		}
	}
	const char *const *needed[] = { BLOCK_KEYS, HEAD_KEYS, EMBD_KEYS };
	uint32_t *into[] = { &c->block_count, &c->n_head, &c->n_embd };
	for (size_t i = 0; i < 3; i++) {
		const int r = hparam_u32(h, needed[i], 1, shown, into[i], err);
		if (r == 0)
			gguf_errf(err, "%s: lacks '%s' (architecture %s)", shown, needed[i][0], arch);
		if (r <= 0)
			goto fail;
	}
	if (c->block_count > ST_MAX_BLOCKS) {
		gguf_errf(err, "%s: %" PRIu32 " blocks, more than the %u ggufs converts", shown,
		          c->block_count, ST_MAX_BLOCKS);
		goto fail;
	}
	/* the config class's constructor: head_dim and num_key_value_heads filled in */
	const json_t *hd = json_object_get(h, "head_dim");
	if ((!hd || json_is_null(hd)) && config_classes[k].fills_head_dim)
		json_object_set_new(h, "head_dim", json_integer(c->n_embd / c->n_head));
	const json_t *kvh = json_object_get(h, "num_key_value_heads");
	if (!kvh || json_is_null(kvh))
		json_object_set_new(h, "num_key_value_heads", json_integer(c->n_head));
	/* LlamaModel's rope dimension: head_dim, else hidden / heads */
	hd = json_object_get(h, "head_dim");
	if (!hd || json_is_null(hd))
		c->rope_dim = c->n_embd / c->n_head;
	else if (!as_u32(hd, 1, &c->rope_dim)) {
		gguf_errf(err, "%s: 'head_dim' is not a count from 1 to 2^32-1", shown);
		goto fail;
	}
	c->n_head_kv = c->n_head;
	if (hparam_u32(h, HEAD_KV_KEYS, 1, shown, &c->n_head_kv, err) < 0)
		goto fail;
	if (!as_u32(json_object_get(h, "vocab_size"), 1, &c->vocab_size)) {
		gguf_errf(err, "%s: 'vocab_size' is not a count from 1 to 2^32-1", shown);
		goto fail;
	}
	if (check_kinds(h, shown, err) < 0)
		goto fail;
	snprintf(c->hf_arch, sizeof c->hf_arch, "%s", arch);
	c->names = st_names_find(model_classes[m].gguf_arch);
	if (!c->names) {
		gguf_errf(err, "%s: no name map for architecture %s", shown, arch);
		goto fail;
	}
	c->hparams = h;
	json_decref(file);
	return 0;
fail:
	json_decref(h);
	json_decref(file);
	memset(c, 0, sizeof *c);
	return -1;
}

void st_config_free(struct st_config *c)
{
	json_decref(c->hparams);
	memset(c, 0, sizeof *c);
}

/* "ARCH.SUFFIX" into buf (of GGUF_ERR_MAX bytes): a key of c's architecture. */
static const char *arch_key(const struct st_config *c, const char *suffix, char *buf)
{
	snprintf(buf, GGUF_ERR_MAX, "%s.%s", c->names->arch, suffix);
	return buf;
}

/* A u32 key from the hyperparameter under keys, when there is one (checked at parse). */
static void put_u32(const struct st_config *c, struct st_kv *kv, const char *suffix,
                    const char *const *keys)
{
	const json_t *v = find_hparam(c->hparams, keys);
	char key[GGUF_ERR_MAX];
	if (v)
		st_kv_u32(kv, arch_key(c, suffix, key), (uint32_t)json_integer_value(v));
}

/* A f32 key from the number under keys (a float64 rounded to float32 as numpy rounds
 * it), when there is one. */
static void put_f32(const struct st_config *c, struct st_kv *kv, const char *suffix,
                    const char *const *keys)
{
	const json_t *v = find_hparam(c->hparams, keys);
	char key[GGUF_ERR_MAX];
	if (v)
		st_kv_f32(kv, arch_key(c, suffix, key), (float)json_number_value(v));
}

void st_config_write_hparams(const struct st_config *c, enum st_ftype ftype,
                             struct st_kv *kv)
{
	char key[GGUF_ERR_MAX];
	/* TextModel.set_gguf_parameters */
	st_kv_u32(kv, arch_key(c, "block_count", key), c->block_count);
	put_u32(c, kv, "context_length", CTX_KEYS);
	put_u32(c, kv, "embedding_length", EMBD_KEYS);
	put_u32(c, kv, "feed_forward_length", FF_KEYS);
	put_u32(c, kv, "attention.head_count", HEAD_KEYS);
	put_u32(c, kv, "attention.head_count_kv", HEAD_KV_KEYS);
	const json_t *causal = json_object_get(c->hparams, "is_causal");
	if (json_is_false(causal))
		st_kv_bool(kv, arch_key(c, "attention.causal", key), false);
	put_f32(c, kv, "rope.freq_base", ROPE_THETA_KEYS);
	put_f32(c, kv, "attention.layer_norm_rms_epsilon", RMS_EPS_KEYS);
	put_f32(c, kv, "attention.layer_norm_epsilon", NORM_EPS_KEYS);
	const json_t *hd = json_object_get(c->hparams, "head_dim");
	if (hd && !json_is_null(hd)) {
		st_kv_u32(kv, arch_key(c, "attention.key_length", key),
		          (uint32_t)json_integer_value(hd));
		st_kv_u32(kv, arch_key(c, "attention.value_length", key),
		          (uint32_t)json_integer_value(hd));
	}
	st_kv_u32(kv, "general.file_type", (uint32_t)ftype);
	/* LlamaModel.set_gguf_parameters */
	st_kv_u32(kv, arch_key(c, "vocab_size", key), c->vocab_size);
	st_kv_u32(kv, arch_key(c, "rope.dimension_count", key), c->rope_dim);
}
