/* The ggml tensor type table: one entry per ggml type id, the single place that knows
 * what each type is: its name and block geometry. Which function decodes a type is the
 * dequantizer's (dequant.h). */
#ifndef GGUFS_TYPES_H
#define GGUFS_TYPES_H

#include <stdint.h>

enum ggml_type_id {
	GGML_TYPE_F32 = 0,
	GGML_TYPE_F16 = 1,
	GGML_TYPE_Q4_0 = 2,
	GGML_TYPE_Q4_1 = 3,
	/* 4, 5: q4_2, q4_3, removed */
	GGML_TYPE_Q5_0 = 6,
	GGML_TYPE_Q5_1 = 7,
	GGML_TYPE_Q8_0 = 8,
	GGML_TYPE_Q8_1 = 9,
	GGML_TYPE_Q2_K = 10,
	GGML_TYPE_Q3_K = 11,
	GGML_TYPE_Q4_K = 12,
	GGML_TYPE_Q5_K = 13,
	GGML_TYPE_Q6_K = 14,
	GGML_TYPE_Q8_K = 15,
	GGML_TYPE_IQ2_XXS = 16,
	GGML_TYPE_IQ2_XS = 17,
	GGML_TYPE_IQ3_XXS = 18,
	GGML_TYPE_IQ1_S = 19,
	GGML_TYPE_IQ4_NL = 20,
	GGML_TYPE_IQ3_S = 21,
	GGML_TYPE_IQ2_S = 22,
	GGML_TYPE_IQ4_XS = 23,
	GGML_TYPE_I8 = 24,
	GGML_TYPE_I16 = 25,
	GGML_TYPE_I32 = 26,
	GGML_TYPE_I64 = 27,
	GGML_TYPE_F64 = 28,
	GGML_TYPE_IQ1_M = 29,
	GGML_TYPE_BF16 = 30,
	/* 31..33: q4_0_4_4, q4_0_4_8, q4_0_8_8, removed */
	GGML_TYPE_TQ1_0 = 34,
	GGML_TYPE_TQ2_0 = 35,
	/* 36..38: iq4_nl_4_4, iq4_nl_4_8, iq4_nl_8_8, removed */
	GGML_TYPE_MXFP4 = 39,
	GGML_TYPE_NVFP4 = 40,
	GGML_TYPE_Q1_0 = 41,
	GGML_TYPE_Q2_0 = 42,
	GGML_TYPE_COUNT = 43,
};

struct ggml_type {
	uint32_t id;
	const char *name;       /* ggml's name: "q4_K", "iq2_xxs", "bf16" */
	uint32_t block_elems;   /* values per block; 0 when the layout is not known */
	uint32_t block_bytes;   /* bytes per block; 0 when the layout is not known. The
	                         * dequantizer decodes exactly the types whose layout is
	                         * known (dequant.c checks it) */
};

/* The entry of a known type id, or NULL for an id ggufs has never heard of. An entry
 * without a block geometry (a removed id, q8_1, q8_K) gets a raw file only. */
const struct ggml_type *ggml_type_get(uint32_t id);

/* A printable name for any id: ggml's name, or "type<N>" for an unknown one. buf must
 * hold 16 bytes; the result is buf or a static string. */
const char *ggml_type_name(uint32_t id, char buf[16]);

#endif
