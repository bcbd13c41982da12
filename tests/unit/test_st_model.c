/* A model folder mounted as a model (lib/3-safetensors/st_model.h): tests/data/st's
 * llama-spm-f32 opened through the local opener, its model.gguf laid out by the
 * modelfile path every model's goes through, is the converter's output byte for byte
 * (the reference beside it, by its sha256 in expected-SHA256SUMS: st-data-sums), read
 * whole and in 4 KiB reads; a model.safetensors that shrinks under it fails every read
 * after it, EIO naming it (model_changed sees it too); a folder without model.safetensors is
 * refused, named, and
 * so is a part that is no safetensors file, a hostile index, and what the converter would
 * read and ggufs does not convert yet (README.md, a sampling value). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit.h"

#include "scratch_dir.h"

#include "model.h"
#include "modelfile.h"
#include "st_model.h"

static void test_model_gguf(void **state)
{
	(void)state;
	FILE *f = fopen(TEST_DATA "/st/llama-spm-f32.auto.gguf", "rb");
	assert_non_null(f);
	static uint8_t want[435200], got[435200];
	assert_int_equal(fread(want, 1, sizeof want, f), sizeof want);
	fclose(f);
	const struct model_opener o = model_opener_local(false);
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = st_model_open(TEST_DATA "/st/llama-spm-f32/", ST_OUT_AUTO, &o,
	                                      err);
	if (!m)
		fail_msg("%s", err);
	struct modelfile mf;
	assert_int_equal(modelfile_build(m, &mf, err), 0);
	assert_int_equal(mf.size, sizeof want);
	char why[GGUF_ERR_MAX];
	assert_int_equal(modelfile_read(m, &mf, 0, mf.size, got, why), 0);
	assert_memory_equal(got, want, sizeof want);
	memset(got, 0, sizeof got);
	for (uint64_t off = 0; off < mf.size; off += 4096) {
		const uint64_t len = mf.size - off < 4096 ? mf.size - off : 4096;
		assert_int_equal(modelfile_read(m, &mf, off, len, got + off, why), 0);
	}
	assert_memory_equal(got, want, sizeof want);
	modelfile_free(&mf);
	model_close(m);
}

static void test_refused(void **state)
{
	(void)state;
	const struct model_opener o = model_opener_local(false);
	char err[GGUF_ERR_MAX];
	assert_null(st_model_open(TEST_DATA "/st", ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "/st: no model.safetensors"));
}

/* Writes len bytes of p as scratch file name (under the folder). */
static void put(const char *name, const void *p, size_t len)
{
	char path[256];
	snprintf(path, sizeof path, "%s/llama-spm-f32/%s", scratch_dir, name);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Copies the test folder's file name into the scratch folder. */
static void copy_in(const char *name)
{
	char path[256];
	snprintf(path, sizeof path, TEST_DATA "/st/llama-spm-f32/%s", name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[1 << 20];
	const size_t n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	put(name, buf, n);
}

static void test_refused_until_converted(void **state)
{
	(void)state;
	char dir[128], path[256];
	snprintf(dir, sizeof dir, "%s/llama-spm-f32", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	static const char *const files[] = { "config.json", "tokenizer.model",
	                                     "tokenizer_config.json", "chat_template.jinja",
	                                     "generation_config.json", "model.safetensors" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		copy_in(files[i]);
	const struct model_opener o = model_opener_local(false);
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = st_model_open(dir, ST_OUT_AUTO, &o, err);
	if (!m)
		fail_msg("%s", err);
	/* model.safetensors shrinks under the model: every read after it fails with EIO
	 * naming it (the converted file is of the version opened, or nothing), the bytes
	 * read before were right */
	struct modelfile mf;
	assert_int_equal(modelfile_build(m, &mf, err), 0);
	static uint8_t before[435200], after[435200];
	char why[GGUF_ERR_MAX];
	assert_int_equal(modelfile_read(m, &mf, 0, mf.size, before, why), 0);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	assert_int_equal(truncate(path, 400000), 0);
	assert_memory_equal(before, "GGUF", 4);
	assert_int_equal(modelfile_read(m, &mf, 0, 30000, after, why), -EIO);
	assert_non_null(strstr(why, "model.safetensors"));
	assert_int_equal(modelfile_read(m, &mf, mf.size - 4096, 4096, after, why), -EIO);
	assert_non_null(strstr(why, "model.safetensors"));
	assert_int_not_equal(model_changed(m, NULL), 0);
	modelfile_free(&mf);
	model_close(m);
	copy_in("model.safetensors");
	/* without an index every model*.safetensors is a part, read and checked */
	put("model-extra.safetensors", "x", 1);
	assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "model-extra.safetensors: 1 bytes, too short"));
	snprintf(path, sizeof path, "%s/model-extra.safetensors", dir);
	assert_int_equal(unlink(path), 0);
	/* an index: its files only, plain names in the folder, naming the parts' tensors */
	static const char *const bad_index[][2] = {
		{ "{\"weight_map\": {\"lm_head.weight\": \"../model.safetensors\"}}",
		  "tensor 'lm_head.weight' is in no file of the folder" },
		{ "{\"weight_map\": [\"model.safetensors\"]}", "no weight_map object" },
		{ "{\"weight_map\": {\"lm_head.weight\": \"model.safetensors\"}}",
		  "is in a part but not in the index's weight_map" },
		{ "{\"weight_map\": {\"lm_head.weight\": \"model-2.safetensors\"}}",
		  "no model-2.safetensors, a part of the model" },
	};
	for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
		put("model.safetensors.index.json", bad_index[i][0], strlen(bad_index[i][0]));
		assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
		if (!strstr(err, bad_index[i][1]))
			fail_msg("'%s', wanted '%s'", err, bad_index[i][1]);
	}
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	assert_int_equal(unlink(path), 0);
	/* the same tensors in two parts: the converter would keep the later silently */
	char copy[256];
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	snprintf(copy, sizeof copy, "%s/model-copy.safetensors", dir);
	assert_int_equal(link(path, copy), 0);
	assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "is in two of its .safetensors files"));
	assert_int_equal(unlink(copy), 0);
	put("README.md", "---\nlicense: mit\n---\n", 21);
	assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "holds README.md, which ggufs does not convert yet"));
	snprintf(path, sizeof path, "%s/README.md", dir);
	assert_int_equal(unlink(path), 0);
	put("generation_config.json", "{\"temperature\": 0.6}", 20);
	assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "generation_config.json: 'temperature', a sampling value"));
	put("generation_config.json", "{\"top_k\": 1}\0", 13);   /* json.load refuses it */
	assert_null(st_model_open(dir, ST_OUT_AUTO, &o, err));
	assert_non_null(strstr(err, "generation_config.json: not a JSON object"));
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		assert_int_equal(unlink(path), 0);
	}
	assert_int_equal(rmdir(dir), 0);
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_model_gguf),
	cmocka_unit_test(test_refused),
	cmocka_unit_test(test_refused_until_converted),
)
