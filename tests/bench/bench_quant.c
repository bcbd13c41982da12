/* Quantizer throughput, one thread: per type, GB/s of float32 input per CPU second of
 * lib/2-quant's quant_row and, in the same run on the same values, of llama.cpp's own
 * ggml_quantize_chunk (imatrix NULL, what llama_model_quantize() runs without an
 * importance matrix) from the pinned libggml-base.so, loaded with dlopen; their ratio;
 * and whether the two outputs are the same bytes. CPU seconds of the calling thread,
 * not wall time, so that other work on a shared machine counts less; the best of
 * REPEATS passes.
 *
 * With --imatrix, the same under an importance matrix (issue 46): MB/s per CPU second
 * of quant_row_weighted, a row at a time, against ggml_quantize_chunk given the same
 * matrix, for every type whose bytes a matrix changes (or those named); one call of
 * each quantizes a row first, so that neither side's grids are built in the timing.
 *
 * The values: 2048-value rows of gaussian weights at 0.02, as in a model's matrices;
 * the matrix: 2048 log-normal values (sigma 2, as real ones spread over decades).
 *
 * Usage: bench_quant [--llama DIR] [--imatrix] [TYPE...]   (DIR holds libggml-base.so;
 * default: every type quant_can_make, or under --imatrix quant_can_make_weighted, says
 * yes to). Issue 36 wants ggufs's rate at least llama.cpp's, issue 46 the same for
 * iq2_xxs, iq1_m, iq3_xxs and q4_K under a matrix. */
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
#define ROWS_WEIGHTED 256       /* 512 Ki values, 2 MiB: the i-quants are slow */
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

/* The best CPU seconds of REPEATS passes of ggufs (chunk NULL) or llama.cpp over the
 * ROWS_WEIGHTED rows of x under the matrix w. */
static double best_weighted_pass(enum ggml_type_id type, ggml_chunk_fn chunk, const float *x,
                                 const float *w, uint8_t *y)
{
	const struct ggml_type *tt = ggml_type_get(type);
	const size_t row_bytes = ROW / tt->block_elems * tt->block_bytes;
	double best = INFINITY;

	for (int r = 0; r < REPEATS; r++) {
		double t0 = cpu_now();
		if (chunk) {
			chunk((int)type, x, y, 0, ROWS_WEIGHTED, ROW, w);
		} else {
			for (int i = 0; i < ROWS_WEIGHTED; i++)
				if (quant_row_weighted(type, x + (size_t)i * ROW, y + i * row_bytes, ROW,
				                       w) != 0) {
					fprintf(stderr, "bench_quant: quant_row_weighted refused %u\n", type);
					exit(1);
				}
		}
		double t = cpu_now() - t0;
		if (t < best)
			best = t;
	}
	return best;
}

/* One type under the matrix w: its line of the second table. Returns false when the
 * outputs differ. */
static bool bench_weighted(const struct ggml_type *t, ggml_chunk_fn chunk, const float *x,
                           const float *w, uint8_t *ours, uint8_t *theirs)
{
	const enum ggml_type_id type = (enum ggml_type_id)t->id;
	const double in_mb = (double)ROW * ROWS_WEIGHTED * sizeof(float) / 1e6;
	const size_t out = (size_t)ROW * ROWS_WEIGHTED / t->block_elems * t->block_bytes;

	if (quant_row_weighted(type, x, ours, ROW, w) != 0)      /* its grids, built */
		return false;
	double mine = best_weighted_pass(type, NULL, x, w, ours);
	printf("%-8s %10.2f", t->name, in_mb / mine);
	if (!chunk) {
		printf("\n");
		return true;
	}
	chunk((int)type, x, theirs, 0, 1, ROW, w);
	double ref = best_weighted_pass(type, chunk, x, w, theirs);
	bool same = memcmp(ours, theirs, out) == 0;
	printf(" %10.2f %7.2f  %s\n", in_mb / ref, ref / mine, same ? "yes" : "NO");
	fflush(stdout);
	return same;
}

/* n log-normal values exp(sigma * gaussian), a matrix's spread. */
static void fill_lognormal(float *w, size_t n, float sigma)
{
	fill_gaussian(w, n, sigma);
	for (size_t i = 0; i < n; i++)
		w[i] = expf(w[i]);
}

/* The --imatrix table over the types named (all weighted ones when none is). */
static bool weighted_table(ggml_chunk_fn chunk, const float *x, char **names, int count)
{
	static const enum ggml_type_id ignored[] = {
		GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_MXFP4,
		GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_Q1_0, GGML_TYPE_Q2_0,
	};
	float *w = malloc(ROW * sizeof *w);
	uint8_t *ours = malloc((size_t)ROW * ROWS_WEIGHTED * sizeof(float));
	uint8_t *theirs = malloc((size_t)ROW * ROWS_WEIGHTED * sizeof(float));
	bool ok = w && ours && theirs;

	if (ok) {
		fill_lognormal(w, ROW, 2.0f);
		printf("under an importance matrix: %d x %d float32 (%.0f MiB), one thread, best of "
		       "%d, MB/s of input per CPU second\n", ROWS_WEIGHTED, ROW,
		       ROW * ROWS_WEIGHTED * 4.0 / 1048576, REPEATS);
		printf("%-8s %10s %10s %7s  %s\n", "type", "ggufs", "llama.cpp", "ratio",
		       "same bytes");
	}
	for (uint32_t id = 0; ok && id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (!t || !quant_can_make_weighted((enum ggml_type_id)id))
			continue;
		bool wanted = count == 0;
		for (size_t k = 0; count == 0 && k < sizeof ignored / sizeof ignored[0]; k++)
			wanted = wanted && ignored[k] != (enum ggml_type_id)id;
		for (int a = 0; a < count; a++)
			wanted = wanted || strcmp(names[a], t->name) == 0;
		if (wanted)
			ok = bench_weighted(t, chunk, x, w, ours, theirs) && ok;
	}
	free(w);
	free(ours);
	free(theirs);
	return ok;
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
	bool weighted = false;
	if (argc > 2 && strcmp(argv[1], "--llama") == 0) {
		dir = argv[2];
		first = 3;
	}
	if (first < argc && strcmp(argv[first], "--imatrix") == 0) {
		weighted = true;
		first++;
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
	if (weighted) {
		bool same = weighted_table(chunk, x, argv + first, argc - first);
		free(x);
		free(ours);
		free(theirs);
		return same ? 0 : 1;
	}

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
