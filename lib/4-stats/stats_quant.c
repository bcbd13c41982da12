/* q4_K, q6_K and q8_0 statistics from the blocks (stats_quant.h).
 *
 * q4_K.
 * In sub-block j of a q4_K block (blocks.h) the value of quant q (0..15) is
 *
 *   w = fl(d1 * q - m1)      d1 = d * sc_j,  m1 = dmin * m_j   (floats)
 *
 * d and dmin are fp16 (11 significant bits, multiples of 2^-24), sc and m 6-bit, so d1,
 * m1 and d1 * q are exact: multiples of 2^-24 below 2^26. The real d1 * q - m1 is
 * then a multiple of g, the value of the last significand bit of d or of dmin, whichever
 * is finer (q4_K_grid), and when every one of the sub-block (q from its least qmin to
 * its greatest qmax) is below 2^24 g it fits float32's significand: w IS that real.
 * Then, with S1 = sum q and S2 = sum q^2 over the 32:
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
 * bits agree. On a 2-core AVX-512 machine this scans q4_K at 4.5 GB of blocks per CPU
 * second in process (3.5 for all of ggufs --check), against 1.45 for dequantizing to
 * float32 and summing the floats.
 *
 * q8_0 and q6_K. Every value is w = D * q' exactly, for a float D per sub-block and an
 * integer q' = u - off of its unsigned quant u:
 *
 *   q8_0   w = q * d               D = d,                   q' = q in -128..127 (n = 32)
 *   q6_K   w = (d * sc) * (q - 32) D = fl(d * sc), sc int8, q' = q - 32 in -32..31 (n = 16)
 *
 * An fp16 d is M 2^e with an integer |M| < 2^11 and e >= -24 (subnormals included, and
 * d = +-0 as M = 0); |sc| <= 128 and |q'| <= 128 are integers of at most 7 significant
 * bits (128 = 2^7 has one), |q - 32| <= 32 of at most 5. So d * sc has at most 18
 * significant bits, and d * q (18) and (d * sc) * (q - 32) (23) at most 24: no product
 * rounds, and none overflows (65504 * 128 * 32 < 2^28). A non-zero |w| is at least
 * 2^-24, far above float32's least normal 2^-126, so none is subnormal; w is zero
 * exactly where D is or q' is. Then, with S1, S2 over u (T = n S2 - S1^2 is the same over
 * q' = u - off, and below 2^24 as n^2 times a variance of at most 255^2 / 4):
 *
 *   s1 = D (S1 - n off) - n shift                 D (S1 - n off) exact: 18 + 13 bits
 *   s2 = D^2 T / n  +  s1^2 / n                   D^2 T exact for q8_0 (22 + 24 bits);
 *                                                 for q6_K up to 36 + 18, one rounding
 *
 * the least and greatest values are D q' at the least and greatest u (in either order,
 * as D may be negative), and the zeros are all n where D == 0, else the count of u == off.
 * Nothing is summed value by value. The integer sums by AVX2 and the float64 figures in
 * generic vectors compiled for AVX2 serve the AVX-512 level too (there is no AVX-512
 * mirror as for q4_K). q8_0's block j of a run of 16 goes to lane j, q6_K's sub-block j
 * to lane j. */
#include "stats_quant.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "blocks.h"
#include "dequant.h"
#include "types.h"

/* The integer sums of up to 16 sub-blocks, as the float64 stages' vectors load them:
 * S1 = sum q, S2 = sum q^2, the least and greatest q, and (q8_0, q6_K) how many q are
 * the type's zero quant. */
struct quant_sums {
	int32_t s1[16], s2[16], qmin[16], qmax[16], nz[16];
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
static void q4_K_sums_scalar(const uint8_t *qs, struct quant_sums *o)
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

/* The 32 bytes of a and b to 16 of each, their halves combined by op, side by side. */
#define PAIR(op, a, b)                                                        \
	op(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31))

/* Horizontal sums of eight sub-blocks at once by halving, into s1[0..8) and s2[0..8):
 * e[k] holds sub-block 2k's S1 | S2 << 32 in two 64-bit parts, then 2k + 1's. */
__attribute__((target("avx2")))
static inline void sums8_avx2(const __m256i e[4], int32_t *s1, int32_t *s2)
{
	__m256i g[2];
	for (int k = 0; k < 2; k++)
		g[k] = _mm256_add_epi64(_mm256_unpacklo_epi64(e[2 * k], e[2 * k + 1]),
		                        _mm256_unpackhi_epi64(e[2 * k], e[2 * k + 1]));
	/* g[k] holds sub-blocks 4k, 4k + 2 | 4k + 1, 4k + 3, as S1 | S2 << 32: the S1s of
	 * each in order, then its S2s */
	const __m256i split = _mm256_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7);
	const __m256i h0 = _mm256_permutevar8x32_epi32(g[0], split);
	const __m256i h1 = _mm256_permutevar8x32_epi32(g[1], split);
	_mm256_storeu_si256((__m256i *)s1, _mm256_permute2x128_si256(h0, h1, 0x20));
	_mm256_storeu_si256((__m256i *)s2, _mm256_permute2x128_si256(h0, h1, 0x31));
}

/* Horizontal unsigned byte minima and maxima of eight sub-blocks at once, into
 * qmin[0..8) and qmax[0..8): mn[k] and mx[k] hold 16 bytes of sub-block 2k, then 16 of
 * 2k + 1. Halving: to 8 (64-bit unpacks), to 4 (32-bit shuffles), to 1 (shifts within
 * 32 bits). */
__attribute__((target("avx2")))
static inline void minmax8_avx2(const __m256i mn[4], const __m256i mx[4], int32_t *qmin,
                                int32_t *qmax)
{
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
	_mm256_storeu_si256((__m256i *)qmin,
	                    _mm256_and_si256(_mm256_permutevar8x32_epi32(mn4, order), byte));
	_mm256_storeu_si256((__m256i *)qmax,
	                    _mm256_and_si256(_mm256_permutevar8x32_epi32(mx4, order), byte));
}

/* The sums of eight sub-blocks of 32 quants into o at at..at + 7: v[j] holds sub-block
 * j's quants (unsigned bytes), s[j] its S1 | S2 << 32 in four 64-bit parts. */
__attribute__((target("avx2")))
static inline void sums32_avx2(const __m256i v[8], const __m256i s[8], struct quant_sums *o,
                               int at)
{
	__m256i e[4], mn[4], mx[4];
	for (int k = 0; k < 4; k++) {
		e[k] = PAIR(_mm256_add_epi64, s[2 * k], s[2 * k + 1]);
		mn[k] = PAIR(_mm256_min_epu8, v[2 * k], v[2 * k + 1]);
		mx[k] = PAIR(_mm256_max_epu8, v[2 * k], v[2 * k + 1]);
	}
	sums8_avx2(e, o->s1 + at, o->s2 + at);
	minmax8_avx2(mn, mx, o->qmin + at, o->qmax + at);
}
#undef PAIR

/* AVX2: the eight sub-blocks as eight vectors of 32 quants (one byte each), summed by
 * sums32_avx2. S1 and S2 each fit 32 bits, so both travel in one 64-bit lane of
 * psadbw's sums; q^2 (at most 225) is a byte table lookup. */
__attribute__((target("avx2")))
static void q4_K_sums_avx2(const uint8_t *qs, struct quant_sums *o)
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
	sums32_avx2(v, s, o, 0);
}
#endif

/* A q4_K block's d1 and m1 for its eight sub-blocks (d * sc and dmin * m, floats). */
static void q4_K_scales_scalar(const uint8_t *blk, float d1[8], float m1[8])
{
	const float d = half_at(FIELD(blk, block_q4_K, d));
	const float dmin = half_at(FIELD(blk, block_q4_K, dmin));
	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;
		k4_scale_min(FIELD(blk, block_q4_K, scales), j, &sc, &m);
		d1[j] = d * (float)sc;
		m1[j] = dmin * (float)m;
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
/* q4_K_scales_scalar with F16C and the 6-bit fields unpacked in eight 32-bit lanes
 * (blocks.h): sc j and m j from bytes j and j + 4 for j < 4; for j >= 4 their low
 * nibbles from byte j + 4 and their top bits from bytes j - 4 and j. The same products. */
__attribute__((target("avx2,f16c")))
static void q4_K_scales_avx2(const uint8_t *blk, float d1[8], float m1[8])
{
	const uint8_t *s = FIELD(blk, block_q4_K, scales);
	const __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)s));
	const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + 4)));
	const __m256i a03 = _mm256_permute2x128_si256(a, a, 0x00);
	const __m256i six = _mm256_set1_epi32(0x3f), four = _mm256_set1_epi32(0x0f);
	const __m256i sc = _mm256_blend_epi32(
		_mm256_and_si256(a, six),
		_mm256_or_si256(_mm256_and_si256(c, four),
		                _mm256_slli_epi32(_mm256_srli_epi32(a03, 6), 4)), 0xf0);
	const __m256i m = _mm256_blend_epi32(
		_mm256_and_si256(c, six),
		_mm256_or_si256(_mm256_srli_epi32(c, 4),
		                _mm256_slli_epi32(_mm256_srli_epi32(a, 6), 4)), 0xf0);
	const float d = _cvtsh_ss(rd16(FIELD(blk, block_q4_K, d)));
	const float dmin = _cvtsh_ss(rd16(FIELD(blk, block_q4_K, dmin)));
	_mm256_storeu_ps(d1, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sc)));
	_mm256_storeu_ps(m1, _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(m)));
}
#endif

/* The bound below which a q4_K sub-block's values fit float32 (the header comment):
 * 2^24 g for a grid g that divides every d1 * q - m1 of the block. d1 = d * sc is a
 * multiple of d's last significand bit, 2^(max(E, 1) - 25) for an fp16 of exponent field
 * E (subnormals included), and m1 of dmin's; the finer of the two serves (a zero serves
 * for nothing). This g may be finer than a sub-block's own, which makes the test
 * stricter, never wrong: in tinyllama-q4km no sub-block fails it. */
static double q4_K_grid(const uint8_t *blk)
{
	int e = 1000;
	for (int f = 0; f < 2; f++) {
		const uint16_t h = rd16(blk + 2 * f);
		const int E = h >> 10 & 0x1f;
		if ((h & 0x7fff) && (E ? E : 1) - 25 < e)
			e = (E ? E : 1) - 25;
	}
	if (e == 1000)
		return INFINITY;
	/* 2^(24 + e), e in -24..5 */
	const uint64_t bits = (uint64_t)(1023 + 24 + e) << 52;
	double g;
	memcpy(&g, &bits, sizeof g);
	return g;
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

/* Sub-blocks h..h + 3 of a block into lanes base + h..: everything but the sub-blocks
 * that do not fit (returned as bits, to be summed value by value) and the counting of
 * zeros where d1 * q == m1 for a whole q in qmin..qmax (bits << 8, the q in k[]). */
static inline __attribute__((always_inline)) unsigned
q4_K_quarter(struct stats_lanes *l, int base, int h, const float d1a[8], const float m1a[8],
             double grid, const struct quant_sums *s, double shift, double k[8])
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
	const vl4 fit = big < grid;
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
           const float m1a[8], double grid, const struct quant_sums *s, double shift)
{
	double k[8];
	const unsigned rare = q4_K_quarter(l, base, 0, d1a, m1a, grid, s, shift, k) |
	                      q4_K_quarter(l, base, 4, d1a, m1a, grid, s, shift, k);
	if (rare)
		q4_K_rare(l, base, qs, d1a, m1a, rare & 0xff, rare >> 8, k, shift);
}

static void q4_K_block_base(struct stats_lanes *l, int base, const uint8_t *qs,
                            const float d1a[8], const float m1a[8], double grid,
                            const struct quant_sums *s, double shift)
{
	q4_K_block(l, base, qs, d1a, m1a, grid, s, shift);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2")))
static void q4_K_block_avx2(struct stats_lanes *l, int base, const uint8_t *qs,
                            const float d1a[8], const float m1a[8], double grid,
                            const struct quant_sums *s, double shift)
{
	q4_K_block(l, base, qs, d1a, m1a, grid, s, shift);
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2")))

/* q4_K_block in AVX-512: its operations one for one, with mask registers for its
 * selects (blend(k, a, b) is k ? b : a), so that every lane rounds as there. GCC's
 * lowering of the generic vectors is piecewise here, 3x slower. */
AVX512 static void q4_K_block_avx512(struct stats_lanes *l, int base, const uint8_t *qs,
                                     const float d1a[8], const float m1a[8], double grid,
                                     const struct quant_sums *s, double shift)
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
	const __mmask8 fit = _mm512_cmp_pd_mask(big, _mm512_set1_pd(grid), _CMP_LT_OQ);

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

/* The blocks into lanes, with the scales and integer sums of one level; block b's
 * sub-block j goes to lane 8 (b % 2) + j. */
static inline __attribute__((always_inline)) void
q4_K_lanes_with(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks, double shift,
                void (*scales)(const uint8_t *, float *, float *),
                void (*sums)(const uint8_t *, struct quant_sums *),
                void (*block)(struct stats_lanes *, int, const uint8_t *, const float *,
                              const float *, double, const struct quant_sums *, double))
{
	for (uint64_t b = 0; b < nblocks; b++, p += sizeof(struct block_q4_K)) {
		const uint8_t *qs = FIELD(p, block_q4_K, qs);
		float d1[8], m1[8];
		struct quant_sums s;
		scales(p, d1, m1);
		sums(qs, &s);
		block(l, (int)(8 * (b % 2)), qs, d1, m1, q4_K_grid(p), &s, shift);
	}
}

static void q4_K_lanes_base(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_scales_scalar, q4_K_sums_scalar,
	                q4_K_block_base);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2")))
static void q4_K_lanes_avx2(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_scales_avx2, q4_K_sums_avx2, q4_K_block_avx2);
}

AVX512 static void q4_K_lanes_avx512(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                              double shift)
{
	q4_K_lanes_with(l, p, nblocks, shift, q4_K_scales_avx2, q4_K_sums_avx2,
	                q4_K_block_avx512);
}
#endif

/* q8_0 and q6_K: every value is exactly D * (u - off) (the header comment says why), for
 * a float D per sub-block and its unsigned quants u. The sums below are of u. */

/* The sums of one sub-block's n quants u into entry j of o, off being the quant of the
 * value zero. */
static inline void sums_of(struct quant_sums *o, int j, const uint8_t *u, int n, int off)
{
	int s1 = 0, s2 = 0, lo = 255, hi = 0, nz = 0;
	for (int i = 0; i < n; i++) {
		s1 += u[i];
		s2 += u[i] * u[i];
		lo = u[i] < lo ? u[i] : lo;
		hi = u[i] > hi ? u[i] : hi;
		nz += u[i] == off;
	}
	o->s1[j] = s1;
	o->s2[j] = s2;
	o->qmin[j] = lo;
	o->qmax[j] = hi;
	o->nz[j] = nz;
}

/* The q8_0 block at p as sub-block j, its quants q as u = q + 128. */
static void q8_0_sums_one(const uint8_t *p, struct quant_sums *o, int j)
{
	const uint8_t *qs = FIELD(p, block_q8_0, qs);
	uint8_t u[QK];
	for (int i = 0; i < QK; i++)
		u[i] = qs[i] ^ 0x80;
	sums_of(o, j, u, QK, 128);
}

/* The specification of q8_0's sums: the count (at most 16) blocks at p, block j as
 * sub-block j; the level for CPUs without AVX2. */
static void q8_0_sums_scalar(const uint8_t *p, int count, struct quant_sums *o)
{
	for (int j = 0; j < count; j++)
		q8_0_sums_one(p + j * sizeof(struct block_q8_0), o, j);
}

/* Quant n (0..255) of the q6_K block at p, 0..63 (blocks.h). */
static inline int q6_K_quant(const uint8_t *p, int n)
{
	const int h = n / 128, k = n % 128 / 32, l = n % 32;
	const int low = FIELD(p, block_q6_K, ql)[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2)) & 0x0f;
	const int high = FIELD(p, block_q6_K, qh)[32 * h + l] >> (2 * k) & 3;
	return low | high << 4;
}

/* The specification of q6_K's sums: the 16 sub-blocks of the block at p; the level for
 * CPUs without AVX2. */
static void q6_K_sums_scalar(const uint8_t *p, struct quant_sums *o)
{
	uint8_t u[QK_K];
	for (int n = 0; n < QK_K; n++)
		u[n] = (uint8_t)q6_K_quant(p, n);
	for (int j = 0; j < 16; j++)
		sums_of(o, j, u + 16 * j, 16, 32);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* q8_0 in AVX2, eight blocks at a time as q4_K's eight sub-blocks (sums32_avx2); u^2
 * (up to 65025) by 16-bit multiplies, whose 32-bit pair sums fold to 64-bit lanes. A
 * ragged end is summed by the specification, which gives the same integers. */
__attribute__((target("avx2")))
static void q8_0_sums_avx2(const uint8_t *p, int count, struct quant_sums *o)
{
	const __m256i zero = _mm256_setzero_si256(), bias = _mm256_set1_epi8((char)0x80);
	const __m256i low32 = _mm256_set1_epi64x(0xffffffff);
	int j = 0;
	for (; j + 8 <= count; j += 8) {
		__m256i v[8], s[8];
		for (int b = 0; b < 8; b++) {
			const uint8_t *qs = FIELD(p + (j + b) * sizeof(struct block_q8_0), block_q8_0, qs);
			const __m256i x = _mm256_loadu_si256((const __m256i *)qs);
			v[b] = _mm256_xor_si256(x, bias);
			const __m256i u0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v[b]));
			const __m256i u1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v[b], 1));
			__m256i sq = _mm256_add_epi32(_mm256_madd_epi16(u0, u0),
			                              _mm256_madd_epi16(u1, u1));
			sq = _mm256_and_si256(_mm256_add_epi32(sq, _mm256_srli_epi64(sq, 32)), low32);
			s[b] = _mm256_or_si256(_mm256_sad_epu8(v[b], zero), _mm256_slli_epi64(sq, 32));
			o->nz[j + b] = __builtin_popcount(
				(unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, zero)));
		}
		sums32_avx2(v, s, o, j);
	}
	for (; j < count; j++)
		q8_0_sums_one(p + j * sizeof(struct block_q8_0), o, j);
}

/* q6_K in AVX2: the 256 quants as eight vectors of 32 in the order of the values, so
 * vector m holds sub-block 2m, then 2m + 1, as sums8_avx2 and minmax8_avx2 take them;
 * q^2 (up to 3969) by byte multiplies to 16-bit pair sums, then to 32 and 64 bits. */
__attribute__((target("avx2")))
static void q6_K_sums_avx2(const uint8_t *p, struct quant_sums *o)
{
	const __m256i nib = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x30);
	const __m256i zero = _mm256_setzero_si256(), ones = _mm256_set1_epi16(1);
	const __m256i low32 = _mm256_set1_epi64x(0xffffffff), off = _mm256_set1_epi8(32);
	__m256i v[8], e[8];
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = FIELD(p, block_q6_K, ql) + 64 * h;
		const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
		const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
		const __m256i qh = _mm256_loadu_si256(
			(const __m256i *)(FIELD(p, block_q6_K, qh) + 32 * h));
		/* bits 4-5 of value k's quant are bits 2k, 2k + 1 of qh */
		v[4 * h] = _mm256_or_si256(_mm256_and_si256(l0, nib),
		                           _mm256_and_si256(_mm256_slli_epi16(qh, 4), two));
		v[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, nib),
		                               _mm256_and_si256(_mm256_slli_epi16(qh, 2), two));
		v[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), nib),
		                               _mm256_and_si256(qh, two));
		v[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), nib),
		                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), two));
	}
	for (int m = 0; m < 8; m++) {
		__m256i sq = _mm256_madd_epi16(_mm256_maddubs_epi16(v[m], v[m]), ones);
		sq = _mm256_and_si256(_mm256_add_epi32(sq, _mm256_srli_epi64(sq, 32)), low32);
		e[m] = _mm256_or_si256(_mm256_sad_epu8(v[m], zero), _mm256_slli_epi64(sq, 32));
		const unsigned z = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v[m], off));
		o->nz[2 * m] = __builtin_popcount(z & 0xffff);
		o->nz[2 * m + 1] = __builtin_popcount(z >> 16);
	}
	for (int k = 0; k < 2; k++) {
		sums8_avx2(e + 4 * k, o->s1 + 8 * k, o->s2 + 8 * k);
		minmax8_avx2(v + 4 * k, v + 4 * k, o->qmin + 8 * k, o->qmax + 8 * k);
	}
}
#endif

/* Sub-blocks h..h + 3 of the 16 whose values are exactly D * (u - off), n of them each,
 * into lanes h..h + 3, but only those below count: as q4_K_quarter, in the compiler's
 * vector extensions for every level. */
static inline __attribute__((always_inline)) void
exact_quarter(struct stats_lanes *l, int h, const float Da[16], const struct quant_sums *s,
              int n, int off, int count, double shift)
{
	vf4 D, lo, hi;
	vd4 s1a, s2a;
	vu4 zero;
	vi4 q0i, q1i, S1i, S2i, nz;
	memcpy(&D, Da + h, sizeof D);
	memcpy(&lo, l->lo + h, sizeof lo);
	memcpy(&hi, l->hi + h, sizeof hi);
	memcpy(&s1a, l->s1 + h, sizeof s1a);
	memcpy(&s2a, l->s2 + h, sizeof s2a);
	memcpy(&zero, l->zero + h, sizeof zero);
	memcpy(&S1i, s->s1 + h, sizeof S1i);
	memcpy(&S2i, s->s2 + h, sizeof S2i);
	memcpy(&q0i, s->qmin + h, sizeof q0i);
	memcpy(&q1i, s->qmax + h, sizeof q1i);
	memcpy(&nz, s->nz + h, sizeof nz);
	const vi4 valid = (vi4){ h, h + 1, h + 2, h + 3 } < count;
	const vl4 valid_l = __builtin_convertvector(valid, vl4);
	/* the least and greatest values, D exact times the exact q - off */
	const vf4 w0 = D * __builtin_convertvector(q0i - off, vf4);
	const vf4 w1 = D * __builtin_convertvector(q1i - off, vf4);
	const vi4 lt = w0 < w1;
	const vf4 wlo = SELF(lt, w0, w1), whi = SELF(lt, w1, w0);
	lo = SELF(valid & (wlo < lo), wlo, lo);
	hi = SELF(valid & (whi > hi), whi, hi);
	/* the sums about the sub-block's mean and the mean's distance from shift */
	const vd4 dd = __builtin_convertvector(D, vd4);
	const vd4 S1 = __builtin_convertvector(S1i - n * off, vd4);
	const vd4 T = __builtin_convertvector(S2i * n - S1i * S1i, vd4);
	const vd4 s1 = dd * S1 - (double)n * shift;
	const vd4 s2 = dd * dd * T / (double)n + s1 * s1 / (double)n;
	s1a += SELD(valid_l, s1, (vd4){ 0 });
	s2a += SELD(valid_l, s2, (vd4){ 0 });
	/* zeros: all n where D is, else those at the quant off */
	zero += (vu4)(valid & SEL(D == 0.0f, (vi4){ 0 } + n, nz));
	memcpy(l->lo + h, &lo, sizeof lo);
	memcpy(l->hi + h, &hi, sizeof hi);
	memcpy(l->s1 + h, &s1a, sizeof s1a);
	memcpy(l->s2 + h, &s2a, sizeof s2a);
	memcpy(l->zero + h, &zero, sizeof zero);
}

/* The first count (1..16) of 16 sub-blocks into lanes 0..count - 1. */
static inline __attribute__((always_inline)) void
exact_block(struct stats_lanes *l, const float D[16], const struct quant_sums *s, int n, int off,
            int count, double shift)
{
	for (int h = 0; h < count; h += 4)
		exact_quarter(l, h, D, s, n, off, count, shift);
}

typedef void exact_fn(struct stats_lanes *, const float *, const struct quant_sums *, int, int,
                      int, double);

static void exact_block_base(struct stats_lanes *l, const float D[16], const struct quant_sums *s,
                             int n, int off, int count, double shift)
{
	exact_block(l, D, s, n, off, count, shift);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Also the AVX-512 level's: GCC lowers the generic vectors piecewise for AVX-512. */
__attribute__((target("avx2")))
static void exact_block_avx2(struct stats_lanes *l, const float D[16], const struct quant_sums *s,
                             int n, int off, int count, double shift)
{
	exact_block(l, D, s, n, off, count, shift);
}
#endif

/* q8_0 blocks into lanes, 16 at a time, block b to lane b % 16. */
static inline __attribute__((always_inline)) void
q8_0_lanes_with(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks, double shift,
                void (*sums)(const uint8_t *, int, struct quant_sums *), exact_fn *block)
{
	for (uint64_t b = 0; b < nblocks; b += 16, p += 16 * sizeof(struct block_q8_0)) {
		const int count = nblocks - b < 16 ? (int)(nblocks - b) : 16;
		float D[16] = { 0 };
		struct quant_sums s;
		/* the unused sub-blocks of a short run are masked out, but computed: as zeros */
		if (count < 16)
			memset(&s, 0, sizeof s);
		sums(p, count, &s);
		for (int j = 0; j < count; j++)
			D[j] = half_at(FIELD(p + j * sizeof(struct block_q8_0), block_q8_0, d));
		block(l, D, &s, QK, 128, count, shift);
	}
}

/* q6_K blocks into lanes, sub-block j of each to lane j. */
static inline __attribute__((always_inline)) void
q6_K_lanes_with(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks, double shift,
                void (*sums)(const uint8_t *, struct quant_sums *), exact_fn *block)
{
	for (uint64_t b = 0; b < nblocks; b++, p += sizeof(struct block_q6_K)) {
		const float d = half_at(FIELD(p, block_q6_K, d));
		const int8_t *sc = (const int8_t *)FIELD(p, block_q6_K, scales);
		float D[16];
		struct quant_sums s;
		sums(p, &s);
		for (int j = 0; j < 16; j++)
			D[j] = d * (float)sc[j];
		block(l, D, &s, 16, 32, 16, shift);
	}
}

typedef void lanes_fn(struct stats_lanes *, const uint8_t *, uint64_t, double);

static void q8_0_lanes_base(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q8_0_lanes_with(l, p, nblocks, shift, q8_0_sums_scalar, exact_block_base);
}

static void q6_K_lanes_base(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q6_K_lanes_with(l, p, nblocks, shift, q6_K_sums_scalar, exact_block_base);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2")))
static void q8_0_lanes_avx2(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q8_0_lanes_with(l, p, nblocks, shift, q8_0_sums_avx2, exact_block_avx2);
}

__attribute__((target("avx2")))
static void q6_K_lanes_avx2(struct stats_lanes *l, const uint8_t *p, uint64_t nblocks,
                            double shift)
{
	q6_K_lanes_with(l, p, nblocks, shift, q6_K_sums_avx2, exact_block_avx2);
}
#endif

/* The lanes functions of a type at each level (NULL: the one below). */
static lanes_fn *lanes_of(uint32_t type, enum dequant_level level)
{
	static lanes_fn *const table[][DEQUANT_LEVELS] = {
#if defined(__x86_64__) && defined(__GNUC__)
		{ q4_K_lanes_base, q4_K_lanes_avx2, q4_K_lanes_avx512 },
		{ q8_0_lanes_base, q8_0_lanes_avx2, NULL },
		{ q6_K_lanes_base, q6_K_lanes_avx2, NULL },
#else
		{ q4_K_lanes_base },
		{ q8_0_lanes_base },
		{ q6_K_lanes_base },
#endif
	};
	const int t = type == GGML_TYPE_Q4_K ? 0 : type == GGML_TYPE_Q8_0 ? 1 : 2;
	int at = (int)level;
	while (!table[t][at])
		at--;
	return table[t][at];
}

bool stats_quant_has(uint32_t type)
{
	return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q6_K;
}

float stats_quant_first(uint32_t type, const uint8_t *p)
{
	if (type == GGML_TYPE_Q8_0)
		return (float)*(const int8_t *)FIELD(p, block_q8_0, qs) *
		       half_at(FIELD(p, block_q8_0, d));
	if (type == GGML_TYPE_Q6_K)
		return half_at(FIELD(p, block_q6_K, d)) *
		       (float)*(const int8_t *)FIELD(p, block_q6_K, scales) *
		       (float)(q6_K_quant(p, 0) - 32);
	uint8_t sc, m;
	k4_scale_min(FIELD(p, block_q4_K, scales), 0, &sc, &m);
	const float d1 = half_at(FIELD(p, block_q4_K, d)) * (float)sc;
	const float m1 = half_at(FIELD(p, block_q4_K, dmin)) * (float)m;
	return d1 * (float)q4_K_quant(FIELD(p, block_q4_K, qs), 0, 0) - m1;
}

void stats_quant_lanes(uint32_t type, struct stats_lanes *l, const uint8_t *p,
                       uint64_t nblocks, double shift)
{
	lanes_of(type, dequant_active())(l, p, nblocks, shift);
}
