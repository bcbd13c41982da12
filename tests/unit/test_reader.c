/* The tensor reader (lib/3-reader/reader.h) on its own, without the tree: raw and
 * float32 ranges of a tensor at and around block boundaries against a whole-tensor
 * dequantization, ranges that reach the end, a model file that shrinks (before a read,
 * and during one: the SIGBUS guard), and byte sources that are not mapped (read slice
 * by slice) or fail. */
#include <errno.h>
#include <inttypes.h>
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

#include "dequant.h"
#include "gguf_writer.h"
#include "guard.h"
#include "model.h"
#include "model_source.h"
#include "reader.h"
#include "test_data.h"
#include "types.h"

/* Tensor 0: q8_0, 8192 blocks (278528 bytes, more than a slice of a fetched read);
 * tensor 1: q4_K, 16 blocks; tensor 2: f32, 1000 values. Random block bytes. */
static const struct {
	const char *name;
	uint32_t type;
	uint64_t ne;
} tensors[] = {
	{ "q8", GGML_TYPE_Q8_0, 32 * 8192 },
	{ "q4k", GGML_TYPE_Q4_K, 256 * 16 },
	{ "f", GGML_TYPE_F32, 1000 },
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

struct fixture {
	char path[64];
	uint8_t *img;             /* the file as written */
	size_t len;
	struct ggufs_model *m;
	float *values[N_TENSORS]; /* each tensor dequantized whole, the expected .f32 */
};

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint8_t next_byte(void)
{
	return (uint8_t)(xorshift64(&rng) >> 24);
}

/* The stored bytes of tensor i in the file as written. */
static const uint8_t *stored(const struct fixture *f, uint64_t i)
{
	const struct gguf_tensor *g = model_tensor(f->m, i);
	return f->img + g->offset;
}

/* gw_flat_tensor_fn: tensor k of the table, its blocks random bytes. */
static void random_tensor(void *ctx, int k, const char **name, uint32_t *type, uint64_t *n,
                          struct gw *data)
{
	(void)ctx;
	const struct ggml_type *ty = ggml_type_get(tensors[k].type);
	*name = tensors[k].name;
	*type = tensors[k].type;
	*n = tensors[k].ne;
	for (uint64_t b = 0; b < tensors[k].ne / ty->block_elems * ty->block_bytes; b++)
		gw_u8(data, next_byte());
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	struct gw w;
	gw_init(&w);
	gw_flat_model(&w, N_TENSORS, random_tensor, NULL);
	strcpy(f->path, "/tmp/ggufs-reader-XXXXXX");
	char err[GGUF_ERR_MAX];
	if (!(f->m = gw_open_temp(&w, f->path, &f->img, &f->len, err)))
		fail_msg("%s", err);
	for (uint64_t i = 0; i < N_TENSORS; i++) {
		const struct gguf_tensor *g = model_tensor(f->m, i);
		f->values[i] = malloc(g->n_elements * sizeof(float));
		assert_non_null(f->values[i]);
		dequant_get(g->type)->to_float(stored(f, i), f->values[i],
		                               g->n_elements / g->ti->block_elems);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	model_close(f->m);
	unlink(f->path);
	for (int i = 0; i < N_TENSORS; i++)
		free(f->values[i]);
	free(f->img);
	free(f);
	return 0;
}

/* Writes the file back whole, as it was before a test cut it. */
static void restore(const struct fixture *f)
{
	FILE *fp = fopen(f->path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fwrite(f->img, 1, f->len, fp), f->len);
	assert_int_equal(fclose(fp), 0);
}

/* Checks reader_f32 and reader_raw of tensor i on ranges starting at, just before and
 * just after block boundaries, of lengths around a block, into an aligned buffer and a
 * misaligned one (the bounce path), against the whole tensor. */
static void check_ranges(const struct fixture *f, uint64_t i)
{
	const struct gguf_tensor *g = model_tensor(f->m, i);
	const uint64_t bo = (uint64_t)g->ti->block_elems * sizeof(float);
	const uint64_t f32_size = g->n_elements * sizeof(float), bb = g->ti->block_bytes;
	const uint64_t offs[] = { 0, 1, bo - 1, bo, bo + 1, 3 * bo - 2, f32_size / 2 + 3,
	                          f32_size - bo - 1, f32_size - bo, f32_size - 1 };
	const uint64_t lens[] = { 1, 3, bo - 1, bo, bo + 1, 2 * bo - 1, 5 * bo + 2, f32_size };
	char *buf = malloc(f32_size + 1);
	assert_non_null(buf);
	for (size_t a = 0; a < sizeof offs / sizeof offs[0]; a++) {
		for (size_t b = 0; b < sizeof lens / sizeof lens[0]; b++) {
			const uint64_t off = offs[a];
			const uint64_t len = lens[b] < f32_size - off ? lens[b] : f32_size - off;
			for (int shift = 0; shift < 2; shift++) {
				memset(buf, 0x55, f32_size + 1);
				assert_int_equal(reader_f32(f->m, i, off, len, buf + shift, NULL), 0);
				assert_memory_equal(buf + shift, (const char *)f->values[i] + off, len);
			}
			/* the same positions in the stored bytes, by block */
			const uint64_t roff = off / bo * bb + off % bb;
			const uint64_t rlen = len < g->size - roff ? len : g->size - roff;
			assert_int_equal(reader_raw(f->m, i, roff, rlen, buf, NULL), 0);
			assert_memory_equal(buf, stored(f, i) + roff, rlen);
		}
	}
	free(buf);
}

static void test_block_boundaries(void **state)
{
	struct fixture *f = *state;
	for (uint64_t i = 0; i < N_TENSORS; i++)
		check_ranges(f, i);
}

/* A visit that counts its calls and checks the bytes it is given against ctx's. */
struct expect {
	const uint8_t *want;
	uint64_t len;
	int calls;
};

static void visit_expect(void *ctx, const uint8_t *p, uint64_t len)
{
	struct expect *e = ctx;
	e->calls++;
	assert_int_equal(len, e->len);
	assert_memory_equal(p, e->want, len);
}

/* Ranges that end exactly at the end are whole; ranges past it are refused by the
 * visit (-EINVAL, fn never called) and clipped by the span. */
static void test_past_the_end(void **state)
{
	struct fixture *f = *state;
	const uint64_t i = 1;
	const struct gguf_tensor *g = model_tensor(f->m, i);
	const uint64_t f32_size = g->n_elements * sizeof(float);
	char buf[64];
	assert_int_equal(reader_f32(f->m, i, f32_size - 5, 5, buf, NULL), 0);
	assert_memory_equal(buf, (const char *)f->values[i] + f32_size - 5, 5);
	assert_int_equal(reader_raw(f->m, i, g->size - 7, 7, buf, NULL), 0);
	assert_memory_equal(buf, stored(f, i) + g->size - 7, 7);
	assert_int_equal(reader_f32(f->m, i, f32_size, 0, buf, NULL), 0);

	struct expect e = { .want = stored(f, i) + g->size - 9, .len = 9 };
	assert_int_equal(reader_visit_raw(f->m, i, g->size - 9, 9, buf, visit_expect, &e, NULL), 0);
	assert_int_equal(e.calls, 1);
	e.calls = 0;
	assert_int_equal(reader_visit_raw(f->m, i, g->size - 9, 10, buf, visit_expect, &e, NULL),
	                 -EINVAL);
	assert_int_equal(reader_visit_raw(f->m, i, g->size + 1, 0, buf, visit_expect, &e, NULL),
	                 -EINVAL);
	assert_int_equal(reader_visit_raw(f->m, i, g->size, 0, buf, visit_expect, &e, NULL), 0);
	assert_int_equal(e.calls, 0);

	int fd;
	uint64_t file_off, count;
	assert_true(reader_raw_span(f->m, i, g->size - 10, 100, &fd, &file_off, &count, NULL));
	assert_int_equal(file_off, g->offset + g->size - 10);
	assert_int_equal(count, 10);
	assert_true(reader_raw_span(f->m, i, g->size, 100, &fd, &file_off, &count, NULL));
	assert_int_equal(count, 0);
}

/* A file cut short under the model: what is gone is -EIO from every read (never zeros
 * from the tail of a page), what is left reads as before, and so does all of it once
 * the file is whole again. */
static void test_shrunk(void **state)
{
	struct fixture *f = *state;
	const uint64_t i = 0;
	const struct gguf_tensor *g = model_tensor(f->m, i);
	const uint64_t cut = g->offset + g->size / 2;     /* inside tensor 0's blocks */
	char *buf = malloc(g->n_elements * sizeof(float));
	assert_non_null(buf);
	assert_int_equal(truncate(f->path, (off_t)cut), 0);

	assert_int_equal(reader_raw(f->m, i, 0, 100, buf, NULL), 0);
	assert_memory_equal(buf, stored(f, i), 100);
	assert_int_equal(reader_f32(f->m, i, 0, 4096, buf, NULL), 0);
	assert_memory_equal(buf, f->values[i], 4096);
	assert_int_equal(reader_raw(f->m, i, g->size / 2 - 10, 20, buf, NULL), -EIO);
	assert_int_equal(reader_raw(f->m, i, 0, g->size, buf, NULL), -EIO);
	assert_int_equal(reader_f32(f->m, i, g->n_elements * 2, 4, buf, NULL), -EIO);
	assert_int_equal(reader_f32(f->m, 1, 0, 4, buf, NULL), -EIO);    /* wholly past the cut */
	struct expect e = { 0 };
	assert_int_equal(reader_visit_raw(f->m, i, 0, g->size, buf, visit_expect, &e, NULL), -EIO);
	assert_int_equal(e.calls, 0);
	int fd;
	uint64_t file_off, count;
	assert_true(reader_raw_span(f->m, i, g->size / 2 - 10, 100, &fd, &file_off, &count, NULL));
	assert_int_equal(count, 10);

	/* each failure says why where it is seen: the file, and the sizes it shrank between */
	char want[GGUF_ERR_MAX], why[GGUF_ERR_MAX];
	snprintf(want, sizeof want, "%s: the file shrank from %zu to %" PRIu64 " bytes while "
	         "mounted: reads of the bytes that went fail with EIO", f->path, f->len, cut);
	assert_int_equal(reader_raw(f->m, i, 0, g->size, buf, why), -EIO);
	assert_string_equal(why, want);
	assert_int_equal(reader_f32(f->m, 1, 0, 4, buf, why), -EIO);
	assert_string_equal(why, want);
	assert_int_equal(reader_visit_raw(f->m, i, 0, g->size, buf, visit_expect, &e, why), -EIO);
	assert_string_equal(why, want);
	assert_true(reader_raw_span(f->m, i, g->size / 2 - 10, 100, &fd, &file_off, &count, why));
	assert_string_equal(why, want);
	assert_int_equal(reader_raw(f->m, i, 0, 100, buf, why), 0);   /* a read that works */

	restore(f);
	assert_int_equal(reader_raw(f->m, i, 0, g->size, buf, NULL), 0);
	assert_memory_equal(buf, stored(f, i), g->size);
	assert_int_equal(reader_f32(f->m, 1, 0, 4, buf, NULL), 0);
	free(buf);
}

/* A visit that cuts the file to nothing, then touches the last byte it was given: a
 * page that has gone, which raises SIGBUS. */
static const char *cut_path;

static void visit_cut(void *ctx, const uint8_t *p, uint64_t len)
{
	(void)ctx;
	if (truncate(cut_path, 0) == 0)
		(void)((const volatile uint8_t *)p)[len - 1];
}

/* The file shrinks after the reader checked its size, while the bytes are being
 * touched: the SIGBUS guard turns the fault into -EIO and the process lives on. */
static void test_sigbus_guard(void **state)
{
	struct fixture *f = *state;
	const struct gguf_tensor *g = model_tensor(f->m, 0);
	guard_install();   /* cmocka puts its own SIGBUS handler in for every test */
	cut_path = f->path;
	assert_int_equal(reader_visit_raw(f->m, 0, 0, g->size, NULL, visit_cut, NULL, NULL), -EIO);
	restore(f);
	char buf[16];
	assert_int_equal(reader_raw(f->m, 0, g->size - 16, 16, buf, NULL), 0);
	assert_memory_equal(buf, stored(f, 0) + g->size - 16, 16);
}

/* A byte source that is not mapped, as a remote file is: reads copy from the file as
 * written until reads_left runs out (-1: never), then fail. */
struct test_source {
	struct source src;
	const uint8_t *data;
	int reads_left;
	int reads;
};

static int test_source_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                            char why[GGUF_ERR_MAX])
{
	struct test_source *ts = (struct test_source *)src;
	ts->reads++;
	if (ts->reads_left == 0) {
		if (why)
			gguf_errf(why, "test.gguf: read %d failed", ts->reads);
		return -EIO;
	}
	if (ts->reads_left > 0)
		ts->reads_left--;
	memcpy(buf, ts->data + off, len);
	return 0;
}

static void test_source_close(struct source *src)
{
	(void)src;
}

static const struct source_ops test_source_ops = {
	.read = test_source_read,
	.close = test_source_close,
};

/* The fixture's model, made again by hand (model_source.h) with its one file's bytes
 * read through src: its tensors into ts. f->m until model_close. */
static void read_through(struct fixture *f, struct source *src, struct model_tensor *ts)
{
	const struct gguf_file *own = model_own_meta(f->m);
	for (uint64_t i = 0; i < N_TENSORS; i++)
		ts[i] = (struct model_tensor){ model_tensor(f->m, i), 0 };
	static struct model_file file;   /* the model's until it closes */
	file = (struct model_file){ .path = f->path, .size = f->len, .src = src, .gguf = own };
	const struct model_desc d = { .path = f->path, .st = *model_stat(f->m), .meta = own,
	                              .tensors = ts, .n_tensors = N_TENSORS, .files = &file,
	                              .n_files = 1 };
	f->m = model_new(&d);
	assert_non_null(f->m);
}

/* Through a source that is not mapped, the same bytes as through the mapping: the
 * .f32 of a tensor larger than a slice comes slice by slice. */
static void test_unmapped_source(void **state)
{
	struct fixture *f = *state;
	struct test_source ts = { .src.ops = &test_source_ops, .data = f->img, .reads_left = -1 };
	struct ggufs_model *mapped = f->m;
	struct model_tensor mts[N_TENSORS];
	read_through(f, &ts.src, mts);
	assert_null(model_tensor_mapped(f->m, 0));
	for (uint64_t i = 0; i < N_TENSORS; i++)
		check_ranges(f, i);
	const struct gguf_tensor *g = model_tensor(f->m, 0);
	ts.reads = 0;
	char *buf = malloc(g->n_elements * sizeof(float));
	assert_non_null(buf);
	assert_int_equal(reader_f32(f->m, 0, 0, g->n_elements * sizeof(float), buf, NULL), 0);
	assert_memory_equal(buf, f->values[0], g->n_elements * sizeof(float));
	assert_true(ts.reads > 1);
	struct expect e = { .want = stored(f, 0) + 34, .len = 68 };
	assert_int_equal(reader_visit_raw(f->m, 0, 34, 68, buf, visit_expect, &e, NULL), 0);
	assert_int_equal(e.calls, 1);
	int fd;
	uint64_t file_off, count;
	assert_false(reader_raw_span(f->m, 0, 0, 100, &fd, &file_off, &count, NULL));
	free(buf);
	model_close(f->m);
	f->m = mapped;
}

/* Through a source that fails, at once or part way through a read of several slices:
 * -EIO from every read, and a visit never sees bytes. */
static void test_failing_source(void **state)
{
	struct fixture *f = *state;
	struct test_source ts = { .src.ops = &test_source_ops, .data = f->img, .reads_left = 0 };
	struct ggufs_model *mapped = f->m;
	struct model_tensor mts[N_TENSORS];
	read_through(f, &ts.src, mts);
	const struct gguf_tensor *g = model_tensor(f->m, 0);
	char *buf = malloc(g->n_elements * sizeof(float));
	assert_non_null(buf);
	char why[GGUF_ERR_MAX];
	assert_int_equal(reader_raw(f->m, 0, 0, 16, buf, why), -EIO);
	assert_string_equal(why, "test.gguf: read 1 failed");   /* the source's own why */
	assert_int_equal(reader_f32(f->m, 0, 0, 16, buf, why), -EIO);
	assert_string_equal(why, "test.gguf: read 2 failed");
	assert_int_equal(reader_f32(f->m, 1, 5, 1000, buf, NULL), -EIO);
	struct expect e = { 0 };
	assert_int_equal(reader_visit_raw(f->m, 0, 0, 16, buf, visit_expect, &e, NULL), -EIO);
	assert_int_equal(e.calls, 0);
	/* the second slice of a whole .f32 read fails */
	ts.reads_left = 1;
	ts.reads = 0;
	assert_int_equal(reader_f32(f->m, 0, 0, g->n_elements * sizeof(float), buf, NULL), -EIO);
	assert_int_equal(ts.reads, 2);
	free(buf);
	model_close(f->m);
	f->m = mapped;
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_block_boundaries),
	cmocka_unit_test(test_past_the_end),
	cmocka_unit_test(test_shrunk),
	cmocka_unit_test(test_sigbus_guard),
	cmocka_unit_test(test_unmapped_source),
	cmocka_unit_test(test_failing_source))
