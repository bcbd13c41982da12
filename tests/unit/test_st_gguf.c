/* A model folder converted as one GGUF file (lib/3-safetensors/st_gguf.h): tests/data/st's
 * llama-spm-f32, outtype auto, is the converter's output byte for byte (the reference
 * beside it, whose sha256 the test st-data-sums checks against expected-SHA256SUMS):
 * read whole and in 4 KiB reads across the header's end; outtype f32 makes every tensor
 * F32; outtype auto follows the first matrix's dtype (BF16, F16); a folder without
 * config.json or tokenizer.model is refused naming what lacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_gguf.h"
#include "types.h"

#define FOLDER TEST_DATA "/st/llama-spm-f32"

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
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

static struct st_text text(const char *file)
{
	char path[512];
	snprintf(path, sizeof path, FOLDER "/%s", file);
	struct st_text t = { NULL, 0 };
	t.p = slurp(path, &t.n);
	return t;
}

struct fixture {
	struct st_folder f;
	char *file, *ref;
	size_t file_len, ref_len;
	struct st_header h;
};

static void load(struct fixture *x)
{
	memset(x, 0, sizeof *x);
	x->f.name = "llama-spm-f32";
	x->f.config = text("config.json");
	x->f.tokenizer_model = text("tokenizer.model");
	x->f.tokenizer_config = text("tokenizer_config.json");
	x->f.added_tokens = text("added_tokens.json");
	x->f.jinja = text("chat_template.jinja");
	x->f.template_json = text("chat_template.json");
	assert_null(x->f.added_tokens.p);
	x->file = slurp(FOLDER "/model.safetensors", &x->file_len);
	x->ref = slurp(TEST_DATA "/st/llama-spm-f32.auto.gguf", &x->ref_len);
	assert_non_null(x->file);
	assert_non_null(x->ref);
	uint64_t need;
	char err[GGUF_ERR_MAX];
	assert_true(st_header_size((uint8_t *)x->file, x->file_len, "m", &need, err));
	assert_int_equal(st_header_parse((uint8_t *)x->file, need, x->file_len, "m", &x->h,
	                                 err), 0);
}

static void unload(struct fixture *x)
{
	st_header_free(&x->h);
	free((char *)x->f.config.p);
	free((char *)x->f.tokenizer_model.p);
	free((char *)x->f.tokenizer_config.p);
	free((char *)x->f.jinja.p);
	free(x->file);
	free(x->ref);
}

static int mem_read(void *ctx, uint32_t shard, uint64_t off, uint64_t len, void *buf,
                    char why[GGUF_ERR_MAX])
{
	const struct fixture *x = ctx;
	(void)why;
	assert_int_equal(shard, 0);
	assert_true(off <= x->file_len && len <= x->file_len - off);
	memcpy(buf, x->file + off, len);
	return 0;
}

static void test_reference(void **state)
{
	(void)state;
	struct fixture x;
	load(&x);
	const struct st_header *shards[1] = { &x.h };
	struct st_gguf g;
	char err[GGUF_ERR_MAX];
	if (st_gguf_make(&x.f, shards, 1, ST_OUT_AUTO, &g, err) < 0)
		fail_msg("%s", err);
	assert_int_equal(g.size, x.ref_len);
	assert_int_equal(g.data_offset, 24320);
	uint8_t *got = malloc(g.size);
	assert_non_null(got);
	char why[GGUF_ERR_MAX];
	assert_int_equal(st_gguf_read(&g, 0, g.size, got, mem_read, &x, why), 0);
	assert_memory_equal(got, x.ref, g.size);
	memset(got, 0, g.size);
	for (uint64_t off = 0; off < g.size; off += 4096) {
		const uint64_t len = g.size - off < 4096 ? g.size - off : 4096;
		assert_int_equal(st_gguf_read(&g, off, len, got + off, mem_read, &x, why), 0);
	}
	assert_memory_equal(got, x.ref, g.size);
	free(got);
	st_gguf_free(&g);
	/* outtype f32: the same keys but file_type 0, every tensor F32 */
	assert_int_equal(st_gguf_make(&x.f, shards, 1, ST_OUT_F32, &g, err), 0);
	for (size_t i = 0; i < g.plan.n; i++)
		assert_int_equal(g.plan.t[i].type, GGML_TYPE_F32);
	assert_non_null(memmem(g.header.p, g.header.len, "general.file_type\x04\0\0\0\0\0\0\0",
	                       25));
	st_gguf_free(&g);
	/* outtype auto: the first matrix that is BF16 or F16 decides (a 1-D one does not) */
	x.h.t[2].dtype = ST_BF16;        /* blk.0.attn_norm, 1-D */
	x.h.t[3].dtype = ST_BF16;        /* blk.0.ffn_down: the first such matrix */
	x.h.t[4].dtype = ST_F16;
	assert_int_equal(st_gguf_make(&x.f, shards, 1, ST_OUT_AUTO, &g, err), 0);
	assert_int_equal(g.plan.t[0].type, GGML_TYPE_BF16);
	assert_int_equal(g.plan.t[2].type, GGML_TYPE_F32);
	st_gguf_free(&g);
	unload(&x);
}

static void test_refusals(void **state)
{
	(void)state;
	struct fixture x;
	load(&x);
	const struct st_header *shards[1] = { &x.h };
	struct st_gguf g;
	char err[GGUF_ERR_MAX];
	struct st_text model = x.f.tokenizer_model;
	x.f.tokenizer_model.p = NULL;
	assert_int_equal(st_gguf_make(&x.f, shards, 1, ST_OUT_AUTO, &g, err), -1);
	assert_non_null(strstr(err, "llama-spm-f32: no tokenizer.model"));
	x.f.tokenizer_model = model;
	struct st_text config = x.f.config;
	x.f.config.p = NULL;
	assert_int_equal(st_gguf_make(&x.f, shards, 1, ST_OUT_AUTO, &g, err), -1);
	assert_non_null(strstr(err, "llama-spm-f32: no config.json"));
	x.f.config = config;
	unload(&x);
}

UNIT_TESTS(
	cmocka_unit_test(test_reference),
	cmocka_unit_test(test_refusals),
)
