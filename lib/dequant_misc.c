/* The ternary types (tq1_0 tq2_0), the FP4 microscaling types (mxfp4 nvfp4) and the
 * plain 1- and 2-bit types (q1_0 q2_0).
 *
 * Each function follows the float operation order of ggml's dequantize_row_* so that its
 * output is the same bit for bit, NaN and infinite scales included. Blocks are copied out
 * of src with memcpy (src may be unaligned) and fp16 fields read as little-endian bytes. */
#include "dequant.h"
#include "ggml_tables.h"

#include <math.h>
#include <string.h>

#define QK_K 256

/* The little-endian 16 bits at p, whatever the host's byte order. */
static inline uint16_t rd16(const void *p)
{
	const uint8_t *b = p;
	return (uint16_t)(b[0] | b[1] << 8);
}

/* tq1_0: 54 bytes, 256 values, 1.69 bits a value (BitNet b1.58 / TriLM ternary).
 *
 *   qs[0..31]   byte m: 5 trits, of values m, m+32, m+64, m+96, m+128
 *   qs[32..47]  byte m: 5 trits, of values 160+m, 176+m, 192+m, 208+m, 224+m
 *   qh[4]       byte m: 4 trits, of values 240+m, 244+m, 248+m, 252+m
 *   d           fp16 scale
 *
 *   A byte is the trits t0 t1 t2 t3 t4 read as a base-3 fraction, rounded up to 8 bits:
 *   byte = ceil((81 t0 + 27 t1 + 9 t2 + 3 t3 + t4) * 256 / 243), with t4 = 0 in qh. So
 *   (byte * 3^n) mod 256 drops the first n trits and (that * 3) >> 8 is trit n.
 *
 *   value = (trit - 1) * d */
struct block_tq1_0 {
	uint8_t qs[48];
	uint8_t qh[4];
	uint16_t d;
};
_Static_assert(sizeof(struct block_tq1_0) == 54, "tq1_0 block size");

/* count * ntrits values: trit n of every byte of q, for n = 0, 1, ... */
static float *put_trits(float *y, const uint8_t *q, int count, int ntrits, float d)
{
	static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
	for (int n = 0; n < ntrits; n++) {
		for (int m = 0; m < count; m++) {
			const uint8_t rest = (uint8_t)(q[m] * pow3[n]);
			const int trit = (rest * 3) >> 8;
			*y++ = (float)(trit - 1) * d;
		}
	}
	return y;
}

/* Decodes nblocks tq1_0 blocks into 256 floats each. */
static void dequant_tq1_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_tq1_0)) {
		struct block_tq1_0 b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		dst = put_trits(dst, b.qs, 32, 5, d);
		dst = put_trits(dst, b.qs + 32, 16, 5, d);
		dst = put_trits(dst, b.qh, 4, 4, d);
	}
}

/* tq2_0: 66 bytes, 256 values, 2.06 bits a value.
 *
 *   qs[64]  two runs of 32 bytes, one per 128 values; in run r, byte m:
 *             7..6          5..4          3..2          1..0
 *             q(128r+96+m)  q(128r+64+m)  q(128r+32+m)  q(128r+m)
 *   d       fp16 scale
 *
 *   value = (q - 1) * d        (q = 3 is never written, decodes to 2d) */
struct block_tq2_0 {
	uint8_t qs[QK_K / 4];
	uint16_t d;
};
_Static_assert(sizeof(struct block_tq2_0) == 66, "tq2_0 block size");

/* Decodes nblocks tq2_0 blocks into 256 floats each. */
static void dequant_tq2_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_tq2_0)) {
		struct block_tq2_0 b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int run = 0; run < 64; run += 32)
			for (int shift = 0; shift < 8; shift += 2)
				for (int m = 0; m < 32; m++)
					*dst++ = (float)(((b.qs[run + m] >> shift) & 3) - 1) * d;
	}
}

/* 2n FP4 (E2M1) values from n bytes: low nibbles to y[0..n), high to y[n..2n).
 * kvalues_fp4 holds twice the E2M1 values (0 0.5 1 1.5 2 3 4 6, then negated) so that
 * they are integers; the scale decoders below halve the scale to make up for it. */
static void put_fp4(float *y, float d, const uint8_t *qs, int n)
{
	for (int j = 0; j < n; j++) {
		y[j] = kvalues_fp4[qs[j] & 0xf] * d;
		y[j + n] = kvalues_fp4[qs[j] >> 4] * d;
	}
}

/* mxfp4: 17 bytes, 32 values, 4.25 bits a value (OCP microscaling MXFP4).
 *
 *   e       E8M0 scale: 2^(e - 127), a bare exponent (e = 255 is not treated as NaN)
 *   qs[16]  byte j: low nibble = value j, high nibble = value j + 16;
 *           nibble = s e e m, an E2M1 float
 *
 *   value = kvalues_fp4[nibble] * 2^(e - 128) */
struct block_mxfp4 {
	uint8_t e;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 block size");

/* Half an E8M0 scale, 2^(e - 128): from 2^-128 (subnormal) up to 2^127, never inf/NaN. */
static float e8m0_half(uint8_t e)
{
	return ldexpf(1.0f, (int)e - 128);
}

/* Decodes nblocks mxfp4 blocks into 32 floats each. */
static void dequant_mxfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_mxfp4), dst += 32) {
		struct block_mxfp4 b;
		memcpy(&b, p, sizeof b);
		put_fp4(dst, e8m0_half(b.e), b.qs, 16);
	}
}

/* nvfp4: 36 bytes, 64 values, 4.5 bits a value (NVIDIA NVFP4, without the per-tensor
 * fp32 scale, which ggml does not store).
 *
 *   d[4]    one UE4M3 scale per 16 values:  7  6..3  2..0
 *                                           -  exp   man     (bias 7, bit 7 ignored)
 *   qs[32]  8 bytes per 16 values; in sub-block s, byte j: low nibble = value 16s + j,
 *           high nibble = value 16s + j + 8; nibbles are E2M1 as in mxfp4
 *
 *   value = kvalues_fp4[nibble] * ue4m3(d[s]) / 2 */
struct block_nvfp4 {
	uint8_t d[4];
	uint8_t qs[32];
};
_Static_assert(sizeof(struct block_nvfp4) == 36, "nvfp4 block size");

/* Half a UE4M3 scale. 0x7f, the format's NaN, reads as 0 as in ggml; exp = 0 is subnormal,
 * man * 2^-9. Every result is exact, so this need not mirror ggml's arithmetic. */
static float ue4m3_half(uint8_t x)
{
	if (x == 0 || x == 0x7f)
		return 0.0f;
	const int exp = (x >> 3) & 0xf;
	const int man = x & 7;
	if (exp == 0)
		return ldexpf((float)man, -10);
	return ldexpf((float)(8 + man), exp - 11);
}

/* Decodes nblocks nvfp4 blocks into 64 floats each. */
static void dequant_nvfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_nvfp4)) {
		struct block_nvfp4 b;
		memcpy(&b, p, sizeof b);
		for (int s = 0; s < 4; s++, dst += 16)
			put_fp4(dst, ue4m3_half(b.d[s]), b.qs + 8 * s, 8);
	}
}

/* q1_0: 18 bytes, 128 values, 1.125 bits a value.
 *
 *   d       fp16 scale
 *   qs[16]  bit j % 8 of byte j / 8 is value j (least significant bit first)
 *
 *   value = bit ? d : -d */
struct block_q1_0 {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_q1_0) == 18, "q1_0 block size");

/* Decodes nblocks q1_0 blocks into 128 floats each. */
static void dequant_q1_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q1_0), dst += 128) {
		struct block_q1_0 b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int j = 0; j < 128; j++)
			dst[j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : -d;
	}
}

/* q2_0: 18 bytes, 64 values, 2.25 bits a value.
 *
 *   d       fp16 scale
 *   qs[16]  byte j / 4, bits 2(j % 4)+1 .. 2(j % 4): q of value j (low bits first)
 *             7..6    5..4    3..2    1..0
 *             q(4k+3) q(4k+2) q(4k+1) q(4k)
 *
 *   value = (q - 1) * d        (q = 0 1 2 3: -d 0 d 2d) */
struct block_q2_0 {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_q2_0) == 18, "q2_0 block size");

/* Decodes nblocks q2_0 blocks into 64 floats each. */
static void dequant_q2_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q2_0), dst += 64) {
		struct block_q2_0 b;
		memcpy(&b, p, sizeof b);
		const float d = fp16_to_f32(rd16(&b.d));
		for (int j = 0; j < 64; j++)
			dst[j] = (float)(((b.qs[j / 4] >> 2 * (j % 4)) & 3) - 1) * d;
	}
}

const struct dequant_impl dequant_misc_impls[] = {
	{ GGML_TYPE_TQ1_0, QK_K, sizeof(struct block_tq1_0), dequant_tq1_0 },
	{ GGML_TYPE_TQ2_0, QK_K, sizeof(struct block_tq2_0), dequant_tq2_0 },
	{ GGML_TYPE_MXFP4, 32, sizeof(struct block_mxfp4), dequant_mxfp4 },
	{ GGML_TYPE_NVFP4, 64, sizeof(struct block_nvfp4), dequant_nvfp4 },
	{ GGML_TYPE_Q1_0, 128, sizeof(struct block_q1_0), dequant_q1_0 },
	{ GGML_TYPE_Q2_0, 64, sizeof(struct block_q2_0), dequant_q2_0 },
	{ 0, 0, 0, NULL },
};
