/* What weighted reads of a tensor keep between them (quant_read.h's quant_prep: every
 * expert's weights once, each row's sum for q4_0..q5_1 once): reads through a prep, the
 * first ones making what it keeps and the later ones using it, give the bytes of
 * reader_quant_weighted, which makes everything per read; four threads reading one prep
 * at once too (in the TSan list); a row with a NaN keeps nothing and its reads refuse
 * every time. The matrix is a legacy .dat made here: one entry of 2 experts. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "guard.h"
#include "imatrix_file.h"
#include "model.h"
#include "quant.h"
#include "quant_read.h"
#include "test_data.h"
#include "types.h"

/* Tensor "x": f32, rows of 768 (three 256-blocks), 3 rows per expert, 2 experts; row 4
 * of "nan" holds a NaN. */
#define NE0 768
#define NE1 3
#define NE2 2
#define N_VALUES (NE0 * NE1 * NE2)

struct fixture {
	char path[64];
	uint8_t *img;
	size_t len;
	struct ggufs_model *m;
	uint8_t *mx;         /* the matrix file's bytes */
	struct imatrix im;
};

static uint64_t rng = 0x9e3779b97f4a7c15u;

static float next_value(void)
{
	const uint64_t r = xorshift64(&rng);
	return (float)((int64_t)(r >> 11) - (INT64_C(1) << 52)) / (float)(INT64_C(1) << 52);
}

/* A legacy matrix of entries "x" and "nan" (NE0 x NE2 sums each, ncall 3). */
static uint8_t *legacy_matrix(size_t *len)
{
	struct gw w;
	gw_init(&w);
	gw_u32(&w, 2);
	const char *names[2] = { "x", "nan" };
	for (int e = 0; e < 2; e++) {
		gw_u32(&w, (uint32_t)strlen(names[e]));
		gw_raw(&w, names[e], strlen(names[e]));
		gw_u32(&w, 3);
		gw_u32(&w, NE0 * NE2);
		for (int v = 0; v < NE0 * NE2; v++)
			gw_f32(&w, 1.0f + 50.0f * fabsf(next_value()) * (v % 7 == 0 ? 20.0f : 1.0f));
	}
	return gw_take(&w, len);
}

static int setup(void **state)
{
	guard_install();
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	struct gw w, data;
	gw_init(&data);
	for (int k = 0; k < 2; k++)
		for (int e = 0; e < N_VALUES; e++)
			gw_f32(&data, k == 1 && e == 4 * NE0 + 100 ? NAN : next_value());
	gw_init(&w);
	gw_header(&w, 3, 2, 1);
	gw_kv_str(&w, "general.architecture", "quant_prep");
	const uint64_t ne[3] = { NE0, NE1, NE2 };
	gw_tensor(&w, "x", 3, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "nan", 3, ne, GGML_TYPE_F32, N_VALUES * 4);
	gw_align(&w, 32);
	gw_raw(&w, data.buf, data.len);
	gw_free(&data);
	strcpy(f->path, "/tmp/ggufs-quant-prep-XXXXXX");
	char err[GGUF_ERR_MAX];
	if (!(f->m = gw_open_temp(&w, f->path, &f->img, &f->len, err)))
		fail_msg("%s", err);
	size_t mlen;
	f->mx = legacy_matrix(&mlen);
	if (imatrix_parse(f->mx, mlen, &f->im, err) < 0)
		fail_msg("%s", err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	imatrix_free(&f->im);
	free(f->mx);
	model_close(f->m);
	unlink(f->path);
	free(f->img);
	free(f);
	return 0;
}

static const uint32_t types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                  GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_IQ4_NL };

/* Ranges [off, off + len) of a tensor of size bytes as type to: around block and row
 * boundaries, part rows, across experts. */
static void range_of(uint32_t to, uint64_t size, int k, uint64_t *off, uint64_t *len)
{
	const uint64_t bb = ggml_type_get(to)->block_bytes;
	const uint64_t row = size / (NE1 * NE2);
	const uint64_t offs[] = { 0, bb + 1, row - 3, row, 2 * row + bb, 3 * row - 1, 4 * row + 7,
	                          size - bb };
	const uint64_t lens[] = { 1, bb, 2 * bb + 1, row, 5, 2 * row + 3, row / 2, bb };
	*off = offs[k % 8];
	*len = lens[(k / 8) % 8];
	if (*len > size - *off)
		*len = size - *off;
}

static void test_prepared_equal_weighted(void **state)
{
	struct fixture *f = *state;
	const struct imatrix_entry *w = imatrix_find(&f->im, "x", 1);
	assert_non_null(w);
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		if (!quant_can_make_weighted(types[t]))
			continue;
		struct quant_prep *p;
		assert_int_equal(reader_quant_prep_new(f->m, 0, &f->im, w, &p), 0);
		const uint64_t size = reader_quant_size(f->m, 0, types[t]);
		uint8_t *want = malloc(size), *got = malloc(size);
		assert_non_null(want);
		assert_non_null(got);
		assert_int_equal(reader_quant_weighted(f->m, 0, types[t], &f->im, w, 0, size, want,
		                                       NULL), 0);
		/* twice: the first reads make what p keeps, the second use it */
		for (int pass = 0; pass < 2; pass++)
			for (int k = 0; k < 64; k++) {
				uint64_t off, len;
				range_of(types[t], size, k, &off, &len);
				assert_int_equal(reader_quant_prepared(p, types[t], off, len, got, NULL), 0);
				assert_memory_equal(got, want + off, len);
			}
		assert_true(reader_quant_prep_bytes(p) >= NE0 * NE2 * sizeof(float));
		free(want);
		free(got);
		reader_quant_prep_free(p);
	}
	/* an entry of another size than ne0 x ne2 is refused */
	struct quant_prep *p;
	assert_int_equal(reader_quant_prep_new(f->m, 0, &f->im, NULL, &p), -EINVAL);
	assert_null(p);
}

/* A row with a NaN keeps nothing: every read of it refuses, before and after the rows
 * around it were kept. */
static void test_nan_row_refuses(void **state)
{
	struct fixture *f = *state;
	const struct imatrix_entry *w = imatrix_find(&f->im, "nan", 3);
	assert_non_null(w);
	struct quant_prep *p;
	assert_int_equal(reader_quant_prep_new(f->m, 1, &f->im, w, &p), 0);
	const uint64_t size = reader_quant_size(f->m, 1, GGML_TYPE_Q4_0);
	const uint64_t row = size / (NE1 * NE2);
	uint8_t buf[64];
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(reader_quant_prepared(p, GGML_TYPE_Q4_0, 3 * row, 18, buf, NULL), 0);
		assert_int_equal(reader_quant_prepared(p, GGML_TYPE_Q4_0, 4 * row + row - 18, 18, buf,
		                                       NULL), -EIO);
		assert_int_equal(reader_quant_prepared(p, GGML_TYPE_Q4_0, 5 * row, 18, buf, NULL), 0);
	}
	reader_quant_prep_free(p);
}

struct reader_arg {
	struct fixture *f;
	struct quant_prep *p;
	uint32_t to;
	const uint8_t *want;
	uint64_t size;
	int seed;
	int bad;
};

static void *reader_thread(void *arg)
{
	struct reader_arg *a = arg;
	uint8_t *got = malloc(a->size);
	for (int k = 0; got && k < 64; k++) {
		uint64_t off, len;
		range_of(a->to, a->size, k * 5 + a->seed, &off, &len);
		if (reader_quant_prepared(a->p, a->to, off, len, got, NULL) != 0 ||
		    memcmp(got, a->want + off, len) != 0)
			a->bad++;
	}
	free(got);
	return NULL;
}

/* Four threads read one prep at once, each making rows' sums the others use. */
static void test_threads_share_one_prep(void **state)
{
	struct fixture *f = *state;
	const struct imatrix_entry *w = imatrix_find(&f->im, "x", 1);
	const uint32_t tos[] = { GGML_TYPE_Q4_1, GGML_TYPE_Q5_0 };
	for (size_t t = 0; t < 2; t++) {
		if (!quant_can_make_weighted(tos[t]))
			continue;
		struct quant_prep *p;
		assert_int_equal(reader_quant_prep_new(f->m, 0, &f->im, w, &p), 0);
		const uint64_t size = reader_quant_size(f->m, 0, tos[t]);
		uint8_t *want = malloc(size);
		assert_non_null(want);
		assert_int_equal(reader_quant_weighted(f->m, 0, tos[t], &f->im, w, 0, size, want,
		                                       NULL), 0);
		pthread_t th[4];
		struct reader_arg args[4];
		for (int i = 0; i < 4; i++) {
			args[i] = (struct reader_arg){ f, p, tos[t], want, size, i, 0 };
			assert_int_equal(pthread_create(&th[i], NULL, reader_thread, &args[i]), 0);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(args[i].bad, 0);
		}
		free(want);
		reader_quant_prep_free(p);
	}
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_prepared_equal_weighted),
	cmocka_unit_test(test_nan_row_refuses),
	cmocka_unit_test(test_threads_share_one_prep))
