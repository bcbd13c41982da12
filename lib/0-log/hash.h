/* The hashes of the library, all FNV-1a at heart.
 *
 * hash_bytes is for untrusted names in lookup tables. Every name in a GGUF file is
 * chosen by whoever wrote it, so a fixed hash would let a file make the tables degrade
 * to lists and a mount take quadratic time. It starts from a per-process random seed
 * and ends in a full-avalanche mix, so that which names collide cannot be planned.
 *
 * hash_fnv1a is plain FNV-1a, for what must be the same in every process: the hash
 * suffix of a cut file name, the names of disk cache entries. Not for checksums (the
 * disk cache checks its blocks with XXH3). */
#ifndef GGUFS_HASH_H
#define GGUFS_HASH_H

#include <stdint.h>

/* FNV-1a's standard 64-bit offset basis. */
#define HASH_FNV1A_BASIS 0xcbf29ce484222325ull

/* 64-bit FNV-1a of p[0..n), from basis (HASH_FNV1A_BASIS for the standard hash). */
uint64_t hash_fnv1a(const void *p, uint64_t n, uint64_t basis);

/* A seeded 64-bit hash of p[0..n) (FNV-1a from a random start, then murmur3's fmix64). */
uint64_t hash_bytes(const void *p, uint64_t n, uint64_t salt);

/* The slots of an open-addressing table of n entries (linear probing, mask = slots - 1):
 * a power of two, at least 16 and twice n, so that it stays at most half full. */
uint64_t hash_slots(uint64_t n);

#endif
