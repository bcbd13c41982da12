/* Quantizer throughput, one thread: per type, GB/s of float32 input per CPU second of
 * lib/2-quant's quant_row and, in the same run on the same values, of llama.cpp's own
 * ggml_quantize_chunk (imatrix NULL, what llama_model_quantize() runs without an
 * importance matrix) from the pinned libggml-base.so, loaded with dlopen; their ratio;
 * and whether the two outputs are the same bytes. CPU seconds of the calling thread,
 * not wall time, so that other work on a shared machine counts less; the best of
 * REPEATS passes.
 *
 * The values: 2048-value rows of gaussian weights at 0.02, as in a model's matrices.
 *
 * Usage: bench_quant [--llama DIR] [TYPE...]   (DIR holds libggml-base.so; default:
 * every type quant_can_make says yes to). Issue 36 wants ggufs's rate at least
 * llama.cpp's. */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "quant.h"
#include "types.h"

#define ROW 2048
#define ROWS 2048               /* 4 Mi values, 16 MiB of input */
#define REPEATS 3

/* ggml_quantize_chunk's signature (ggml.h). */
typedef size_t (*ggml_chunk_fn)(int type, const float *src, void *dst, int64_t start,
                                int64_t nrows, int64_t n_per_row, const float *imatrix);

/* CPU seconds of this thread. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n gaussian values (Box-Muller over bench_fill_random's bytes) times sigma. */
static void fill_gaussian(float *x, size_t n, float sigma)
{
	uint32_t *u = malloc(n * sizeof *u);
	if (!u) {
		fprintf(stderr, "bench_quant: out of memory\n");
		exit(1);
	}
	bench_fill_random((uint8_t *)u, n * sizeof *u, 36);
	for (size_t i = 0; i + 1 < n; i += 2) {
		double a = ((double)u[i] + 1.0) / 4294967297.0;
		double b = (double)u[i + 1] / 4294967296.0;
		double r = sqrt(-2.0 * log(a));
		x[i] = (float)(r * cos(2 * M_PI * b)) * sigma;
		x[i + 1] = (float)(r * sin(2 * M_PI * b)) * sigma;
	}
	free(u);
}

/* The best CPU seconds of REPEATS passes of ggufs (chunk NULL) or llama.cpp over x. */
static double best_pass(enum ggml_type_id type, ggml_chunk_fn chunk, const float *x,
                        uint8_t *y)
{
	double best = INFINITY;
	for (int r = 0; r < REPEATS; r++) {
		double t0 = cpu_now();
		if (chunk)
			chunk((int)type, x, y, 0, ROWS, ROW, NULL);
		else if (quant_row(type, x, y, (int64_t)ROW * ROWS) != 0) {
			fprintf(stderr, "bench_quant: quant_row refused %u\n", type);
			exit(1);
		}
		double t = cpu_now() - t0;
		if (t < best)
			best = t;
	}
	return best;
}

/* llama.cpp's ggml_quantize_chunk from DIR/libggml-base.so, or NULL (said why). */
static ggml_chunk_fn load_llama(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/libggml-base.so", dir);
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("llama.cpp: not loaded (%s): its column is empty\n", dlerror());
		return NULL;
	}
	ggml_chunk_fn fn;
	void *sym = dlsym(lib, "ggml_quantize_chunk");
	memcpy(&fn, &sym, sizeof fn);
	return fn;
}

/* Runs one type: its line of the table. Returns false when the outputs differ. */
static bool bench_type(const struct ggml_type *t, ggml_chunk_fn chunk, const float *x,
                       uint8_t *ours, uint8_t *theirs)
{
	const double in_gb = (double)ROW * ROWS * sizeof(float) / 1e9;
	size_t out = (size_t)ROW * ROWS / t->block_elems * t->block_bytes;
	double mine = best_pass((enum ggml_type_id)t->id, NULL, x, ours);
	printf("%-8s %10.3f", t->name, in_gb / mine);
	if (!chunk) {
		printf("\n");
		return true;
	}
	double ref = best_pass((enum ggml_type_id)t->id, chunk, x, theirs);
	bool same = memcmp(ours, theirs, out) == 0;
	printf(" %10.3f %7.2f  %s\n", in_gb / ref, ref / mine, same ? "yes" : "NO");
	return same;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	int first = 1;
	if (argc > 2 && strcmp(argv[1], "--llama") == 0) {
		dir = argv[2];
		first = 3;
	}
	size_t n = (size_t)ROW * ROWS;
	float *x = malloc(n * sizeof *x);
	uint8_t *ours = malloc(n * sizeof(float)), *theirs = malloc(n * sizeof(float));
	if (!x || !ours || !theirs) {
		fprintf(stderr, "bench_quant: out of memory\n");
		return 1;
	}
	fill_gaussian(x, n, 0.02f);
	ggml_chunk_fn chunk = dir ? load_llama(dir) : NULL;

	printf("quantizing %d x %d float32 (%.0f MiB), one thread, best of %d, GB/s of input "
	       "per CPU second\n", ROWS, ROW, n * 4.0 / 1048576, REPEATS);
	printf("%-8s %10s %10s %7s  %s\n", "type", "ggufs", "llama.cpp", "ratio", "same bytes");
	bool ok = true;
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (!t || !quant_can_make((enum ggml_type_id)id))
			continue;
		bool wanted = first >= argc;
		for (int a = first; a < argc; a++)
			wanted = wanted || strcmp(argv[a], t->name) == 0;
		if (wanted)
			ok = bench_type(t, chunk, x, ours, theirs) && ok;
	}
	free(x);
	free(ours);
	free(theirs);
	return ok ? 0 : 1;
}
