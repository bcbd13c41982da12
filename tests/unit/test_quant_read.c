/* A tensor read as another type would store it (lib/3-reader/quant_read.h), against
 * the whole tensor quantized at once by quant_row: every range at, around and across
 * block boundaries, into misaligned buffers too; the tensor's own type is its stored
 * bytes; sizes; ranges and types refused; a model file that shrinks gives -EIO and no
 * block made from bytes that were not read. */
#include <errno.h>
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
#include "model.h"
#include "quant.h"
#include "quant_read.h"
#include "reader.h"
#include "test_data.h"
#include "types.h"

/* Tensor 0: f32, 3 rows of 512 (whole blocks of every type); tensor 1: f16, 2 rows of
 * 256; tensor 2: f32, 2 rows of 100 (no whole block of 32 or 256 in a row). */
static const struct {
	const char *name;
	uint32_t type;
	uint64_t ne[2];
} tensors[] = {
	{ "w", GGML_TYPE_F32, { 512, 3 } },
	{ "h", GGML_TYPE_F16, { 256, 2 } },
	{ "odd", GGML_TYPE_F32, { 100, 2 } },
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

struct fixture {
	char path[64];
	uint8_t *img;
	size_t len;
	struct ggufs_model *m;
};

static uint64_t rng = 0x2545f4914f6cdd1du;

/* A value of a spread that exercises scales: mostly small, now and then large. */
static float next_value(void)
{
	const uint64_t r = xorshift64(&rng);
	const float v = (float)((int64_t)(r >> 11) - (INT64_C(1) << 52)) / (float)(INT64_C(1) << 52);
	return (r & 0xff) == 7 ? 40.0f * v : v;
}

static int setup(void **state)
{
	guard_install();   /* the SIGBUS guard of mapped reads, before any read */
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	struct gw w, data;
	uint64_t at[N_TENSORS];
	gw_init(&data);
	for (int k = 0; k < N_TENSORS; k++) {
		at[k] = data.len;
		for (uint64_t e = 0; e < tensors[k].ne[0] * tensors[k].ne[1]; e++) {
			const float v = next_value();
			if (tensors[k].type == GGML_TYPE_F16) {
				_Float16 h = (_Float16)v;
				gw_raw(&data, &h, 2);
			} else {
				gw_f32(&data, v);
			}
		}
		gw_fill(&data, 0, (32 - data.len % 32) % 32);
	}
	gw_init(&w);
	gw_header(&w, 3, N_TENSORS, 1);
	gw_kv_str(&w, "general.architecture", "quant_read");
	for (int k = 0; k < N_TENSORS; k++)
		gw_tensor(&w, tensors[k].name, 2, tensors[k].ne, tensors[k].type, at[k]);
	gw_align(&w, 32);
	gw_raw(&w, data.buf, data.len);
	gw_free(&data);
	strcpy(f->path, "/tmp/ggufs-quant-read-XXXXXX");
	char err[GGUF_ERR_MAX];
	if (!(f->m = gw_open_temp(&w, f->path, &f->img, &f->len, err)))
		fail_msg("%s", err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	model_close(f->m);
	unlink(f->path);
	free(f->img);
	free(f);
	return 0;
}

/* Tensor i as type to, made whole: its values read whole and quantized at once. */
static uint8_t *whole(const struct fixture *f, uint64_t i, uint32_t to, uint64_t *size)
{
	const struct gguf_tensor *g = model_tensor(f->m, i);
	*size = reader_quant_size(f->m, i, to);
	assert_true(*size > 0);
	float *v = malloc(g->n_elements * sizeof *v);
	uint8_t *out = malloc(*size);
	assert_non_null(v);
	assert_non_null(out);
	assert_int_equal(reader_f32(f->m, i, 0, g->n_elements * sizeof *v, v, NULL), 0);
	assert_int_equal(quant_row(to, v, out, (int64_t)g->n_elements), 0);
	free(v);
	return out;
}

/* Every range around block boundaries, of lengths around a block and across the
 * 64-block steps of a read, into an aligned and a misaligned buffer. */
static void check_type(const struct fixture *f, uint64_t i, uint32_t to)
{
	uint64_t size;
	uint8_t *want = whole(f, i, to, &size);
	const uint64_t bb = ggml_type_get(to)->block_bytes;
	const uint64_t offs[] = { 0, 1, bb - 1, bb, bb + 1, 3 * bb - 2, size / 2 + 3,
	                          size - bb - 1, size - bb, size - 1 };
	const uint64_t lens[] = { 1, 3, bb - 1, bb, bb + 1, 2 * bb - 1, 65 * bb + 2, size };
	uint8_t *buf = malloc(size + 1);
	assert_non_null(buf);
	for (size_t a = 0; a < sizeof offs / sizeof offs[0]; a++) {
		if (offs[a] >= size)   /* a tensor of few blocks */
			continue;
		for (size_t b = 0; b < sizeof lens / sizeof lens[0]; b++) {
			const uint64_t off = offs[a];
			const uint64_t len = lens[b] < size - off ? lens[b] : size - off;
			for (int shift = 0; shift < 2; shift++) {
				memset(buf, 0x55, size + 1);
				assert_int_equal(reader_quant(f->m, i, to, off, len, buf + shift, NULL), 0);
				assert_memory_equal(buf + shift, want + off, len);
			}
		}
	}
	free(buf);
	free(want);
}

static void test_ranges(void **state)
{
	struct fixture *f = *state;
	const uint32_t types[] = { GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_F16,
	                           GGML_TYPE_BF16, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, GGML_TYPE_Q2_K };
	int made = 0;
	for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
		if (!quant_can_make(types[k]))
			continue;   /* a quantizer not written yet */
		made++;
		check_type(f, 0, types[k]);
		if (types[k] != GGML_TYPE_F16)
			check_type(f, 1, types[k]);
	}
	assert_true(made >= 4);
}

/* The tensor's own type: its stored bytes, as llama.cpp copies a tensor it keeps. */
static void test_own_type_is_stored_bytes(void **state)
{
	struct fixture *f = *state;
	for (uint64_t i = 0; i < N_TENSORS; i++) {
		const struct gguf_tensor *g = model_tensor(f->m, i);
		assert_int_equal(reader_quant_size(f->m, i, g->type), g->size);
		uint8_t *buf = malloc(g->size);
		assert_non_null(buf);
		assert_int_equal(reader_quant(f->m, i, g->type, 3, g->size - 3, buf, NULL), 0);
		assert_memory_equal(buf, f->img + g->offset + 3, g->size - 3);
		free(buf);
	}
}

/* Sizes from the types alone; what cannot be made is refused, nothing written. */
static void test_sizes_and_refusals(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(reader_quant_size(f->m, 0, GGML_TYPE_Q8_0), 512 * 3 / 32 * 34);
	assert_int_equal(reader_quant_size(f->m, 0, GGML_TYPE_Q6_K), 512 * 3 / 256 * 210);
	assert_int_equal(reader_quant_size(f->m, 1, GGML_TYPE_F32), 256 * 2 * 4);
	/* rows of 100: no whole block of 32 or 256 */
	assert_int_equal(reader_quant_size(f->m, 2, GGML_TYPE_Q8_0), 0);
	assert_int_equal(reader_quant_size(f->m, 2, GGML_TYPE_Q6_K), 0);
	assert_int_equal(reader_quant_size(f->m, 0, GGML_TYPE_COUNT + 5), 0);
	uint8_t buf[64];
	memset(buf, 0x55, sizeof buf);
	assert_int_equal(reader_quant(f->m, 2, GGML_TYPE_Q8_0, 0, 1, buf, NULL), -EINVAL);
	const uint64_t size = reader_quant_size(f->m, 0, GGML_TYPE_Q8_0);
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, size - 1, 2, buf, NULL), -EINVAL);
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, size + 1, 0, buf, NULL), -EINVAL);
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, UINT64_MAX, 2, buf, NULL), -EINVAL);
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, size, 0, buf, NULL), 0);
	for (size_t k = 0; k < sizeof buf; k++)
		assert_int_equal(buf[k], 0x55);
}

/* The file shrinks under the model: a read of the bytes that went is -EIO (the SIGBUS
 * guard), never blocks made of zeros. */
static void test_shrunk_file(void **state)
{
	struct fixture *f = *state;
	guard_install();   /* cmocka puts its own SIGBUS handler in for every test */
	const struct gguf_tensor *g = model_tensor(f->m, 0);
	assert_int_equal(truncate(f->path, (off_t)(g->offset + g->size / 2)), 0);
	const uint64_t size = reader_quant_size(f->m, 0, GGML_TYPE_Q8_0);
	uint8_t *buf = malloc(size);
	assert_non_null(buf);
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, 0, size, buf, NULL), -EIO);
	/* the first half still reads */
	assert_int_equal(reader_quant(f->m, 0, GGML_TYPE_Q8_0, 0, 34, buf, NULL), 0);
	free(buf);
	FILE *fp = fopen(f->path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fwrite(f->img, 1, f->len, fp), f->len);
	assert_int_equal(fclose(fp), 0);
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_ranges),
	cmocka_unit_test(test_own_type_is_stored_bytes),
	cmocka_unit_test(test_sizes_and_refusals),
	cmocka_unit_test(test_shrunk_file))
