/* What a name on the command line names (lib/8-mount/name_kind.h): every form of a model
 * and of a library, by the one rule the mount, --check and --diff share. */
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

#include "name_kind.h"

/* path inside the scratch directory (a static buffer: one at a time). */
static const char *in_scratch(const char *path)
{
	static char buf[512];
	snprintf(buf, sizeof buf, "%s/%s", scratch_dir, path);
	return buf;
}

/* An empty file at path in the scratch directory. */
static void touch(const char *path)
{
	FILE *f = fopen(in_scratch(path), "w");
	assert_non_null(f);
	fclose(f);
}

static void test_local_file_and_folder(void **state)
{
	(void)state;
	touch("m.gguf");
	assert_int_equal(mkdir(in_scratch("models"), 0755), 0);
	assert_int_equal(symlink("models", in_scratch("link")), 0);
	assert_int_equal(symlink("m.gguf", in_scratch("flink")), 0);
	assert_int_equal(name_kind_of(in_scratch("m.gguf")), NAME_KIND_FILE);
	assert_int_equal(name_kind_of(in_scratch("models")), NAME_KIND_FOLDER);
	assert_int_equal(name_kind_of(in_scratch("models/")), NAME_KIND_FOLDER);
	/* symlinks are followed: a link to a folder is a library */
	assert_int_equal(name_kind_of(in_scratch("link")), NAME_KIND_FOLDER);
	assert_int_equal(name_kind_of(in_scratch("flink")), NAME_KIND_FILE);
	/* a missing file is one model (opening it says it is missing) */
	assert_int_equal(name_kind_of(in_scratch("gone.gguf")), NAME_KIND_FILE);
	/* a split model is named by its first file, a file */
	touch("s-00001-of-00002.gguf");
	assert_int_equal(name_kind_of(in_scratch("s-00001-of-00002.gguf")), NAME_KIND_FILE);
	assert_true(name_kind_is_library(NAME_KIND_FOLDER));
	assert_false(name_kind_is_library(NAME_KIND_FILE));
	/* a folder with config.json is one model folder, not a library; a config.json that
	 * is a folder makes none */
	assert_int_equal(mkdir(in_scratch("hf"), 0755), 0);
	touch("hf/config.json");
	assert_int_equal(name_kind_of(in_scratch("hf")), NAME_KIND_MODEL_FOLDER);
	assert_int_equal(name_kind_of(in_scratch("hf/")), NAME_KIND_MODEL_FOLDER);
	assert_false(name_kind_is_library(NAME_KIND_MODEL_FOLDER));
	assert_int_equal(mkdir(in_scratch("odd"), 0755), 0);
	assert_int_equal(mkdir(in_scratch("odd/config.json"), 0755), 0);
	assert_int_equal(name_kind_of(in_scratch("odd")), NAME_KIND_FOLDER);
}

static void test_other_schemes(void **state)
{
	(void)state;
	assert_int_equal(name_kind_of("ftp://h/m.gguf"), NAME_KIND_SCHEME);
	assert_int_equal(name_kind_of("file:///m.gguf"), NAME_KIND_SCHEME);
	assert_int_equal(name_kind_of("git+ssh://h/m"), NAME_KIND_SCHEME);
	assert_int_equal(name_kind_scheme_len("git+ssh://h/m"), 7);
	assert_int_equal(name_kind_scheme_len("3ftp://h"), 0);
	assert_int_equal(name_kind_scheme_len("ftp:/h"), 0);
	assert_int_equal(name_kind_scheme_len("/ftp://h"), 0);
	/* unless a local file has that name after all: "ftp:" a folder holding "x" */
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(scratch_dir), 0);
	assert_int_equal(mkdir("ftp:", 0755), 0);
	touch("ftp:/x.gguf");
	assert_int_equal(name_kind_of("ftp://x.gguf"), NAME_KIND_FILE);
	assert_int_equal(name_kind_of("ftp://"), NAME_KIND_FOLDER);
	assert_int_equal(chdir(cwd), 0);
	assert_false(name_kind_is_library(NAME_KIND_SCHEME));
}

static void test_urls(void **state)
{
	(void)state;
	assert_int_equal(name_kind_of("http://h/m.gguf"), NAME_KIND_URL);
	assert_int_equal(name_kind_of("HTTPS://h/m.gguf"), NAME_KIND_URL);
	/* a folder's URL, a hub's blob/ page: one model all the same */
	assert_int_equal(name_kind_of("https://h/models/"), NAME_KIND_URL);
	assert_int_equal(name_kind_of("https://huggingface.co/o/r/blob/main/m.gguf"), NAME_KIND_URL);
	assert_false(name_kind_is_library(NAME_KIND_URL));
}

static void test_hub_names(void **state)
{
	(void)state;
	assert_int_equal(name_kind_of("hf://o/r"), NAME_KIND_HUB_LIBRARY);
	assert_int_equal(name_kind_of("HF://o/r/"), NAME_KIND_HUB_LIBRARY);
	assert_int_equal(name_kind_of("hf://o/r@v1"), NAME_KIND_HUB_LIBRARY);
	assert_int_equal(name_kind_of("hf://o/r@v1/sub/dir"), NAME_KIND_HUB_LIBRARY);
	assert_int_equal(name_kind_of("hf://o/r/m.gguf"), NAME_KIND_HUB_FILE);
	assert_int_equal(name_kind_of("hf://o/r@0123abc/sub/M.GGUF"), NAME_KIND_HUB_FILE);
	assert_int_equal(name_kind_of("hf://o/r:Q4_K_M"), NAME_KIND_HUB_QUANT);
	assert_int_equal(name_kind_of("hf://o/r@v1:q8_0"), NAME_KIND_HUB_QUANT);
	/* names that do not parse are one file, which opening refuses with its reason */
	assert_int_equal(name_kind_of("hf://o"), NAME_KIND_HUB_FILE);
	assert_int_equal(name_kind_of("hf://o/r/../m.gguf"), NAME_KIND_HUB_FILE);
	assert_int_equal(name_kind_of("hf://o/r:"), NAME_KIND_HUB_FILE);
	assert_true(name_kind_is_library(NAME_KIND_HUB_LIBRARY));
	assert_false(name_kind_is_library(NAME_KIND_HUB_FILE));
	assert_false(name_kind_is_library(NAME_KIND_HUB_QUANT));
}

static void test_s3_names(void **state)
{
	(void)state;
	assert_int_equal(name_kind_of("s3://bucket"), NAME_KIND_S3_LIBRARY);
	assert_int_equal(name_kind_of("s3://bucket/"), NAME_KIND_S3_LIBRARY);
	assert_int_equal(name_kind_of("S3://bucket/prefix/"), NAME_KIND_S3_LIBRARY);
	assert_int_equal(name_kind_of("s3://bucket/a/b/"), NAME_KIND_S3_LIBRARY);
	assert_int_equal(name_kind_of("s3://bucket/m.gguf"), NAME_KIND_S3_OBJECT);
	assert_int_equal(name_kind_of("s3://bucket/prefix/m.gguf"), NAME_KIND_S3_OBJECT);
	/* a key without .gguf is an object all the same: S3 has no folders */
	assert_int_equal(name_kind_of("s3://bucket/prefix"), NAME_KIND_S3_OBJECT);
	assert_true(name_kind_is_library(NAME_KIND_S3_LIBRARY));
	assert_false(name_kind_is_library(NAME_KIND_S3_OBJECT));
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_local_file_and_folder),
	cmocka_unit_test(test_other_schemes),
	cmocka_unit_test(test_urls),
	cmocka_unit_test(test_hub_names),
	cmocka_unit_test(test_s3_names))
