#include "half.h"

#include <math.h>
#include <string.h>

/* IEEE 754 binary16:  s eeeee mmmmmmmmmm
 * Rebuilt bit by bit rather than through _Float16 so that every pattern, subnormals,
 * infinities and NaN payloads included, converts the same on every compiler. */
float fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;
	uint32_t bits;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (mant << 13);
	} else if (mant == 0) {
		bits = sign;
	} else {
		/* subnormal: normalise the mantissa */
		exp = 113;
		while (!(mant & 0x400)) {
			mant <<= 1;
			exp--;
		}
		bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* bfloat16 is the top half of a binary32. */
float bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* A float's bits and back. */
static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* The rounding is done by the FPU, in one float add (the method of Maratos' FP16
 * library, which ggml uses): |f| is first scaled by 2^112 then 2^-110 so that a value
 * too large for a half overflows to inf and a small one keeps its bits; adding a power
 * of two whose exponent is 13 above f's (at least that of the smallest normal half, so
 * that subnormal halves come out right) leaves exactly the 10 mantissa bits of the half
 * at the bottom of the sum, rounded to nearest-even by the add, with the half's exponent
 * just above them. */
uint16_t f32_to_fp16(float f)
{
	float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
	uint32_t w = f32_bits(f);
	uint32_t shl1 = w + w;                  /* the sign dropped */
	uint32_t sign = w & 0x80000000u;
	uint32_t bias = shl1 & 0xff000000u;     /* f's exponent, in the top byte */

	if (bias < 0x71000000u)
		bias = 0x71000000u;             /* no lower than the smallest normal half's */
	base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
	uint32_t bits = f32_bits(base);
	uint32_t exp_bits = (bits >> 13) & 0x00007c00u;
	uint32_t mant_bits = bits & 0x00000fffu; /* its top 2 bits add into the exponent,
	                                          * which rebases it to the half's bias */
	uint16_t nonsign = (uint16_t)(exp_bits + mant_bits);

	return (uint16_t)((sign >> 16) | (shl1 > 0xff000000u ? 0x7e00u : nonsign));
}

/* Adding 0x7fff plus the lowest kept bit rounds the dropped 16 bits to nearest, ties
 * to the even kept value; a carry runs into the exponent as it should. */
uint16_t f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}
