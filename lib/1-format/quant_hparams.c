/* The hyperparameters llama_model_quantize() loads before it writes a byte: what
 * llama_model_create and llama_model_base::load_hparams (src/llama-model.cpp) read of a
 * model's metadata, in their order, with their refusals in llama.cpp's words: an
 * unknown architecture, a required key missing, any key read of another type, an array
 * of the wrong length or element type, and the values llama.cpp asserts (where it
 * aborts, the line says what it asserts); then the keys the architecture's own
 * load_arch_hparams requires whatever the model says (llama_archs.h: not those it reads
 * only under a condition, nor the types of those read optionally). */
#include "quant_rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "llama_archs.h"

/* ggml's gguf_type_name: the names llama.cpp's messages give types */
static const char *llama_type_name(uint32_t t)
{
	static const char *const names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32",
	                                     "bool", "str", "arr", "u64", "i64", "f64" };
	return t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* The keys of one model as llama.cpp's loader reads them: meta, and the architecture
 * that prefixes "%s." keys. */
struct hp_reader {
	const struct gguf_file *meta;
	const char *arch;
	char *err;
};

/* The key "ARCH.suffix" (into key, 256 bytes) and its entry, or NULL. */
static const struct gguf_kv *hp_find(const struct hp_reader *r, const char *suffix, char *key)
{
	snprintf(key, 256, "%s.%s", r->arch, suffix);
	return gguf_find_kv(r->meta, key);
}

/* llama_model_loader::get_key of a scalar of GGUF type want: 1 found (kv), 0 absent and
 * not required, -1 refused (absent and required, or of another type: llama.cpp throws
 * for either, whether required or not). */
static int hp_get(const struct hp_reader *r, const char *suffix, uint32_t want, bool required,
                  const struct gguf_kv **kv)
{
	char key[256];
	*kv = hp_find(r, suffix, key);
	if (!*kv) {
		if (!required)
			return 0;
		gguf_errf(r->err, "key not found in model: %s", key);
		return -1;
	}
	if ((*kv)->value.type != want) {
		gguf_errf(r->err, "key %s has wrong type %s but expected type %s", key,
		          llama_type_name((*kv)->value.type), llama_type_name(want));
		return -1;
	}
	return 1;
}

/* A uint32 key (get_key<uint32_t>) into *out, left as it was when absent. */
static int hp_u32(const struct hp_reader *r, const char *suffix, bool required, uint32_t *out)
{
	const struct gguf_kv *kv;
	int found = hp_get(r, suffix, GGUF_TYPE_UINT32, required, &kv);
	if (found > 0)
		*out = gguf_le32(kv->value.data);
	return found;
}

/* A key whose value is only checked for its type (bool, float32, string). */
static int hp_typed(const struct hp_reader *r, const char *suffix, uint32_t type)
{
	const struct gguf_kv *kv;
	return hp_get(r, suffix, type, false, &kv);
}

/* get_key_or_arr into a per-layer uint32 array: a uint32 for every layer, or an array of
 * n_layer uint32, int32 or bool (read as 0 or 1). *first gets layer 0's value, *max the
 * largest; both left as they were when the key is absent. */
static int hp_u32_or_arr(const struct hp_reader *r, const char *suffix, uint32_t n_layer,
                         uint32_t *first, uint32_t *max)
{
	char key[256];
	const struct gguf_kv *kv = hp_find(r, suffix, key);
	if (!kv)
		return 0;
	if (kv->value.type != GGUF_TYPE_ARRAY) {
		int found = hp_u32(r, suffix, false, first);
		*max = *first;
		return found;
	}
	if (kv->value.count != n_layer) {
		gguf_errf(r->err, "key %s has wrong array length; expected %" PRIu32 ", got %" PRIu32,
		          key, n_layer, (uint32_t)kv->value.count);
		return -1;
	}
	uint32_t et = kv->value.elem_type;
	if (et != GGUF_TYPE_UINT32 && et != GGUF_TYPE_INT32 && et != GGUF_TYPE_BOOL) {
		if (et == GGUF_TYPE_UINT64 || et == GGUF_TYPE_FLOAT32 || et == GGUF_TYPE_STRING)
			gguf_errf(r->err, "%s has wrong array element type %s", key, llama_type_name(et));
		else
			gguf_errf(r->err, "%s is not a string/float32/uint32/int32/uint64 array", key);
		return -1;
	}
	*max = 0;
	for (uint64_t i = 0; i < kv->value.count; i++) {
		uint32_t v = et == GGUF_TYPE_BOOL ? kv->value.data[i] != 0
		                                  : gguf_le32(kv->value.data + 4 * i);
		if (i == 0)
			*first = v;
		if (v > *max)
			*max = v;
	}
	return 1;
}

/* get_arr into a vector of strings: an array of strings; any other array refused, a key
 * that is no array ignored. */
static int hp_str_arr(const struct hp_reader *r, const char *suffix)
{
	char key[256];
	const struct gguf_kv *kv = hp_find(r, suffix, key);
	if (!kv || kv->value.type != GGUF_TYPE_ARRAY || kv->value.elem_type == GGUF_TYPE_STRING)
		return 0;
	uint32_t et = kv->value.elem_type;
	if (et == GGUF_TYPE_UINT32 || et == GGUF_TYPE_INT32 || et == GGUF_TYPE_UINT64
	    || et == GGUF_TYPE_FLOAT32)
		gguf_errf(r->err, "%s has wrong array element type %s", key, llama_type_name(et));
	else
		gguf_errf(r->err, "%s is not a string/float32/uint32/int32/uint64 array", key);
	return -1;
}

/* The rope scaling type names llama_rope_scaling_type_from_string knows ("linear" when
 * the key is absent); any other is a failed assertion in llama.cpp. */
static int hp_rope_scaling(const struct hp_reader *r)
{
	const struct gguf_kv *kv;
	int found = hp_get(r, "rope.scaling.type", GGUF_TYPE_STRING, false, &kv);
	if (found <= 0)
		return found;
	uint64_t len = gguf_le64(kv->value.data);
	const char *s = (const char *)kv->value.data + 8;
	static const char *const known[] = { "none", "linear", "yarn", "longrope" };
	/* llama.cpp compares the C string: the bytes up to a NUL */
	const char *nul = memchr(s, 0, len);
	size_t n = nul ? (size_t)(nul - s) : len;
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (strlen(known[i]) == n && memcmp(known[i], s, n) == 0)
			return 1;
	gguf_errf(r->err, "%s.rope.scaling.type is not none, linear, yarn or longrope: llama.cpp "
	          "asserts a known one", r->arch);
	return -1;
}

/* load_hparams's experts: llama.cpp asserts these (and the process dies) */
static int hp_experts(const struct hp_reader *r, const struct quant_hparams *hp,
                      uint32_t used_max, uint32_t groups, uint32_t group_used)
{
	const char *bad = NULL;
	if (hp->n_expert > 1024)
		bad = "expert_count at most 1024";
	else if (used_max > hp->n_expert)
		bad = "expert_used_count at most expert_count";
	else if (hp->n_expert > 0 && used_max == 0)
		bad = "expert_used_count above 0 with experts";
	else if (hp->n_expert > 0 && groups >= hp->n_expert)
		bad = "expert_group_count below expert_count";
	else if (hp->n_expert > 0 && groups > 1
	         && (hp->n_expert % groups || group_used == 0 || group_used >= groups))
		bad = "expert_count a multiple of expert_group_count, expert_group_used_count "
		      "from 1 to below it";
	else if (hp->n_expert == 0 && groups != 0)
		bad = "no expert_group_count without experts";
	if (!bad)
		return 0;
	gguf_errf(r->err, "%s.expert_count %" PRIu32 " and expert_used_count %" PRIu32
	          " do not agree: llama.cpp asserts %s", r->arch, hp->n_expert, used_max, bad);
	return -1;
}

/* WavTokenizer's decoder's own keys, read in load_hparams itself. */
static int hp_wavtokenizer(const struct hp_reader *r, uint32_t n_layer_all)
{
	uint32_t v = 0, posnet = 0, convnext = 0;
	if (hp_u32(r, "features_length", true, &v) < 0 || hp_u32(r, "embedding_length", true, &v) < 0
	    || hp_u32(r, "posnet.embedding_length", true, &v) < 0
	    || hp_u32(r, "posnet.block_count", true, &posnet) < 0
	    || hp_u32(r, "convnext.embedding_length", true, &v) < 0
	    || hp_u32(r, "convnext.block_count", true, &convnext) < 0)
		return -1;
	if (posnet > n_layer_all || convnext > n_layer_all) {
		gguf_errf(r->err, "%s.posnet.block_count or convnext.block_count is more than the "
		          "block count: llama.cpp asserts it is not", r->arch);
		return -1;
	}
	return 0;
}

/* The rest of load_hparams after the experts: feed-forward and head counts, rope, head
 * sizes, classifier labels. */
static int hp_heads_rope(const struct hp_reader *r, struct quant_hparams *hp, uint32_t n_embd)
{
	uint32_t mx, ff = 0;
	if (hp_u32_or_arr(r, "feed_forward_length", hp->n_layer_all, &ff, &mx) < 0
	    || hp_u32_or_arr(r, "attention.head_count", hp->n_layer_all, &hp->n_head, &mx) < 0)
		return -1;
	hp->n_head_kv = hp->n_head;
	if (hp_u32_or_arr(r, "attention.head_count_kv", hp->n_layer_all, &hp->n_head_kv, &mx) < 0
	    || hp_typed(r, "rope.scaling.finetuned", GGUF_TYPE_BOOL) < 0
	    || hp_u32(r, "rope.scaling.original_context_length", false, &mx) < 0
	    || hp_typed(r, "rope.freq_base", GGUF_TYPE_FLOAT32) < 0 || hp_rope_scaling(r) < 0)
		return -1;
	/* the old key name only when the new one is absent */
	int factor = hp_typed(r, "rope.scaling.factor", GGUF_TYPE_FLOAT32);
	if (factor < 0 || (factor == 0 && hp_typed(r, "rope.scale_linear", GGUF_TYPE_FLOAT32) < 0)
	    || hp_typed(r, "rope.scaling.attn_factor", GGUF_TYPE_FLOAT32) < 0
	    || hp_typed(r, "rope.scaling.alpha", GGUF_TYPE_FLOAT32) < 0)
		return -1;
	if (hp->n_head > 0) {
		uint32_t head_k = n_embd / hp->n_head, head_v = head_k;
		if (hp_u32(r, "attention.key_length", false, &head_k) < 0
		    || hp_u32(r, "attention.value_length", false, &head_v) < 0)
			return -1;
		uint32_t n_rot = head_k;
		if (hp_u32(r, "rope.dimension_count", false, &n_rot) < 0)
			return -1;
		if ((!strcmp(r->arch, "llama") || !strcmp(r->arch, "deci") || !strcmp(r->arch, "falcon")
		     || !strcmp(r->arch, "llama-embed")) && n_rot != head_k) {
			gguf_errf(r->err, "invalid n_rot: %" PRIu32 ", expected %" PRIu32, n_rot, head_k);
			return -1;
		}
	}
	if (hp_u32(r, "attention.key_length_swa", false, &mx) < 0
	    || hp_u32(r, "attention.value_length_swa", false, &mx) < 0
	    || hp_u32(r, "rope.dimension_count_swa", false, &mx) < 0
	    || hp_str_arr(r, "classifier.output_labels") < 0)
		return -1;
	return 0;
}

/* The keys the architecture's own load_arch_hparams requires (llama_archs.h). */
static int hp_arch_keys(const struct hp_reader *r, const struct llama_arch *arch)
{
	for (const struct llama_arch_key *k = arch->keys; k && k->key; k++) {
		const struct gguf_kv *kv = gguf_find_kv(r->meta, k->key);
		bool array = kv && kv->value.type == GGUF_TYPE_ARRAY;
		if (k->how == 'a' && !array) {
			gguf_errf(r->err, "array key not found in model: %s", k->key);
			return -1;
		}
		if (!kv) {
			gguf_errf(r->err, "key not found in model: %s", k->key);
			return -1;
		}
		uint32_t want = k->how == 'n' ? GGUF_TYPE_ARRAY
		              : k->how == 'k' ? k->type : LLAMA_ARCH_ANY_TYPE;
		if (want != LLAMA_ARCH_ANY_TYPE && kv->value.type != want) {
			gguf_errf(r->err, "key %s has wrong type %s but expected type %s", k->key,
			          llama_type_name(kv->value.type), llama_type_name(want));
			return -1;
		}
	}
	return 0;
}

int quant_hparams_read(const struct gguf_file *meta, struct quant_hparams *hp,
                       char err[GGUF_ERR_MAX])
{
	*hp = (struct quant_hparams){ 0 };
	const struct gguf_kv *a = gguf_find_kv(meta, "general.architecture");
	if (a && a->value.type != GGUF_TYPE_STRING) {
		gguf_errf(err, "key general.architecture has wrong type %s but expected type str",
		          llama_type_name(a->value.type));
		return -1;
	}
	uint64_t alen = a ? gguf_le64(a->value.data) : 0;
	const char *aptr = a ? (const char *)a->value.data + 8 : "";
	/* llama.cpp takes the string as a C string: up to its first NUL */
	const char *nul = memchr(aptr, 0, alen);
	if (nul)
		alen = (uint64_t)(nul - aptr);
	/* llama_model_create's refusals, before any hyperparameter is read */
	const struct llama_arch *known = llama_arch_find(aptr, alen);
	if (!known) {
		gguf_errf(err, "unknown model architecture: '%.*s%s'", alen > 64 ? 64 : (int)alen,
		          aptr, alen > 64 ? "..." : "");
		return -1;
	}
	if (!known->has_model) {
		gguf_errf(err, "unsupported model architecture: '%s'", known->name);
		return -1;
	}
	struct hp_reader r = { meta, known->name, err };
	const struct gguf_kv *kv;
	if (hp_get(&(struct hp_reader){ meta, "general", err }, "name", GGUF_TYPE_STRING, false,
	           &kv) < 0)
		return -1;
	/* a CLIP model's hyperparameters are not read at all; the rules below still need
	 * a block count, so one without is refused (where llama.cpp may make a file) */
	uint32_t n_embd = 0, v;
	if (strcmp(known->name, "clip") != 0
	    && (hp_u32(&r, "context_length", true, &v) < 0
	        || hp_u32(&r, "embedding_length", true, &n_embd) < 0
	        || hp_u32(&r, "embedding_length_out", false, &v) < 0
	        || hp_typed(&r, "attention.causal", GGUF_TYPE_BOOL) < 0
	        || hp_u32(&r, "pooling_type", false, &v) < 0))
		return -1;
	if (hp_u32(&r, "block_count", true, &hp->n_layer_all) < 0)
		return -1;
	if (hp->n_layer_all == 0 || hp->n_layer_all > 512) {
		gguf_errf(err, "%s.block_count is %" PRIu32 ": llama.cpp asserts 1 to 512", r.arch,
		          hp->n_layer_all);
		return -1;
	}
	if (strcmp(known->name, "clip") == 0)
		return 0;
	if (hp_u32(&r, "nextn_predict_layers", false, &hp->n_layer_nextn) < 0)
		return -1;
	if (hp->n_layer_nextn > hp->n_layer_all) {
		gguf_errf(err, "%s.nextn_predict_layers is more than the block count: llama.cpp "
		          "asserts it is not", r.arch);
		return -1;
	}
	uint32_t used_first = 0, used_max = 0, groups = 0, group_used = 0;
	if (hp_u32(&r, "expert_count", false, &hp->n_expert) < 0
	    || hp_u32_or_arr(&r, "expert_used_count", hp->n_layer_all, &used_first, &used_max) < 0
	    || hp_u32(&r, "expert_group_count", false, &groups) < 0
	    || hp_u32(&r, "expert_group_used_count", false, &group_used) < 0)
		return -1;
	if ((!strcmp(r.arch, "hunyuan_vl") || !strcmp(r.arch, "hunyuan-dense")) && hp->n_expert <= 1)
		hp->n_expert = used_max = 0;
	if (!strcmp(r.arch, "wavtokenizer-dec") && hp_wavtokenizer(&r, hp->n_layer_all) < 0)
		return -1;
	if (hp_experts(&r, hp, used_max, groups, group_used) < 0 || hp_heads_rope(&r, hp, n_embd) < 0
	    || hp_arch_keys(&r, known) < 0)
		return -1;

	hp->falcon = strcmp(r.arch, "falcon") == 0;
	hp->bailingmoe3 = strcmp(r.arch, "bailingmoe3") == 0;
	/* the architectures whose load_hparams can say LLM_TYPE_70B, on llama.cpp's own
	 * conditions (n_layer() is the layers less the next-token-prediction ones) */
	uint32_t n_layer = hp->n_layer_all - hp->n_layer_nextn;
	if (strcmp(r.arch, "llama") == 0)
		hp->type_70b = hp->n_expert != 8 && n_layer == 80 && hp->n_head != hp->n_head_kv;
	else if (!strcmp(r.arch, "qwen2") || !strcmp(r.arch, "deci") || !strcmp(r.arch, "olmo"))
		hp->type_70b = n_layer == 80;
	else if (strcmp(r.arch, "jais2") == 0)
		hp->type_70b = n_layer == 68;
	return 0;
}
