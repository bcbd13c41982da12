/* q4_K statistics from the blocks (stats_quant.h).
 *
 * In sub-block j of a q4_K block (blocks.h) the value of quant q (0..15) is
 *
 *   w = fl(d1 * q - m1)      d1 = d * sc_j,  m1 = dmin * m_j   (floats)
 *
 * d and dmin are fp16 (11 significant bits, multiples of 2^-24), sc and m 6-bit, so d1,
 * m1 and d1 * q are exact: multiples of 2^-24 below 2^26. The real d1 * q - m1 is
 * then a multiple of g = 2^min(lsb(d1), lsb(m1)), and when every one of the sub-block
 * (q from its least qmin to its greatest qmax) is below 2^24 g it fits float32's
 * significand: w IS that real. Then, with S1 = sum q and S2 = sum q^2 over the 32:
 *
 *   s1 = sum (w - shift)   = d1 S1 - 32 m1 - 32 shift
 *   s2 = sum (w - shift)^2 = d1^2 (32 S2 - S1^2) / 32  +  s1^2 / 32
 *
 * (the squares about the sub-block's own mean, exact in float64 as d1^2 has 34 bits and
 * 32 S2 - S1^2 < 2^18; plus the mean's distance from shift). fl is monotonic, so the
 * least and greatest values are w at qmin and qmax; a value is zero only where
 * d1 * q == m1; and none is subnormal (a non-zero multiple of 2^-24). A sub-block that
 * does not fit is summed value by value: none of tinyllama-q4km's 104,448 does, as
 * llama.cpp makes dmin 4 to 16 times d.
 *
 * Per block: the integer sums by SIMD (exact at any level), then the float64 figures of
 * its eight sub-blocks side by side, one lane each, in the same IEEE operations at every
 * level (generic vectors, and AVX-512 intrinsics written op for op after them), so the
 * bits agree. On a 2-core AVX-512 machine this scans q4_K at 2.9 GB of blocks per CPU
 * second, against 1.45 for dequantizing to float32 and summing the floats. */
#include "stats_quant.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "blocks.h"
#include "dequant.h"
#include "types.h"

/* The integer sums of a q4_K block's eight sub-blocks, as q4_K_block's vectors load
 * them: S1 = sum q, S2 = sum q^2, and the least and greatest q. */
struct q4_K_sums {
	int32_t s1[8], s2[8], qmin[8], qmax[8];
};

/* The quant of value l (0..31) of sub-block j (0..7) in qs: chunk j / 2 of 32 bytes,
 * low nibbles for even j, high for odd. */
static inline int q4_K_quant(const uint8_t *qs, int j, int l)
{
	return qs[32 * (j / 2) + l] >> (4 * (j % 2)) & 0x0f;
}

/* How many of sub-block j's 32 quants are q: a byte-wise compare of the 32 bytes,
 * eight at a time (a zero byte of x ^ q has its high bit set in the result). */
static uint32_t q4_K_count(const uint8_t *qs, int j, int q)
{
	const uint64_t ones = 0x0101010101010101u, low7 = 0x7f7f7f7f7f7f7f7fu;
	uint32_t n = 0;
	for (int w = 0; w < 4; w++) {
		uint64_t x;
		memcpy(&x, qs + 32 * (j / 2) + 8 * w, sizeof x);
		x = (x >> (4 * (j % 2)) & 0x0f * ones) ^ (uint64_t)q * ones;
		n += (uint32_t)__builtin_popcountll(~(((x & low7) + low7) | x) & ~low7);
	}
	return n;
}

/* The specification of the sums, and the level for CPUs without AVX2. */
static void q4_K_sums_scalar(const uint8_t *qs, struct q4_K_sums *o)
{
	for (int j = 0; j < 8; j++) {
		uint32_t s1 = 0, s2 = 0;
		int lo = 15, hi = 0;
		for (int l = 0; l < 32; l++) {
			const int q = q4_K_quant(qs, j, l);
			s1 += (uint32_t)q;
			s2 += (uint32_t)(q * q);
			lo = q < lo ? q : lo;
			hi = q > hi ? q : hi;
		}
		o->s1[j] = (int32_t)s1;
		o->s2[j] = (int32_t)s2;
		o->qmin[j] = lo;
		o->qmax[j] = hi;
	}
}

#if defined(__x86_64__) && defined(__GNUC__)

/* Four vectors of 32 bytes to one of [a | b | c | d] 8-byte lanes ... by pairs: the
 * 32 bytes of a and b become 16 of each (their halves combined by op), side by side. */
#define PAIR(op, a, b)                                                        \
	op(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31))

/* AVX2: the eight sub-blocks as eight vectors of 32 quants (one byte each), then
 * horizontal sums, minima and maxima of all eight at once by halving: 32 bytes to 16
 * (PAIR), to 8 (64-bit unpacks), to 4 (32-bit shuffles), to 1 (shifts within 32 bits).
 * S1 and S2 each fit 32 bits, so both travel in one 64-bit lane of psadbw's sums; q^2
 * (at most 225) is a byte table lookup. */
__attribute__((target("avx2")))
static void q4_K_sums_avx2(const uint8_t *qs, struct q4_K_sums *o)
{
	const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
	const __m256i sq = _mm256_setr_epi8(0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121,
	                                    (char)144, (char)169, (char)196, (char)225,
	                                    0, 1, 4, 9, 16, 25, 36, 49, 64, 81, 100, 121,
	                                    (char)144, (char)169, (char)196, (char)225);
	__m256i v[8], s[8];
	for (int c = 0; c < 4; c++) {
		const __m256i x = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
		v[2 * c] = _mm256_and_si256(x, nib);
		v[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 4), nib);
	}
	for (int j = 0; j < 8; j++) {
		const __m256i q2 = _mm256_shuffle_epi8(sq, v[j]);
		s[j] = _mm256_or_si256(_mm256_sad_epu8(v[j], zero),
		                       _mm256_slli_epi64(_mm256_sad_epu8(q2, zero), 32));
	}
	/* sums: 4 lanes of 64 bits per sub-block, to 2 (PAIR), to 1 (unpacks) */
	__m256i e[4];
	for (int k = 0; k < 4; k++)
		e[k] = PAIR(_mm256_add_epi64, s[2 * k], s[2 * k + 1]);
	__m256i g[2];
	for (int k = 0; k < 2; k++)
		g[k] = _mm256_add_epi64(_mm256_unpacklo_epi64(e[2 * k], e[2 * k + 1]),
		                        _mm256_unpackhi_epi64(e[2 * k], e[2 * k + 1]));
	/* g[k] holds sub-blocks 4k, 4k + 2 | 4k + 1, 4k + 3, as S1 | S2 << 32: the S1s of
	 * each in order, then its S2s */
	const __m256i split = _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7);
	const __m256i h0 = _mm256_permutevar8x32_epi32(g[0], split);
	const __m256i h1 = _mm256_permutevar8x32_epi32(g[1], split);
	_mm256_storeu_si256((__m256i *)o->s1, _mm256_permute2x128_si256(h0, h1, 0x20));
	_mm256_storeu_si256((__m256i *)o->s2, _mm256_permute2x128_si256(h0, h1, 0x31));
	/* minima and maxima: 32 bytes per sub-block to 16, 8, 4, 1 */
	__m256i mn[4], mx[4];
	for (int k = 0; k < 4; k++) {
		mn[k] = PAIR(_mm256_min_epu8, v[2 * k], v[2 * k + 1]);
		mx[k] = PAIR(_mm256_max_epu8, v[2 * k], v[2 * k + 1]);
	}
	__m256i mn8[2], mx8[2];
	for (int k = 0; k < 2; k++) {
		mn8[k] = _mm256_min_epu8(_mm256_unpacklo_epi64(mn[2 * k], mn[2 * k + 1]),
		                         _mm256_unpackhi_epi64(mn[2 * k], mn[2 * k + 1]));
		mx8[k] = _mm256_max_epu8(_mm256_unpacklo_epi64(mx[2 * k], mx[2 * k + 1]),
		                         _mm256_unpackhi_epi64(mx[2 * k], mx[2 * k + 1]));
	}
	/* dwords 0, 2 of each 16-byte lane against 1, 3 */
	const __m256 a = _mm256_castsi256_ps(mn8[0]), b = _mm256_castsi256_ps(mn8[1]);
	const __m256 c = _mm256_castsi256_ps(mx8[0]), d = _mm256_castsi256_ps(mx8[1]);
	__m256i mn4 = _mm256_min_epu8(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)),
	                              _mm256_castps_si256(_mm256_shuffle_ps(a, b, 0xdd)));
	__m256i mx4 = _mm256_max_epu8(_mm256_castps_si256(_mm256_shuffle_ps(c, d, 0x88)),
	                              _mm256_castps_si256(_mm256_shuffle_ps(c, d, 0xdd)));
	mn4 = _mm256_min_epu8(mn4, _mm256_srli_epi32(mn4, 16));
	mn4 = _mm256_min_epu8(mn4, _mm256_srli_epi32(mn4, 8));
	mx4 = _mm256_max_epu8(mx4, _mm256_srli_epi32(mx4, 16));
	mx4 = _mm256_max_epu8(mx4, _mm256_srli_epi32(mx4, 8));
	/* dword k holds sub-block 2k (k < 4) or 2(k - 4) + 1, in its low byte */
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	const __m256i byte = _mm256_set1_epi32(0xff);
	_mm256_storeu_si256((__m256i *)o->qmin,
	                    _mm256_and_si256(_mm256_permutevar8x32_epi32(mn4, order), byte));
	_mm256_storeu_si256((__m256i *)o->qmax,
	                    _mm256_and_si256(_mm256_permutevar8x32_epi32(mx4, order), byte));
}
#undef PAIR
#endif

/* Sub-block j's 6-bit scale and min from q4_K's 12 scale bytes (blocks.h). */
static void q4_K_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 0x3f;
		*m = s[j + 4] & 0x3f;
	} else {
		*sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
		*m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

/* One value into lane j the long way, as stats_kernel's lane_add does for a finite one
 * (none of these blocks has a NaN or infinite scale). */
static void lane_value(struct stats_lanes *l, int j, float w, double shift)
{
	uint32_t u;
	memcpy(&u, &w, sizeof u);
	const uint32_t a = u & 0x7fffffffu;
	l->zero[j] += a == 0;
	l->sub[j] += a - 1u < 0x007fffffu;
	const double d = (double)w - shift;
	l->s1[j] += d;
	l->s2[j] += d * d;
}

/* The lanes of a block that q4_K_block leaves: misfit, a bit per sub-block that does
 * not fit (summed value by value), and whole, a bit per sub-block with zeros at the
 * quant k[j] (counted). */
static void q4_K_rare(struct stats_lanes *l, int base, const uint8_t *qs, const float d1[8],
                      const float m1[8], unsigned misfit, unsigned whole, const double k[8],
                      double shift)
{
	for (int j = 0; j < 8; j++) {
		if (misfit >> j & 1) {
			for (int i = 0; i < 32; i++)
				lane_value(l, base + j, d1[j] * (float)q4_K_quant(qs, j, i) - m1[j],
				           shift);
		} else if (whole >> j & 1) {
			l->zero[base + j] += q4_K_count(qs, j, (int)k[j]);
		}
	}
}

/* Four sub-blocks of a block side by side, in the compiler's vector extensions: one
 * source for every level, each lane doing the scalar operations of one sub-block, so
 * the float64 results are the same bits whatever the target makes of them. Four, not
 * eight: GCC splits a vector of four doubles into SSE halves well, but turns the
 * compares of eight into scalar code on AVX2. */
typedef double vd4 __attribute__((vector_size(32)));
typedef int64_t vl4 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));
#define SEL(m, a, b) (((a) & (m)) | ((b) & ~(m)))
#define SELD(m, a, b) ((vd4)SEL(m, (vl4)(a), (vl4)(b)))
#define SELF(m, a, b) ((vf4)SEL(m, (vi4)(a), (vi4)(b)))

/* For each lane, the value of the lowest set bit of f, a float32 that is zero or not
 * subnormal, as a float (a power of two); +inf for zero. The significand with its
 * implicit bit, m & -m, is 2^t exactly as a float; adding f's exponent less 150 to that
 * float's exponent field makes 2^(e - 150 + t), which is at least 2^-24 here. */
static inline __attribute__((always_inline)) void lowest_bit(const vf4 *fp, vf4 *out)
{
	const vf4 f = *fp;
	const vu4 u = (vu4)f;
	const vu4 m = (u & 0x7fffffu) | 0x800000u;
	const vf4 low = __builtin_convertvector((vi4)(m & (0u - m)), vf4);
	const vi4 e = (vi4)((u >> 23) & 0xffu) - 150;
	const vf4 g = (vf4)((vi4)low + e * (1 << 23));
	*out = SELF(f == 0.0f, (vf4){ 0 } + INFINITY, g);
}

/* Sub-blocks h..h + 3 of a block into lanes base + h..: everything but the sub-blocks
 * that do not fit (returned as bits, to be summed value by value) and the counting of
 * zeros where d1 * q == m1 for a whole q in qmin..qmax (bits << 8, the q in k[]). */
static inline __attribute__((always_inline)) unsigned
q4_K_quarter(struct stats_lanes *l, int base, int h, const float d1a[8], const float m1a[8],
             const struct q4_K_sums *s, double shift, double k[8])
{
	vf4 d1, m1, lo, hi;
	vd4 s1a, s2a;
	vu4 zero;
	vi4 q0i, q1i, S1i, S2i;
	memcpy(&d1, d1a + h, sizeof d1);
	memcpy(&m1, m1a + h, sizeof m1);
	memcpy(&lo, l->lo + base + h, sizeof lo);
	memcpy(&hi, l->hi + base + h, sizeof hi);
	memcpy(&s1a, l->s1 + base + h, sizeof s1a);
	memcpy(&s2a, l->s2 + base + h, sizeof s2a);
	memcpy(&zero, l->zero + base + h, sizeof zero);
	memcpy(&S1i, s->s1 + h, sizeof S1i);
	memcpy(&S2i, s->s2 + h, sizeof S2i);
	memcpy(&q0i, s->qmin + h, sizeof q0i);
	memcpy(&q1i, s->qmax + h, sizeof q1i);
	const vf4 q0 = __builtin_convertvector(q0i, vf4);
	const vf4 q1 = __builtin_convertvector(q1i, vf4);
	/* the least and greatest values, exactly as the dequantizer rounds them */
	const vf4 w0 = d1 * q0 - m1, w1 = d1 * q1 - m1;
	const vi4 lt = w0 < w1;
	const vf4 wlo = SELF(lt, w0, w1), whi = SELF(lt, w1, w0);
	lo = SELF(wlo < lo, wlo, lo);
	hi = SELF(whi > hi, whi, hi);
	/* do the reals at the ends, and so all between, fit 24 bits of the finer grid? */
	const vd4 dd = __builtin_convertvector(d1, vd4), md = __builtin_convertvector(m1, vd4);
	const vd4 q0d = __builtin_convertvector(q0i, vd4), q1d = __builtin_convertvector(q1i, vd4);
	const vd4 e0 = dd * q0d - md, e1 = dd * q1d - md;
	const vd4 a0 = (vd4)((vl4)e0 & INT64_MAX), a1 = (vd4)((vl4)e1 & INT64_MAX);
	const vd4 big = SELD(a0 > a1, a0, a1);
	vf4 gd, gm;
	lowest_bit(&d1, &gd);
	lowest_bit(&m1, &gm);
	const vd4 g = __builtin_convertvector(SELF(gd < gm, gd, gm), vd4);
	const vl4 fit = big < g * 16777216.0;
	/* the sums of a sub-block that fits, from S1 and S2 */
	const vd4 S1 = __builtin_convertvector(S1i, vd4);
	const vd4 T = __builtin_convertvector(S2i * 32 - S1i * S1i, vd4);
	const vd4 s1 = (dd * S1 - 32.0 * md) - 32.0 * shift;
	const vd4 s2 = dd * dd * T / 32.0 + s1 * s1 / 32.0;
	s1a += SELD(fit, s1, (vd4){ 0 });
	s2a += SELD(fit, s2, (vd4){ 0 });
	/* zeros: all 32 where d1 and m1 are; where only d1 is not, those with q = m1 / d1 */
	const vi4 d1zero = d1 == 0.0f;
	const vl4 d1zero_l = __builtin_convertvector(d1zero, vl4);
	zero += (vu4)(d1zero & (m1 == 0.0f)) & 32u;
	const vd4 k0 = md / SELD(d1zero_l, (vd4){ 0 } + 1.0, dd);
	const vl4 in = (k0 >= q0d) & (k0 <= q1d);
	const vd4 kc = SELD(in, k0, (vd4){ 0 });
	const vd4 kw = __builtin_convertvector(__builtin_convertvector(kc, vi4), vd4);
	const vl4 whole = in & (kw == kc) & (dd * kw == md) & ~d1zero_l;
	memcpy(l->lo + base + h, &lo, sizeof lo);
	memcpy(l->hi + base + h, &hi, sizeof hi);
	memcpy(l->s1 + base + h, &s1a, sizeof s1a);
	memcpy(l->s2 + base + h, &s2a, sizeof s2a);
	memcpy(l->zero + base + h, &zero, sizeof zero);
	memcpy(k + h, &kw, sizeof kw);
	/* the rare lanes as bits, gathered by halving */
	const vl4 bit = (vl4){ 1, 2, 4, 8 } << h;
	vl4 r = (~fit & bit) | (whole & fit & bit << 8);
	r |= __builtin_shufflevector(r, r, 2, 3, 0, 1);
	r |= __builtin_shufflevector(r, r, 1, 0, 3, 2);
	return (unsigned)r[0];
}

/* A block's eight sub-blocks into lanes base..base + 7, the rare ones (q4_K_quarter)
 * after. */
static inline __attribute__((always_inline)) void
q4_K_block(struct stats_lanes *l, int base, const uint8_t *qs, const float d1a[8],
           const float m1a[8], const struct q4_K_sums *s, double shift)
{
	double k[8];
	const unsigned rare = q4_K_quarter(l, base, 0, d1a, m1a, s, shift, k) |
	                      q4_K_quarter(l, base, 4, d1a, m1a, s, shift, k);
	if (rare)
		q4_K_rare(l, base, qs, d1a, m1a, rare & 0xff, rare >> 8, k, shift);
}

static void q4_K_block_base(struct stats_lanes *l, int base, const uint8_t *qs,
                            const float d1a[8], const float m1a[8], const struct q4_K_sums *s,
                            double shift)
{
	q4_K_block(l, base, qs, d1a, m1a, s, shift);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2")))
static void q4_K_block_avx2(struct stats_lanes *l, int base, const uint8_t *qs,
                            const float d1a[8], const float m1a[8], const struct q4_K_sums *s,
                            double shift)
{
	q4_K_block(l, base, qs, d1a, m1a, s, shift);
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2")))

/* lowest_bit in AVX-512VL: the same integer operations on the float's bits. */
AVX512 static inline __m256 lowest_bit_avx512(__m256 f)
{
	const __m256i u = _mm256_castps_si256(f);
	const __m256i m = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffff)),
	                                  _mm256_set1_epi32(0x800000));
	const __m256 low =
		_mm256_cvtepi32_ps(_mm256_and_si256(m, _mm256_sub_epi32(_mm256_setzero_si256(), m)));
	const __m256i e = _mm256_sub_epi32(
		_mm256_and_si256(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(0xff)),
		_mm256_set1_epi32(150));
	const __m256 g = _mm256_castsi256_ps(
		_mm256_add_epi32(_mm256_castps_si256(low), _mm256_slli_epi32(e, 23)));
	return _mm256_mask_blend_ps(_mm256_cmp_ps_mask(f, _mm256_setzero_ps(), _CMP_EQ_OQ), g,
	                            _mm256_set1_ps(INFINITY));
}

/* q4_K_block in AVX-512: its operations one for one, with mask registers for its
 * selects (blend(k, a, b) is k ? b : a), so that every lane rounds as there. GCC's
 * lowering of the generic vectors is piecewise here, 3x slower. */
AVX512 static void q4_K_block_avx512(struct stats_lanes *l, int base, const uint8_t *qs,
                                     const float d1a[8], const float m1a[8],
                                     const struct q4_K_sums *s, double shift)
{
	const __m256 d1 = _mm256_loadu_ps(d1a), m1 = _mm256_loadu_ps(m1a);
	const __m256 q0 = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)s->qmin));
	const __m256 q1 = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)s->qmax));
	const __m256 w0 = _mm256_sub_ps(_mm256_mul_ps(d1, q0), m1);
	const __m256 w1 = _mm256_sub_ps(_mm256_mul_ps(d1, q1), m1);
	const __mmask8 lt = _mm256_cmp_ps_mask(w0, w1, _CMP_LT_OQ);
	const __m256 wlo = _mm256_mask_blend_ps(lt, w1, w0), whi = _mm256_mask_blend_ps(lt, w0, w1);
	__m256 lo = _mm256_loadu_ps(l->lo + base), hi = _mm256_loadu_ps(l->hi + base);
	lo = _mm256_mask_blend_ps(_mm256_cmp_ps_mask(wlo, lo, _CMP_LT_OQ), lo, wlo);
	hi = _mm256_mask_blend_ps(_mm256_cmp_ps_mask(whi, hi, _CMP_GT_OQ), hi, whi);
	_mm256_storeu_ps(l->lo + base, lo);
	_mm256_storeu_ps(l->hi + base, hi);

	const __m512d dd = _mm512_cvtps_pd(d1), md = _mm512_cvtps_pd(m1);
	const __m512d q0d = _mm512_cvtps_pd(q0), q1d = _mm512_cvtps_pd(q1);
	const __m512i abs = _mm512_set1_epi64(INT64_MAX);
	const __m512d a0 = _mm512_castsi512_pd(_mm512_and_si512(
		_mm512_castpd_si512(_mm512_sub_pd(_mm512_mul_pd(dd, q0d), md)), abs));
	const __m512d a1 = _mm512_castsi512_pd(_mm512_and_si512(
		_mm512_castpd_si512(_mm512_sub_pd(_mm512_mul_pd(dd, q1d), md)), abs));
	const __m512d big = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(a0, a1, _CMP_GT_OQ), a1, a0);
	const __m256 gd = lowest_bit_avx512(d1), gm = lowest_bit_avx512(m1);
	const __m512d g =
		_mm512_cvtps_pd(_mm256_mask_blend_ps(_mm256_cmp_ps_mask(gd, gm, _CMP_LT_OQ), gm, gd));
	const __mmask8 fit =
		_mm512_cmp_pd_mask(big, _mm512_mul_pd(g, _mm512_set1_pd(16777216.0)), _CMP_LT_OQ);

	const __m256i S1i = _mm256_loadu_si256((const __m256i *)s->s1);
	const __m256i S2i = _mm256_loadu_si256((const __m256i *)s->s2);
	const __m512d S1 = _mm512_cvtepi32_pd(S1i);
	const __m512d T = _mm512_cvtepi32_pd(
		_mm256_sub_epi32(_mm256_slli_epi32(S2i, 5), _mm256_mullo_epi32(S1i, S1i)));
	const __m512d c32 = _mm512_set1_pd(32.0);
	const __m512d s1 = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(dd, S1), _mm512_mul_pd(c32, md)),
	                                 _mm512_set1_pd(32.0 * shift));
	/* / 32 as * 2^-5: the same real, so the same rounding, without a division's
	 * latency (GCC makes the same change in q4_K_quarter's / 32.0) */
	const __m512d c32th = _mm512_set1_pd(0x1p-5);
	const __m512d s2 = _mm512_add_pd(_mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(dd, dd), T), c32th),
	                                 _mm512_mul_pd(_mm512_mul_pd(s1, s1), c32th));
	_mm512_storeu_pd(l->s1 + base,
	                 _mm512_add_pd(_mm512_loadu_pd(l->s1 + base), _mm512_maskz_mov_pd(fit, s1)));
	_mm512_storeu_pd(l->s2 + base,
	                 _mm512_add_pd(_mm512_loadu_pd(l->s2 + base), _mm512_maskz_mov_pd(fit, s2)));

	const __mmask8 d1zero = _mm256_cmp_ps_mask(d1, _mm256_setzero_ps(), _CMP_EQ_OQ);
	const __mmask8 m1zero = _mm256_cmp_ps_mask(m1, _mm256_setzero_ps(), _CMP_EQ_OQ);
	__m256i zero = _mm256_loadu_si256((const __m256i *)(l->zero + base));
	zero = _mm256_mask_add_epi32(zero, d1zero & m1zero, zero, _mm256_set1_epi32(32));
	_mm256_storeu_si256((__m256i *)(l->zero + base), zero);
	/* Not a division here: m1 / d1 to 14 bits, rounded, names the one whole q in 0..15
	 * it could be, and the exact d1 * q == m1 decides; so the lanes and their q are
	 * those of q4_K_quarter's exact division, without its latency (a third of the
	 * time of this function). */
	const __m512d den = _mm512_mask_blend_pd(d1zero, dd, _mm512_set1_pd(1.0));
	const __m512d kr = _mm512_roundscale_pd(_mm512_mul_pd(md, _mm512_rcp14_pd(den)),
	                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	const __mmask8 in = _mm512_cmp_pd_mask(kr, q0d, _CMP_GE_OQ) &
	                    _mm512_cmp_pd_mask(kr, q1d, _CMP_LE_OQ);
	const __m512d kw = _mm512_maskz_mov_pd(in, kr);
	const __mmask8 whole = in & _mm512_cmp_pd_mask(_mm512_mul_pd(dd, kw), md, _CMP_EQ_OQ) &
	                       (__mmask8)~d1zero;
	const unsigned misfit = (uint8_t)~fit, wholes = whole & fit;
	if (misfit | wholes) {
		double k[8];
		_mm512_storeu_pd(k, kw);
		q4_K_rare(l, base, qs, d1a, m1a, misfit, wholes, k, shift);
	}
}
#endif

/* The blocks into lanes, with the integer sums of one level; block b's sub-block j goes
 * to lane 8 (b % 2) + j. */
static inline __attribute__((always_inline)) void
q4_K_lanes_with(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks, double shift,
                void (*sums)(const uint8_t *, struct q4_K_sums *),
                void (*block)(struct stats_lanes *, int, const uint8_t *, const float *,
                              const float *, const struct q4_K_sums *, double))
{
	for (uint64_t b = 0; b < nblocks; b++, p += sizeof(struct block_q4_K)) {
		const float d = half_at(FIELD(p, block_q4_K, d));
		const float dmin = half_at(FIELD(p, block_q4_K, dmin));
		const uint8_t *scales = FIELD(p, block_q4_K, scales);
		const uint8_t *qs = FIELD(p, block_q4_K, qs);
		float d1[8], m1[8];
		struct q4_K_sums s;
		sums(qs, &s);
		for (int j = 0; j < 8; j++) {
			int sc, m;
			q4_K_scale_min(scales, j, &sc, &m);
			d1[j] = d * (float)sc;
			m1[j] = dmin * (float)m;
		}
		block(l, (int)(8 * (b % 2)), qs, d1, m1, &s, shift);
	}
}

static void q4_K_lanes_base(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_sums_scalar, q4_K_block_base);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2")))
static void q4_K_lanes_avx2(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_sums_avx2, q4_K_block_avx2);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2")))
static void q4_K_lanes_avx512(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                              double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_sums_avx2, q4_K_block_avx512);
}
#endif

static void q4_K_lanes(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks, double shift)
{
#if defined(__x86_64__) && defined(__GNUC__)
	switch (dequant_active()) {
	case DEQUANT_AVX512:
		q4_K_lanes_avx512(l, p, nblocks, shift);
		return;
	case DEQUANT_AVX2:
		q4_K_lanes_avx2(l, p, nblocks, shift);
		return;
	default:
		break;
	}
#endif
	q4_K_lanes_base(l, p, nblocks, shift);
}

bool stats_quant_has(uint32_t type)
{
	return type == GGML_TYPE_Q4_K;
}

float stats_quant_first(uint32_t type, const uint8_t *p)
{
	(void)type;
	int sc, m;
	q4_K_scale_min(FIELD(p, block_q4_K, scales), 0, &sc, &m);
	const float d1 = half_at(FIELD(p, block_q4_K, d)) * (float)sc;
	const float m1 = half_at(FIELD(p, block_q4_K, dmin)) * (float)m;
	return d1 * (float)q4_K_quant(FIELD(p, block_q4_K, qs), 0, 0) - m1;
}

void stats_quant_lanes(uint32_t type, struct stats_lanes *l, const uint8_t *p,
                       uint64_t nblocks, double shift)
{
	(void)type;
	q4_K_lanes(l, p, nblocks, shift);
}
