/* The quantizers' dispatch: which function makes each ggml type, without a matrix and
 * under one, and the row state the legacy types need under one. The block geometry is
 * the type table's (types.h); the family files (quant_float.c, quant_legacy.c,
 * quant_k.c, quant_iq4.c, quant_iq3.c, quant_iq2.c, quant_iq1.c, quant_misc.c) hold the
 * functions. */
#include "quant.h"
#include "quant_impl.h"

#include <errno.h>

/* The quantizer of every type this layer makes, by type id; NULL for the others. */
static const quant_fn makers[GGML_TYPE_COUNT] = {
	[GGML_TYPE_F32]  = quant_f32,
	[GGML_TYPE_F16]  = quant_f16,
	[GGML_TYPE_BF16] = quant_bf16,
	[GGML_TYPE_Q4_0] = quant_q4_0,
	[GGML_TYPE_Q4_1] = quant_q4_1,
	[GGML_TYPE_Q5_0] = quant_q5_0,
	[GGML_TYPE_Q5_1] = quant_q5_1,
	[GGML_TYPE_Q8_0] = quant_q8_0,
	[GGML_TYPE_Q2_K] = quant_q2_K,
	[GGML_TYPE_Q3_K] = quant_q3_K,
	[GGML_TYPE_Q4_K] = quant_q4_K,
	[GGML_TYPE_Q5_K] = quant_q5_K,
	[GGML_TYPE_Q6_K] = quant_q6_K,
	[GGML_TYPE_IQ4_NL] = quant_iq4_nl,
	[GGML_TYPE_IQ4_XS] = quant_iq4_xs,
	[GGML_TYPE_IQ3_S] = quant_iq3_s,
	[GGML_TYPE_TQ1_0] = quant_tq1_0,
	[GGML_TYPE_TQ2_0] = quant_tq2_0,
	[GGML_TYPE_MXFP4] = quant_mxfp4,
	[GGML_TYPE_Q1_0] = quant_q1_0,
	[GGML_TYPE_Q2_0] = quant_q2_0,
};

/* The quantizer under a matrix of every type whose bytes the matrix changes, or that
 * needs one. */
static const quant_w_fn weighted_makers[GGML_TYPE_COUNT] = {
	[GGML_TYPE_Q4_0] = quant_q4_0_w,
	[GGML_TYPE_Q4_1] = quant_q4_1_w,
	[GGML_TYPE_Q5_0] = quant_q5_0_w,
	[GGML_TYPE_Q5_1] = quant_q5_1_w,
	[GGML_TYPE_Q2_K] = quant_q2_K_w,
	[GGML_TYPE_Q3_K] = quant_q3_K_w,
	[GGML_TYPE_Q4_K] = quant_q4_K_w,
	[GGML_TYPE_Q5_K] = quant_q5_K_w,
	[GGML_TYPE_Q6_K] = quant_q6_K_w,
	[GGML_TYPE_IQ4_NL] = quant_iq4_nl_w,
	[GGML_TYPE_IQ4_XS] = quant_iq4_xs_w,
	[GGML_TYPE_IQ3_S] = quant_iq3_s_w,
	[GGML_TYPE_IQ2_XXS] = quant_iq2_xxs_w,
	[GGML_TYPE_IQ2_XS] = quant_iq2_xs_w,
	[GGML_TYPE_IQ2_S] = quant_iq2_s_w,
	[GGML_TYPE_IQ3_XXS] = quant_iq3_xxs_w,
	[GGML_TYPE_IQ1_S] = quant_iq1_s_w,
	[GGML_TYPE_IQ1_M] = quant_iq1_m_w,
};

/* The types whose ggml quantizer ignores the matrix: under one, their maker runs. */
static bool ignores_weights(enum ggml_type_id type)
{
	switch (type) {
	case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0:
	case GGML_TYPE_MXFP4: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_Q1_0:
	case GGML_TYPE_Q2_0:
		return true;
	default:
		return false;
	}
}

bool quant_can_make(enum ggml_type_id type)
{
	return (unsigned)type < GGML_TYPE_COUNT && makers[type] != NULL;
}

bool quant_can_make_weighted(enum ggml_type_id type)
{
	return (unsigned)type < GGML_TYPE_COUNT &&
	       (weighted_makers[type] != NULL || ignores_weights(type));
}

bool quant_requires_weights(enum ggml_type_id type)
{
	return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S;
}

bool quant_row_needs_values(enum ggml_type_id type, bool weighted)
{
	return weighted && (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_1 ||
	                    type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1);
}

/* The block size of type when n values are whole blocks of it, or 0 (n negative, not
 * whole blocks, or a type without a block size). */
static uint32_t whole_blocks(enum ggml_type_id type, int64_t n)
{
	const struct ggml_type *t = ggml_type_get(type);

	if (!t || t->block_elems == 0 || n < 0 || n % t->block_elems != 0)
		return 0;
	return t->block_elems;
}

int quant_row(enum ggml_type_id type, const float *x, void *y, int64_t n)
{
	if (!quant_can_make(type))
		return -EINVAL;
	uint32_t be = whole_blocks(type, n);
	if (be == 0)
		return -EINVAL;
	makers[type](x, y, n / be);
	return 0;
}

/* Runs type's weighted maker, or its plain one where the matrix changes nothing, over
 * n values (whole blocks of be). */
static void run_weighted(enum ggml_type_id type, uint32_t be, const float *x, void *y,
                         int64_t n, const float *weights, float sigma2)
{
	if (weighted_makers[type])
		weighted_makers[type](x, y, n / be, weights, sigma2);
	else
		makers[type](x, y, n / be);
}

/* ggml's sigma2 of a legacy row under a matrix: x^2 summed in order from the first
 * value, over the row's length as a float. */
static float row_sigma2(const float *x, int64_t n)
{
	float sum_x2 = 0;

	for (int64_t j = 0; j < n; j++)
		sum_x2 += x[j] * x[j];
	return sum_x2 / (float)n;
}

int quant_row_prepare(enum ggml_type_id type, const float *x_row, int64_t n_per_row,
                      const float *weights, struct quant_row_ctx *ctx)
{
	if (!quant_can_make_weighted(type) || (!weights && quant_requires_weights(type)))
		return -EINVAL;
	if (whole_blocks(type, n_per_row) == 0)
		return -EINVAL;
	const bool needs = quant_row_needs_values(type, weights != NULL);
	if (needs && !x_row)
		return -EINVAL;
	*ctx = (struct quant_row_ctx){ .type = (uint32_t)type, .n_per_row = n_per_row,
	                               .weighted = weights != NULL,
	                               .sigma2 = needs ? row_sigma2(x_row, n_per_row) : 0 };
	return 0;
}

int quant_blocks_weighted(enum ggml_type_id type, const float *x, void *y, int64_t n,
                          const float *weights, const struct quant_row_ctx *ctx)
{
	if (!quant_can_make_weighted(type) || ctx->type != (uint32_t)type ||
	    ctx->weighted != (weights != NULL) || (!weights && quant_requires_weights(type)))
		return -EINVAL;
	uint32_t be = whole_blocks(type, n);
	if (be == 0 || n > ctx->n_per_row)
		return -EINVAL;
	run_weighted(type, be, x, y, n, weights, ctx->sigma2);
	return 0;
}

int quant_row_weighted(enum ggml_type_id type, const float *x, void *y, int64_t n,
                       const float *weights)
{
	struct quant_row_ctx ctx;
	int r = quant_row_prepare(type, x, n, weights, &ctx);

	return r < 0 ? r : quant_blocks_weighted(type, x, y, n, weights, &ctx);
}
