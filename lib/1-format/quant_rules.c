#include "quant_rules.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types.h"

/* The 26 names, each with llama.cpp's ftype and default type. */
static const struct quant_name names[] = {
	{ "F32", QUANT_FTYPE_F32, GGML_TYPE_F32 },
	{ "F16", QUANT_FTYPE_F16, GGML_TYPE_F16 },
	{ "BF16", QUANT_FTYPE_BF16, GGML_TYPE_BF16 },
	{ "Q8_0", QUANT_FTYPE_Q8_0, GGML_TYPE_Q8_0 },
	{ "Q6_K", QUANT_FTYPE_Q6_K, GGML_TYPE_Q6_K },
	{ "Q5_K_M", QUANT_FTYPE_Q5_K_M, GGML_TYPE_Q5_K },
	{ "Q5_K_S", QUANT_FTYPE_Q5_K_S, GGML_TYPE_Q5_K },
	{ "Q5_1", QUANT_FTYPE_Q5_1, GGML_TYPE_Q5_1 },
	{ "Q5_0", QUANT_FTYPE_Q5_0, GGML_TYPE_Q5_0 },
	{ "Q4_K_M", QUANT_FTYPE_Q4_K_M, GGML_TYPE_Q4_K },
	{ "Q4_K_S", QUANT_FTYPE_Q4_K_S, GGML_TYPE_Q4_K },
	{ "Q4_1", QUANT_FTYPE_Q4_1, GGML_TYPE_Q4_1 },
	{ "Q4_0", QUANT_FTYPE_Q4_0, GGML_TYPE_Q4_0 },
	{ "Q3_K_L", QUANT_FTYPE_Q3_K_L, GGML_TYPE_Q3_K },
	{ "Q3_K_M", QUANT_FTYPE_Q3_K_M, GGML_TYPE_Q3_K },
	{ "Q3_K_S", QUANT_FTYPE_Q3_K_S, GGML_TYPE_Q3_K },
	{ "Q2_K", QUANT_FTYPE_Q2_K, GGML_TYPE_Q2_K },
	{ "IQ4_XS", QUANT_FTYPE_IQ4_XS, GGML_TYPE_IQ4_XS },
	{ "IQ4_NL", QUANT_FTYPE_IQ4_NL, GGML_TYPE_IQ4_NL },
	{ "IQ3_M", QUANT_FTYPE_IQ3_M, GGML_TYPE_IQ3_S },
	{ "IQ3_S", QUANT_FTYPE_IQ3_S, GGML_TYPE_IQ3_S },
	{ "TQ2_0", QUANT_FTYPE_TQ2_0, GGML_TYPE_TQ2_0 },
	{ "TQ1_0", QUANT_FTYPE_TQ1_0, GGML_TYPE_TQ1_0 },
	{ "MXFP4_MOE", QUANT_FTYPE_MXFP4_MOE, GGML_TYPE_MXFP4 },
	{ "Q2_0", QUANT_FTYPE_Q2_0, GGML_TYPE_Q2_0 },
	{ "Q1_0", QUANT_FTYPE_Q1_0, GGML_TYPE_Q1_0 },
};

/* The file types of llama.cpp that need an importance matrix, with their default types,
 * in llama-quantize's help order. */
static const struct quant_name imatrix_names[] = {
	{ "IQ2_XXS", QUANT_FTYPE_IQ2_XXS, GGML_TYPE_IQ2_XXS },
	{ "IQ2_XS", QUANT_FTYPE_IQ2_XS, GGML_TYPE_IQ2_XS },
	{ "IQ2_S", QUANT_FTYPE_IQ2_S, GGML_TYPE_IQ2_XS },
	{ "IQ2_M", QUANT_FTYPE_IQ2_M, GGML_TYPE_IQ2_S },
	{ "IQ1_S", QUANT_FTYPE_IQ1_S, GGML_TYPE_IQ1_S },
	{ "IQ1_M", QUANT_FTYPE_IQ1_M, GGML_TYPE_IQ1_M },
	{ "Q2_K_S", QUANT_FTYPE_Q2_K_S, GGML_TYPE_Q2_K },
	{ "IQ3_XS", QUANT_FTYPE_IQ3_XS, GGML_TYPE_IQ3_S },
	{ "IQ3_XXS", QUANT_FTYPE_IQ3_XXS, GGML_TYPE_IQ3_XXS },
};

const struct quant_name *quant_names(size_t *n)
{
	*n = sizeof names / sizeof names[0];
	return names;
}

const struct quant_name *quant_imatrix_names(size_t *n)
{
	*n = sizeof imatrix_names / sizeof imatrix_names[0];
	return imatrix_names;
}

const struct quant_name *quant_name_find(const char *name)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(names[i].name, name) == 0)
			return &names[i];
	for (size_t i = 0; i < sizeof imatrix_names / sizeof imatrix_names[0]; i++)
		if (strcmp(imatrix_names[i].name, name) == 0)
			return &imatrix_names[i];
	return NULL;
}

const struct quant_name *quant_name_of_ftype(uint32_t ftype)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].ftype == ftype)
			return &names[i];
	for (size_t i = 0; i < sizeof imatrix_names / sizeof imatrix_names[0]; i++)
		if (imatrix_names[i].ftype == ftype)
			return &imatrix_names[i];
	return NULL;
}

void quant_params_default(struct quant_params *p, uint32_t ftype)
{
	*p = (struct quant_params){
		.ftype = ftype,
		.output_tensor_type = QUANT_TYPE_NONE,
		.token_embedding_type = QUANT_TYPE_NONE,
		.quantize_output_tensor = true,
	};
}

void quant_params_imatrix(struct quant_params *p, const struct imatrix *im, const char *file)
{
	const bool some = im && im->n_entries > 0;
	p->imatrix = some ? im : NULL;
	p->imatrix_file = some ? file : NULL;
}

/* Whether ggml counts type id as quantized (ggml_is_quantized: not f32, f16, bf16,
 * f64 or an integer type). */
static bool quant_type_is_quantized(uint32_t id)
{
	switch (id) {
	case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_F64:
	case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
		return false;
	default:
		return true;
	}
}

uint32_t quant_n_dims(const struct gguf_tensor *t)
{
	for (uint32_t d = GGUF_MAX_DIMS; d > 1; d--)
		if (t->ne[d - 1] > 1)
			return d;
	return 1;
}

/* Values per block of a type with a known layout; 0 for any other. */
static uint64_t blck(uint32_t type)
{
	const struct ggml_type *ti = ggml_type_get(type);
	return ti && ti->block_bytes ? ti->block_elems : 0;
}

bool quant_tensor_bytes(const struct gguf_tensor *t, uint32_t type, uint64_t *bytes)
{
	const struct ggml_type *ti = ggml_type_get(type);
	if (!ti || !ti->block_bytes || !ti->block_elems || t->ne[0] % ti->block_elems)
		return false;
	uint64_t v = t->ne[0] / ti->block_elems * ti->block_bytes;
	for (int d = 1; d < GGUF_MAX_DIMS; d++)
		if (__builtin_mul_overflow(v, t->ne[d], &v))
			return false;
	*bytes = v;
	return true;
}

/* ---- order ---- */

/* What sscanf(name, "blk.%d.", &layer) leaves in layer (glibc: leading white space and
 * a sign taken, the digits through strtol, so saturated to a long, then converted to
 * int by dropping the high bits); -1 when it matches nothing. name is NUL-terminated. */
static int blk_layer(const char *name, bool *found)
{
	*found = false;
	if (strncmp(name, "blk.", 4) != 0)
		return -1;
	const char *p = name + 4;
	while (*p == ' ' || (*p >= '\t' && *p <= '\r'))
		p++;
	bool neg = false;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9')
		return -1;
	uint64_t v = 0;
	bool sat = false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > ((uint64_t)INT64_MAX + 1 - (uint64_t)(*p - '0')) / 10)
			sat = true;
		else
			v = v * 10 + (uint64_t)(*p - '0');
	}
	int64_t l;
	if (neg)
		l = sat || v > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)v;
	else
		l = sat || v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
	*found = true;
	return (int)(int32_t)(uint32_t)(uint64_t)l;
}

/* A tensor name as a C string (checked by quant_rules_order to fit). */
static void cname(const struct gguf_tensor *t, char out[64])
{
	memcpy(out, t->name.ptr, t->name.len);
	out[t->name.len] = 0;
}

struct order_item {
	int layer;
	const struct gguf_tensor *t;
	uint64_t index;
};

/* llama_model_loader's weight_name_comparer: by layer, then std::string's order. */
static int order_cmp(const void *pa, const void *pb)
{
	const struct order_item *a = pa, *b = pb;
	if (a->layer != b->layer)
		return a->layer < b->layer ? -1 : 1;
	uint64_t n = a->t->name.len < b->t->name.len ? a->t->name.len : b->t->name.len;
	int c = memcmp(a->t->name.ptr, b->t->name.ptr, n);
	if (c)
		return c;
	return a->t->name.len < b->t->name.len ? -1 : a->t->name.len > b->t->name.len;
}

int quant_rules_order(const struct gguf_tensor *const *tensors, uint64_t n, uint64_t *order,
                      char err[GGUF_ERR_MAX])
{
	if (n > SIZE_MAX / sizeof(struct order_item)) {
		gguf_errf(err, "out of memory for %" PRIu64 " tensors", n);
		return -1;
	}
	struct order_item *it = malloc((n ? n : 1) * sizeof *it);
	if (!it) {
		gguf_errf(err, "out of memory for %" PRIu64 " tensors", n);
		return -1;
	}
	for (uint64_t i = 0; i < n; i++) {
		const struct gguf_tensor *t = tensors[i];
		char q[80], name[64];
		/* ggml keeps names in 64 bytes with their NUL (GGML_MAX_NAME) */
		if (t->name.len >= 64 || memchr(t->name.ptr, 0, t->name.len)) {
			gguf_errf(err, "tensor name '%s' is not one llama.cpp can hold (63 bytes "
			          "at most, no NUL)", gguf_quote(&t->name, q));
			free(it);
			return -1;
		}
		cname(t, name);
		bool found;
		it[i] = (struct order_item){ .layer = blk_layer(name, &found), .t = t, .index = i };
	}
	qsort(it, n, sizeof *it, order_cmp);
	for (uint64_t i = 0; i < n; i++)
		order[i] = it[i].index;
	free(it);
	return 0;
}

/* ---- types ---- */

enum category {
	CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
	CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER,
};

static bool has(const char *name, const char *part)
{
	return strstr(name, part) != NULL;
}

/* tensor_get_category: the first of these the name matches. */
static enum category category_of(const char *name)
{
	if (!strcmp(name, "output.weight"))
		return CAT_OUTPUT;
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
		return CAT_TOKEN_EMBD;
	static const struct { const char *part; enum category cat; } parts[] = {
		{ "attn_qkv.weight", CAT_ATTN_QKV }, { "attn_kv_b.weight", CAT_ATTN_KV_B },
		{ "attn_v.weight", CAT_ATTN_V }, { "attn_k.weight", CAT_ATTN_K },
		{ "attn_q.weight", CAT_ATTN_Q }, { "attn_output.weight", CAT_ATTN_OUTPUT },
		{ "ffn_up", CAT_FFN_UP }, { "ffn_gate", CAT_FFN_GATE }, { "ffn_down", CAT_FFN_DOWN },
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (has(name, parts[i].part))
			return parts[i].cat;
	return CAT_OTHER;
}

static bool is_attn_v(enum category c)
{
	return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B;
}

/* tensor_allows_quantization: 2-D and 3-D weights, less the kinds llama.cpp keeps. */
static bool allows(const struct quant_params *p, const struct gguf_tensor *t, const char *name)
{
	if (quant_n_dims(t) < 2)
		return false;
	size_t len = strlen(name);
	/* name.rfind("weight") == name.size() - 6: also true of any 5-byte name, where
	 * both sides are npos */
	bool q = (len >= 6 && !strcmp(name + len - 6, "weight")) || len == 5;
	q = q && !has(name, "_norm.weight");
	q = q && (p->quantize_output_tensor || strcmp(name, "output.weight"));
	static const char *const keep[] = {
		"ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
		"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
		"indexer.k_proj.weight", "indexer.q_proj.weight",
		"time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
		"time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
		"time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
		"time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
		"time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
		"time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
		"sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
		".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
	};
	for (size_t i = 0; q && i < sizeof keep / sizeof keep[0]; i++)
		q = !has(name, keep[i]);
	q = q && strcmp(name, "position_embd.weight") && strcmp(name, "token_types.weight");
	return q;
}

/* quantize_state_impl: the counters the rules keep across tensors. */
struct qstate {
	const struct quant_hparams *hp;
	const struct quant_params *p;
	int n_attention_wv, n_ffn_down, n_ffn_gate, n_ffn_up;
	int i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
	bool has_tied_embeddings;
};

static bool use_more_bits(int i_layer, int n_layers)
{
	return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
	       (i_layer - n_layers / 8) % 3 == 2;
}

/* layer_info: the counter's layer, or with experts the name's; -1 with err when the
 * name says no layer in range. */
static int layer_of(const struct qstate *qs, int counter, int n_layer, const char *name,
                    int *i_layer, char err[GGUF_ERR_MAX])
{
	*i_layer = counter;
	uint32_t n_expert = qs->hp->n_expert > 1 ? qs->hp->n_expert : 1;
	if (n_expert > 1) {
		bool found;
		int l = blk_layer(name, &found);
		if (!found) {
			gguf_errf(err, "Failed to determine layer for tensor %s", name);
			return -1;
		}
		if (l < 0 || l >= n_layer) {
			gguf_errf(err, "Bad layer %d for tensor %s. Must be in [0, %d)", l, name, n_layer);
			return -1;
		}
		*i_layer = l;
	}
	return 0;
}

#define FT(x) (ftype == QUANT_FTYPE_##x)
#define T(x) GGML_TYPE_##x

/* llama_tensor_get_type_impl: the type the mixture gives a tensor of category cat
 * whose default is new_type. -1 with err where llama.cpp throws. */
static int type_impl(struct qstate *qs, uint32_t *new_type_io, const struct gguf_tensor *t,
                     const char *name, enum category cat, char err[GGUF_ERR_MAX])
{
	const struct quant_hparams *hp = qs->hp;
	const uint32_t ftype = qs->p->ftype;
	uint32_t new_type = *new_type_io;
	const uint32_t n_gqa = hp->n_head_kv ? hp->n_head / hp->n_head_kv : 0;
	const bool falcon = hp->falcon;
	const bool iq2_family = FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ2_S) ||
	                        FT(IQ2_M) || FT(IQ1_M);

	if (cat == CAT_OUTPUT || (qs->has_tied_embeddings && cat == CAT_TOKEN_EMBD)) {
		if (qs->p->output_tensor_type != QUANT_TYPE_NONE) {
			new_type = qs->p->output_tensor_type;
		} else {
			const uint64_t nx = t->ne[0];
			const uint64_t qk_k = blck(new_type);
			if (FT(MXFP4_MOE))
				new_type = T(Q8_0);
			else if (falcon || nx % qk_k != 0)
				new_type = T(Q8_0);
			else if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ3_XXS) || FT(IQ1_S) || FT(IQ2_S) ||
			         FT(IQ2_M) || FT(IQ1_M))
				new_type = T(Q5_K);
			else if (new_type != T(Q8_0))
				new_type = T(Q6_K);
		}
	} else if (FT(MXFP4_MOE)) {
		/* MoE tensors (3-D) to MXFP4, the others to Q8_0 */
		const bool bailing_expert = hp->bailingmoe3 &&
			(cat == CAT_FFN_UP || cat == CAT_FFN_GATE || cat == CAT_FFN_DOWN);
		if (t->ne[2] > 1 && (!hp->bailingmoe3 || bailing_expert))
			new_type = T(MXFP4);
		else
			new_type = T(Q8_0);
	} else if (cat == CAT_TOKEN_EMBD) {
		if (qs->p->token_embedding_type != QUANT_TYPE_NONE)
			new_type = qs->p->token_embedding_type;
		else if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ1_M))
			new_type = T(Q2_K);
		else if (FT(IQ2_S) || FT(IQ2_M))
			new_type = T(IQ3_S);
		else if (FT(IQ3_XXS))
			new_type = T(IQ3_S);
		else if (FT(TQ1_0) || FT(TQ2_0) || FT(Q2_0))
			new_type = T(Q4_K);
	} else if (iq2_family) {
		if (is_attn_v(cat)) {
			if (n_gqa >= 4 || hp->n_expert >= 4)
				new_type = T(Q4_K);
			else
				new_type = FT(IQ2_S) || FT(IQ2_M) ? T(IQ3_S) : T(Q2_K);
			++qs->i_attention_wv;
		} else if (hp->n_expert == 8 && cat == CAT_ATTN_K) {
			new_type = T(Q4_K);
		} else if (cat == CAT_FFN_DOWN) {
			if (qs->i_ffn_down < qs->n_ffn_down / 8)
				new_type = FT(IQ2_S) || FT(IQ2_M) ? T(IQ3_S) : T(Q2_K);
			++qs->i_ffn_down;
		} else if (cat == CAT_ATTN_OUTPUT) {
			if (hp->n_expert == 8)
				new_type = T(Q5_K);
			else if (FT(IQ1_S) || FT(IQ1_M))
				new_type = T(IQ2_XXS);
			else if (FT(IQ2_S) || FT(IQ2_M))
				new_type = T(IQ3_S);
		}
	} else if (is_attn_v(cat)) {
		if (FT(Q2_K))
			new_type = n_gqa >= 4 ? T(Q4_K) : T(Q3_K);
		else if (FT(Q2_K_S) && n_gqa >= 4)
			new_type = T(Q4_K);
		else if (FT(IQ3_XXS))
			new_type = n_gqa >= 4 ? T(Q4_K) : !qs->p->imatrix ? T(IQ3_S) : T(IQ3_XXS);
		else if ((FT(IQ3_XS) || FT(IQ3_S)) && n_gqa >= 4)
			new_type = T(Q4_K);
		else if (FT(IQ3_M))
			new_type = T(Q4_K);
		else if (FT(Q3_K_M))
			new_type = qs->i_attention_wv < 2 ? T(Q5_K) : T(Q4_K);
		else if (FT(Q3_K_L))
			new_type = T(Q5_K);
		else if ((FT(IQ4_NL) || FT(IQ4_XS)) && n_gqa >= 4)
			new_type = T(Q5_K);
		else if ((FT(Q4_K_M) || FT(Q5_K_M)) &&
		         use_more_bits(qs->i_attention_wv, qs->n_attention_wv))
			new_type = T(Q6_K);
		else if (FT(Q4_K_S) && qs->i_attention_wv < 4)
			new_type = T(Q5_K);
		/* a 70B's attn_v is 8 times smaller than its attn_q: more bits cost little */
		if (hp->type_70b && (new_type == T(Q3_K) || new_type == T(Q4_K)))
			new_type = T(Q5_K);
		if (hp->n_expert == 8)
			new_type = T(Q8_0);
		++qs->i_attention_wv;
	} else if (cat == CAT_ATTN_K) {
		if (hp->n_expert == 8)
			new_type = T(Q8_0);
		else if (FT(IQ3_XS))
			new_type = T(IQ3_XXS);
		else if (FT(IQ3_XXS))
			new_type = T(IQ2_S);
	} else if (cat == CAT_ATTN_Q) {
		if (FT(IQ3_XS))
			new_type = T(IQ3_XXS);
		else if (FT(IQ3_XXS))
			new_type = T(IQ2_S);
	} else if (cat == CAT_FFN_DOWN) {
		int i_layer, n_layer = qs->n_ffn_down;
		if (layer_of(qs, qs->i_ffn_down, n_layer, name, &i_layer, err) < 0)
			return -1;
		if (FT(Q2_K)) {
			new_type = T(Q3_K);
		} else if (FT(Q2_K_S)) {
			if (i_layer < n_layer / 8)
				new_type = T(Q4_K);
		} else if (FT(IQ3_XXS) && !qs->p->imatrix) {
			new_type = i_layer < n_layer / 8 ? T(Q4_K) : T(Q3_K);
		} else if (FT(Q3_K_M)) {
			new_type = i_layer < n_layer / 16 ? T(Q5_K)
			         : !falcon || use_more_bits(i_layer, n_layer) ? T(Q4_K) : T(Q3_K);
		} else if (FT(IQ3_M) && (i_layer < n_layer / 8 ||
		                         (hp->n_expert == 8 && use_more_bits(i_layer, n_layer)))) {
			new_type = T(Q4_K);
		} else if (FT(Q3_K_L)) {
			new_type = falcon ? T(Q4_K) : T(Q5_K);
		} else if (FT(Q4_K_M)) {
			if (falcon)
				new_type = i_layer < n_layer / 16 ? T(Q6_K)
				         : use_more_bits(i_layer, n_layer) ? T(Q5_K) : T(Q4_K);
			else if (use_more_bits(i_layer, n_layer))
				new_type = T(Q6_K);
		} else if (i_layer < n_layer / 8 && (FT(IQ4_NL) || FT(IQ4_XS)) &&
		           !qs->p->imatrix) {
			new_type = T(Q5_K);
		} else if (FT(Q5_K_M) && use_more_bits(i_layer, n_layer)) {
			new_type = T(Q6_K);
		} else if (FT(Q4_K_S) && !falcon && i_layer < n_layer / 8) {
			new_type = T(Q5_K);
		} else if ((FT(Q4_0) || FT(Q5_0)) && qs->p->imatrix && i_layer < n_layer / 8) {
			new_type = FT(Q4_0) ? T(Q4_1) : T(Q5_1);
		}
		++qs->i_ffn_down;
	} else if (cat == CAT_ATTN_OUTPUT) {
		if (!falcon) {
			if (hp->n_expert == 8) {
				if (FT(Q2_K) || FT(IQ3_XS) || FT(IQ3_XXS) || FT(Q3_K_S) || FT(Q3_K_M) ||
				    FT(IQ4_NL) || FT(Q4_K_S) || FT(Q4_K_M) || FT(IQ3_S) || FT(IQ3_M) ||
				    FT(IQ4_XS))
					new_type = T(Q5_K);
			} else {
				if (FT(Q2_K))
					new_type = T(Q3_K);
				else if (FT(IQ3_XXS))
					new_type = T(IQ3_S);
				else if (FT(Q3_K_M))
					new_type = T(Q4_K);
				else if (FT(Q3_K_L))
					new_type = T(Q5_K);
				else if (FT(IQ3_M))
					new_type = T(Q4_K);
			}
		} else if (FT(Q3_K_L)) {
			new_type = T(Q4_K);
		}
	} else if (cat == CAT_ATTN_QKV) {
		if (FT(Q3_K_M) || FT(Q3_K_L) || FT(IQ3_M))
			new_type = T(Q4_K);
		else if (FT(Q4_K_M))
			new_type = T(Q5_K);
		else if (FT(Q5_K_M))
			new_type = T(Q6_K);
	} else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
		int *counter = cat == CAT_FFN_GATE ? &qs->i_ffn_gate : &qs->i_ffn_up;
		int n_layer = cat == CAT_FFN_GATE ? qs->n_ffn_gate : qs->n_ffn_up;
		int i_layer;
		if (layer_of(qs, *counter, n_layer, name, &i_layer, err) < 0)
			return -1;
		if (FT(IQ3_XS) && i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8)
			new_type = T(IQ3_XXS);
		++*counter;
	}
	*new_type_io = new_type;
	return 0;
}

/* tensor_type_fallback: a type whose block divides the row, as llama.cpp demotes. -1
 * with err for a target it has no fallback for. */
static int fallback(const struct gguf_tensor *t, uint32_t *type, char err[GGUF_ERR_MAX])
{
	const uint64_t ncols = t->ne[0];
	const uint64_t qk = blck(*type);
	if (!qk) {
		gguf_errf(err, "type %" PRIu32 " has no block layout ggufs knows", *type);
		return -1;
	}
	if (ncols % qk == 0)
		return 0;
	uint32_t r;
	switch (*type) {
	case T(IQ1_S): case T(IQ1_M): case T(IQ2_XXS): case T(IQ2_XS): case T(IQ2_S):
	case T(IQ3_XXS): case T(IQ3_S): case T(IQ4_XS):
		r = T(IQ4_NL);
		break;
	case T(Q2_0): case T(Q2_K): case T(Q3_K): case T(TQ1_0): case T(TQ2_0):
		r = T(Q4_0);
		break;
	case T(Q4_K): r = T(Q5_0); break;
	case T(Q5_K): r = T(Q5_1); break;
	case T(Q6_K): r = T(Q8_0); break;
	default:
		if (qk <= 32) {
			r = *type;
			break;
		}
		{
			char b[16];
			gguf_errf(err, "no tensor type fallback is defined for type %s",
			          ggml_type_name(*type, b));
		}
		return -1;
	}
	if (ncols % blck(r) != 0)
		r = T(F16);
	*type = r;
	return 0;
}

/* tensor_requires_imatrix */
static bool requires_imatrix(const char *name, uint32_t type, uint32_t ftype)
{
	if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight") ||
	    !strcmp(name, "output.weight"))
		return false;
	switch (type) {
	case T(IQ3_XXS): case T(IQ2_XXS): case T(IQ2_XS): case T(IQ2_S): case T(IQ1_M):
	case T(IQ1_S):
		return true;
	case T(Q2_K):
		return FT(Q2_K_S);
	default:
		return false;
	}
}

/* The refusal of a --tensor-type search that gave up on tensor name: -1. */
static int too_complex(const char *name, char err[GGUF_ERR_MAX])
{
	gguf_errf(err, "a --tensor-type regex took too many steps on tensor %s", name);
	return -1;
}

/* llama_tensor_get_type: one tensor's type. -1 with err where llama.cpp throws. */
static int tensor_type(struct qstate *qs, const struct gguf_tensor *t, const char *name,
                       uint32_t default_type, uint32_t *out, char err[GGUF_ERR_MAX])
{
	const struct quant_params *p = qs->p;
	if (!allows(p, t, name)) {
		*out = t->type;
		return 0;
	}
	enum category cat = category_of(name);
	if (p->token_embedding_type != QUANT_TYPE_NONE && cat == CAT_TOKEN_EMBD) {
		/* per_layer_token_embd follows it unless a --tensor-type pattern names it */
		const uint32_t named = strcmp(name, "per_layer_token_embd.weight") || !p->tensor_type
			? QUANT_TYPE_NONE : p->tensor_type(p->tensor_type_ctx, name, strlen(name));
		if (named == QUANT_TYPE_TOO_COMPLEX)
			return too_complex(name, err);
		if (named == QUANT_TYPE_NONE) {
			*out = p->token_embedding_type;
			return 0;
		}
	}
	if (p->output_tensor_type != QUANT_TYPE_NONE && cat == CAT_OUTPUT) {
		*out = p->output_tensor_type;
		return 0;
	}
	uint32_t new_type = default_type;
	if (quant_type_is_quantized(default_type)) {
		bool manual = false;
		if (p->tensor_type) {
			uint32_t m = p->tensor_type(p->tensor_type_ctx, name, strlen(name));
			if (m == QUANT_TYPE_TOO_COMPLEX)
				return too_complex(name, err);
			if (m != QUANT_TYPE_NONE) {
				new_type = m;
				manual = true;
			}
		}
		if (!manual && !p->pure && type_impl(qs, &new_type, t, name, cat, err) < 0)
			return -1;
		if (fallback(t, &new_type, err) < 0)
			return -1;
	}
	*out = new_type;
	return 0;
}

/* The main loop's look for a converted tensor's weights in the importance matrix: an
 * entry of ne[0] x ne[2] values (one row of weights per expert) is its weights (into
 * *out when out is not NULL); one of another size refuses the file, but for the token
 * embeddings, which then go without; a tensor whose type needs weights refuses it
 * without them. 0, or -1 with err. */
static int matrix_weights(const struct quant_params *p, const struct gguf_tensor *t,
                          const char *name, uint32_t type, const struct imatrix_entry **out,
                          char err[GGUF_ERR_MAX])
{
	const struct imatrix_entry *e = imatrix_find(p->imatrix, name, strlen(name));
	/* ne[0] * ne[2] <= n_elements, which the parser bounded */
	const uint64_t want = t->ne[0] * t->ne[2];
	if (e && e->n_values != want) {
		if (strcmp(name, "token_embd.weight") && strcmp(name, "per_layer_token_embd.weight")) {
			gguf_errf(err, "imatrix size %d is different from tensor size %d for %s",
			          (int)e->n_values, (int)want, name);
			return -1;
		}
		e = NULL;
	}
	if (!e && requires_imatrix(name, type, p->ftype)) {
		gguf_errf(err, "Missing importance matrix for tensor %s in a very low-bit "
		          "quantization", name);
		return -1;
	}
	if (out)
		*out = e;
	return 0;
}

int quant_rules_types(const struct quant_hparams *hp, const struct quant_params *p,
                      const struct gguf_tensor *const *tensors, uint64_t n, uint32_t *types,
                      const struct imatrix_entry **weights, char err[GGUF_ERR_MAX])
{
	const uint32_t ftype = p->ftype;
	const struct quant_name *qn = quant_name_of_ftype(ftype);
	if (!qn) {
		gguf_errf(err, "invalid output file type %" PRIu32, ftype);
		return -1;
	}
	struct qstate qs = { .hp = hp, .p = p, .has_tied_embeddings = true };
	/* init_quantize_state_counters */
	for (uint64_t i = 0; i < n; i++) {
		char name[64];
		cname(tensors[i], name);
		enum category c = category_of(name);
		if (is_attn_v(c))
			++qs.n_attention_wv;
		if (c == CAT_OUTPUT)
			qs.has_tied_embeddings = false;
	}
	qs.n_ffn_down = qs.n_ffn_gate = qs.n_ffn_up = (int)hp->n_layer_all;

	/* the preliminary pass over every tensor: its type, and a refusal before any is
	 * written */
	for (uint64_t i = 0; i < n; i++) {
		const struct gguf_tensor *t = tensors[i];
		char name[64], b1[16];
		cname(t, name);
		if (tensor_type(&qs, t, name, qn->default_type, &types[i], err) < 0)
			return -1;
		if (!p->imatrix && allows(p, t, name) && requires_imatrix(name, types[i], ftype)) {
			gguf_errf(err, "this quantization requires an imatrix! (tensor %s, type %s)",
			          name, ggml_type_name(types[i], b1));
			return -1;
		}
	}
	/* the main loop's refusals, for each tensor that is converted, in order */
	for (uint64_t i = 0; i < n; i++) {
		const struct gguf_tensor *t = tensors[i];
		const uint32_t nt = types[i];
		char name[64], b1[16], b2[16];
		cname(t, name);
		if (weights)
			weights[i] = NULL;
		if (nt == t->type)
			continue;
		if (p->imatrix && matrix_weights(p, t, name, nt, weights ? &weights[i] : NULL, err) < 0)
			return -1;
		if (!blck(nt) || t->ne[0] % blck(nt)) {
			gguf_errf(err, "tensor %s: type %s does not fit its rows", name,
			          ggml_type_name(nt, b1));
			return -1;
		}
		if (quant_type_is_quantized(t->type)) {
			if (!p->allow_requantize) {
				gguf_errf(err, "requantizing from type %s is disabled",
				          ggml_type_name(t->type, b1));
				return -1;
			}
			if (!t->has_f32) {
				gguf_errf(err, "type %s unsupported for integer quantization: no "
				          "dequantization available", ggml_type_name(t->type, b1));
				return -1;
			}
		} else if (t->type != T(F32) && t->type != T(F16) && t->type != T(BF16)) {
			gguf_errf(err, "cannot dequantize/convert tensor type %s",
			          ggml_type_name(t->type, b1));
			return -1;
		}
		/* it quantizes ne[1] x ne[2] rows and then checks the size of all of them,
		 * which a 4-D tensor fails (an assert: the process dies) */
		if (t->ne[3] > 1) {
			gguf_errf(err, "tensor %s is 4-D, which llama.cpp cannot convert to %s",
			          name, ggml_type_name(nt, b2));
			return -1;
		}
	}
	return 0;
}
