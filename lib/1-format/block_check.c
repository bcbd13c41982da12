#include "block_check.h"

#include <stddef.h>

#include "blocks.h"
#include "types.h"

/* What ggml_validate_row_data checks in a block of each quantized type: up to two fp16
 * fields at these offsets (0xff: none), or a rule of its own (the enum). q8_K, whose
 * float32 d ggml also checks, is never in a GGUF file. */
enum scale_rule { SCALES_NONE, SCALES_F16, SCALES_E8M0, SCALES_IQ1_M, SCALES_OK };
struct scale_fields {
	enum scale_rule rule;
	uint8_t at[2];
};

#define F16_1(T, A) { SCALES_F16, { offsetof(struct T, A), 0xff } }
#define F16_2(T, A, B) { SCALES_F16, { offsetof(struct T, A), offsetof(struct T, B) } }

static const struct scale_fields scale_table[GGML_TYPE_COUNT] = {
	[GGML_TYPE_Q4_0] = F16_1(block_q4_0, d),
	[GGML_TYPE_Q4_1] = F16_2(block_q4_1, d, m),
	[GGML_TYPE_Q5_0] = F16_1(block_q5_0, d),
	[GGML_TYPE_Q5_1] = F16_2(block_q5_1, d, m),
	[GGML_TYPE_Q8_0] = F16_1(block_q8_0, d),
	[GGML_TYPE_Q2_K] = F16_2(block_q2_K, d, dmin),
	[GGML_TYPE_Q3_K] = F16_1(block_q3_K, d),
	[GGML_TYPE_Q4_K] = F16_2(block_q4_K, d, dmin),
	[GGML_TYPE_Q5_K] = F16_2(block_q5_K, d, dmin),
	[GGML_TYPE_Q6_K] = F16_1(block_q6_K, d),
	[GGML_TYPE_IQ2_XXS] = F16_1(block_iq2_xxs, d),
	[GGML_TYPE_IQ2_XS] = F16_1(block_iq2_xs, d),
	[GGML_TYPE_IQ3_XXS] = F16_1(block_iq3_xxs, d),
	[GGML_TYPE_IQ1_S] = F16_1(block_iq1_s, d),
	[GGML_TYPE_IQ4_NL] = F16_1(block_iq4_nl, d),
	[GGML_TYPE_IQ3_S] = F16_1(block_iq3_s, d),
	[GGML_TYPE_IQ2_S] = F16_1(block_iq2_s, d),
	[GGML_TYPE_IQ4_XS] = F16_1(block_iq4_xs, d),
	[GGML_TYPE_IQ1_M] = { SCALES_IQ1_M, { 0xff, 0xff } },
	[GGML_TYPE_TQ1_0] = F16_1(block_tq1_0, d),
	[GGML_TYPE_TQ2_0] = F16_1(block_tq2_0, d),
	[GGML_TYPE_MXFP4] = { SCALES_E8M0, { offsetof(struct block_mxfp4, e), 0xff } },
	/* every UE4M3 byte is a valid scale for ggml (0x7f reads as 0) */
	[GGML_TYPE_NVFP4] = { SCALES_OK, { 0xff, 0xff } },
	[GGML_TYPE_Q1_0] = F16_1(block_q1_0, d),
	[GGML_TYPE_Q2_0] = F16_1(block_q2_0, d),
};

bool block_check_has_scales(uint32_t type)
{
	return type < GGML_TYPE_COUNT && scale_table[type].rule != SCALES_NONE;
}

bool block_check_looks(uint32_t type)
{
	return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 ||
	       type == GGML_TYPE_F64 || block_check_has_scales(type);
}

/* An fp16 with all exponent bits set: NaN or infinite. */
static inline bool f16_bad(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00;
}

/* Whether the block of the scale rule f at p is refused. */
static bool block_bad(const struct scale_fields *f, const uint8_t *p)
{
	switch (f->rule) {
	case SCALES_F16:
		return f16_bad(rd16(p + f->at[0])) || (f->at[1] != 0xff && f16_bad(rd16(p + f->at[1])));
	case SCALES_E8M0:
		return p[f->at[0]] == 0xff;
	case SCALES_IQ1_M:
		return f16_bad(iq1_m_scale_bits(FIELD(p, block_iq1_m, scales)));
	default:
		return false;
	}
}

uint64_t block_check_bad_scales(uint32_t type, const uint8_t *p, uint64_t n)
{
	if (!block_check_has_scales(type))
		return 0;
	const struct scale_fields *f = &scale_table[type];
	const uint64_t bytes = ggml_type_get(type)->block_bytes;
	uint64_t bad = 0;
	/* the rule chosen once, not per block: this runs over every block of a scan */
	switch (f->rule) {
	case SCALES_F16:
		if (f->at[1] == 0xff) {
			for (uint64_t b = 0; b < n; b++, p += bytes)
				bad += f16_bad(rd16(p + f->at[0]));
		} else {
			for (uint64_t b = 0; b < n; b++, p += bytes)
				bad += f16_bad(rd16(p + f->at[0])) | f16_bad(rd16(p + f->at[1]));
		}
		break;
	case SCALES_E8M0:
		for (uint64_t b = 0; b < n; b++, p += bytes)
			bad += p[f->at[0]] == 0xff;
		break;
	case SCALES_IQ1_M:
		for (uint64_t b = 0; b < n; b++, p += bytes)
			bad += f16_bad(iq1_m_scale_bits(FIELD(p, block_iq1_m, scales)));
		break;
	default:
		break;
	}
	return bad;
}

uint64_t block_check_first_bad(uint32_t type, const uint8_t *p, uint64_t n)
{
	uint64_t b = 0;
	switch (type) {
	case GGML_TYPE_F32:
		while (b < n && (gguf_le32(p + 4 * b) & 0x7f800000u) != 0x7f800000u)
			b++;
		return b;
	case GGML_TYPE_F16:
		while (b < n && !f16_bad(gguf_le16(p + 2 * b)))
			b++;
		return b;
	case GGML_TYPE_BF16:
		while (b < n && (gguf_le16(p + 2 * b) & 0x7f80) != 0x7f80)
			b++;
		return b;
	case GGML_TYPE_F64:
		while (b < n && (gguf_le64(p + 8 * b) & UINT64_C(0x7ff0000000000000)) !=
		                UINT64_C(0x7ff0000000000000))
			b++;
		return b;
	default:
		break;
	}
	if (!block_check_has_scales(type))
		return n;
	const struct scale_fields *f = &scale_table[type];
	const uint64_t bytes = ggml_type_get(type)->block_bytes;
	while (b < n && !block_bad(f, p + b * bytes))
		b++;
	return b;
}
