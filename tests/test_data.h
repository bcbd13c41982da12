/* What the unit tests make up their data with: a fixed pseudo-random sequence
 * (xorshift64), so that a failure reproduces, floats from and to their bits, and
 * little-endian stores into block bytes. */
#ifndef GGUFS_TESTS_TEST_DATA_H
#define GGUFS_TESTS_TEST_DATA_H

#include <stdint.h>
#include <string.h>

/* The next number of the sequence that *state (never 0) is at. */
static inline uint64_t xorshift64(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* The float, or double, whose bits are u. */
static inline float float_of_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline double double_of_bits(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

/* The bits of float f, or of double d. */
static inline uint32_t bits_of_float(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline uint64_t bits_of_double(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

/* v at p, little-endian (a block's fp16 scale). */
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

#endif
