/* A model folder mounted as a model (lib/3-safetensors/st_model.h): tests/data/st's
 * llama-spm-f32 opened through the local opener, its model.gguf laid out by the
 * modelfile path every model's goes through, is the converter's output byte for byte
 * (the reference beside it, by its sha256 in expected-SHA256SUMS: st-data-sums), read
 * whole and in 4 KiB reads; a folder without model.safetensors is refused, named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

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

UNIT_TESTS(
	cmocka_unit_test(test_model_gguf),
	cmocka_unit_test(test_refused),
)
