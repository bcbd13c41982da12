/* An importance matrix file as llama-quantize reads it (lib/1-format/imatrix_file.h),
 * without llama.cpp: each form's weights (GGUF: per expert, by the rounded count, 1 where
 * the count is below 1, 0 past the experts; legacy: by ncall when positive), the chunk
 * count and dataset, each name once (the last), lookups, and the refusals, each one
 * line. tests/llama/test_imatrix_file.py checks the same against llama-quantize's own
 * reading, on crafted files and llama-imatrix's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "imatrix_file.h"

static void legacy_entry(struct gw *w, const char *name, int32_t ncall, int32_t n,
                         const float *sums)
{
	gw_u32(w, (uint32_t)strlen(name));
	gw_raw(w, name, strlen(name));
	gw_u32(w, (uint32_t)ncall);
	gw_u32(w, (uint32_t)n);
	for (int32_t i = 0; i < n; i++)
		gw_f32(w, sums[i]);
}

static const float SUMS[8] = { 2, 4, 6, 8, 10, 12, 14, 16 };

static void test_legacy(void **state)
{
	(void)state;
	struct gw w;
	gw_init(&w);
	gw_u32(&w, 3);
	legacy_entry(&w, "w", 4, 8, SUMS);
	legacy_entry(&w, "a", 0, 2, SUMS);
	legacy_entry(&w, "w", -1, 3, SUMS + 1);   /* the last of a name is its entry */
	gw_u32(&w, 7);                            /* chunk count, then the dataset */
	gw_u32(&w, 4);
	gw_raw(&w, "ca\0t", 4);
	struct imatrix im;
	char err[GGUF_ERR_MAX];
	assert_int_equal(imatrix_parse(w.buf, w.len, &im, err), 0);
	assert_true(im.legacy);
	assert_int_equal(im.n_entries, 2);
	assert_int_equal(im.chunk_count, 7);
	assert_true(im.has_dataset);
	assert_int_equal(im.dataset.len, 2);      /* cut at its NUL */
	const struct imatrix_entry *e = imatrix_find(&im, "w", 1);
	assert_non_null(e);
	assert_int_equal(e->n_values, 3);
	float v[8];
	imatrix_values(&im, e, v);                /* ncall -1: the sums as they are */
	assert_true(v[0] == 4 && v[1] == 6 && v[2] == 8);
	e = imatrix_find(&im, "a", 1);
	assert_non_null(e);
	imatrix_values(&im, e, v);
	assert_true(v[0] == 2 && v[1] == 4);
	assert_null(imatrix_find(&im, "b", 1));
	assert_ptr_equal(&im.entries[0], imatrix_find(&im, "a", 1));   /* sorted */
	imatrix_free(&im);

	/* ncall 4 divides; a tail of fewer than 4 bytes is a chunk count of those bytes */
	gw_free(&w);
	gw_init(&w);
	gw_u32(&w, 1);
	legacy_entry(&w, "x", 4, 8, SUMS);
	gw_u8(&w, 5);
	gw_u8(&w, 1);
	assert_int_equal(imatrix_parse(w.buf, w.len, &im, err), 0);
	assert_int_equal(im.chunk_count, 0x105);
	assert_false(im.has_dataset);
	imatrix_values(&im, &im.entries[0], v);
	for (int i = 0; i < 8; i++)
		assert_true(v[i] == SUMS[i] / 4);
	imatrix_free(&im);
	gw_free(&w);
}

/* A GGUF matrix of one weight "w": sums [ne0, n_counts] (or n_sums values in one
 * dimension when not a multiple), counts, with the keys unless leave_out names one. */
static void gguf_matrix(struct gw *w, const float *sums, uint64_t n_sums, const float *counts,
                        uint64_t n_counts, const char *leave_out, uint32_t counts_type)
{
	const char *keys[] = { "imatrix.chunk_count", "imatrix.chunk_size" };
	uint64_t n_kv = 1 + 2 - (leave_out != NULL);
	gw_init(w);
	gw_header(w, 3, 2, n_kv);
	gw_key(w, "imatrix.datasets", GGUF_TYPE_ARRAY);
	gw_array(w, GGUF_TYPE_STRING, 1);
	gw_str(w, "calib");
	for (int k = 0; k < 2; k++)
		if (!leave_out || strcmp(leave_out, keys[k]) != 0)
			gw_kv_u32(w, keys[k], 11);
	uint64_t sums_bytes = (n_sums * 4 + 31) / 32 * 32;
	gw_tensor(w, "w.in_sum2", 1, &n_sums, GGML_TYPE_F32, 0);
	gw_tensor(w, "w.counts", 1, &n_counts, counts_type, sums_bytes);
	gw_align(w, 32);
	for (uint64_t i = 0; i < n_sums; i++)
		gw_f32(w, sums[i]);
	gw_align(w, 32);
	for (uint64_t i = 0; i < n_counts; i++)
		gw_f32(w, counts[i]);
}

static void test_gguf(void **state)
{
	(void)state;
	/* 4 experts of 2 values; counts 0.4 (below 1), 2.5 (3), NaN, 4; 1 value past them */
	const float sums[9] = { 3, 6, 9, 12, 15, 18, 21, 24, 27 };
	const float counts[4] = { 0.4f, 2.5f, NAN, 4 };
	struct gw w;
	gguf_matrix(&w, sums, 9, counts, 4, NULL, GGML_TYPE_F32);
	struct imatrix im;
	char err[GGUF_ERR_MAX];
	assert_int_equal(imatrix_parse(w.buf, w.len, &im, err), 0);
	assert_false(im.legacy);
	assert_int_equal(im.chunk_count, 11);
	assert_true(im.has_dataset && im.dataset.len == 5);
	assert_int_equal(im.n_entries, 1);
	const struct imatrix_entry *e = imatrix_find(&im, "w", 1);
	assert_non_null(e);
	float v[9];
	imatrix_values(&im, e, v);
	const float want[9] = { 1, 1, 3, 4, 1, 1, 21.0f / 4, 6, 0 };
	for (int i = 0; i < 9; i++)
		assert_true(v[i] == want[i]);
	float bad;
	assert_true(imatrix_entry_finite(&im, e, &bad));
	imatrix_free(&im);
	gw_free(&w);

	const float inf_sums[2] = { 1, INFINITY };
	const float one = 1;
	gguf_matrix(&w, inf_sums, 2, &one, 1, NULL, GGML_TYPE_F32);
	assert_int_equal(imatrix_parse(w.buf, w.len, &im, err), 0);
	assert_false(imatrix_entry_finite(&im, &im.entries[0], &bad));
	assert_true(isinf(bad));
	imatrix_free(&im);
	gw_free(&w);
}

static void refused(const uint8_t *img, size_t n, const char *phrase)
{
	struct imatrix im;
	char err[GGUF_ERR_MAX] = "";
	assert_int_equal(imatrix_parse(img, n, &im, err), -1);
	if (!strstr(err, phrase))
		fail_msg("\"%s\" does not say \"%s\"", err, phrase);
	assert_null(strchr(err, '\n'));
	assert_null(im.entries);
}

static void test_refusals(void **state)
{
	(void)state;
	struct gw w;
	const float one = 1, zero_counts[1] = { 0 };
	gguf_matrix(&w, SUMS, 8, &one, 1, "imatrix.chunk_size", GGML_TYPE_F32);
	refused(w.buf, w.len, "lacks its metadata");
	gw_free(&w);
	gguf_matrix(&w, SUMS, 8, &one, 1, NULL, GGML_TYPE_F16);
	refused(w.buf, w.len, "must be F32");
	gw_free(&w);
	gguf_matrix(&w, SUMS, 8, zero_counts, 0, NULL, GGML_TYPE_F32);
	refused(w.buf, w.len, "hold no values");
	gw_free(&w);

	refused((const uint8_t *)"", 0, "no entries");
	gw_init(&w);
	gw_u32(&w, 0x7fffffff);
	legacy_entry(&w, "w", 1, 8, SUMS);
	refused(w.buf, w.len, "more than its");
	gw_free(&w);
	gw_init(&w);
	gw_u32(&w, 1);
	legacy_entry(&w, "w", 1, 8, SUMS);
	refused(w.buf, w.len - 1, "the file ends before them");
	gw_put_u32(&w, 4, 0xffffffffu);           /* a negative name length */
	refused(w.buf, w.len, "negative length");
	gw_free(&w);
}

UNIT_TESTS(
	cmocka_unit_test(test_legacy),
	cmocka_unit_test(test_gguf),
	cmocka_unit_test(test_refusals),
)
