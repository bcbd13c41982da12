/* Quantizes float32 values with lib/2-quant, for the reference tests against llama.cpp
 * (tests/quant_ref.py, tests/quant_ref_imatrix.py):
 *     quant_row TYPE [FILE]
 * reads little-endian float32 values from FILE (or stdin) and writes quant_row's bytes
 * for them to stdout. TYPE is ggml's name (q4_K, bf16, ...). The count of values must
 * be a multiple of the type's block size.
 *     quant_row --weights WFILE --row N [--parts SEED] [--threads T] TYPE [FILE]
 * quantizes rows of N values under the importance matrix of WFILE (N float32 values,
 * the same for every row; "none": no matrix) with quant_row_weighted, one call a row;
 * with --parts, each row in runs of whole blocks cut at places drawn from SEED, the runs
 * in a shuffled order, by quant_blocks_weighted after one quant_row_prepare a row (the
 * row's values are given to prepare only where quant_row_needs_values says so); with
 * --threads, the rows spread over T threads (1..16). The bytes go to stdout.
 *     quant_row --list
 *     quant_row --weighted-list
 * prints every type quant_can_make (quant_can_make_weighted) says yes to, one line
 * each: name, id, block_elems, block_bytes (and for --weighted-list, 1 if it requires
 * a matrix, else 0). Exit 0, or 2 with a line on stderr. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "types.h"

#define MAX_THREADS 16

/* The type id named name, or -1. */
static int type_by_name(const char *name)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (t && t->name && strcmp(t->name, name) == 0)
			return (int)id;
	}
	return -1;
}

/* Reads all of f into a malloc'd buffer; its byte count in *len. NULL on failure. */
static char *slurp(FILE *f, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap * 2);
		if (!bigger)
			free(buf);
		buf = bigger;
		cap *= 2;
	}
	if (buf && ferror(f)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* The whole of the file at path (stdin for NULL) as float32 values, malloc'd (at least
 * one), their count in *n. NULL, said on stderr, when it cannot be read. */
static float *read_floats(const char *path, int64_t *n)
{
	FILE *in = path ? fopen(path, "rb") : stdin;
	if (!in) {
		fprintf(stderr, "quant_row: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	size_t len = 0;
	char *buf = slurp(in, &len);
	if (in != stdin)
		fclose(in);
	if (!buf || len % sizeof(float) != 0) {
		fprintf(stderr, "quant_row: cannot read whole float32 values\n");
		free(buf);
		return NULL;
	}
	float *x = malloc(len ? len : sizeof(float));
	if (x)
		memcpy(x, buf, len);
	free(buf);
	*n = (int64_t)(len / sizeof(float));
	return x;
}

/* Writes n bytes of y to stdout; 0, or 2 said on stderr. */
static int put_bytes(const void *y, size_t n)
{
	if (fwrite(y, 1, n, stdout) != n || fflush(stdout) != 0) {
		fprintf(stderr, "quant_row: cannot write the output\n");
		return 2;
	}
	return 0;
}

/* The --list and --weighted-list outputs. */
static int list_types(bool weighted)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		enum ggml_type_id type = (enum ggml_type_id)id;
		if (!t || !(weighted ? quant_can_make_weighted(type) : quant_can_make(type)))
			continue;
		printf("%s %u %u %u", t->name, id, t->block_elems, t->block_bytes);
		if (weighted)
			printf(" %d", quant_requires_weights(type) ? 1 : 0);
		printf("\n");
	}
	return fflush(stdout) == 0 ? 0 : 2;
}

/* The rows to quantize and how: what every thread shares. */
struct job {
	enum ggml_type_id type;
	const struct ggml_type *t;
	const float *x, *w;
	uint8_t *y;
	int64_t nrows, row;
	bool parts;
	uint64_t seed;
	int nthreads;
	int failed;             /* the first failing call's result, else 0 */
	pthread_mutex_t lock;
};

/* xorshift64*: the next of the sequence at *s. */
static uint64_t next_random(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1du;
}

/* Quantizes row r of j in runs: cut after each block with probability 1/4, the runs
 * quantized in a shuffled order. Returns the first failure, else 0. */
static int quantize_parts(const struct job *j, int64_t r)
{
	const int64_t be = j->t->block_elems, nb = j->row / be;
	const float *x = j->x + r * j->row;
	uint8_t *y = j->y + r * (nb * j->t->block_bytes);
	uint64_t s = (j->seed + 1) * 0x9e3779b97f4a7c15u + (uint64_t)r;
	struct quant_row_ctx ctx;
	int64_t *start = malloc((size_t)(nb + 1) * sizeof *start);
	int64_t runs = 0;
	int rc = -ENOMEM;

	if (!start)
		return rc;
	/* the row's values go to prepare only where they are needed */
	rc = quant_row_prepare(j->type, quant_row_needs_values(j->type, j->w != NULL) ? x : NULL,
	                       j->row, j->w, &ctx);
	for (int64_t b = 0; rc == 0 && b < nb; b++)
		if (b == 0 || next_random(&s) % 4 == 0)
			start[runs++] = b;
	start[runs] = nb;
	for (int64_t k = runs - 1; rc == 0 && k > 0; k--) {   /* shuffle the run order */
		int64_t m = (int64_t)(next_random(&s) % (uint64_t)(k + 1));
		int64_t a = start[k];
		start[k] = start[m];
		start[m] = a;
	}
	/* runs are [start[k], the next start above it): sorted copy gives the ends */
	for (int64_t k = 0; rc == 0 && k < runs; k++) {
		int64_t b0 = start[k], b1 = nb;
		for (int64_t m = 0; m < runs; m++)
			if (start[m] > b0 && start[m] < b1)
				b1 = start[m];
		rc = quant_blocks_weighted(j->type, x + b0 * be, y + b0 * j->t->block_bytes,
		                           (b1 - b0) * be, j->w ? j->w + b0 * be : NULL, &ctx);
	}
	free(start);
	return rc;
}

/* A thread's share: rows k, k + nthreads, ... of the job. */
struct share {
	struct job *j;
	int k;
};

static void *run_share(void *arg)
{
	struct share *s = arg;
	struct job *j = s->j;
	const int64_t row_bytes = j->row / j->t->block_elems * j->t->block_bytes;

	for (int64_t r = s->k; r < j->nrows; r += j->nthreads) {
		int rc = j->parts ? quantize_parts(j, r)
		                  : quant_row_weighted(j->type, j->x + r * j->row,
		                                       j->y + r * row_bytes, j->row, j->w);
		if (rc != 0) {
			pthread_mutex_lock(&j->lock);
			if (!j->failed)
				j->failed = rc;
			pthread_mutex_unlock(&j->lock);
			break;
		}
	}
	return NULL;
}

/* The --weights mode: argv from the first option. */
static int weighted_main(int argc, char **argv)
{
	const char *wfile = NULL, *in = NULL, *name = NULL;
	int64_t row = 0;
	struct job j = { .nthreads = 1, .lock = PTHREAD_MUTEX_INITIALIZER };

	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--weights") == 0 && a + 1 < argc)
			wfile = argv[++a];
		else if (strcmp(argv[a], "--row") == 0 && a + 1 < argc)
			row = strtoll(argv[++a], NULL, 10);
		else if (strcmp(argv[a], "--parts") == 0 && a + 1 < argc)
			j.parts = true, j.seed = strtoull(argv[++a], NULL, 10);
		else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
			j.nthreads = atoi(argv[++a]);
		else if (!name)
			name = argv[a];
		else if (!in)
			in = argv[a];
		else
			name = NULL, a = argc;
	}
	int type = name ? type_by_name(name) : -1;
	if (!wfile || row <= 0 || type < 0 || j.nthreads < 1 || j.nthreads > MAX_THREADS) {
		fprintf(stderr, "usage: quant_row --weights WFILE --row N [--parts SEED] "
		        "[--threads T] TYPE [FILE]\n");
		return 2;
	}
	j.type = (enum ggml_type_id)type;
	j.t = ggml_type_get((uint32_t)type);
	int64_t n = 0, nw = 0;
	float *x = read_floats(in, &n), *w = NULL;
	if (!x)
		return 2;
	if (strcmp(wfile, "none") != 0 && !(w = read_floats(wfile, &nw))) {
		free(x);
		return 2;
	}
	int rc = 2;
	if (n % row != 0 || (w && nw != row) || row % j.t->block_elems != 0) {
		fprintf(stderr, "quant_row: %lld values, %lld weights: not rows of %lld\n",
		        (long long)n, (long long)nw, (long long)row);
		goto out;
	}
	j.x = x;
	j.w = w;
	j.row = row;
	j.nrows = n / row;
	size_t out_len = (size_t)(n / j.t->block_elems) * j.t->block_bytes;
	j.y = malloc(out_len ? out_len : 1);
	if (!j.y)
		goto out;
	pthread_t tid[MAX_THREADS];
	struct share sh[MAX_THREADS];
	int started = 0;
	for (int k = 0; k < j.nthreads; k++) {
		sh[k] = (struct share){ .j = &j, .k = k };
		if (pthread_create(&tid[k], NULL, run_share, &sh[k]) != 0)
			break;
		started++;
	}
	for (int k = 0; k < started; k++)
		pthread_join(tid[k], NULL);
	if (started < j.nthreads)
		fprintf(stderr, "quant_row: cannot start %d threads\n", j.nthreads);
	else if (j.failed)
		fprintf(stderr, "quant_row: %s refused: %s\n", name, strerror(-j.failed));
	else
		rc = put_bytes(j.y, out_len);
	free(j.y);
out:
	free(x);
	free(w);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--list") == 0)
		return list_types(false);
	if (argc == 2 && strcmp(argv[1], "--weighted-list") == 0)
		return list_types(true);
	if (argc > 1 && strncmp(argv[1], "--", 2) == 0)
		return weighted_main(argc, argv);
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: quant_row TYPE [FILE]\n");
		return 2;
	}
	int type = type_by_name(argv[1]);
	if (type < 0 || !quant_can_make((enum ggml_type_id)type)) {
		fprintf(stderr, "quant_row: %s: not a type lib/2-quant makes\n", argv[1]);
		return 2;
	}
	int64_t n = 0;
	float *x = read_floats(argc == 3 ? argv[2] : NULL, &n);
	if (!x)
		return 2;
	const struct ggml_type *t = ggml_type_get((uint32_t)type);
	size_t out_len = (size_t)(n / t->block_elems) * t->block_bytes;
	void *y = malloc(out_len ? out_len : 1);
	int rc = 2;
	if (y) {
		if (quant_row((enum ggml_type_id)type, x, y, n) != 0)
			fprintf(stderr, "quant_row: %lld values are not whole %s blocks\n",
			        (long long)n, argv[1]);
		else
			rc = put_bytes(y, out_len);
	}
	free(x);
	free(y);
	return rc;
}
