/* `ggufs --check` against reading the file: GB/s of GGUF bytes on a generated q4_K
 * model of 283 MB, from a warm page cache, next to `cat MODEL > /dev/null` of the
 * same file, as a ratio, then both again from a cold page cache (the model dropped from it
 * before each run), and `ggufs --check --json` (which computes every figure, not only
 * the health that the text report needs); and, in process at each SIMD level, the
 * statistics loop alone in GB/s of float32, and the statistics of q4_K blocks taken
 * without dequantizing them (stats_quant.h) in GB/s of GGUF bytes.
 *
 * The model's blocks are random bytes with fp16 scales like a real q4_K model's (d in
 * 2^-12 .. 2^-7, dmin 4 to 16 times d), so that the scan takes the path a healthy
 * model takes.
 *
 * Usage: bench_check GGUFS [DIR]   (DIR: where the model is written, default $TMPDIR) */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "blocks.h"
#include "dequant.h"
#include "stats.h"
#include "types.h"

#define N_TENSORS 48
#define NE0 4096
#define NE1 2560          /* 4096 x 2560 q4_K: 5.9 MB of blocks, 48 of them 283 MB */
#define TRIES 5           /* each figure is the best of this many: the machine is shared */
#define KERNEL_VALUES (4u << 20)

/* An fp16 of 2^e for e in -14..15. */
static uint16_t f16_pow2(int e)
{
	return (uint16_t)((e + 15) << 10);
}

/* size bytes of q4_K blocks at b: random quants and scales, with fp16 d and dmin like a
 * real model's. */
static void fill_q4_K(uint8_t *b, uint64_t size, uint64_t seed)
{
	const struct ggml_type *q4k = ggml_type_get(GGML_TYPE_Q4_K);
	bench_fill_random(b, size, seed);
	for (uint64_t k = 0; k < size; k += q4k->block_bytes) {
		/* random significands, and dmin 4 to 16 times d, as llama.cpp's
		 * quantizer writes them (tinyllama-q4km: dmin's exponent is d's + 2
		 * in 7% of blocks, + 3 in 79%, + 4 in 14%) */
		const int e = -12 + (int)(b[k + 20] % 5);
		uint16_t d = f16_pow2(e) | (rd16(b + k + 22) & 0x3ff);
		uint16_t dmin = f16_pow2(e + 2 + (int)(b[k + 21] % 3)) | (rd16(b + k + 24) & 0x3ff);
		memcpy(b + k + offsetof(struct block_q4_K, d), &d, 2);
		memcpy(b + k + offsetof(struct block_q4_K, dmin), &dmin, 2);
	}
}

/* The model: N_TENSORS q4_K tensors of NE0 x NE1, data aligned to 32. */
static uint64_t write_model(const char *path)
{
	const struct ggml_type *q4k = ggml_type_get(GGML_TYPE_Q4_K);
	const uint64_t size = (uint64_t)NE0 * NE1 / q4k->block_elems * q4k->block_bytes;
	FILE *f = bench_open_gguf(path, N_TENSORS, 1);
	bench_put_str(f, "general.architecture");
	bench_put_u32(f, 8);
	bench_put_str(f, "bench");
	for (int i = 0; i < N_TENSORS; i++) {
		char name[64];
		snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
		bench_put_str(f, name);
		bench_put_u32(f, 2);
		bench_put_u64(f, NE0);
		bench_put_u64(f, NE1);
		bench_put_u32(f, GGML_TYPE_Q4_K);
		bench_put_u64(f, (uint64_t)i * size);   /* size is a multiple of 32 */
	}
	static const uint8_t zeros[32];
	bench_put(f, zeros, (32 - (uint64_t)ftell(f) % 32) % 32);
	uint8_t *b = malloc(size);
	if (!b) {
		fprintf(stderr, "bench_check: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < N_TENSORS; i++) {
		fill_q4_K(b, size, 0x5eed + (uint64_t)i);
		bench_put(f, b, size);
	}
	free(b);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	return (uint64_t)N_TENSORS * size;
}

/* A run's wall-clock seconds and the CPU seconds (user + system) its threads took. */
struct timing {
	double wall, cpu;
};

/* How long argv takes to run with stdout to /dev/null; wall -1 when it fails or exits
 * with a status other than want. */
static struct timing run_timed(char *const argv[], int want)
{
	struct timing fail = { -1, -1 };
	double t0 = bench_now();
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (pid < 0 || wait4(pid, &status, 0, &ru) != pid)
		return fail;
	struct timing t = {
		.wall = bench_now() - t0,
		.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6,
	};
	return WIFEXITED(status) && WEXITSTATUS(status) == want ? t : fail;
}

/* Drops the file at path from the page cache (it is clean: written and synced). */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* The best of TRIES runs (wall and CPU seconds, each its own best), each from a cold
 * page cache when cold is set; wall -1 when a run failed. */
static struct timing best_of(char *const argv[], int want, const char *cold)
{
	struct timing best = { -1, -1 };
	for (int k = 0; k < TRIES; k++) {
		if (cold)
			drop_cache(cold);
		struct timing t = run_timed(argv, want);
		if (t.wall < 0)
			return t;
		if (best.wall < 0 || t.wall < best.wall)
			best.wall = t.wall;
		if (best.cpu < 0 || t.cpu < best.cpu)
			best.cpu = t.cpu;
	}
	return best;
}

/* GB/s of q4_K blocks through stats_acc_add_blocks at the active level, best of TRIES. */
static double blocks_rate(const uint8_t *p, uint64_t nblocks)
{
	static struct stats_acc acc;
	const uint64_t group = STATS_BLOCK / 256;
	double best = 0;
	for (int k = 0; k < TRIES; k++) {
		struct tensor_stats s;
		stats_acc_init(&acc);
		double t0 = bench_now();
		for (uint64_t b = 0; b < nblocks; b += group)
			stats_acc_add_blocks(&acc, GGML_TYPE_Q4_K, p + b * 144, group);
		stats_acc_finish(&acc, &s);
		double r = (double)nblocks * 144 / (bench_now() - t0) / 1e9;
		if (r > best)
			best = r;
	}
	return best;
}

/* GB/s of float32 through stats_acc_add at the active level, best of TRIES. */
static double kernel_rate(const float *x)
{
	static struct stats_acc acc;
	double best = 0;
	for (int k = 0; k < TRIES; k++) {
		struct tensor_stats s;
		stats_acc_init(&acc);
		double t0 = bench_now();
		stats_acc_add(&acc, x, KERNEL_VALUES);
		stats_acc_finish(&acc, &s);
		double r = KERNEL_VALUES * 4.0 / (bench_now() - t0) / 1e9;
		if (r > best)
			best = r;
	}
	return best;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_check GGUFS [DIR]\n");
		return 2;
	}
	const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char path[4096];
	snprintf(path, sizeof path, "%s/ggufs-bench-check-%d.gguf", dir, (int)getpid());

	float *x = malloc(KERNEL_VALUES * sizeof *x);
	if (!x)
		return 1;
	uint64_t r = 0x9e3779b97f4a7c15u;
	for (uint32_t i = 0; i < KERNEL_VALUES; i++) {
		r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
		x[i] = (float)(int64_t)(r * 0x2545f4914f6cdd1du) * 0x1p-70f;
	}
	printf("statistics loop, in process, 16 MiB of float32, best of %d:\n", TRIES);
	enum dequant_level best = dequant_best();
	for (int l = DEQUANT_SCALAR; l <= (int)best; l++) {
		dequant_select((enum dequant_level)l);
		printf("  %-7s %6.2f GB/s\n", dequant_level_name((enum dequant_level)l),
		       kernel_rate(x));
	}
	dequant_select(best);
	free(x);

	/* 4096 groups of 16 blocks: 9.4 MB */
	const uint64_t nblocks = 4096 * (STATS_BLOCK / 256);
	uint8_t *blocks = malloc(nblocks * 144);
	if (!blocks)
		return 1;
	fill_q4_K(blocks, nblocks * 144, 0xb10c);
	printf("\nq4_K statistics from the blocks, in process, 9.4 MB, GB/s of GGUF bytes:\n");
	for (int l = DEQUANT_SCALAR; l <= (int)best; l++) {
		dequant_select((enum dequant_level)l);
		printf("  %-7s %6.2f GB/s\n", dequant_level_name((enum dequant_level)l),
		       blocks_rate(blocks, nblocks));
	}
	dequant_select(best);
	free(blocks);

	uint64_t bytes = write_model(path);
	char *cat[] = { "cat", path, NULL };
	char *check[] = { argv[1], "--check", path, NULL };
	printf("\nq4_K model, %d tensors, %.0f MB, GB/s of GGUF bytes, best of %d (the CPU\n"
	       "figure counts both threads' time: it changes less with the machine's load):\n",
	       N_TENSORS, (double)bytes / 1e6, TRIES);
	char *check_json[] = { argv[1], "--check", "--json", path, NULL };
	bool ok = true;
	for (int cold = 0; cold < 2; cold++) {
		if (!cold)
			run_timed(cat, 0);   /* into the page cache */
		struct timing t_cat = best_of(cat, 0, cold ? path : NULL);
		struct timing t_check = best_of(check, 0, cold ? path : NULL);
		struct timing t_json = best_of(check_json, 0, cold ? path : NULL);
		if (t_cat.wall < 0 || t_check.wall < 0 || t_json.wall < 0) {
			fprintf(stderr, "bench_check: cat or ggufs --check failed on %s\n", path);
			unlink(path);
			return 1;
		}
		double g_cat = (double)bytes / t_cat.wall / 1e9;
		double g_check = (double)bytes / t_check.wall / 1e9;
		double g_json = (double)bytes / t_json.wall / 1e9;
		printf("  %s page cache: cat > /dev/null %6.2f\n", cold ? "cold" : "warm", g_cat);
		printf("    ggufs --check         %6.2f (%.2fx cat; %.2f GB per CPU second)",
		       g_check, g_check / g_cat, (double)bytes / t_check.cpu / 1e9);
		if (!cold) {
			printf("   target >= 2 GB/s: %s", g_check >= 2.0 ? "met" : "MISSED");
			ok &= g_check >= 2.0;
		}
		printf("\n    ggufs --check --json  %6.2f (%.2fx cat; %.2f GB per CPU second)\n",
		       g_json, g_json / g_cat, (double)bytes / t_json.cpu / 1e9);
	}
	unlink(path);
	printf("\n%s\n", ok ? "target met" : "target MISSED");
	return 0;
}
