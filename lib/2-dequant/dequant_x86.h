/* The vector building blocks of dequant_x86.c (included by it alone, in each of its
 * builds, so DQ_AVX512 says which): fp16 scales, prefetch, loads, put16 (16 signed bytes
 * to 16 floats, the one step that differs between the builds), nibble and bit
 * unpacking, table lookups and k-quant scales. The exactness rules of dequant_x86.c's
 * head hold for every one. */
#ifndef GGUFS_DEQUANT_X86_H
#define GGUFS_DEQUANT_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

/* blocks.h's half_at in one F16C instruction, which sets a signalling NaN's quiet bit
 * where half_at keeps it clear: only for scales that are then multiplied, which sets
 * that bit anyway, payload and sign kept, so that the product is the same either way. */
INLINE float half_f16c(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof h);
	return _cvtsh_ss(h);
}

/* blocks.h's half_at, exact for every pattern as it is: F16C, and for a NaN the float
 * built from the bits, sign-extended h shifted left by 13 putting the sign at bit 31
 * and the payload at bits 22-13. A blend in a vector register: the compiler made a
 * select on the bits a branch, mispredicted on every NaN. */
INLINE float half_exact(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, sizeof h);
	const __m128 number = _mm_cvtph_ps(_mm_cvtsi32_si128(h));
	const __m128i built = _mm_cvtsi32_si128((int)((uint32_t)(int32_t)(int16_t)h << 13 |
	                                              0x7f800000u));
	return _mm_cvtss_f32(_mm_blendv_ps(number, _mm_castsi128_ps(built),
	                                   _mm_cmpunord_ps(number, number)));
}

#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 4096
#endif
#ifndef PREFETCH_HINT
#define PREFETCH_HINT _MM_HINT_NTA
#endif

/* Asks for the bytes PREFETCH_AHEAD past a block of size bytes at p, one prefetch per
 * cache line. A tensor is read once, straight through, and the hardware prefetcher
 * alone leaves the loop waiting on memory (measured: q8_0 output from 30 to 60 GB/s);
 * the non-temporal hint keeps the stream from evicting the output buffer from L2. A
 * prefetch never faults, so running past the end of src is harmless. */
INLINE void prefetch_ahead(const uint8_t *p, size_t size)
{
	for (size_t off = 0; off < size; off += 64)
		_mm_prefetch((const char *)p + PREFETCH_AHEAD + off, PREFETCH_HINT);
}

INLINE __m128i load16(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

INLINE __m256i load32(const uint8_t *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* What put16 does with m after the multiply: the reference's own operation, so that a
 * NaN m comes out with its own sign (q * d - (-m) would flip it). PLUS_OFFSET is the _1
 * types', and also takes their reference's d = 0 where m is a NaN (dequant_legacy.c),
 * so that the add never sees two NaNs and the compiler's operand order cannot pick
 * the payload. That is one compare on the broadcast m (AVX-512: the broadcast of d
 * zeroes by its mask for free); a select on the float d went through an integer
 * register and cost q4_1 about a tenth of its speed. */
enum offset { NO_OFFSET, MINUS_OFFSET, PLUS_OFFSET };

/* dst[0..16) = (float)q[j] * d, then - m or + m as op says (a constant once inlined),
 * for the 16 signed bytes of q. */
INLINE void put16(float *dst, __m128i q, float d, float m, enum offset op)
{
#if DQ_AVX512
	const __m512 mv = _mm512_set1_ps(m);
	__m512 dv = _mm512_set1_ps(d);
	if (op == PLUS_OFFSET)
		dv = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(mv, mv, _CMP_ORD_Q), dv);
	__m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), dv);
	if (op == MINUS_OFFSET)
		v = _mm512_sub_ps(v, mv);
	else if (op == PLUS_OFFSET)
		v = _mm512_add_ps(v, mv);
	_mm512_storeu_ps(dst, v);
#else
	const __m256 mv = _mm256_set1_ps(m);
	__m256 dv = _mm256_set1_ps(d);
	if (op == PLUS_OFFSET)
		dv = _mm256_and_ps(_mm256_cmp_ps(mv, mv, _CMP_ORD_Q), dv);
	for (int h = 0; h < 2; h++, q = _mm_unpackhi_epi64(q, q)) {
		__m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv);
		if (op == MINUS_OFFSET)
			v = _mm256_sub_ps(v, mv);
		else if (op == PLUS_OFFSET)
			v = _mm256_add_ps(v, mv);
		_mm256_storeu_ps(dst + 8 * h, v);
	}
#endif
}

/* put16 for the 32 signed bytes of q, all with the same d and m. */
INLINE void put32(float *dst, __m256i q, float d, float m, enum offset op)
{
	put16(dst, _mm256_castsi256_si128(q), d, m, op);
	put16(dst + 16, _mm256_extracti128_si256(q, 1), d, m, op);
}

INLINE __m256i bytes(int8_t b)
{
	return _mm256_set1_epi8(b);
}

/* Bits 0-3 and 4-7 of each byte of x, as bytes. */
INLINE __m256i low_nibbles(__m256i x)
{
	return _mm256_and_si256(x, bytes(0x0f));
}

INLINE __m256i high_nibbles(__m256i x)
{
	return _mm256_and_si256(_mm256_srli_epi16(x, 4), bytes(0x0f));
}

/* The 32 nibbles of the 16 bytes at p in the legacy order: the low nibbles (values
 * 0..15), then the high ones (values 16..31). */
INLINE __m256i nibbles16(const uint8_t *p)
{
	__m128i x = load16(p);
	return low_nibbles(_mm256_set_m128i(_mm_srli_epi16(x, 4), x));
}

/* Byte j is 0xff where bit j of bits is set, else 0. */
INLINE __m256i bits_to_bytes(uint32_t bits)
{
	/* byte j takes byte j / 8 of bits, then tests bit j % 8 of it */
	const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
	                                      2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), pick);
	return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* Byte j is 0xff where byte j of x has any bit of mask set, else 0. */
INLINE __m256i has_bit(__m256i x, int8_t mask)
{
	return _mm256_cmpeq_epi8(_mm256_and_si256(x, bytes(mask)), bytes(mask));
}

/* The 16 int8 levels of a non-linear 4-bit type, looked up by nibble in each byte of
 * idx (both 128-bit lanes). */
INLINE __m256i lookup16(const int8_t table[16], __m256i idx)
{
	__m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
	return _mm256_shuffle_epi8(t, idx);
}

/* out[j] = d * (float)s[j] for 8 signed bytes s: the sub-block scales of a k-quant,
 * rounded exactly as the reference's scalar d * (float)sc. */
INLINE void scale8(float out[8], float d, __m128i s)
{
	__m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s));
	_mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(d), v));
}

/* scale8 for 16 signed bytes. */
INLINE void scale16(float out[16], float d, __m128i s)
{
	scale8(out, d, s);
	scale8(out + 8, d, _mm_unpackhi_epi64(s, s));
}

/* The eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) packed into the 12 scale
 * bytes of q4_K and q5_K (see blocks.h), unpacked four at a time as 32-bit words. */
INLINE __m128i k4_scales_mins(const uint8_t *s)
{
	uint32_t w[3], out[4];
	memcpy(w, s, sizeof w);
	out[0] = w[0] & 0x3f3f3f3f;                                        /* sc 0-3 */
	out[1] = (w[2] & 0x0f0f0f0f) | (w[0] >> 6 & 0x03030303) << 4;     /* sc 4-7 */
	out[2] = w[1] & 0x3f3f3f3f;                                        /* m 0-3 */
	out[3] = (w[2] >> 4 & 0x0f0f0f0f) | (w[1] >> 6 & 0x03030303) << 4; /* m 4-7 */
	return _mm_loadu_si128((const __m128i *)out);
}

#endif
