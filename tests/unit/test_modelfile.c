/* model.gguf: the header writer (gguf_write.h) and the layout of the model as one file
 * (modelfile.h), single-file and split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf_split.h"
#include "gguf_write.h"
#include "gguf_writer.h"
#include "model.h"
#include "scratch_dir.h"
#include "modelfile.h"

#define TINYLLAMA TEST_DATA "/tinyllama-q4km.gguf"

/* The whole file at path, malloc'ed, its size in *size. */
static uint8_t *slurp(const char *path, uint64_t *size)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*size = (uint64_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc(*size ? *size : 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, *size, f), *size);
	fclose(f);
	return p;
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* Written back with its own keys, tensors and offsets, a llama.cpp file's header is its
 * bytes up to the data section, padding included. */
static void test_header_roundtrip(void **state)
{
	(void)state;
	uint64_t size, len;
	uint8_t *img = slurp(TINYLLAMA, &size);
	struct gguf_file gf;
	char err[GGUF_ERR_MAX];
	assert_int_equal(gguf_parse(img, size, &gf, err), 0);
	const struct gguf_kv **kv = calloc(gf.n_kv, sizeof *kv);
	const struct gguf_tensor **ts = calloc(gf.n_tensors, sizeof *ts);
	uint64_t *offs = calloc(gf.n_tensors, sizeof *offs);
	for (uint64_t i = 0; i < gf.n_kv; i++)
		kv[i] = &gf.kv[i];
	for (uint64_t i = 0; i < gf.n_tensors; i++) {
		ts[i] = &gf.tensors[i];
		offs[i] = gf.tensors[i].offset - gf.data_offset;
	}
	assert_int_equal(gguf_header_write(gf.version, kv, gf.n_kv, ts, offs, gf.n_tensors,
	                                   gf.alignment, NULL, 0, &len, err), 0);
	assert_int_equal(len, gf.data_offset);
	uint8_t *out = malloc(len);
	/* one byte short: refused, nothing past cap written */
	assert_int_equal(gguf_header_write(gf.version, kv, gf.n_kv, ts, offs, gf.n_tensors,
	                                   gf.alignment, out, len - 1, &len, err), -1);
	assert_int_equal(gguf_header_write(gf.version, kv, gf.n_kv, ts, offs, gf.n_tensors,
	                                   gf.alignment, out, len, &len, err), 0);
	assert_memory_equal(out, img, len);
	/* in two pieces (the head, then the tensor infos every edit state shares): the same
	 * bytes, then only zeros up to the data section */
	uint64_t head_len, infos_len;
	assert_int_equal(gguf_header_head_write(gf.version, gf.n_tensors, kv, gf.n_kv, NULL, 0,
	                                        &head_len, err), 0);
	assert_int_equal(gguf_tensor_infos_write(ts, offs, gf.n_tensors, NULL, 0, &infos_len,
	                                         err), 0);
	assert_true(head_len + infos_len <= len && len - (head_len + infos_len) < gf.alignment);
	uint8_t *pieces = calloc(1, len);
	assert_int_equal(gguf_header_head_write(gf.version, gf.n_tensors, kv, gf.n_kv, pieces,
	                                        head_len - 1, &head_len, err), -1);
	assert_int_equal(gguf_header_head_write(gf.version, gf.n_tensors, kv, gf.n_kv, pieces,
	                                        head_len, &head_len, err), 0);
	assert_int_equal(gguf_tensor_infos_write(ts, offs, gf.n_tensors, pieces + head_len,
	                                         infos_len, &infos_len, err), 0);
	assert_memory_equal(pieces, img, len);
	free(pieces);
	/* bad alignments */
	assert_int_equal(gguf_header_write(3, kv, 0, ts, offs, 0, 0, NULL, 0, &len, err), -1);
	assert_int_equal(gguf_header_write(3, kv, 0, ts, offs, 0, 48, NULL, 0, &len, err), -1);
	/* nothing at all: 24 bytes padded to 32 */
	assert_int_equal(gguf_header_write(3, kv, 0, ts, offs, 0, 32, NULL, 0, &len, err), 0);
	assert_int_equal(len, 32);
	free(out);
	free(kv);
	free(ts);
	free(offs);
	gguf_file_free(&gf);
	free(img);
}

/* Lengths that would pass 2^64 are refused, not wrapped; so are too many dimensions. */
static void test_header_overflow(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	uint64_t len;
	static const char name[] = "t";
	struct gguf_kv k = { .key = { name, UINT64_MAX - 8 },
	                     .value = { .type = GGUF_TYPE_UINT8, .data = (const uint8_t *)name,
	                                .size = 1 } };
	const struct gguf_kv *kv[1] = { &k };
	assert_int_equal(gguf_header_write(3, kv, 1, NULL, NULL, 0, 32, NULL, 0, &len, err), -1);
	assert_non_null(strstr(err, "2^64"));
	struct gguf_tensor t = { .name = { name, 1 }, .n_dims = 5 };
	const struct gguf_tensor *ts[1] = { &t };
	uint64_t off = 0;
	assert_int_equal(gguf_header_write(3, NULL, 0, ts, &off, 1, 32, NULL, 0, &len, err), -1);
	assert_non_null(strstr(err, "dimensions"));
}

/* model.gguf's bytes [off, off + len), read at once and through iovecs. */
static void check_ranges(const struct ggufs_model *m, const struct modelfile *mf,
                         const uint8_t *whole)
{
	uint64_t offs[] = { 0, 1, 23, mf->header_len ? mf->header_len - 5 : 7, 4096, 100000,
	                    mf->size / 2, mf->size - 3 };
	uint64_t lens[] = { 1, 7, 4096, 65536, 1u << 20 };
	uint8_t *buf = malloc(1u << 20);
	struct iovec iov[64];
	for (size_t a = 0; a < sizeof offs / sizeof offs[0]; a++) {
		for (size_t b = 0; b < sizeof lens / sizeof lens[0]; b++) {
			uint64_t off = offs[a], len = lens[b];
			if (off >= mf->size)
				continue;
			if (len > mf->size - off)
				len = mf->size - off;
			assert_int_equal(modelfile_read(m, mf, off, len, buf, NULL), 0);
			assert_memory_equal(buf, whole + off, len);
			int n = modelfile_iov(m, mf, off, len, iov, 64, NULL);
			uint64_t at = 0;
			for (int i = 0; i < n; i++) {
				assert_true(at + iov[i].iov_len <= len);
				assert_memory_equal(iov[i].iov_base, whole + off + at, iov[i].iov_len);
				at += iov[i].iov_len;
			}
			if (n)
				assert_int_equal(at, len);
		}
	}
	free(buf);
}

/* model.gguf of m (laid out in mf) reads as img (size bytes), whole and by ranges; m and
 * mf are closed after. */
static void expect_image(struct ggufs_model *m, struct modelfile *mf, const uint8_t *img,
                         uint64_t size)
{
	uint8_t *whole = malloc(size);
	assert_int_equal(modelfile_read(m, mf, 0, size, whole, NULL), 0);
	assert_memory_equal(whole, img, size);
	check_ranges(m, mf, img);
	free(whole);
	modelfile_free(mf);
	model_close(m);
}

/* A single-file model is its file, byte for byte. */
static void test_single(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	uint64_t size;
	uint8_t *img = slurp(TINYLLAMA, &size);
	struct ggufs_model *m = model_open(TINYLLAMA, err);
	assert_non_null(m);
	struct modelfile mf;
	assert_int_equal(modelfile_build(m, &mf, err), 0);
	assert_int_equal(mf.size, size);
	assert_null(mf.header);
	expect_image(m, &mf, img, size);
	free(img);
}

/* A split model merges back into the file it was split from: tinyllama was written by
 * llama.cpp, tensors in order at alignment 32 with zero padding, so the merged file is
 * the original byte for byte (the split keys are gone, the tensors are where they were). */
static void test_split_merges_back(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], prefix[128], path[160];
	uint64_t size;
	uint8_t *img = slurp(TINYLLAMA, &size);
	for (unsigned count = 2; count <= 5; count += 3) {
		snprintf(prefix, sizeof prefix, "%s/tl%u", scratch_dir, count);
		assert_int_equal(gguf_split(TINYLLAMA, prefix, count, NULL), 0);
		snprintf(path, sizeof path, "%s-00002-of-%05u.gguf", prefix, count);
		struct ggufs_model *m = model_open(path, err);
		assert_non_null(m);
		struct modelfile mf;
		assert_int_equal(modelfile_build(m, &mf, err), 0);
		assert_int_equal(mf.size, size);
		assert_int_equal(mf.n_spans, model_n_tensors(m));
		expect_image(m, &mf, img, size);
	}
	free(img);
}

/* One shard with version version and, when alignment is not 0, general.alignment. */
static void write_shard(const char *path, unsigned no, uint32_t version, uint32_t alignment)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, version, 1, alignment ? 4 : 3);
	if (alignment)
		gw_kv_u32(&w, "general.alignment", alignment);
	gw_key(&w, "split.no", GGUF_TYPE_UINT16);
	gw_u16(&w, (uint16_t)no);
	gw_key(&w, "split.count", GGUF_TYPE_UINT16);
	gw_u16(&w, 2);
	gw_key(&w, "split.tensors.count", GGUF_TYPE_INT32);
	gw_u32(&w, 2);
	uint64_t ne = 8;
	gw_tensor(&w, no ? "b" : "a", 1, &ne, 0, 0);
	gw_align(&w, alignment ? alignment : 32);
	gw_fill(&w, (uint8_t)(0x40 + no), 32);
	size_t len;
	uint8_t *p = gw_take(&w, &len);
	write_file(path, p, len);
	free(p);
}

/* Shards that disagree on version or alignment have no merged file: refused with the
 * shard named. Those that agree merge, split keys gone, the alignment kept. */
static void test_split_disagree(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], a[160], b[160];
	static const struct { uint32_t v0, a0, v1, a1; const char *why; } cases[] = {
		{ 3, 0, 2, 0, "GGUF version 2, but the first shard's is 3" },
		{ 3, 64, 3, 0, "alignment 32, but the first shard's is 64" },
		{ 3, 64, 3, 64, NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(a, sizeof a, "%s/d%zu-00001-of-00002.gguf", scratch_dir, i);
		snprintf(b, sizeof b, "%s/d%zu-00002-of-00002.gguf", scratch_dir, i);
		write_shard(a, 0, cases[i].v0, cases[i].a0);
		write_shard(b, 1, cases[i].v1, cases[i].a1);
		struct ggufs_model *m = model_open(a, err);
		assert_non_null(m);
		struct modelfile mf;
		if (cases[i].why) {
			assert_int_equal(modelfile_build(m, &mf, err), -1);
			assert_non_null(strstr(err, cases[i].why));
			assert_non_null(strstr(err, b));
			assert_null(strchr(err, '\n'));
		} else {
			assert_int_equal(modelfile_build(m, &mf, err), 0);
			uint8_t *whole = malloc(mf.size);
			assert_int_equal(modelfile_read(m, &mf, 0, mf.size, whole, NULL), 0);
			struct gguf_file gf;
			assert_int_equal(gguf_parse(whole, mf.size, &gf, err), 0);
			assert_int_equal(gf.n_kv, 1);
			assert_int_equal(gf.alignment, 64);
			assert_int_equal(gf.n_tensors, 2);
			assert_int_equal(gf.tensors[0].offset % 64, 0);
			assert_int_equal(gf.tensors[1].offset - gf.tensors[0].offset, 64);
			assert_int_equal(mf.size, gf.tensors[1].offset + 64);
			for (int k = 0; k < 32; k++) {
				assert_int_equal(whole[gf.tensors[0].offset + k], 0x40);
				assert_int_equal(whole[gf.tensors[1].offset + k], 0x41);
				assert_int_equal(whole[gf.tensors[0].offset + 32 + k], 0);   /* padding */
			}
			gguf_file_free(&gf);
			free(whole);
			modelfile_free(&mf);
		}
		model_close(m);
	}
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_header_roundtrip),
	cmocka_unit_test(test_header_overflow),
	cmocka_unit_test(test_single),
	cmocka_unit_test(test_split_merges_back),
	cmocka_unit_test(test_split_disagree))
