#include "stats_kernel.h"

#include <math.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "dequant.h"

void stats_lanes_init(struct stats_lanes *l)
{
	memset(l, 0, sizeof *l);
	for (int j = 0; j < STATS_LANES; j++) {
		l->lo[j] = INFINITY;
		l->hi[j] = -INFINITY;
	}
}

double stats_lanes_sum(const double *v, int n)
{
	double t[STATS_LANES];
	memcpy(t, v, (size_t)n * sizeof *t);
	for (int w = n / 2; w >= 1; w /= 2)
		for (int j = 0; j < w; j++)
			t[j] += t[j + w];
	return t[0];
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

/* The portable body: four groups of 4 lanes, each group one vector of 4 floats (and
 * two of 2 doubles), written with the compiler's vector extensions so that it cannot
 * fall back to scalar code (SSE2 on baseline x86-64, NEON on arm64). Bit selects
 * instead of branches: sel(m, a, b) is a where m is all ones, else b. */
typedef float vf4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));
typedef float vf2 __attribute__((vector_size(8)));
typedef double vd2 __attribute__((vector_size(16)));
#define sel(m, a, b) (((a) & (m)) | ((b) & ~(m)))

static void kernel_base(struct stats_lanes *l, const float *x, size_t n, double shift)
{
	enum { G = STATS_LANES / 4 };
	vd2 s1[G][2], s2[G][2];
	vf4 lo[G], hi[G];
	vu4 nf[G], zero[G], sub[G];
	memcpy(s1, l->s1, sizeof s1);
	memcpy(s2, l->s2, sizeof s2);
	memcpy(lo, l->lo, sizeof lo);
	memcpy(hi, l->hi, sizeof hi);
	memcpy(nf, l->nonfinite, sizeof nf);
	memcpy(zero, l->zero, sizeof zero);
	memcpy(sub, l->sub, sizeof sub);
	const vu4 pinf = (vu4){ 0 } + 0x7f800000u, ninf = (vu4){ 0 } + 0xff800000u;
	size_t i = 0;
	for (; i + STATS_LANES <= n; i += STATS_LANES) {
		for (int g = 0; g < G; g++) {
			vu4 u;
			memcpy(&u, x + i + 4 * g, sizeof u);
			const vu4 a = u & 0x7fffffffu;
			const vu4 fin = (vu4)(a < 0x7f800000u);
			nf[g] += fin + 1u;
			zero[g] -= (vu4)(a == 0u);
			sub[g] -= (vu4)(a - 1u < 0x007fffffu);
			const vf4 flo = (vf4)sel(fin, u, pinf), fhi = (vf4)sel(fin, u, ninf);
			lo[g] = (vf4)sel((vu4)(flo < lo[g]), (vu4)flo, (vu4)lo[g]);
			hi[g] = (vf4)sel((vu4)(fhi > hi[g]), (vu4)fhi, (vu4)hi[g]);
			const vf4 v = (vf4)(u & fin);
			const vf2 h[2] = { __builtin_shufflevector(v, v, 0, 1),
			                   __builtin_shufflevector(v, v, 2, 3) };
			for (int k = 0; k < 2; k++) {
				const vd2 d = __builtin_convertvector(h[k], vd2) - shift;
				s1[g][k] += d;
				s2[g][k] += d * d;
			}
		}
	}
	memcpy(l->s1, s1, sizeof s1);
	memcpy(l->s2, s2, sizeof s2);
	memcpy(l->lo, lo, sizeof lo);
	memcpy(l->hi, hi, sizeof hi);
	memcpy(l->nonfinite, nf, sizeof nf);
	memcpy(l->zero, zero, sizeof zero);
	memcpy(l->sub, sub, sizeof sub);
	for (int j = 0; i < n; i++, j++)
		lane_add(l, j, x[i], shift);
}

#if defined(__x86_64__) && defined(__GNUC__)

/* AVX2: two groups of 8 lanes, with the selects as blends and the mins as minps, which
 * the generic vectors cannot express either (1.5x their body at this width). */
__attribute__((target("avx2")))
static void kernel_avx2(struct stats_lanes *l, const float *x, size_t n, double shift)
{
	__m256d s1[2][2], s2[2][2];
	__m256 lo[2], hi[2];
	__m256i nf[2], zero[2], sub[2];
	for (int g = 0; g < 2; g++) {
		for (int k = 0; k < 2; k++) {
			s1[g][k] = _mm256_loadu_pd(l->s1 + 8 * g + 4 * k);
			s2[g][k] = _mm256_loadu_pd(l->s2 + 8 * g + 4 * k);
		}
		lo[g] = _mm256_loadu_ps(l->lo + 8 * g);
		hi[g] = _mm256_loadu_ps(l->hi + 8 * g);
		nf[g] = _mm256_loadu_si256((const __m256i *)(l->nonfinite + 8 * g));
		zero[g] = _mm256_loadu_si256((const __m256i *)(l->zero + 8 * g));
		sub[g] = _mm256_loadu_si256((const __m256i *)(l->sub + 8 * g));
	}
	const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), one = _mm256_set1_epi32(1);
	const __m256i exp_all = _mm256_set1_epi32(0x7f800000);
	const __m256i sub_top = _mm256_set1_epi32(0x007ffffe), none = _mm256_setzero_si256();
	const __m256 pinf = _mm256_set1_ps(INFINITY), ninf = _mm256_set1_ps(-INFINITY);
	const __m256d vshift = _mm256_set1_pd(shift);
	size_t i = 0;
	for (; i + STATS_LANES <= n; i += STATS_LANES) {
		for (int g = 0; g < 2; g++) {
			const __m256 v = _mm256_loadu_ps(x + i + 8 * g);
			const __m256i a = _mm256_and_si256(_mm256_castps_si256(v), abs_mask);
			/* a is below 2^31, so a signed compare is an unsigned one */
			const __m256i fin = _mm256_cmpgt_epi32(exp_all, a);
			const __m256 finf = _mm256_castsi256_ps(fin);
			nf[g] = _mm256_add_epi32(nf[g], _mm256_add_epi32(fin, one));
			zero[g] = _mm256_sub_epi32(zero[g], _mm256_cmpeq_epi32(a, none));
			/* a - 1 <= 0x7ffffe, unsigned: its min with 0x7ffffe is itself */
			const __m256i am1 = _mm256_sub_epi32(a, one);
			sub[g] = _mm256_sub_epi32(
				sub[g], _mm256_cmpeq_epi32(_mm256_min_epu32(am1, sub_top), am1));
			lo[g] = _mm256_min_ps(_mm256_blendv_ps(pinf, v, finf), lo[g]);
			hi[g] = _mm256_max_ps(_mm256_blendv_ps(ninf, v, finf), hi[g]);
			const __m256 z = _mm256_and_ps(v, finf);
			const __m256d d0 =
				_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(z)), vshift);
			const __m256d d1 =
				_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(z, 1)), vshift);
			s1[g][0] = _mm256_add_pd(s1[g][0], d0);
			s1[g][1] = _mm256_add_pd(s1[g][1], d1);
			s2[g][0] = _mm256_add_pd(s2[g][0], _mm256_mul_pd(d0, d0));
			s2[g][1] = _mm256_add_pd(s2[g][1], _mm256_mul_pd(d1, d1));
		}
	}
	for (int g = 0; g < 2; g++) {
		for (int k = 0; k < 2; k++) {
			_mm256_storeu_pd(l->s1 + 8 * g + 4 * k, s1[g][k]);
			_mm256_storeu_pd(l->s2 + 8 * g + 4 * k, s2[g][k]);
		}
		_mm256_storeu_ps(l->lo + 8 * g, lo[g]);
		_mm256_storeu_ps(l->hi + 8 * g, hi[g]);
		_mm256_storeu_si256((__m256i *)(l->nonfinite + 8 * g), nf[g]);
		_mm256_storeu_si256((__m256i *)(l->zero + 8 * g), zero[g]);
		_mm256_storeu_si256((__m256i *)(l->sub + 8 * g), sub[g]);
	}
	for (int j = 0; i < n; i++, j++)
		lane_add(l, j, x[i], shift);
}

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
