/* Helpers shared by the benchmarks: the dequantizers' two halves (bench_dequant.c in
 * process, bench_mount.c through a real mount) and bench_check.c; bench_util.c. */
#ifndef GGUFS_BENCH_H
#define GGUFS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_NE0 2048
#define BENCH_NE1 32000
#define BENCH_CHUNK (1u << 20)   /* output buffer and read size */

/* Monotonic seconds. */
double bench_now(void);

/* n random bytes (xorshift64*, fixed seed): fast enough for hundreds of MB. */
void bench_fill_random(uint8_t *p, size_t n, uint64_t seed);

/* Writing GGUF files by hand: n bytes of p, a little-endian u32 or u64 (x86 is, as GGUF
 * is), a GGUF string; any write error ends the benchmark. */
void bench_put(FILE *f, const void *p, size_t n);
void bench_put_u32(FILE *f, uint32_t v);
void bench_put_u64(FILE *f, uint64_t v);
void bench_put_str(FILE *f, const char *s);
/* path made anew with a GGUF v3 preamble of n_tensors and n_kv: its stream for what
 * follows (ends the benchmark when it cannot be made). */
FILE *bench_open_gguf(const char *path, uint64_t n_tensors, uint64_t n_kv);

/* The mount half: writes models into a temporary folder, mounts them with the ggufs
 * binary at ggufs, and prints per type the cold and warm GB/s of .f32 and raw reads,
 * two readers at once, the daemon's RssAnon and mount times. mem is the memcpy GB/s
 * every figure is compared to. Returns false when a target of issue 4 is missed. */
bool bench_mount(const char *ggufs, double mem, const char *const *types, size_t count);

#endif
