/* The quantizers' dispatch: which function makes each ggml type. The block geometry is
 * the type table's (types.h); the family files (quant_float.c, quant_legacy.c,
 * quant_k.c, ...) hold the functions. */
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
};

bool quant_can_make(enum ggml_type_id type)
{
	return (unsigned)type < GGML_TYPE_COUNT && makers[type] != NULL;
}

int quant_row(enum ggml_type_id type, const float *x, void *y, int64_t n)
{
	if (!quant_can_make(type))
		return -EINVAL;
	const struct ggml_type *t = ggml_type_get(type);
	if (!t || t->block_elems == 0 || n < 0 || n % t->block_elems != 0)
		return -EINVAL;
	makers[type](x, y, n / t->block_elems);
	return 0;
}
