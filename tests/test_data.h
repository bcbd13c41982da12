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

/* The float, or double, whose bits are u; the bits of float f, or of double d (a
 * union's other member: C11's way to read an object's bytes as another type). */
static inline float float_of_bits(uint32_t u) { return (union { uint32_t u; float f; }){ u }.f; }
static inline double double_of_bits(uint64_t u) { return (union { uint64_t u; double d; }){ u }.d; }
static inline uint32_t bits_of_float(float f) { return (union { float f; uint32_t u; }){ f }.u; }
static inline uint64_t bits_of_double(double d) { return (union { double d; uint64_t u; }){ d }.u; }

/* v at p, little-endian (a block's fp16 scale). */
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

#endif
