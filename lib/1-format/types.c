#include "types.h"
#include "blocks.h"

#include <pthread.h>
#include <stdio.h>

/* One row per ggml type id, removed ones included (so that xattrs and gguf.json can
 * name a raw-only tensor): the single place that knows each type's name and block
 * geometry. A row with a name only (a removed id, q8_1, q8_K: types ggufs has no
 * dequantizer for) has no geometry either, and its tensors get a raw file only. */
static const struct type_row {
	const char *name;       /* ggml's name */
	uint32_t block_elems;   /* values per block */
	uint32_t block_bytes;   /* bytes per block: sizeof the struct in blocks.h */
} rows[GGML_TYPE_COUNT] = {
	[GGML_TYPE_F32]     = { "f32", 1, sizeof(float) },
	[GGML_TYPE_F16]     = { "f16", 1, sizeof(uint16_t) },
	[GGML_TYPE_Q4_0]    = { "q4_0", QK, sizeof(struct block_q4_0) },
	[GGML_TYPE_Q4_1]    = { "q4_1", QK, sizeof(struct block_q4_1) },
	[4]                 = { .name = "q4_2" },
	[5]                 = { .name = "q4_3" },
	[GGML_TYPE_Q5_0]    = { "q5_0", QK, sizeof(struct block_q5_0) },
	[GGML_TYPE_Q5_1]    = { "q5_1", QK, sizeof(struct block_q5_1) },
	[GGML_TYPE_Q8_0]    = { "q8_0", QK, sizeof(struct block_q8_0) },
	[GGML_TYPE_Q8_1]    = { .name = "q8_1" },
	[GGML_TYPE_Q2_K]    = { "q2_K", QK_K, sizeof(struct block_q2_K) },
	[GGML_TYPE_Q3_K]    = { "q3_K", QK_K, sizeof(struct block_q3_K) },
	[GGML_TYPE_Q4_K]    = { "q4_K", QK_K, sizeof(struct block_q4_K) },
	[GGML_TYPE_Q5_K]    = { "q5_K", QK_K, sizeof(struct block_q5_K) },
	[GGML_TYPE_Q6_K]    = { "q6_K", QK_K, sizeof(struct block_q6_K) },
	[GGML_TYPE_Q8_K]    = { .name = "q8_K" },
	[GGML_TYPE_IQ2_XXS] = { "iq2_xxs", QK_K, sizeof(struct block_iq2_xxs) },
	[GGML_TYPE_IQ2_XS]  = { "iq2_xs", QK_K, sizeof(struct block_iq2_xs) },
	[GGML_TYPE_IQ3_XXS] = { "iq3_xxs", QK_K, sizeof(struct block_iq3_xxs) },
	[GGML_TYPE_IQ1_S]   = { "iq1_s", QK_K, sizeof(struct block_iq1_s) },
	[GGML_TYPE_IQ4_NL]  = { "iq4_nl", QK4_NL, sizeof(struct block_iq4_nl) },
	[GGML_TYPE_IQ3_S]   = { "iq3_s", QK_K, sizeof(struct block_iq3_s) },
	[GGML_TYPE_IQ2_S]   = { "iq2_s", QK_K, sizeof(struct block_iq2_s) },
	[GGML_TYPE_IQ4_XS]  = { "iq4_xs", QK_K, sizeof(struct block_iq4_xs) },
	[GGML_TYPE_I8]      = { "i8", 1, sizeof(int8_t) },
	[GGML_TYPE_I16]     = { "i16", 1, sizeof(int16_t) },
	[GGML_TYPE_I32]     = { "i32", 1, sizeof(int32_t) },
	[GGML_TYPE_I64]     = { "i64", 1, sizeof(int64_t) },
	[GGML_TYPE_F64]     = { "f64", 1, sizeof(double) },
	[GGML_TYPE_IQ1_M]   = { "iq1_m", QK_K, sizeof(struct block_iq1_m) },
	[GGML_TYPE_BF16]    = { "bf16", 1, sizeof(uint16_t) },
	[31]                = { .name = "q4_0_4_4" },
	[32]                = { .name = "q4_0_4_8" },
	[33]                = { .name = "q4_0_8_8" },
	[GGML_TYPE_TQ1_0]   = { "tq1_0", QK_K, sizeof(struct block_tq1_0) },
	[GGML_TYPE_TQ2_0]   = { "tq2_0", QK_K, sizeof(struct block_tq2_0) },
	[36]                = { .name = "iq4_nl_4_4" },
	[37]                = { .name = "iq4_nl_4_8" },
	[38]                = { .name = "iq4_nl_8_8" },
	[GGML_TYPE_MXFP4]   = { "mxfp4", QK_MXFP4, sizeof(struct block_mxfp4) },
	[GGML_TYPE_NVFP4]   = { "nvfp4", QK_NVFP4, sizeof(struct block_nvfp4) },
	[GGML_TYPE_Q1_0]    = { "q1_0", QK1_0, sizeof(struct block_q1_0) },
	[GGML_TYPE_Q2_0]    = { "q2_0", QK2_0, sizeof(struct block_q2_0) },
};

/* What ggml_type_get hands out: a row with its id. Filled once from rows. */
static struct ggml_type table[GGML_TYPE_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void type_table_init(void)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct type_row *r = &rows[id];
		table[id] = (struct ggml_type){
			.id = id, .name = r->name, .block_elems = r->block_elems,
			.block_bytes = r->block_bytes,
		};
	}
}

const struct ggml_type *ggml_type_get(uint32_t id)
{
	if (id >= GGML_TYPE_COUNT)
		return NULL;
	pthread_once(&table_once, type_table_init);
	return &table[id];
}

const char *ggml_type_name(uint32_t id, char buf[16])
{
	if (id < GGML_TYPE_COUNT)
		return rows[id].name;
	snprintf(buf, 16, "type%u", (unsigned)id);
	return buf;
}
