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
#include "dequant_scalar.h"
#include "blocks.h"
#include "ggml_tables.h"

#include <string.h>

/* Byte j of a grid row is its j-th magnitude (the grids are stored little-endian). */
static inline uint8_t grid_u8(uint64_t row, int j)
{
	return (uint8_t)(row >> 8 * j);
}

/* 8 values: db times the magnitudes of a grid row, negated where signs has bit j set.
 * The shared tail of iq2_xxs, iq2_xs, iq2_s, iq3_xxs and iq3_s. */
static void put_signed_row(float *y, float db, uint64_t row, uint8_t signs)
{
	/* the factor by lookup, not by branch: sign bits are data, and a branch on each
	 * one mispredicted half the time (measured: iq2_xxs 1.0 -> 7.7 GB/s) */
	static const float factor[2] = { 1.f, -1.f };
	for (int j = 0; j < 8; j++)
		y[j] = db * grid_u8(row, j) * factor[(signs & kmask_iq2xs[j]) != 0];
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

/* Decodes nblocks iq2_xxs blocks into 256 floats each. */
void dequant_iq2_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xxs)) {
		struct block_iq2_xxs b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq2_xs blocks into 256 floats each. */
void dequant_iq2_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xs)) {
		struct block_iq2_xs b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq2_s blocks into 256 floats each. */
void dequant_iq2_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_s)) {
		struct block_iq2_s b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq3_xxs blocks into 256 floats each. */
void dequant_iq3_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_xxs)) {
		struct block_iq3_xxs b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq3_s blocks into 256 floats each. */
void dequant_iq3_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_s)) {
		struct block_iq3_s b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq1_s blocks into 256 floats each. */
void dequant_iq1_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_s)) {
		struct block_iq1_s b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
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

/* Decodes nblocks iq1_m blocks into 256 floats each. */
void dequant_iq1_m(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_m)) {
		struct block_iq1_m b;
		memcpy(&b, p, sizeof b);
		uint16_t sc[4];
		for (int k = 0; k < 4; k++)
			sc[k] = rd16(b.scales + 2 * k);
		const float d = fp16_to_f32(iq1_m_scale_bits(b.scales));
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

/* 32 values from 16 bytes of iq4_nl nibbles, low nibbles first; shared with iq4_xs. */
static void put_iq4_nibbles(float *y, float d, const uint8_t qs[16])
{
	for (int j = 0; j < 16; j++) {
		y[j] = d * kvalues_iq4nl[qs[j] & 0xf];
		y[j + 16] = d * kvalues_iq4nl[qs[j] >> 4];
	}
}

/* Decodes nblocks iq4_nl blocks into 32 floats each. */
void dequant_iq4_nl(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq4_nl), dst += QK4_NL) {
		struct block_iq4_nl b;
		memcpy(&b, p, sizeof b);
		put_iq4_nibbles(dst, half_at(&b.d), b.qs);
	}
}

/* Decodes nblocks iq4_xs blocks into 256 floats each. */
void dequant_iq4_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq4_xs)) {
		struct block_iq4_xs b;
		memcpy(&b, p, sizeof b);
		const float d = half_at(&b.d);
		const uint16_t scales_h = rd16(&b.scales_h);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
			               ((scales_h >> 2 * ib) & 3) << 4;
			put_iq4_nibbles(dst, d * (ls - 32), b.qs + 16 * ib);
		}
	}
}
