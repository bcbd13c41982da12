/* The helpers of bench.h that every benchmark program links. */
#include <string.h>
#include <time.h>

#include "bench.h"

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void bench_fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = seed | 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		uint64_t r = s * 0x2545f4914f6cdd1du;
		memcpy(p + i, &r, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(s >> (8 * (i % 8)));
}
