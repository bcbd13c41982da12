/* The ternary, FP4 and plain 1- and 2-bit quantizations: tq1_0 and tq2_0 (BitNet b1.58
 * and TriLM weights), mxfp4 (OCP microscaling FP4), q1_0 and q2_0, as ggml's
 * quantize_row_{tq1_0,tq2_0,mxfp4,q1_0,q2_0}_ref write them, which is also what
 * ggml_quantize_chunk runs for them without an importance matrix (q1_0 and q2_0 read
 * one only to loop row by row, to the same bytes). Each block is scaled by its largest
 * magnitude (mxfp4: the power of two below it; q1_0: the mean magnitude) and each value
 * rounded on its own: no search. The same float operations in the same order as ggml,
 * and its casts of out-of-range floats as x86-64 computes them, so that NaN, inf and
 * huge inputs give ggml's bytes too. blocks.h draws each layout; each function repeats
 * the part of it that it writes. */
#include "quant_impl.h"

#include "blocks.h"
#include "ggml_tables.h"
#include "half.h"

#include <math.h>
#include <stdbool.h>

/* The largest |x[j]| of n values as ggml's MAX(amax, fabsf(v)) folds them: a NaN wins
 * only where it is last (amax > NaN is false, NaN > v is false too). */
static float absmax_fold(const float *x, int n)
{
	float amax = 0.0f;

	for (int j = 0; j < n; j++)
		amax = quant_maxf(amax, fabsf(x[j]));
	return amax;
}

/* The trit of v at inverse scale id, plus one (0, 1 or 2 for |v * id| <= 1), as
 * ggml's (int)(lroundf(v * id) + 1) computes it: only the low bits matter to the byte
 * it goes into, so it is kept modulo 2^32 (lroundf gives LONG_MIN for NaN and values
 * out of range, which then wraps rather than overflows here). */
static uint32_t trit(float v, float id)
{
	return (uint32_t)((unsigned long)lroundf(v * id) + 1u);
}

/* Five trits (or four, shifted one place up) as one byte: the base-3 number t0 t1 t2
 * t3 t4, accumulated in a byte as ggml does (q = q * 3 + t mod 256), then scaled to
 * 256 / 243 and rounded up, so that multiplying by 3^n mod 256 brings trit n to the
 * top. For trits of 0..2 the number is at most 242 and the byte at most 255. */
static uint8_t trits_byte(uint32_t q)
{
	return (uint8_t)(((uint32_t)(uint8_t)q * 256u + (243u - 1u)) / 243u);
}

/* tq1_0, 54 bytes a block of 256 (layout in blocks.h):
 *
 *   0                         32              48      52   54
 *   +-------------------------+---------------+-------+----+
 *   | qs[0..31]: 5 trits each | qs[32..47]: 5 | qh[4] | d  |
 *   +-------------------------+---------------+-------+----+
 *     byte m: values m, m+32,   byte m: values  byte m: values 240+m, +4, +8, +12
 *     m+64, m+96, m+128         160+m, +16 .. +64
 *
 * d = the block's largest magnitude; a trit is round(v / d) + 1. */
void quant_tq1_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_tq1_0)) {
		const float d = absmax_fold(x, QK_K);
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_tq1_0, qs);
		uint8_t *qh = y + offsetof(struct block_tq1_0, qh);
		const float *v = x;

		quant_put16(y + offsetof(struct block_tq1_0, d), f32_to_fp16(d));
		for (int m = 0; m < 32; m++) {
			uint32_t q = 0;
			for (int n = 0; n < 5; n++)
				q = q * 3u + trit(v[m + 32 * n], id);
			qs[m] = trits_byte(q);
		}
		v += 5 * 32;
		for (int m = 0; m < 16; m++) {
			uint32_t q = 0;
			for (int n = 0; n < 5; n++)
				q = q * 3u + trit(v[m + 16 * n], id);
			qs[32 + m] = trits_byte(q);
		}
		v += 5 * 16;
		for (int m = 0; m < 4; m++) {
			uint32_t q = 0;
			for (int n = 0; n < 4; n++)
				q = q * 3u + trit(v[m + 4 * n], id);
			qh[m] = trits_byte(q * 3u);   /* the first trit in the top place */
		}
	}
}

/* tq2_0, 66 bytes a block of 256:
 *
 *   0                                64   66
 *   +--------------------------------+----+
 *   | qs[64]: 2 bits a value         | d  |
 *   +--------------------------------+----+
 *     in run r (32 bytes, 128 values), byte m: bits 2n+1..2n = q(128r + 32n + m)
 *
 * d = the block's largest magnitude; q = round(v / d) + 1, its low 2 bits kept. */
void quant_tq2_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK_K, y += sizeof(struct block_tq2_0)) {
		const float d = absmax_fold(x, QK_K);
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_tq2_0, qs);

		quant_put16(y + offsetof(struct block_tq2_0, d), f32_to_fp16(d));
		for (int r = 0; r < 2; r++) {
			const float *v = x + 128 * r;
			for (int m = 0; m < 32; m++) {
				uint32_t q = 0;
				for (int n = 0; n < 4; n++)
					q += (trit(v[m + 32 * n], id) & 3u) << (2 * n);
				qs[32 * r + m] = (uint8_t)q;
			}
		}
	}
}

/* Half the value of an E8M0 scale e, 2^(e - 128), as ggml builds it from bits (e = 0
 * and 1 are subnormal floats; no e gives inf or NaN). */
static float e8m0_half(uint8_t e)
{
	const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;

	memcpy(&f, &bits, sizeof f);
	return f;
}

/* The E2M1 codes (indexes into kvalues_fp4, which holds twice each value) nearest to
 * the 32 values x at half-scale d, as ggml's best_index_mxfp4 picks each: the first of
 * the smallest |kvalues_fp4[i] * d - v|, from 0 up, so +0 wins over -0 and a tie goes
 * to the lower code; a NaN v gives 0. The same operations as ggml's, code by code for
 * all 32 values at once rather than value by value, which the compiler vectorizes. */
static void fp4_nearest32(const float *x, float d, uint8_t code[QK_MXFP4])
{
	float best_err[QK_MXFP4];
	int32_t best[QK_MXFP4];
	const float c0 = (float)kvalues_fp4[0] * d;

	for (int j = 0; j < QK_MXFP4; j++) {
		best_err[j] = fabsf(c0 - x[j]);
		best[j] = 0;
	}
	for (int i = 1; i < 16; i++) {
		const float c = (float)kvalues_fp4[i] * d;
		for (int j = 0; j < QK_MXFP4; j++) {
			const float err = fabsf(c - x[j]);
			const int32_t better = -(int32_t)(err < best_err[j]);   /* all ones or 0 */
			best_err[j] = err < best_err[j] ? err : best_err[j];
			best[j] = (best[j] & ~better) | (i & better);
		}
	}
	for (int j = 0; j < QK_MXFP4; j++)
		code[j] = (uint8_t)best[j];
}

/* mxfp4, 17 bytes a block of 32:
 *
 *   0    1                         17
 *   +----+-------------------------+
 *   | e  | qs[16]: seem seem       |   low nibble = value j, high = value j + 16
 *   +----+-------------------------+
 *
 * e = floor(log2(amax)) - 2 + 127, so that the largest magnitude falls in the top
 * binade of E2M1 (4..6 times the half-scale); 0 for a block of zeros. The float
 * floor(log2f(amax)) + 125 goes to a byte as ggml's cast does (low byte of the 32-bit
 * truncation), which matters for amax below 2^-125 (a negative) and amax = inf. log2f
 * is the C library's, as ggml's is: at amax just below a power of two its rounding
 * decides the exponent. */
void quant_mxfp4(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK_MXFP4, y += sizeof(struct block_mxfp4)) {
		float amax = 0.0f;
		for (int j = 0; j < QK_MXFP4; j++) {
			if (amax < fabsf(x[j]))
				amax = fabsf(x[j]);
		}
		const uint8_t e = amax > 0.0f
			? (uint8_t)(quant_cvtt(floorf(log2f(amax)) - 2 + 127) & 0xff) : 0;
		const float d = e8m0_half(e);
		uint8_t *qs = y + offsetof(struct block_mxfp4, qs);

		y[offsetof(struct block_mxfp4, e)] = e;
		uint8_t code[QK_MXFP4];

		fp4_nearest32(x, d, code);
		for (int j = 0; j < QK_MXFP4 / 2; j++)
			qs[j] = (uint8_t)(code[j] | code[j + QK_MXFP4 / 2] << 4);
	}
}

/* q1_0, 18 bytes a block of 128:
 *
 *   0      2                          18
 *   +------+--------------------------+
 *   |  d   | qs[16]: one bit a value  |   bit j % 8 of byte j / 8: value j >= 0
 *   +------+--------------------------+
 *
 * d = the mean magnitude (summed in order, then divided by 128): the scale that keeps
 * the block's L1 norm; a bit is the value's sign (set for +0 and positives, clear for
 * negatives and NaN). */
void quant_q1_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK1_0, y += sizeof(struct block_q1_0)) {
		float sum_abs = 0.0f;
		for (int j = 0; j < QK1_0; j++)
			sum_abs += fabsf(x[j]);
		const float d = sum_abs / QK1_0;
		uint8_t *qs = y + offsetof(struct block_q1_0, qs);

		quant_put16(y + offsetof(struct block_q1_0, d), f32_to_fp16(d));
		memset(qs, 0, QK1_0 / 8);
		for (int j = 0; j < QK1_0; j++) {
			if (x[j] >= 0.0f)
				qs[j / 8] |= (uint8_t)(1u << (j % 8));
		}
	}
}

/* q2_0, 18 bytes a block of 64:
 *
 *   0      2                          18
 *   +------+--------------------------+
 *   |  d   | qs[16]: 2 bits a value   |   byte j / 4, bits 2(j % 4)+1..2(j % 4): q(j)
 *   +------+--------------------------+
 *
 * d = the block's largest magnitude (NaNs skipped); q = round(v / d) + 1 clamped to
 * 0..3, the float to int as x86-64 converts it (NaN: INT32_MIN, so q = 0). */
void quant_q2_0(const float *x, uint8_t *y, int64_t nblocks)
{
	for (int64_t i = 0; i < nblocks; i++, x += QK2_0, y += sizeof(struct block_q2_0)) {
		float amax = 0.0f;
		for (int j = 0; j < QK2_0; j++) {
			const float a = fabsf(x[j]);
			if (a > amax)
				amax = a;
		}
		const float d = amax;
		const float id = d > 0.0f ? 1.0f / d : 0.0f;
		uint8_t *qs = y + offsetof(struct block_q2_0, qs);

		quant_put16(y + offsetof(struct block_q2_0, d), f32_to_fp16(d));
		memset(qs, 0, QK2_0 / 4);
		for (int j = 0; j < QK2_0; j++) {
			/* quant_cvtt is at most 2^31 - 128, so the + 1 cannot overflow */
			int q = quant_cvtt(roundf(x[j] * id)) + 1;
			q = q < 0 ? 0 : q > 3 ? 3 : q;
			qs[j / 4] |= (uint8_t)(q << (2 * (j % 4)));
		}
	}
}
