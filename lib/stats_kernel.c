#include "stats_kernel.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "types.h"

void stats_lanes_init(struct stats_lanes *l)
{
	memset(l, 0, sizeof *l);
	for (int j = 0; j < STATS_LANES; j++) {
		l->lo[j] = INFINITY;
		l->hi[j] = -INFINITY;
	}
}

/* One value into lane j: the scalar tail of every kernel, and the specification that
 * the vector bodies below follow lane for lane. A finite value is one whose exponent
 * bits are not all ones; a non-finite one adds 0 to s1 and s2 after the shift, which
 * the caller corrects (stats.c) in the rare block that has one. */
static void lane_add(struct stats_lanes *l, int j, float v, double shift)
{
	uint32_t u;
	memcpy(&u, &v, sizeof u);
	const uint32_t a = u & 0x7fffffffu;
	const int finite = a < 0x7f800000u;
	l->nonfinite[j] += (uint32_t)!finite;
	l->zero[j] += a == 0;
	l->sub[j] += a - 1u < 0x007fffffu;
	const float lo = finite ? v : INFINITY, hi = finite ? v : -INFINITY;
	l->lo[j] = lo < l->lo[j] ? lo : l->lo[j];
	l->hi[j] = hi > l->hi[j] ? hi : l->hi[j];
	const double d = (double)(finite ? v : 0.0f) - shift;
	l->s1[j] += d;
	l->s2[j] += d * d;
}

/* The vector body: STATS_LANES / W groups of W lanes, each group one vector of W
 * floats (and two of W / 2 doubles), written with the compiler's vector extensions so
 * that it cannot fall back to scalar code, and built once per target width. Bit
 * selects instead of branches: sel(m, a, b) is a where m is all ones, else b. */
#define sel(m, a, b) (((a) & (m)) | ((b) & ~(m)))

/* The low and high halves of vector v of W floats, as two vectors of W / 2: by shuffle,
 * which the compiler maps onto the one register each half lives in. */
#define HALVES4(h, v) (h[0] = __builtin_shufflevector(v, v, 0, 1), \
                       h[1] = __builtin_shufflevector(v, v, 2, 3))
#define HALVES8(h, v) (h[0] = __builtin_shufflevector(v, v, 0, 1, 2, 3), \
                       h[1] = __builtin_shufflevector(v, v, 4, 5, 6, 7))
#define HALVES16(h, v) (h[0] = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), \
                        h[1] = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15))
#define HALVES(h, v, W) HALVES##W(h, v)

#define DEFINE_KERNEL(NAME, TARGET, W)                                                      \
	typedef float NAME##_vf __attribute__((vector_size(4 * (W))));                        \
	typedef uint32_t NAME##_vu __attribute__((vector_size(4 * (W))));                     \
	typedef float NAME##_vh __attribute__((vector_size(2 * (W))));                        \
	typedef double NAME##_vd __attribute__((vector_size(4 * (W))));                       \
	enum { NAME##_G = STATS_LANES / (W) };                                                 \
	TARGET static void NAME(struct stats_lanes *l, const float *x, size_t n, double shift) \
	{                                                                                      \
		NAME##_vd s1[NAME##_G][2], s2[NAME##_G][2];                                    \
		NAME##_vf lo[NAME##_G], hi[NAME##_G];                                          \
		NAME##_vu nf[NAME##_G], zero[NAME##_G], sub[NAME##_G];                         \
		for (int g = 0; g < NAME##_G; g++) {                                           \
			memcpy(&s1[g], l->s1 + g * (W), sizeof s1[g]);                         \
			memcpy(&s2[g], l->s2 + g * (W), sizeof s2[g]);                         \
			memcpy(&lo[g], l->lo + g * (W), sizeof lo[g]);                         \
			memcpy(&hi[g], l->hi + g * (W), sizeof hi[g]);                         \
			memcpy(&nf[g], l->nonfinite + g * (W), sizeof nf[g]);                  \
			memcpy(&zero[g], l->zero + g * (W), sizeof zero[g]);                   \
			memcpy(&sub[g], l->sub + g * (W), sizeof sub[g]);                      \
		}                                                                              \
		const NAME##_vu pinf = (NAME##_vu){ 0 } + 0x7f800000u;                         \
		const NAME##_vu ninf = (NAME##_vu){ 0 } + 0xff800000u;                         \
		size_t i = 0;                                                                  \
		for (; i + STATS_LANES <= n; i += STATS_LANES) {                               \
			for (int g = 0; g < NAME##_G; g++) {                                   \
				NAME##_vu u;                                                   \
				memcpy(&u, x + i + g * (W), sizeof u);                         \
				const NAME##_vu a = u & 0x7fffffffu;                           \
				const NAME##_vu fin = (NAME##_vu)(a < 0x7f800000u);            \
				nf[g] += fin + 1u;                                             \
				zero[g] -= (NAME##_vu)(a == 0u);                               \
				sub[g] -= (NAME##_vu)(a - 1u < 0x007fffffu);                   \
				const NAME##_vf flo = (NAME##_vf)sel(fin, u, pinf);            \
				const NAME##_vf fhi = (NAME##_vf)sel(fin, u, ninf);            \
				lo[g] = (NAME##_vf)sel((NAME##_vu)(flo < lo[g]), (NAME##_vu)flo, \
				                       (NAME##_vu)lo[g]);                      \
				hi[g] = (NAME##_vf)sel((NAME##_vu)(fhi > hi[g]), (NAME##_vu)fhi, \
				                       (NAME##_vu)hi[g]);                      \
				const NAME##_vf v = (NAME##_vf)(u & fin);                      \
				NAME##_vh h[2];                                                \
				HALVES(h, v, W);                                               \
				for (int k = 0; k < 2; k++) {                                  \
					const NAME##_vd d =                                    \
						__builtin_convertvector(h[k], NAME##_vd) - shift; \
					s1[g][k] += d;                                         \
					s2[g][k] += d * d;                                     \
				}                                                              \
			}                                                                      \
		}                                                                              \
		for (int g = 0; g < NAME##_G; g++) {                                           \
			memcpy(l->s1 + g * (W), &s1[g], sizeof s1[g]);                         \
			memcpy(l->s2 + g * (W), &s2[g], sizeof s2[g]);                         \
			memcpy(l->lo + g * (W), &lo[g], sizeof lo[g]);                         \
			memcpy(l->hi + g * (W), &hi[g], sizeof hi[g]);                         \
			memcpy(l->nonfinite + g * (W), &nf[g], sizeof nf[g]);                  \
			memcpy(l->zero + g * (W), &zero[g], sizeof zero[g]);                   \
			memcpy(l->sub + g * (W), &sub[g], sizeof sub[g]);                      \
		}                                                                              \
		for (int j = 0; i < n; i++, j++)                                               \
			lane_add(l, j, x[i], shift);                                           \
	}

/* baseline x86-64 (SSE2) or any other target: 4-lane vectors */
DEFINE_KERNEL(kernel_base, , 4)
#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_KERNEL(kernel_avx2, __attribute__((target("avx2"))), 8)

/* AVX-512: the same lanes and operations, in the 16 lanes of one register, with the
 * finite test as a mask register, which the generic vectors above cannot express: a
 * masked min, max and count each take one instruction instead of a compare, a select
 * and an add (1.6x the generic body at this width). minps(x, lo) is x < lo ? x : lo,
 * exactly lane_add's choice. */
__attribute__((target("avx512f,avx512bw,avx512vl")))
static void kernel_avx512(struct stats_lanes *l, const float *x, size_t n, double shift)
{
	__m512d s1a = _mm512_loadu_pd(l->s1), s1b = _mm512_loadu_pd(l->s1 + 8);
	__m512d s2a = _mm512_loadu_pd(l->s2), s2b = _mm512_loadu_pd(l->s2 + 8);
	__m512 lo = _mm512_loadu_ps(l->lo), hi = _mm512_loadu_ps(l->hi);
	__m512i nf = _mm512_loadu_si512(l->nonfinite), zero = _mm512_loadu_si512(l->zero);
	__m512i sub = _mm512_loadu_si512(l->sub);
	const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), one = _mm512_set1_epi32(1);
	const __m512i exp_all = _mm512_set1_epi32(0x7f800000);
	const __m512i sub_max = _mm512_set1_epi32(0x007fffff);
	const __m512d vshift = _mm512_set1_pd(shift);
	size_t i = 0;
	for (; i + STATS_LANES <= n; i += STATS_LANES) {
		const __m512 v = _mm512_loadu_ps(x + i);
		const __m512i a = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
		const __mmask16 fin = _mm512_cmplt_epu32_mask(a, exp_all);
		nf = _mm512_mask_add_epi32(nf, _mm512_knot(fin), nf, one);
		zero = _mm512_mask_add_epi32(zero, _mm512_testn_epi32_mask(a, a), zero, one);
		sub = _mm512_mask_add_epi32(sub,
		                            _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, one), sub_max),
		                            sub, one);
		lo = _mm512_mask_min_ps(lo, fin, v, lo);
		hi = _mm512_mask_max_ps(hi, fin, v, hi);
		const __m512 z = _mm512_maskz_mov_ps(fin, v);
		const __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(z)), vshift);
		const __m512d d1 = _mm512_sub_pd(
			_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(z), 1))),
			vshift);
		s1a = _mm512_add_pd(s1a, d0);
		s1b = _mm512_add_pd(s1b, d1);
		s2a = _mm512_add_pd(s2a, _mm512_mul_pd(d0, d0));
		s2b = _mm512_add_pd(s2b, _mm512_mul_pd(d1, d1));
	}
	_mm512_storeu_pd(l->s1, s1a);
	_mm512_storeu_pd(l->s1 + 8, s1b);
	_mm512_storeu_pd(l->s2, s2a);
	_mm512_storeu_pd(l->s2 + 8, s2b);
	_mm512_storeu_ps(l->lo, lo);
	_mm512_storeu_ps(l->hi, hi);
	_mm512_storeu_si512(l->nonfinite, nf);
	_mm512_storeu_si512(l->zero, zero);
	_mm512_storeu_si512(l->sub, sub);
	for (int j = 0; i < n; i++, j++)
		lane_add(l, j, x[i], shift);
}
#endif

stats_kernel_fn stats_kernel(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	switch (dequant_active()) {
	case DEQUANT_AVX512:
		return kernel_avx512;
	case DEQUANT_AVX2:
		return kernel_avx2;
	default:
		break;
	}
#endif
	return kernel_base;
}
