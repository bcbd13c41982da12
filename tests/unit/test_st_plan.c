/* A converted model's tensors and data section (lib/3-safetensors/st_plan.h) against
 * the converter's output for llama-spm-f32 (tests/data/st, outtype auto: F16 matrices,
 * F32 norms, q/k permuted): the tensor infos are the reference's bytes; the data
 * section read whole, in 4 KiB pieces, in odd pieces and byte by byte across tensor
 * boundaries is the reference's, each read reading only about the checkpoint bytes it
 * needs; a failing read of the checkpoint fails the read with its errno and line. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_config.h"
#include "st_header.h"
#include "st_plan.h"
#include "types.h"

#define ST_DATA TEST_DATA "/st"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	char *p = malloc((size_t)n + 1);
	assert_non_null(p);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	p[n] = '\0';
	*len = (size_t)n;
	return p;
}

/* The checkpoint in memory, the bytes read from it, and a read to fail. */
struct ckpt {
	const uint8_t *p;
	uint64_t size, read, fail_at;
};

static int ckpt_read(void *ctx, uint32_t shard, uint64_t off, uint64_t len, void *buf,
                     char why[GGUF_ERR_MAX])
{
	struct ckpt *c = ctx;
	assert_int_equal(shard, 0);
	assert_true(off <= c->size && len <= c->size - off);
	if (c->fail_at >= off && c->fail_at < off + len) {
		snprintf(why, GGUF_ERR_MAX, "model.safetensors: gone");
		return -EIO;
	}
	memcpy(buf, c->p + off, len);
	c->read += len;
	return 0;
}

struct fixture {
	char *file, *ref, *json;
	size_t file_len, ref_len, json_len;
	struct st_header h;
	struct st_config c;
	struct st_plan p;
	struct ckpt ck;
};

static void setup_fixture(struct fixture *f)
{
	memset(f, 0, sizeof *f);
	f->file = slurp(ST_DATA "/llama-spm-f32/model.safetensors", &f->file_len);
	f->ref = slurp(ST_DATA "/llama-spm-f32.auto.gguf", &f->ref_len);
	f->json = slurp(ST_DATA "/llama-spm-f32/config.json", &f->json_len);
	char err[GGUF_ERR_MAX];
	uint64_t need;
	assert_true(st_header_size((uint8_t *)f->file, f->file_len, "m", &need, err));
	assert_int_equal(st_header_parse((uint8_t *)f->file, need, f->file_len, "m", &f->h,
	                                 err), 0);
	assert_int_equal(st_config_parse(f->json, f->json_len, "config.json", &f->c, err), 0);
	const struct st_header *shards[1] = { &f->h };
	assert_int_equal(st_plan_make(&f->c, shards, 1, ST_FTYPE_F16, &f->p, err), 0);
	f->ck = (struct ckpt){ (uint8_t *)f->file, f->file_len, 0, UINT64_MAX };
}

static void teardown_fixture(struct fixture *f)
{
	st_plan_free(&f->p);
	st_config_free(&f->c);
	st_header_free(&f->h);
	free(f->file);
	free(f->ref);
	free(f->json);
}

/* Where the reference's tensor infos start (its first tensor's name) and its data. */
static const char first_info[] = "\x0d\0\0\0\0\0\0\0output.weight";
static const uint64_t REF_HEADER = 24313, REF_DATA = 24320;

static void test_infos(void **state)
{
	(void)state;
	struct fixture f;
	setup_fixture(&f);
	assert_int_equal(f.p.n, 21);
	assert_int_equal(f.p.t[0].type, GGML_TYPE_F16);
	assert_int_equal(f.p.t[2].type, GGML_TYPE_F32);     /* blk.0.attn_norm */
	assert_int_equal(f.p.data_size, f.ref_len - REF_DATA);
	struct vbytes b = { 0 };
	st_plan_write_infos(&f.p, &b);
	assert_false(b.failed);
	const char *at = memmem(f.ref, REF_HEADER, first_info, sizeof first_info - 1);
	assert_non_null(at);
	assert_int_equal(b.len, REF_HEADER - (uint64_t)(at - f.ref));
	assert_memory_equal(b.p, at, b.len);
	free(b.p);
	teardown_fixture(&f);
}

static void test_data(void **state)
{
	(void)state;
	struct fixture f;
	setup_fixture(&f);
	const uint64_t n = f.p.data_size;
	const uint8_t *want = (const uint8_t *)f.ref + REF_DATA;
	uint8_t *got = malloc(n);
	assert_non_null(got);
	char why[GGUF_ERR_MAX];
	/* whole: every checkpoint byte read once (f32 into f16: half the bytes out) */
	assert_int_equal(st_plan_read(&f.p, 0, n, got, ckpt_read, &f.ck, why), 0);
	assert_memory_equal(got, want, n);
	assert_int_equal(f.ck.read, f.file_len - f.h.data_offset);
	/* in 4 KiB pieces and in odd ones: a piece reads about the bytes it makes */
	static const uint64_t pieces[] = { 4096, 1000, 777, 33 };
	for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
		memset(got, 0xaa, n);
		for (uint64_t off = 0; off < n; off += pieces[k]) {
			const uint64_t len = n - off < pieces[k] ? n - off : pieces[k];
			f.ck.read = 0;
			assert_int_equal(st_plan_read(&f.p, off, len, got + off, ckpt_read, &f.ck,
			                              why), 0);
			assert_true(f.ck.read <= 2 * len + 8);
		}
		assert_memory_equal(got, want, n);
	}
	/* byte by byte around each tensor's start and end (padding, odd halves) */
	for (size_t i = 0; i < f.p.n; i++) {
		const struct st_out *o = &f.p.t[i];
		const uint64_t spots[] = { o->offset, o->offset + 1, o->offset + o->size - 1,
		                           o->offset + o->size, o->offset + o->size + 5 };
		for (size_t s = 0; s < 5; s++) {
			if (spots[s] >= n)
				continue;
			uint8_t byte = 0x55;
			assert_int_equal(st_plan_read(&f.p, spots[s], 1, &byte, ckpt_read, &f.ck,
			                              why), 0);
			assert_int_equal(byte, want[spots[s]]);
		}
	}
	/* a checkpoint byte that cannot be read fails the read that needs it, only */
	f.ck.fail_at = f.p.t[5].src->offset + 8;
	assert_int_equal(st_plan_read(&f.p, f.p.t[5].offset, 64, got, ckpt_read, &f.ck, why),
	                 -EIO);
	assert_string_equal(why, "model.safetensors: gone");
	assert_int_equal(st_plan_read(&f.p, f.p.t[4].offset, 64, got, ckpt_read, &f.ck, why),
	                 0);
	free(got);
	teardown_fixture(&f);
}

static void test_refusals(void **state)
{
	(void)state;
	struct fixture f;
	setup_fixture(&f);
	char err[GGUF_ERR_MAX];
	struct st_plan p;
	const struct st_header *shards[1] = { &f.h };
	/* a name the converter cannot map */
	char *saved = f.h.t[3].name;
	f.h.t[3].name = (char *)"model.layers.0.mlp.mystery.weight";
	assert_int_equal(st_plan_make(&f.c, shards, 1, ST_FTYPE_F16, &p, err), -1);
	assert_non_null(strstr(err, "tensor 'model.layers.0.mlp.mystery.weight' is not one the "
	                            "converter maps (architecture LlamaForCausalLM)"));
	f.h.t[3].name = saved;
	/* q rows that do not split into the heads' halves */
	f.c.n_head = 3;
	assert_int_equal(st_plan_make(&f.c, shards, 1, ST_FTYPE_F16, &p, err), -1);
	assert_non_null(strstr(err, "not 3 heads of an even count"));
	f.c.n_head = 4;
	/* outtype F32: no F16 anywhere, every tensor 4 bytes an element */
	assert_int_equal(st_plan_make(&f.c, shards, 1, ST_FTYPE_F32, &p, err), 0);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.t[i].type, GGML_TYPE_F32);
	st_plan_free(&p);
	teardown_fixture(&f);
}

/* Q8_0: a read of any piece gives the bytes a whole read gives (whose sha256 st-outtypes
 * checks against the converter's), each piece reading about the blocks it cuts. */
static void test_q8_0_pieces(void **state)
{
	(void)state;
	struct fixture f;
	setup_fixture(&f);
	struct st_plan p;
	char err[GGUF_ERR_MAX], why[GGUF_ERR_MAX];
	const struct st_header *shards[1] = { &f.h };
	assert_int_equal(st_plan_make(&f.c, shards, 1, ST_FTYPE_Q8_0, &p, err), 0);
	assert_int_equal(p.t[0].type, GGML_TYPE_Q8_0);
	assert_int_equal(p.t[0].size, 1024 * 64 / 32 * 34);
	assert_int_equal(p.t[2].type, GGML_TYPE_F32);
	uint8_t *whole = malloc(p.data_size), *got = malloc(p.data_size);
	assert_non_null(whole);
	assert_non_null(got);
	assert_int_equal(st_plan_read(&p, 0, p.data_size, whole, ckpt_read, &f.ck, why), 0);
	static const uint64_t pieces[] = { 777, 34, 33, 1 };
	for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
		memset(got, 0xaa, p.data_size);
		for (uint64_t off = 0; off < p.data_size; off += pieces[k]) {
			const uint64_t len = p.data_size - off < pieces[k] ? p.data_size - off
			                                                   : pieces[k];
			f.ck.read = 0;
			assert_int_equal(st_plan_read(&p, off, len, got + off, ckpt_read, &f.ck, why),
			                 0);
			assert_true(f.ck.read <= 4 * (len + 2 * 34));
		}
		assert_memory_equal(got, whole, p.data_size);
	}
	free(whole);
	free(got);
	st_plan_free(&p);
	teardown_fixture(&f);
}

UNIT_TESTS(
	cmocka_unit_test(test_infos),
	cmocka_unit_test(test_q8_0_pieces),
	cmocka_unit_test(test_data),
	cmocka_unit_test(test_refusals),
)
