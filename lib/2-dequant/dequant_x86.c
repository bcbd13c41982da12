/* SIMD dequantizers for x86-64. meson compiles this file twice: with AVX2 and F16C
 * (DQ_AVX512 = 0, giving dequant_avx2_impls) and with AVX-512 F/BW/VL on top
 * (DQ_AVX512 = 1, giving dequant_avx512_impls). Nothing here may run unless dequant.c's
 * dispatch has seen the CPU support that build's instructions; the rest of the library
 * stays baseline x86-64.
 *
 * Exactness: each function gives the output of its scalar reference (dequant_*.c) bit
 * for bit, NaN payloads and signs included (ggufs(1): a .f32 hashes the same on every
 * CPU). Every output value is the same IEEE operations as there: block and sub-block
 * scales are multiplied out first, exactly as the reference does, and each value is
 * then one multiply (and one subtract or add, the reference's own), never an FMA: the
 * file is built with -ffp-contract=off, which also covers the compiler fusing
 * intrinsics. Operand order within one multiply or add is free only because none here
 * sees two NaNs (x86 returns the first operand's NaN, and compilers commute adds and
 * multiplies at will): a value's only NaN input is a block scale, and the _1 types' d
 * is zeroed where m is a NaN, as in the reference. A subtract can see two (the
 * k-quants' d and dmin) and keeps its order, giving the first one's NaN in both. What a
 * NaN becomes is the same on both sides: an operation on one NaN returns it with its
 * quiet bit set, sign and payload kept, and inf * 0 or inf - inf give the same default
 * NaN. Where a fp16 reaches the output without an operation (f16 itself, q1_0's d and
 * -d), its inf and NaN lanes are built from their bits, as the reference builds them:
 * F16C alone would set a signalling NaN's quiet bit.
 *
 * Structure: a block is decoded in two steps. Unpacking its quants into small signed
 * integers, one byte each, is 128/256-bit AVX2 code shared by both builds (AVX-512 CPUs
 * run it too); turning 16 such bytes into 16 floats, put16, is the only step that
 * differs between the builds. Multi-byte fields are read at their byte offsets (block
 * diagrams in blocks.h): blocks sit at any alignment and x86 is little-endian, so
 * unaligned loads read them as stored. */
#include "dequant.h"
#include "blocks.h"
#include "dequant_x86.h"
#include "ggml_tables.h"

#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#if DQ_AVX512
#define IMPLS dequant_avx512_impls
#else
#define IMPLS dequant_avx2_impls
#endif

/* q8_0 blocks to floats: (float)q * d. */
static void dequant_q8_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q8_0), dst += QK) {
		prefetch_ahead(p, sizeof(struct block_q8_0));
		float d = half_f16c(FIELD(p, block_q8_0, d));
		const uint8_t *qs = FIELD(p, block_q8_0, qs);
		put16(dst, load16(qs), d, 0, NO_OFFSET);
		put16(dst + 16, load16(qs + 16), d, 0, NO_OFFSET);
	}
}

/* q4_0 blocks to floats: (float)(q - 8) * d. */
static void dequant_q4_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q4_0), dst += QK) {
		prefetch_ahead(p, sizeof(struct block_q4_0));
		put32(dst, _mm256_sub_epi8(nibbles16(FIELD(p, block_q4_0, qs)), bytes(8)),
		      half_f16c(FIELD(p, block_q4_0, d)), 0, NO_OFFSET);
	}
}

/* q4_1 blocks to floats: (float)q * d + m. */
static void dequant_q4_1(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q4_1), dst += QK) {
		prefetch_ahead(p, sizeof(struct block_q4_1));
		const float m = half_f16c(FIELD(p, block_q4_1, m));
		const float d = half_f16c(FIELD(p, block_q4_1, d));
		put32(dst, nibbles16(FIELD(p, block_q4_1, qs)), d, m, PLUS_OFFSET);
	}
}

/* The 5-bit quants of q5_0 and q5_1: nibbles at qs, fifth bits at qh. */
INLINE __m256i quants5(const uint8_t *qh, const uint8_t *qs)
{
	uint32_t h;
	memcpy(&h, qh, sizeof h);
	return _mm256_or_si256(nibbles16(qs), _mm256_and_si256(bits_to_bytes(h), bytes(0x10)));
}

/* q5_0 blocks to floats: (float)(q - 16) * d. */
static void dequant_q5_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q5_0), dst += QK) {
		prefetch_ahead(p, sizeof(struct block_q5_0));
		const uint8_t *qh = FIELD(p, block_q5_0, qh), *qs = FIELD(p, block_q5_0, qs);
		put32(dst, _mm256_sub_epi8(quants5(qh, qs), bytes(16)),
		      half_f16c(FIELD(p, block_q5_0, d)), 0, NO_OFFSET);
	}
}

/* q5_1 blocks to floats: (float)q * d + m. */
static void dequant_q5_1(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q5_1), dst += QK) {
		prefetch_ahead(p, sizeof(struct block_q5_1));
		const uint8_t *qh = FIELD(p, block_q5_1, qh), *qs = FIELD(p, block_q5_1, qs);
		const float m = half_f16c(FIELD(p, block_q5_1, m));
		const float d = half_f16c(FIELD(p, block_q5_1, d));
		put32(dst, quants5(qh, qs), d, m, PLUS_OFFSET);
	}
}

/* q2_K super-blocks to floats: (d * sc) * q - (dmin * m) per sub-block of 16. */
static void dequant_q2_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q2_K), dst += QK_K) {
		prefetch_ahead(p, sizeof(struct block_q2_K));
		float ds[16], ms[16];
		__m128i sm = load16(FIELD(p, block_q2_K, scales));
		scale16(ds, half_f16c(FIELD(p, block_q2_K, d)),
		        _mm_and_si128(sm, _mm_set1_epi8(0x0f)));
		scale16(ms, half_f16c(FIELD(p, block_q2_K, dmin)),
		        _mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0f)));
		for (int h = 0; h < 2; h++) {
			__m256i x = load32(FIELD(p, block_q2_K, qs) + 32 * h);
			for (int plane = 0; plane < 4; plane++) {
				__m256i q = _mm256_and_si256(_mm256_srli_epi16(x, 2 * plane), bytes(3));
				int s = 8 * h + 2 * plane;
				float *y = dst + 128 * h + 32 * plane;
				put16(y, _mm256_castsi256_si128(q), ds[s], ms[s], MINUS_OFFSET);
				put16(y + 16, _mm256_extracti128_si256(q, 1), ds[s + 1], ms[s + 1],
				      MINUS_OFFSET);
			}
		}
	}
}

/* q3_K super-blocks to floats: (d * (sc - 32)) * (q - 4) per sub-block of 16. */
static void dequant_q3_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q3_K), dst += QK_K) {
		prefetch_ahead(p, sizeof(struct block_q3_K));
		const uint8_t *s = FIELD(p, block_q3_K, scales);
		int8_t sc[16];
		for (int j = 0; j < 16; j++) {
			int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
			int high = s[8 + j % 4] >> (2 * (j / 4)) & 3;
			sc[j] = (int8_t)((low | high << 4) - 32);
		}
		float ds[16];
		scale16(ds, half_f16c(FIELD(p, block_q3_K, d)),
		        _mm_loadu_si128((const __m128i *)sc));

		__m256i hm = load32(FIELD(p, block_q3_K, hmask));
		for (int h = 0; h < 2; h++) {
			__m256i x = load32(FIELD(p, block_q3_K, qs) + 32 * h);
			for (int plane = 0; plane < 4; plane++) {
				/* hmask byte l bit b is bit 2 of value 32b + l */
				__m256i q = _mm256_or_si256(
					_mm256_and_si256(_mm256_srli_epi16(x, 2 * plane), bytes(3)),
					_mm256_and_si256(has_bit(hm, (int8_t)(1 << (4 * h + plane))), bytes(4)));
				q = _mm256_sub_epi8(q, bytes(4));
				int b = 8 * h + 2 * plane;
				float *y = dst + 128 * h + 32 * plane;
				put16(y, _mm256_castsi256_si128(q), ds[b], 0, NO_OFFSET);
				put16(y + 16, _mm256_extracti128_si256(q, 1), ds[b + 1], 0, NO_OFFSET);
			}
		}
	}
}

/* q4_K and q5_K super-blocks to floats (q5_K's fifth bits in qh): (d * sc) * q -
 * (dmin * m) per sub-block of 32. */
INLINE void dequant_k4(const uint8_t *p, float *dst, uint64_t nblocks, bool five)
{
	/* the offset of a field both blocks have, in the one being decoded (a constant once
	 * inlined) */
#define K4(field) \
	(five ? offsetof(struct block_q5_K, field) : offsetof(struct block_q4_K, field))
	const size_t size = five ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
	for (uint64_t i = 0; i < nblocks; i++, p += size, dst += QK_K) {
		prefetch_ahead(p, size);
		const uint8_t *qs = p + K4(qs);
		__m256i qh = five ? load32(FIELD(p, block_q5_K, qh)) : _mm256_setzero_si256();
		float ds[8], ms[8];
		__m128i sm = k4_scales_mins(p + K4(scales));
		scale8(ds, half_f16c(p + K4(d)), sm);
		scale8(ms, half_f16c(p + K4(dmin)), _mm_unpackhi_epi64(sm, sm));

		for (int c = 0; c < 4; c++) {
			__m256i x = load32(qs + 32 * c);
			__m256i lo = low_nibbles(x), hi = high_nibbles(x);
			if (five) {
				/* qh byte l bit s is bit 4 of value l of sub-block s */
				lo = _mm256_or_si256(lo, _mm256_and_si256(
					has_bit(qh, (int8_t)(1 << 2 * c)), bytes(0x10)));
				hi = _mm256_or_si256(hi, _mm256_and_si256(
					has_bit(qh, (int8_t)(2 << 2 * c)), bytes(0x10)));
			}
			put32(dst + 64 * c, lo, ds[2 * c], ms[2 * c], MINUS_OFFSET);
			put32(dst + 64 * c + 32, hi, ds[2 * c + 1], ms[2 * c + 1], MINUS_OFFSET);
		}
	}
#undef K4
}

static void dequant_q4_K(const void *src, float *dst, uint64_t nblocks)
{
	dequant_k4(src, dst, nblocks, false);
}

static void dequant_q5_K(const void *src, float *dst, uint64_t nblocks)
{
	dequant_k4(src, dst, nblocks, true);
}

/* q6_K super-blocks to floats: (d * sc) * (q - 32) per sub-block of 16. */
static void dequant_q6_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q6_K), dst += QK_K) {
		prefetch_ahead(p, sizeof(struct block_q6_K));
		float ds[16];
		scale16(ds, half_f16c(FIELD(p, block_q6_K, d)),
		        load16(FIELD(p, block_q6_K, scales)));

		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = FIELD(p, block_q6_K, ql) + 64 * h;
			__m256i ql0 = load32(ql), ql1 = load32(ql + 32);
			__m256i qh = load32(FIELD(p, block_q6_K, qh) + 32 * h);
			/* run k of 32 values: nibble from ql0/ql1 low/high, bits 2k..2k+1 of qh
			 * moved to bits 4-5 */
			__m256i q[4] = {
				_mm256_or_si256(low_nibbles(ql0),
				                _mm256_and_si256(_mm256_slli_epi16(qh, 4), bytes(0x30))),
				_mm256_or_si256(low_nibbles(ql1),
				                _mm256_and_si256(_mm256_slli_epi16(qh, 2), bytes(0x30))),
				_mm256_or_si256(high_nibbles(ql0), _mm256_and_si256(qh, bytes(0x30))),
				_mm256_or_si256(high_nibbles(ql1),
				                _mm256_and_si256(_mm256_srli_epi16(qh, 2), bytes(0x30))),
			};
			for (int k = 0; k < 4; k++) {
				__m256i v = _mm256_sub_epi8(q[k], bytes(32));
				int s = 8 * h + 2 * k;
				float *y = dst + 128 * h + 32 * k;
				put16(y, _mm256_castsi256_si128(v), ds[s], 0, NO_OFFSET);
				put16(y + 16, _mm256_extracti128_si256(v, 1), ds[s + 1], 0, NO_OFFSET);
			}
		}
	}
}

/* iq4_nl blocks to floats: d * kv, the nibbles indexing kvalues_iq4nl. */
static void dequant_iq4_nl(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	const size_t size = sizeof(struct block_iq4_nl);
	for (uint64_t i = 0; i < nblocks; i++, p += size, dst += QK4_NL) {
		prefetch_ahead(p, size);
		put32(dst, lookup16(kvalues_iq4nl, nibbles16(FIELD(p, block_iq4_nl, qs))),
		      half_f16c(FIELD(p, block_iq4_nl, d)), 0, NO_OFFSET);
	}
}

/* iq4_xs super-blocks to floats: (d * (ls - 32)) * kv per sub-block of 32. */
static void dequant_iq4_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq4_xs)) {
		prefetch_ahead(p, sizeof(struct block_iq4_xs));
		const float d = half_f16c(FIELD(p, block_iq4_xs, d));
		const unsigned scales_h = rd16(FIELD(p, block_iq4_xs, scales_h));
		const uint8_t *scales_l = FIELD(p, block_iq4_xs, scales_l);
		const uint8_t *qs = FIELD(p, block_iq4_xs, qs);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
			               ((scales_h >> 2 * ib) & 3) << 4;
			put32(dst, lookup16(kvalues_iq4nl, nibbles16(qs + 16 * ib)),
			      d * (float)(ls - 32), 0, NO_OFFSET);
		}
	}
}

/* mxfp4 blocks to floats: kv * 2^(e - 128), the power of two built from its bits
 * (ldexpf in the reference; both exact). */
static void dequant_mxfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	const size_t size = sizeof(struct block_mxfp4);
	for (uint64_t i = 0; i < nblocks; i++, p += size, dst += QK_MXFP4) {
		prefetch_ahead(p, size);
		/* e >= 2: a normal float with biased exponent e - 1; e = 1, 0: subnormals */
		const uint8_t e = *FIELD(p, block_mxfp4, e);
		uint32_t bits = e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e;
		float d;
		memcpy(&d, &bits, sizeof d);
		__m256i q = lookup16(kvalues_fp4, nibbles16(FIELD(p, block_mxfp4, qs)));
		put32(dst, q, d, 0, NO_OFFSET);
	}
}

/* nvfp4 blocks to floats: per 16 values, kv * ue4m3(d[s]) / 2 (blocks.h's ue4m3_half,
 * exact); 8 bytes give values 0-7 in their low nibbles and 8-15 in their high ones. */
static void dequant_nvfp4(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	const __m128i table = _mm_loadu_si128((const __m128i *)kvalues_fp4);
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_nvfp4)) {
		prefetch_ahead(p, sizeof(struct block_nvfp4));
		const uint8_t *d = FIELD(p, block_nvfp4, d);
		const uint8_t *qs = FIELD(p, block_nvfp4, qs);
		for (int s = 0; s < 4; s++, dst += 16) {
			__m128i x = _mm_loadl_epi64((const __m128i *)(qs + 8 * s));
			__m128i idx = _mm_and_si128(_mm_unpacklo_epi64(x, _mm_srli_epi16(x, 4)),
			                            _mm_set1_epi8(0x0f));
			put16(dst, _mm_shuffle_epi8(table, idx), ue4m3_half(d[s]), 0, NO_OFFSET);
		}
	}
}

/* dst[0..16) = bit j of bits ? d : -d: a choice, no arithmetic, as in the reference. */
INLINE void put16_pm(float *dst, unsigned bits, float d)
{
#if DQ_AVX512
	_mm512_storeu_ps(dst, _mm512_mask_blend_ps((__mmask16)bits, _mm512_set1_ps(-d),
	                                           _mm512_set1_ps(d)));
#else
	const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
	for (int h = 0; h < 2; h++, bits >>= 8) {
		__m256i set = _mm256_and_si256(_mm256_set1_epi32((int)(bits & 0xff)), lane_bit);
		__m256 mask = _mm256_castsi256_ps(_mm256_cmpeq_epi32(set, lane_bit));
		_mm256_storeu_ps(dst + 8 * h, _mm256_blendv_ps(_mm256_set1_ps(-d), _mm256_set1_ps(d),
		                                               mask));
	}
#endif
}

/* q1_0 blocks to floats: one bit a value, d or -d. */
static void dequant_q1_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q1_0)) {
		prefetch_ahead(p, sizeof(struct block_q1_0));
		/* d reaches the output untouched, without a multiply to quiet a signalling
		 * NaN as F16C would */
		const float d = half_exact(FIELD(p, block_q1_0, d));
		const uint8_t *qs = FIELD(p, block_q1_0, qs);
		for (int j = 0; j < QK1_0 / 16; j++, dst += 16)
			put16_pm(dst, rd16(qs + 2 * j), d);
	}
}

/* q2_0 blocks to floats: (float)(q - 1) * d, four 2-bit q a byte, low bits first. Each
 * byte is copied to four 32-bit lanes, which shift it by 0, 2, 4, 6. */
static void dequant_q2_0(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
	const __m256i three = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1);
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_q2_0)) {
		prefetch_ahead(p, sizeof(struct block_q2_0));
		const __m256 d = _mm256_set1_ps(half_f16c(FIELD(p, block_q2_0, d)));
		const uint8_t *qs = FIELD(p, block_q2_0, qs);
		for (int k = 0; k < QK2_0 / 8; k++, dst += 8) {
			__m256i b = _mm256_setr_epi32(qs[2 * k], qs[2 * k], qs[2 * k], qs[2 * k],
			                              qs[2 * k + 1], qs[2 * k + 1], qs[2 * k + 1],
			                              qs[2 * k + 1]);
			__m256i q = _mm256_sub_epi32(_mm256_and_si256(_mm256_srlv_epi32(b, shifts), three),
			                             one);
			_mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
		}
	}
}

/* ---- the lattice i-quants: grid rows, sign patterns, sub-block scales ----
 *
 * Every 8 values are one row of a fixed grid (8 magnitudes, or two rows of 4 for iq3)
 * and, for the iq2 and iq3 types, a byte of signs. The reference computes
 * db * g * (sign ? -1 : 1); here the sign is put on the integer g before it becomes a
 * float. (-g) * db is exactly -(g * db) (rounding is symmetric); where db is a NaN both
 * are db's NaN, its sign kept (a multiply by -1 returns its NaN operand), and
 * inf * 0 is the same default NaN either way: the same bits in every case. Four rows,
 * 32 values, are gathered into one vector by plain loads. */

/* The 32 magnitudes of four 8-value grid rows, row 0 first. */
INLINE __m256i rows4(uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3)
{
	return _mm256_set_epi64x((long long)r3, (long long)r2, (long long)r1, (long long)r0);
}

/* The 32 magnitudes of eight 4-value iq3 grid rows, two per 8 values. */
INLINE __m256i rows8_iq3(const uint32_t *grid, const int idx[8])
{
	return _mm256_setr_epi32((int)grid[idx[0]], (int)grid[idx[1]], (int)grid[idx[2]],
	                         (int)grid[idx[3]], (int)grid[idx[4]], (int)grid[idx[5]],
	                         (int)grid[idx[6]], (int)grid[idx[7]]);
}

/* g with byte j negated where bit j of signs is set (signs byte l covers values 8l..8l+7). */
INLINE __m256i apply_signs(__m256i g, uint32_t signs)
{
	return _mm256_sign_epi8(g, _mm256_or_si256(bits_to_bytes(signs), bytes(1)));
}

/* The four sign bytes of a 32-value sub-block, value j's sign at bit j. */
INLINE uint32_t signs4(uint8_t s0, uint8_t s1, uint8_t s2, uint8_t s3)
{
	return (uint32_t)s0 | (uint32_t)s1 << 8 | (uint32_t)s2 << 16 | (uint32_t)s3 << 24;
}

/* The signs of a 32-value sub-block given as four 7-bit ksigns_iq2xs indices in the
 * low 28 bits of aux (iq2_xxs, iq3_xxs). */
INLINE uint32_t ksigns4(uint32_t aux)
{
	return signs4(ksigns_iq2xs[aux & 127], ksigns_iq2xs[(aux >> 7) & 127],
	              ksigns_iq2xs[(aux >> 14) & 127], ksigns_iq2xs[(aux >> 21) & 127]);
}

/* put32 of g with a 4-bit scale per 16 values, as iq2_xs and iq2_s store them in one
 * byte: d * (0.5 + nibble) * 0.25, low nibble first. */
INLINE void put32_iq2_scales(float *dst, __m256i g, float d, uint8_t scales)
{
	put16(dst, _mm256_castsi256_si128(g), d * (0.5f + (float)(scales & 0xf)) * 0.25f, 0,
	      NO_OFFSET);
	put16(dst + 16, _mm256_extracti128_si256(g, 1), d * (0.5f + (float)(scales >> 4)) * 0.25f,
	      0, NO_OFFSET);
}

/* iq2_xxs blocks to floats: d * (0.5 + s) * 0.25 * g * sign. */
static void dequant_iq2_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xxs)) {
		prefetch_ahead(p, sizeof(struct block_iq2_xxs));
		const float d = half_f16c(FIELD(p, block_iq2_xxs, d));
		const uint8_t *qs = FIELD(p, block_iq2_xxs, qs);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const uint8_t *q = qs + 8 * ib;
			const uint32_t aux = rd32(q + 4);
			const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
			__m256i g = rows4(iq2xxs_grid[q[0]], iq2xxs_grid[q[1]], iq2xxs_grid[q[2]],
			                  iq2xxs_grid[q[3]]);
			put32(dst, apply_signs(g, ksigns4(aux)), db, 0, NO_OFFSET);
		}
	}
}

/* iq2_xs blocks to floats: as iq2_xxs, a 4-bit scale per 16 values. */
static void dequant_iq2_xs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_xs)) {
		prefetch_ahead(p, sizeof(struct block_iq2_xs));
		const float d = half_f16c(FIELD(p, block_iq2_xs, d));
		const uint8_t *qs = FIELD(p, block_iq2_xs, qs);
		const uint8_t *scales = FIELD(p, block_iq2_xs, scales);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			uint16_t q[4];
			for (int l = 0; l < 4; l++)
				q[l] = rd16(qs + 2 * (4 * ib + l));
			__m256i g = rows4(iq2xs_grid[q[0] & 511], iq2xs_grid[q[1] & 511],
			                  iq2xs_grid[q[2] & 511], iq2xs_grid[q[3] & 511]);
			uint32_t sg = signs4(ksigns_iq2xs[q[0] >> 9], ksigns_iq2xs[q[1] >> 9],
			                     ksigns_iq2xs[q[2] >> 9], ksigns_iq2xs[q[3] >> 9]);
			put32_iq2_scales(dst, apply_signs(g, sg), d, scales[ib]);
		}
	}
}

/* iq2_s blocks to floats: 10-bit grid indices, sign bytes stored as they are. */
static void dequant_iq2_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq2_s)) {
		prefetch_ahead(p, sizeof(struct block_iq2_s));
		const float d = half_f16c(FIELD(p, block_iq2_s, d));
		const uint8_t *qs = FIELD(p, block_iq2_s, qs);
		const uint8_t *signs = qs + QK_K / 8;
		const uint8_t *qh = FIELD(p, block_iq2_s, qh);
		const uint8_t *scales = FIELD(p, block_iq2_s, scales);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			int idx[4];
			for (int l = 0; l < 4; l++)
				idx[l] = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
			__m256i g = rows4(iq2s_grid[idx[0]], iq2s_grid[idx[1]], iq2s_grid[idx[2]],
			                  iq2s_grid[idx[3]]);
			put32_iq2_scales(dst, apply_signs(g, rd32(signs + 4 * ib)), d, scales[ib]);
		}
	}
}

/* iq3_xxs blocks to floats: d * (0.5 + s) * 0.5 * g * sign, 4-value grid rows. */
static void dequant_iq3_xxs(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_xxs)) {
		prefetch_ahead(p, sizeof(struct block_iq3_xxs));
		const float d = half_f16c(FIELD(p, block_iq3_xxs, d));
		const uint8_t *qs = FIELD(p, block_iq3_xxs, qs);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const uint8_t *q = qs + 8 * ib;
			const uint32_t aux = rd32(qs + QK_K / 4 + 4 * ib);
			const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
			const int idx[8] = { q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7] };
			put32(dst, apply_signs(rows8_iq3(iq3xxs_grid, idx), ksigns4(aux)), db, 0,
			      NO_OFFSET);
		}
	}
}

/* iq3_s blocks to floats: d * (1 + 2 s) * g * sign, 9-bit indices into 4-value rows. */
static void dequant_iq3_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq3_s)) {
		prefetch_ahead(p, sizeof(struct block_iq3_s));
		const float d = half_f16c(FIELD(p, block_iq3_s, d));
		const uint8_t *qs = FIELD(p, block_iq3_s, qs);
		const uint8_t *qh = FIELD(p, block_iq3_s, qh);
		const uint8_t *signs = FIELD(p, block_iq3_s, signs);
		const uint8_t *scales = FIELD(p, block_iq3_s, scales);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const int nibble = (scales[ib / 2] >> 4 * (ib % 2)) & 0xf;
			const float db = d * (float)(1 + 2 * nibble);
			const uint8_t *q = qs + 8 * ib;
			int idx[8];
			for (int l = 0; l < 4; l++) {
				idx[2 * l] = q[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256);
				idx[2 * l + 1] = q[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256);
			}
			put32(dst, apply_signs(rows8_iq3(iq3s_grid, idx), rd32(signs + 4 * ib)), db, 0,
			      NO_OFFSET);
		}
	}
}

/* dst[0..16) = ((float)q[j] + delta) * dl for the 16 signed bytes of q, delta lo for
 * the first 8 values and hi for the next 8: the iq1 order of operations. */
INLINE void put16_iq1(float *dst, __m128i q, float dl, float lo, float hi)
{
#if DQ_AVX512
	__m512 delta = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(lo), _mm512_set1_ps(hi));
	__m512 v = _mm512_add_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), delta);
	_mm512_storeu_ps(dst, _mm512_mul_ps(v, _mm512_set1_ps(dl)));
#else
	const float delta[2] = { lo, hi };
	for (int h = 0; h < 2; h++, q = _mm_unpackhi_epi64(q, q)) {
		__m256 v = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)),
		                         _mm256_set1_ps(delta[h]));
		_mm256_storeu_ps(dst + 8 * h, _mm256_mul_ps(v, _mm256_set1_ps(dl)));
	}
#endif
}

/* delta, negated when neg is non-zero, without a branch: the sign bits are random data,
 * and a mispredicted branch per 8 values cost iq1_m two thirds of its speed. */
INLINE float iq1_delta(float delta, unsigned neg)
{
	uint32_t bits;
	memcpy(&bits, &delta, sizeof bits);
	bits ^= (uint32_t)(neg != 0) << 31;
	memcpy(&delta, &bits, sizeof delta);
	return delta;
}

/* iq1_s blocks to floats: d * (2 s + 1) * (g + delta), g in {-1, 0, 1}. */
static void dequant_iq1_s(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_s)) {
		prefetch_ahead(p, sizeof(struct block_iq1_s));
		const float d = half_f16c(FIELD(p, block_iq1_s, d));
		const uint8_t *qs = FIELD(p, block_iq1_s, qs);
		const uint8_t *qhp = FIELD(p, block_iq1_s, qh);
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const unsigned qh = rd16(qhp + 2 * ib);
			const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
			const float delta = iq1_delta(IQ1S_DELTA, qh & 0x8000);
			const uint8_t *q = qs + 4 * ib;
			__m256i g = rows4(iq1s_grid[q[0] | (qh & 7) << 8],
			                  iq1s_grid[q[1] | ((qh >> 3) & 7) << 8],
			                  iq1s_grid[q[2] | ((qh >> 6) & 7) << 8],
			                  iq1s_grid[q[3] | ((qh >> 9) & 7) << 8]);
			put16_iq1(dst, _mm256_castsi256_si128(g), dl, delta, delta);
			put16_iq1(dst + 16, _mm256_extracti128_si256(g, 1), dl, delta, delta);
		}
	}
}

/* iq1_m blocks to floats: as iq1_s with a scale per 16 values and a delta sign per 8;
 * the fp16 super-block scale is spread over the top nibbles of the four scale words. */
static void dequant_iq1_m(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *p = src;
	for (uint64_t i = 0; i < nblocks; i++, p += sizeof(struct block_iq1_m)) {
		prefetch_ahead(p, sizeof(struct block_iq1_m));
		const uint8_t *qs = FIELD(p, block_iq1_m, qs);
		const uint8_t *qh = FIELD(p, block_iq1_m, qh);
		const uint8_t *scales = FIELD(p, block_iq1_m, scales);
		unsigned sc[4];
		for (int k = 0; k < 4; k++)
			sc[k] = rd16(scales + 2 * k);
		const float d = _cvtsh_ss(iq1_m_scale_bits(scales));
		for (int ib = 0; ib < QK_K / 32; ib++, dst += 32) {
			const int shift = 6 * (ib % 2);
			const float dl0 = d * (float)(2 * ((sc[ib / 2] >> shift) & 7) + 1);
			const float dl1 = d * (float)(2 * ((sc[ib / 2] >> (shift + 3)) & 7) + 1);
			const uint8_t *q = qs + 4 * ib;
			const unsigned h0 = qh[2 * ib], h1 = qh[2 * ib + 1];
			__m256i g = rows4(iq1s_grid[q[0] | (h0 & 7) << 8],
			                  iq1s_grid[q[1] | ((h0 >> 4) & 7) << 8],
			                  iq1s_grid[q[2] | (h1 & 7) << 8],
			                  iq1s_grid[q[3] | ((h1 >> 4) & 7) << 8]);
			put16_iq1(dst, _mm256_castsi256_si128(g), dl0, iq1_delta(IQ1M_DELTA, h0 & 0x08),
			          iq1_delta(IQ1M_DELTA, h0 & 0x80));
			put16_iq1(dst + 16, _mm256_extracti128_si256(g, 1), dl1,
			          iq1_delta(IQ1M_DELTA, h1 & 0x08), iq1_delta(IQ1M_DELTA, h1 & 0x80));
		}
	}
}

/* The plain 16-bit float types, one vector of floats per step, the tail one by one. */
#if DQ_AVX512
#define HALVES 16
INLINE void put_bf16(float *dst, const uint8_t *p)
{
	__m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
	_mm512_storeu_ps(dst, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
}

/* F16C, except in the NaN lanes (found by a compare of F16C's own output), which get
 * the float built from the bits as fp16_to_f32 builds it: sign-extended h shifted left
 * by 13 puts the sign at bit 31 and the payload at bits 22-13, and the OR fills the
 * exponent. F16C would set a signalling NaN's quiet bit; this keeps it clear. A blend,
 * not a branch: random bytes have a NaN in 2 of 5 vectors of 16. */
INLINE void put_f16(float *dst, const uint8_t *p)
{
	const __m256i h = _mm256_loadu_si256((const __m256i *)p);
	const __m512 number = _mm512_cvtph_ps(h);
	const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(_mm512_cvtepi16_epi32(h), 13),
	                                     _mm512_set1_epi32(0x7f800000));
	_mm512_storeu_ps(dst, _mm512_mask_mov_ps(number,
	                                         _mm512_cmp_ps_mask(number, number, _CMP_UNORD_Q),
	                                         _mm512_castsi512_ps(bits)));
}
#else
#define HALVES 8
INLINE void put_bf16(float *dst, const uint8_t *p)
{
	__m256i v = _mm256_cvtepu16_epi32(load16(p));
	_mm256_storeu_ps(dst, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
}

/* As the AVX-512 put_f16 above (a compare of F16C's output finds the NaN lanes in one
 * operation, where testing the exponent bits takes two). */
INLINE void put_f16(float *dst, const uint8_t *p)
{
	const __m128i h = load16(p);
	const __m256 number = _mm256_cvtph_ps(h);
	const __m256i bits = _mm256_or_si256(_mm256_slli_epi32(_mm256_cvtepi16_epi32(h), 13),
	                                     _mm256_set1_epi32(0x7f800000));
	_mm256_storeu_ps(dst, _mm256_blendv_ps(number, _mm256_castsi256_ps(bits),
	                                       _mm256_cmp_ps(number, number, _CMP_UNORD_Q)));
}
#endif

/* n 16-bit floats at p to floats, a cache line of 32 a step (one prefetch each), then
 * HALVES a step, and the tail one by one: bf16 (bf, a constant once inlined) is the top
 * half of a binary32, so a shift; f16 is put_f16's, and the tail half_exact's. Both
 * exact for every pattern, signalling NaNs included. */
INLINE void dequant_halves(const uint8_t *p, float *dst, uint64_t n, bool bf)
{
	uint64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		prefetch_ahead(p + 2 * i, 64);
		for (int k = 0; k < 32; k += HALVES) {
			if (bf)
				put_bf16(dst + i + k, p + 2 * (i + k));
			else
				put_f16(dst + i + k, p + 2 * (i + k));
		}
	}
	for (; i + HALVES <= n; i += HALVES) {
		if (bf)
			put_bf16(dst + i, p + 2 * i);
		else
			put_f16(dst + i, p + 2 * i);
	}
	for (; i < n; i++)
		dst[i] = bf ? bf16_to_f32(rd16(p + 2 * i)) : half_exact(p + 2 * i);
}

static void dequant_bf16(const void *src, float *dst, uint64_t n)
{
	dequant_halves(src, dst, n, true);
}

static void dequant_f16(const void *src, float *dst, uint64_t n)
{
	dequant_halves(src, dst, n, false);
}

const struct dequant_impl IMPLS[] = {
	{ GGML_TYPE_F16, dequant_f16 },
	{ GGML_TYPE_BF16, dequant_bf16 },
	{ GGML_TYPE_Q4_0, dequant_q4_0 },
	{ GGML_TYPE_Q4_1, dequant_q4_1 },
	{ GGML_TYPE_Q5_0, dequant_q5_0 },
	{ GGML_TYPE_Q5_1, dequant_q5_1 },
	{ GGML_TYPE_Q8_0, dequant_q8_0 },
	{ GGML_TYPE_Q2_K, dequant_q2_K },
	{ GGML_TYPE_Q3_K, dequant_q3_K },
	{ GGML_TYPE_Q4_K, dequant_q4_K },
	{ GGML_TYPE_Q5_K, dequant_q5_K },
	{ GGML_TYPE_Q6_K, dequant_q6_K },
	{ GGML_TYPE_IQ2_XXS, dequant_iq2_xxs },
	{ GGML_TYPE_IQ2_XS, dequant_iq2_xs },
	{ GGML_TYPE_IQ2_S, dequant_iq2_s },
	{ GGML_TYPE_IQ3_XXS, dequant_iq3_xxs },
	{ GGML_TYPE_IQ3_S, dequant_iq3_s },
	{ GGML_TYPE_IQ1_S, dequant_iq1_s },
	{ GGML_TYPE_IQ1_M, dequant_iq1_m },
	{ GGML_TYPE_IQ4_NL, dequant_iq4_nl },
	{ GGML_TYPE_IQ4_XS, dequant_iq4_xs },
	{ GGML_TYPE_MXFP4, dequant_mxfp4 },
	{ GGML_TYPE_NVFP4, dequant_nvfp4 },
	{ GGML_TYPE_Q1_0, dequant_q1_0 },
	{ GGML_TYPE_Q2_0, dequant_q2_0 },
	{ 0, NULL },
};
