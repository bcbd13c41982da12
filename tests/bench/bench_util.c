/* The helpers of bench.h that every benchmark program links. */
#include <stdio.h>
#include <stdlib.h>
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

void bench_put(FILE *f, const void *p, size_t n)
{
	if (fwrite(p, 1, n, f) != n) {
		perror("bench: write");
		exit(1);
	}
}

void bench_put_u32(FILE *f, uint32_t v)
{
	bench_put(f, &v, 4);
}

void bench_put_u64(FILE *f, uint64_t v)
{
	bench_put(f, &v, 8);
}

void bench_put_str(FILE *f, const char *s)
{
	bench_put_u64(f, strlen(s));
	bench_put(f, s, strlen(s));
}

FILE *bench_open_gguf(const char *path, uint64_t n_tensors, uint64_t n_kv)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	bench_put(f, "GGUF", 4);
	bench_put_u32(f, 3);
	bench_put_u64(f, n_tensors);
	bench_put_u64(f, n_kv);
	return f;
}
