#include "hash.h"

#include <pthread.h>
#include <sys/random.h>
#include <time.h>

static uint64_t seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed_init(void)
{
	if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed) {
		/* no entropy yet (early boot): the clock is still unknown to the file's author */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
	}
}

uint64_t hash_bytes(const void *p, uint64_t n, uint64_t salt)
{
	pthread_once(&seed_once, seed_init);
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed ^ salt;
	for (uint64_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}
