#include "types.h"
#include "dequant.h"

#include <pthread.h>
#include <stdio.h>

/* Names of every id ggml has assigned, removed ones included, so that xattrs and
 * gguf.json can name a raw-only tensor. */
static const char *const type_names[GGML_TYPE_COUNT] = {
	[0] = "f32", [1] = "f16", [2] = "q4_0", [3] = "q4_1", [4] = "q4_2", [5] = "q4_3",
	[6] = "q5_0", [7] = "q5_1", [8] = "q8_0", [9] = "q8_1", [10] = "q2_K", [11] = "q3_K",
	[12] = "q4_K", [13] = "q5_K", [14] = "q6_K", [15] = "q8_K", [16] = "iq2_xxs",
	[17] = "iq2_xs", [18] = "iq3_xxs", [19] = "iq1_s", [20] = "iq4_nl", [21] = "iq3_s",
	[22] = "iq2_s", [23] = "iq4_xs", [24] = "i8", [25] = "i16", [26] = "i32", [27] = "i64",
	[28] = "f64", [29] = "iq1_m", [30] = "bf16", [31] = "q4_0_4_4", [32] = "q4_0_4_8",
	[33] = "q4_0_8_8", [34] = "tq1_0", [35] = "tq2_0", [36] = "iq4_nl_4_4",
	[37] = "iq4_nl_4_8", [38] = "iq4_nl_8_8", [39] = "mxfp4", [40] = "nvfp4",
	[41] = "q1_0", [42] = "q2_0",
};

static struct ggml_type table[GGML_TYPE_COUNT];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	static const struct dequant_impl *const families[] = {
		dequant_float_impls, dequant_legacy_impls, dequant_k_impls,
		dequant_iq_impls, dequant_misc_impls,
	};
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
		table[id] = (struct ggml_type){ .id = id, .name = type_names[id] };
	for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
		for (const struct dequant_impl *d = families[f]; d->fn; d++) {
			struct ggml_type *t = &table[d->type];
			t->block_elems = d->block_elems;
			t->block_bytes = d->block_bytes;
			t->to_float = d->fn;
		}
	}
}

const struct ggml_type *ggml_type_get(uint32_t id)
{
	if (id >= GGML_TYPE_COUNT)
		return NULL;
	pthread_once(&table_once, table_init);
	return &table[id];
}

const char *ggml_type_name(uint32_t id, char buf[16])
{
	if (id < GGML_TYPE_COUNT)
		return type_names[id];
	snprintf(buf, 16, "type%u", (unsigned)id);
	return buf;
}
