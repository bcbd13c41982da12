/* In-process dequantizer throughput: per type, GB/s of float32 output from the scalar
 * reference and from the active SIMD level, each dequantizing a 2048 x 32000 tensor of
 * random block bytes 1 MiB of output at a time into one reused buffer (as the FUSE
 * daemon fills its replies), next to a 256 MiB memcpy measured in the same run.
 *
 * With --ggufs PATH it then runs the mount half (bench_mount.c) with that binary.
 *
 * Usage: bench_dequant [--ggufs PATH] [--all | TYPE...]   (default: the types real
 * models use most; --all: every type with a dequantizer, in process). GGUFS_DEQUANT
 * picks the SIMD column's level. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "dequant.h"
#include "types.h"

#define NE0 BENCH_NE0
#define NE1 BENCH_NE1
#define CHUNK_BYTES BENCH_CHUNK
#define MEMCPY_BYTES (256u << 20)
#define REPEATS 9

/* The types issue 4 names, targets first, then the rest with a SIMD path. */
static const char *const default_types[] = {
	"q4_K", "q6_K", "q8_0", "q4_0", "bf16", "q5_K", "iq4_xs", "iq4_nl", "mxfp4", "f16",
	"q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
	"iq1_s", "iq1_m", "nvfp4", "q1_0", "q2_0", "f32",
};

/* Through the mount: issue 4's types (the first two are the two readers), then two of
 * the lattice i-quants that the largest models are shipped in. */
static const char *const mount_types[] = {
	"q4_K", "q8_0", "q6_K", "q5_K", "q4_0", "iq4_xs", "iq4_nl", "mxfp4", "bf16", "f16",
	"iq2_xxs", "iq1_s",
};

/* Types whose SIMD path must beat the scalar one 3 times over (issue 4). */
static bool has_target(const char *name)
{
	static const char *const targets[] = { "q4_K", "q6_K", "q8_0", "q4_0", "bf16" };
	for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
		if (strcmp(name, targets[i]) == 0)
			return true;
	return false;
}

/* Seconds for one pass of fn over the whole tensor, 1 MiB of output at a time. */
static double pass(dequant_fn fn, const struct ggml_type *t, const uint8_t *src,
                   uint64_t nblocks, float *buf)
{
	uint64_t chunk = CHUNK_BYTES / sizeof(float) / t->block_elems;
	double t0 = bench_now();
	for (uint64_t b = 0; b < nblocks; b += chunk) {
		uint64_t n = nblocks - b < chunk ? nblocks - b : chunk;
		fn(src + b * t->block_bytes, buf, n);
	}
	return bench_now() - t0;
}

/* GB/s of output of the scalar reference and the active dequantizer, the best of
 * REPEATS passes each, taken in turn so that a busy neighbour slows both alike. */
static void run(const struct ggml_type *t, const uint8_t *src, uint64_t nblocks,
                float *buf, double *scalar, double *simd)
{
	double best[2] = { 1e30, 1e30 };
	dequant_fn fns[2] = { dequant_get(t->id)->to_float_ref, dequant_get(t->id)->to_float };
	int n = fns[1] == fns[0] ? 1 : 2;
	for (int r = 0; r < REPEATS; r++) {
		for (int i = 0; i < n; i++) {
			double dt = pass(fns[i], t, src, nblocks, buf);
			if (dt < best[i])
				best[i] = dt;
		}
	}
	double bytes = (double)nblocks * t->block_elems * sizeof(float);
	*scalar = bytes / best[0] / 1e9;
	*simd = n == 2 ? bytes / best[1] / 1e9 : *scalar;
}

/* GB/s of the best of REPEATS memcpys of 256 MiB (pages touched first). */
static double memcpy_rate(void)
{
	uint8_t *a = malloc(MEMCPY_BYTES), *b = malloc(MEMCPY_BYTES);
	if (!a || !b) {
		fprintf(stderr, "bench_dequant: out of memory\n");
		exit(1);
	}
	memset(a, 1, MEMCPY_BYTES);
	memset(b, 2, MEMCPY_BYTES);
	double best = 1e30;
	for (int r = 0; r < REPEATS; r++) {
		double t0 = bench_now();
		memcpy(b, a, MEMCPY_BYTES);
		double dt = bench_now() - t0;
		if (dt < best)
			best = dt;
	}
	/* keep the copy observable */
	volatile uint8_t sink = b[MEMCPY_BYTES / 2];
	(void)sink;
	free(a);
	free(b);
	return MEMCPY_BYTES / best / 1e9;
}

static const struct ggml_type *type_by_name(const char *name)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (dequant_get(t->id)->to_float && strcmp(t->name, name) == 0)
			return t;
	}
	return NULL;
}

/* One table row: the type's rates, ratios and, where issue 4 sets one, its target. */
static bool bench_type(const struct ggml_type *t, double mem, uint8_t *src, float *buf)
{
	uint64_t nblocks = (uint64_t)NE0 * NE1 / t->block_elems;
	bench_fill_random(src, nblocks * t->block_bytes, 0x243f6a8885a308d3u);
	double scalar, fast;
	run(t, src, nblocks, buf, &scalar, &fast);
	bool simd = dequant_get(t->id)->to_float != dequant_get(t->id)->to_float_ref;
	bool target = has_target(t->name);
	bool ok = !target || fast >= 3 * scalar;
	printf("%-8s %9.2f %9.2f %9.2fx %9.2fx %9.2fx   %s\n", t->name, scalar, fast,
	       fast / scalar, scalar / mem, fast / mem,
	       !simd ? "(scalar only)" : target ? (ok ? ">=3x ok" : ">=3x MISSED") : "");
	return ok;
}

int main(int argc, char **argv)
{
	const char *ggufs = NULL;
	if (argc > 2 && strcmp(argv[1], "--ggufs") == 0) {
		ggufs = argv[2];
		argc -= 2;
		argv += 2;
	}
	const char *const *names = default_types;
	size_t count = sizeof default_types / sizeof default_types[0];
	const char *const *mnames = mount_types;
	size_t mcount = sizeof mount_types / sizeof mount_types[0];
	const char *all[GGML_TYPE_COUNT];
	if (argc > 1 && strcmp(argv[1], "--all") == 0) {
		count = 0;
		for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
			if (dequant_get(id)->to_float)
				all[count++] = ggml_type_get(id)->name;
		names = all;
	} else if (argc > 1) {
		names = mnames = (const char *const *)argv + 1;
		count = mcount = (size_t)argc - 1;
	}

	/* the largest source any type needs: 8 bytes a value (f64, i64) */
	uint8_t *src = malloc((size_t)NE0 * NE1 * 8);
	float *buf = malloc(CHUNK_BYTES);
	if (!src || !buf) {
		fprintf(stderr, "bench_dequant: out of memory\n");
		return 1;
	}
	double mem = memcpy_rate();
	printf("dequantizers: scalar vs %s (best on this CPU: %s)\n",
	       dequant_level_name(dequant_active()), dequant_level_name(dequant_best()));
	printf("%d x %d values per type, random block bytes, 1 MiB output buffer, best of %d\n",
	       NE0, NE1, REPEATS);
	printf("memcpy 256 MiB: %.2f GB/s\n\n", mem);
	printf("%-8s %9s %9s %10s %10s %10s\n", "type", "scalar", "SIMD", "SIMD/scal",
	       "scal/mcpy", "SIMD/mcpy");
	printf("%-8s %9s %9s\n", "", "GB/s", "GB/s");

	bool ok = true;
	for (size_t i = 0; i < count; i++) {
		const struct ggml_type *t = type_by_name(names[i]);
		if (!t) {
			fprintf(stderr, "bench_dequant: no dequantizer for type '%s'\n", names[i]);
			return 1;
		}
		ok &= bench_type(t, mem, src, buf);
	}
	free(buf);
	free(src);
	if (ggufs)
		ok &= bench_mount(ggufs, mem, mnames, mcount);
	printf("\n%s\n", ok ? "targets met" : "targets MISSED");
	return 0;
}
