#include "half.h"

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

