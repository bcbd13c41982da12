/* The i-quants: iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq4_nl iq4_xs.
 *
 * Most of them do not store values but indices into fixed grids (lattice codebooks,
 * generated into ggml_tables.c): a grid row holds 8 (or 4) small unsigned magnitudes, a
 * sign pattern says which of them are negative, and a block scale multiplies the lot.
 * Each function follows the float operation order of ggml's dequantize_row_* so that its
 * output is the same bit for bit, NaN and infinite scales included.
 *
 * Blocks are copied out of src with memcpy (src may be unaligned) and their multi-byte
 * fields read as little-endian bytes, so the host's byte order does not matter. */
#include "dequant.h"
#include "ggml_tables.h"

#include <string.h>

#define QK_K 256

/* The little-endian 16 or 32 bits at p, whatever the host's byte order. */
static inline uint16_t rd16(const void *p)
{
	const uint8_t *b = p;
	return (uint16_t)(b[0] | b[1] << 8);
}

static inline uint32_t rd32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Byte j of a grid row is its j-th magnitude (the grids are stored little-endian). */
static inline uint8_t grid_u8(uint64_t row, int j)
{
	return (uint8_t)(row >> 8 * j);
}

/* 8 values: db times the magnitudes of a grid row, negated where signs has bit j set.
 * The shared tail of iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s. */
static void put_signed_row(float *y, float db, uint64_t row, uint8_t signs)
{
	for (int j = 0; j < 8; j++)
		y[j] = db * grid_u8(row, j) * (signs & kmask_iq2xs[j] ? -1.f : 1.f);
}

/* Two 4-value rows of an iq3 grid, side by side, as one 8-value row. */
static inline uint64_t iq3_row_pair(uint32_t lo, uint32_t hi)
{
	return (uint64_t)lo | (uint64_t)hi << 32;
}

/* 8 values: dl times (signed grid value + delta), the shared tail of iq1_s and iq1_m. */
static void put_iq1_row(float *y, float dl, uint16_t index, float delta)
{
	uint64_t row = iq1s_grid[index];
	for (int j = 0; j < 8; j++)
		y[j] = dl * ((int8_t)grid_u8(row, j) + delta);
}

/* iq2_xxs: 66 bytes, 256 values, 2.06 bits a value.
 *
 *   d       fp16 super-block scale
 *   qs[64]  8 groups of 8 bytes, one group per 32 values:
 *             bytes 0..3  four 8-bit indices into iq2xxs_grid (256 rows of 8)
 *             bytes 4..7  a little-endian u32:
 *                           31..28   27..21  20..14  13..7   6..0
 *                           scale s  sign3   sign2   sign1   sign0
 *
 *   signK is a 7-bit index into ksigns_iq2xs, which adds an 8th bit for even parity;
 *   value = d * (0.5 + s) * 0.25 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq2_xxs {
	uint16_t d;
	uint8_t qs[QK_K / 4];
};
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "iq2_xxs block size");

/* Decodes nblocks iq2_xxs blocks into 256 floats each. */
static void dequant_iq2_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xxs)) {
		struct block_iq2_xxs b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const uint8_t *q = b.qs + 8 * ib;
			const uint32_t aux = rd32(q + 4);
			const float db = d * (0.5f + (aux >> 28)) * 0.25f;
			for (int l = 0; l < 4; l++, dst += 8)
				put_signed_row(dst, db, iq2xxs_grid[q[l]],
				               ksigns_iq2xs[(aux >> 7 * l) & 127]);
		}
	}
}

/* iq2_xs: 74 bytes, 256 values, 2.31 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[32]      little-endian u16, one per 8 values:
 *                 15..9        8..0
 *                 sign index   index into iq2xs_grid (512 rows of 8)
 *   scales[8]   one byte per 32 values: low nibble for its first 16, high for the rest
 *
 *   value = d * (0.5 + nibble) * 0.25 * grid[index][j] * (ksigns_iq2xs[sign] bit j ? -1 : 1) */
struct block_iq2_xs {
	uint16_t d;
	uint16_t qs[QK_K / 8];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq2_xs) == 74, "iq2_xs block size");

/* Decodes nblocks iq2_xs blocks into 256 floats each. */
static void dequant_iq2_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xs)) {
		struct block_iq2_xs b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const float db[2] = {
				d * (0.5f + (b.scales[ib] & 0xf)) * 0.25f,
				d * (0.5f + (b.scales[ib] >> 4)) * 0.25f,
			};
			for (int l = 0; l < 4; l++, dst += 8) {
				const uint16_t q = rd16(&b.qs[4 * ib + l]);
				put_signed_row(dst, db[l / 2], iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9]);
			}
		}
	}
}

/* iq2_s: 82 bytes, 256 values, 2.56 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[0..31]   low 8 bits of a 10-bit index into iq2s_grid (1024 rows of 8), one per 8 values
 *   qs[32..63]  sign bytes, one per 8 values: bit j set = value j negative (no parity trick)
 *   qh[8]       one byte per 32 values, 2 bits per row:  7..6  5..4  3..2  1..0
 *                                                        row3  row2  row1  row0
 *               giving index bits 9..8
 *   scales[8]   as iq2_xs: low nibble for the first 16 of 32 values, high for the rest
 *
 *   value = d * (0.5 + nibble) * 0.25 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq2_s {
	uint16_t d;
	uint8_t qs[QK_K / 4];
	uint8_t qh[QK_K / 32];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq2_s) == 82, "iq2_s block size");

/* Decodes nblocks iq2_s blocks into 256 floats each. */
static void dequant_iq2_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_s)) {
		struct block_iq2_s b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		const uint8_t *signs = b.qs + QK_K / 8;
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const float db[2] = {
				d * (0.5f + (b.scales[ib] & 0xf)) * 0.25f,
				d * (0.5f + (b.scales[ib] >> 4)) * 0.25f,
			};
			for (int l = 0; l < 4; l++, dst += 8) {
				const int index = b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300);
				put_signed_row(dst, db[l / 2], iq2s_grid[index], signs[4 * ib + l]);
			}
		}
	}
}

/* iq3_xxs: 98 bytes, 256 values, 3.06 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[0..63]   8-bit indices into iq3xxs_grid (256 rows of 4), two per 8 values
 *   qs[64..95]  8 little-endian u32, one per 32 values, laid out as in iq2_xxs:
 *                 31..28   27..21  20..14  13..7   6..0
 *                 scale s  sign3   sign2   sign1   sign0     (ksigns_iq2xs indices)
 *
 *   value = d * (0.5 + s) * 0.5 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq3_xxs {
	uint16_t d;
	uint8_t qs[3 * QK_K / 8];
};
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "iq3_xxs block size");

/* Decodes nblocks iq3_xxs blocks into 256 floats each. */
static void dequant_iq3_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_xxs)) {
		struct block_iq3_xxs b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const uint8_t *q = b.qs + 8 * ib;
			const uint32_t aux = rd32(b.qs + QK_K / 4 + 4 * ib);
			const float db = d * (0.5f + (aux >> 28)) * 0.5f;
			for (int l = 0; l < 4; l++, dst += 8) {
				uint64_t row = iq3_row_pair(iq3xxs_grid[q[2 * l]], iq3xxs_grid[q[2 * l + 1]]);
				put_signed_row(dst, db, row, ksigns_iq2xs[(aux >> 7 * l) & 127]);
			}
		}
	}
}

/* iq3_s: 110 bytes, 256 values, 3.44 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[64]      low 8 bits of 9-bit indices into iq3s_grid (512 rows of 4), 8 per 32 values
 *   qh[8]       one byte per 32 values: bit k is bit 8 of that group's k-th index
 *   signs[32]   one byte per 8 values: bit j set = value j negative
 *   scales[4]   one byte per 64 values: low nibble for the first 32, high for the rest
 *
 *   value = d * (1 + 2 * nibble) * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq3_s {
	uint16_t d;
	uint8_t qs[QK_K / 4];
	uint8_t qh[QK_K / 32];
	uint8_t signs[QK_K / 8];
	uint8_t scales[QK_K / 64];
};
_Static_assert(sizeof(struct block_iq3_s) == 110, "iq3_s block size");

/* Decodes nblocks iq3_s blocks into 256 floats each. */
static void dequant_iq3_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_s)) {
		struct block_iq3_s b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const int nibble = (b.scales[ib / 2] >> 4 * (ib % 2)) & 0xf;
			const float db = d * (1 + 2 * nibble);
			const uint8_t *q = b.qs + 8 * ib;
			for (int l = 0; l < 4; l++, dst += 8) {
				const int i0 = q[2 * l] | ((b.qh[ib] << (8 - 2 * l)) & 256);
				const int i1 = q[2 * l + 1] | ((b.qh[ib] << (7 - 2 * l)) & 256);
				uint64_t row = iq3_row_pair(iq3s_grid[i0], iq3s_grid[i1]);
				put_signed_row(dst, db, row, b.signs[4 * ib + l]);
			}
		}
	}
}

/* iq1_s: 50 bytes, 256 values, 1.56 bits a value.
 *
 *   d        fp16 super-block scale
 *   qs[32]   low 8 bits of 11-bit indices into iq1s_grid (2048 rows of 8 values in
 *            {-1, 0, 1}), one per 8 values
 *   qh[8]    little-endian u16, one per 32 values:
 *              15      14..12   11..9  8..6   5..3   2..0
 *              dsign   scale s  hi3    hi2    hi1    hi0     (index bits 10..8 of row k)
 *
 *   value = d * (2 * s + 1) * (grid[index][j] + (dsign ? -IQ1S_DELTA : IQ1S_DELTA)) */
struct block_iq1_s {
	uint16_t d;
	uint8_t qs[QK_K / 8];
	uint16_t qh[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq1_s) == 50, "iq1_s block size");

/* Decodes nblocks iq1_s blocks into 256 floats each. */
static void dequant_iq1_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_s)) {
		struct block_iq1_s b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const uint16_t qh = rd16(&b.qh[ib]);
			const float dl = d * (2 * ((qh >> 12) & 7) + 1);
			const float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
			for (int l = 0; l < 4; l++, dst += 8) {
				const uint16_t index = (uint16_t)(b.qs[4 * ib + l] | ((qh >> 3 * l) & 7) << 8);
				put_iq1_row(dst, dl, index, delta);
			}
		}
	}
}

/* iq1_m: 56 bytes, 256 values, 1.75 bits a value. No fp16 field: the super-block scale
 * is spread over the top nibbles of the scales.
 *
 *   qs[32]     low 8 bits of 11-bit indices into iq1s_grid, one per 8 values
 *   qh[16]     one byte per 16 values (two rows):
 *                7       6..4             3       2..0
 *                dsign1  index1 bits 10..8  dsign0  index0 bits 10..8
 *   scales[8]  four little-endian u16 sc[0..3], sc[k] covering 64 values:
 *                15..12      11..9  8..6   5..3   2..0
 *                d nibble k  s3     s2     s1     s0      (one 3-bit scale per 16 values)
 *              d = fp16 whose bits are  sc[3]>>12 : sc[2]>>12 : sc[1]>>12 : sc[0]>>12
 *
 *   value = d * (2 * s + 1) * (grid[index][j] + (dsign ? -IQ1M_DELTA : IQ1M_DELTA)) */
struct block_iq1_m {
	uint8_t qs[QK_K / 8];
	uint8_t qh[QK_K / 16];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq1_m) == 56, "iq1_m block size");

/* Decodes nblocks iq1_m blocks into 256 floats each. */
static void dequant_iq1_m(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_m)) {
		struct block_iq1_m b;
		memcpy(&b, p, sizeof b);
		uint16_t sc[4];
		for (int k = 0; k < 4; k++)
			sc[k] = rd16(b.scales + 2 * k);
		const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
		                                  ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
		const float d = fp16_to_f32(dbits);
		for (int ib = 0; ib < QK_K / 32; ib++) {
			const int shift = 6 * (ib % 2);
			const float dl[2] = {
				d * (2 * ((sc[ib / 2] >> shift) & 7) + 1),
				d * (2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1),
			};
			for (int l = 0; l < 4; l++, dst += 8) {
				const uint8_t qh = b.qh[2 * ib + l / 2] >> 4 * (l % 2);
				const uint16_t index = (uint16_t)(b.qs[4 * ib + l] | (qh & 7) << 8);
				const float delta = qh & 8 ? -IQ1M_DELTA : IQ1M_DELTA;
				put_iq1_row(dst, dl[l / 2], index, delta);
			}
		}
	}
}

/* iq4_nl: 18 bytes, 32 values, 4.5 bits a value; a non-linear q4_0.
 *
 *   d       fp16 block scale
 *   qs[16]  byte j: low nibble = value j, high nibble = value j + 16,
 *           each an index into kvalues_iq4nl (16 int8 levels from -127 to 113)
 *
 *   value = d * kvalues_iq4nl[nibble] */
struct block_iq4_nl {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl block size");

/* 32 values from 16 bytes of iq4_nl nibbles, low nibbles first; shared with iq4_xs. */
static void put_iq4_nibbles(float *y, float d, const uint8_t qs[16])
{
	for (int j = 0; j < 16; j++) {
		y[j] = d * kvalues_iq4nl[qs[j] & 0xf];
		y[j + 16] = d * kvalues_iq4nl[qs[j] >> 4];
	}
}

/* Decodes nblocks iq4_nl blocks into 32 floats each. */
static void dequant_iq4_nl(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq4_nl), dst += 32) {
		struct block_iq4_nl b;
		memcpy(&b, p, sizeof b);
		put_iq4_nibbles(dst, fp16_to_f32(rd16(&b.d)), b.qs);
	}
}

/* iq4_xs: 136 bytes, 256 values, 4.25 bits a value; iq4_nl with 6-bit sub-block scales.
 *
 *   d            fp16 super-block scale
 *   scales_h     little-endian u16: bits 2k+1..2k are the high 2 bits of scale k
 *   scales_l[4]  byte k/2: low nibble = low 4 bits of scale k (k even), high nibble (k odd)
 *   qs[128]      8 runs of 16 bytes, one per 32 values, nibbles as in iq4_nl
 *
 *   value = d * (scale_k - 32) * kvalues_iq4nl[nibble] */
struct block_iq4_xs {
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[QK_K / 64];
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs block size");

/* Decodes nblocks iq4_xs blocks into 256 floats each. */
static void dequant_iq4_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq4_xs)) {
		struct block_iq4_xs b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		const uint16_t scales_h = rd16(&b.scales_h);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
			               ((scales_h >> 2 * ib) & 3) << 4;
			put_iq4_nibbles(dst, d * (ls - 32), b.qs + 16 * ib);
		}
	}
}

const struct dequant_impl dequant_iq_impls[] = {
	{ GGML_TYPE_IQ2_XXS, QK_K, sizeof(struct block_iq2_xxs), dequant_iq2_xxs },
	{ GGML_TYPE_IQ2_XS, QK_K, sizeof(struct block_iq2_xs), dequant_iq2_xs },
	{ GGML_TYPE_IQ3_XXS, QK_K, sizeof(struct block_iq3_xxs), dequant_iq3_xxs },
	{ GGML_TYPE_IQ1_S, QK_K, sizeof(struct block_iq1_s), dequant_iq1_s },
	{ GGML_TYPE_IQ4_NL, 32, sizeof(struct block_iq4_nl), dequant_iq4_nl },
	{ GGML_TYPE_IQ3_S, QK_K, sizeof(struct block_iq3_s), dequant_iq3_s },
	{ GGML_TYPE_IQ2_S, QK_K, sizeof(struct block_iq2_s), dequant_iq2_s },
	{ GGML_TYPE_IQ4_XS, QK_K, sizeof(struct block_iq4_xs), dequant_iq4_xs },
	{ GGML_TYPE_IQ1_M, QK_K, sizeof(struct block_iq1_m), dequant_iq1_m },
	{ 0, 0, 0, NULL },
};
