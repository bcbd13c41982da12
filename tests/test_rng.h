/* What the unit tests make up their data with: a fixed pseudo-random sequence
 * (xorshift64), so that a failure reproduces, and little-endian stores into block bytes. */
#ifndef GGUFS_TESTS_TEST_RNG_H
#define GGUFS_TESTS_TEST_RNG_H

#include <stdint.h>

/* The next number of the sequence that *state (never 0) is at. */
static inline uint64_t xorshift64(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* v at p, little-endian (a block's fp16 scale). */
static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

#endif
