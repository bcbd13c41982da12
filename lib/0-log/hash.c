#include "hash.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>

static uint64_t seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

/* The process's seed: random, or where the kernel has no entropy yet, the clock. */
static void seed_init(void)
{
	if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed) {
		/* no entropy yet (early boot): the clock is still unknown to the file's author */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
	}
}

uint64_t hash_fnv1a(const void *p, uint64_t n, uint64_t basis)
{
	const unsigned char *b = p;
	uint64_t h = basis;
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

uint64_t hash_bytes(const void *p, uint64_t n, uint64_t salt)
{
	pthread_once(&seed_once, seed_init);
	uint64_t h = hash_fnv1a(p, n, HASH_FNV1A_BASIS ^ seed ^ salt);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t hash_slots(uint64_t n)
{
	uint64_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	return cap;
}
