/* IEEE half and bfloat16 values as the GGUF file stores them (block scales, f16 and
 * bf16 tensors): what such a field is, read as a float, and the field a float becomes
 * when ggml writes it. */
#ifndef GGUFS_HALF_H
#define GGUFS_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* IEEE half and bfloat16 to float, exact for every bit pattern (NaN and inf kept). */
float fp16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

/* Float to IEEE half as ggml converts it (GGML_FP32_TO_FP16, its portable code, which
 * the quantizers of ggml-base use on every CPU): rounded to nearest, ties to even;
 * subnormal halves kept; too large gives inf; every NaN gives 0x7e00 with f's sign.
 * Inline, as the two below: the quantizers call them once a value for f16 and bf16.
 *
 * The rounding is done by the FPU, in one float add (the method of Maratos' FP16
 * library, which ggml uses): |f| is first scaled by 2^112 then 2^-110 so that a value
 * too large for a half overflows to inf and a small one keeps its bits; adding a power
 * of two whose exponent is 13 above f's (at least that of the smallest normal half, so
 * that subnormal halves come out right) leaves exactly the 10 mantissa bits of the half
 * at the bottom of the sum, rounded to nearest-even by the add, with the half's exponent
 * just above them. */
static inline uint16_t f32_to_fp16(float f)
{
	uint32_t w, bits;
	float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;

	memcpy(&w, &f, sizeof w);
	uint32_t shl1 = w + w;                  /* the sign dropped */
	uint32_t sign = w & 0x80000000u;
	uint32_t bias = shl1 & 0xff000000u;     /* f's exponent, in the top byte */
	if (bias < 0x71000000u)
		bias = 0x71000000u;             /* no lower than the smallest normal half's */
	bias = (bias >> 1) + 0x07800000u;
	float power;
	memcpy(&power, &bias, sizeof power);
	base = power + base;
	memcpy(&bits, &base, sizeof bits);
	uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
	uint32_t mant_bits = bits & 0x00000fffu; /* its top 2 bits add into the exponent,
	                                          * which rebases it to the half's bias */
	uint16_t nonsign = (uint16_t)(exp_bits + mant_bits);

	return (uint16_t)((sign >> 16) | (shl1 > 0xff000000u ? 0x7e00u : nonsign));
}

/* Float to bfloat16 as ggml converts it (ggml_compute_fp32_to_bf16): rounded to
 * nearest, ties to even (so a value past the largest bf16 becomes inf); subnormals
 * kept; a NaN keeps its top 16 bits with the quiet bit (0x0040) set. Adding 0x7fff plus
 * the lowest kept bit rounds the dropped 16 bits to nearest, ties to the even kept
 * value; a carry runs into the exponent as it should. */
static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

#endif
