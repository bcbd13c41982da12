/* Opening what a name names (lib/8-mount/open_name.h), every form: a local file, a split
 * set by its first shard, a folder as a library (and one that holds the mount point,
 * refused), a URL of another scheme, http(s):// and hf:// names with what their
 * refusals show (no credentials, no query), a hub page's blob/ URL read as its resolve/
 * form (said as a note), hf://OWNER/REPO:QUANT, s3:// objects and prefixes with their
 * configuration from the given environment; and the arguments a URL's credentials are
 * scrubbed from (what /proc/PID/cmdline shows). The remote forms are pointed at a port
 * nobody listens on: what is checked is what is asked for and what a failure says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "unit.h"
#include "gguf_split.h"
#include "scratch_dir.h"

#include "library.h"
#include "model.h"
#include "name_list.h"
#include "open_name.h"

#define TINY TEST_DATA "/tinyllama-q4km.gguf"
/* loopback's port 1: refused at once */
#define NOBODY "http://127.0.0.1:1"

/* The environment the remote forms see: what env_vars holds ("NAME=VALUE" strings). */
static const char *env_vars[8];

static const char *test_env(const char *name)
{
	const size_t n = strlen(name);
	for (size_t i = 0; i < sizeof env_vars / sizeof *env_vars && env_vars[i]; i++)
		if (strncmp(env_vars[i], name, n) == 0 && env_vars[i][n] == '=')
			return env_vars[i] + n + 1;
	return NULL;
}

/* The notes said, one after another. */
static char notes[4096];

static void keep_note(void *arg, const char *line)
{
	(void)arg;
	size_t n = strlen(notes);
	snprintf(notes + n, sizeof notes - n, "%s\n", line);
}

/* Options for the tests: the test's environment, notes kept, one attempt's timeout. */
static struct open_name_opts test_opts(void)
{
	notes[0] = 0;
	return (struct open_name_opts){ .env = test_env, .note = keep_note, .timeout = 1,
	                                .cache_dir = "none" };
}

/* name refused by open_name_model: its error line, which holds want (and no
 * forbidden, when not NULL). */
static void expect_refused(const char *name, const char *want, const char *forbidden)
{
	char err[GGUF_ERR_MAX] = "", *shown = (char *)1;
	const struct open_name_opts o = test_opts();
	struct ggufs_model *m = open_name_model(name, &o, &shown, err);
	assert_null(m);
	assert_null(shown);
	if (!strstr(err, want))
		fail_msg("%s: '%s' does not say '%s'", name, err, want);
	if (forbidden && strstr(err, forbidden))
		fail_msg("%s: '%s' shows '%s'", name, err, forbidden);
}

static void test_local_file(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], *shown = (char *)1;
	const struct open_name_opts o = test_opts();
	struct ggufs_model *m = open_name_model(TINY, &o, &shown, err);
	assert_non_null(m);
	assert_null(shown);   /* a local file is shown by its path */
	assert_false(model_fetched(m));
	assert_int_equal(model_n_files(m), 1);
	model_close(m);
	expect_refused(TEST_DATA "/no-such.gguf", "no-such.gguf", NULL);
	/* a folder given where one model is wanted (--diff) is refused as a file */
	expect_refused(TEST_DATA, TEST_DATA, NULL);
}

static void test_split_by_first_shard(void **state)
{
	(void)state;
	char prefix[256], first[300], err[GGUF_ERR_MAX], *shown;
	snprintf(prefix, sizeof prefix, "%s/tiny", scratch_dir);
	assert_int_equal(gguf_split(TINY, prefix, 3, NULL), 0);
	snprintf(first, sizeof first, "%s-00001-of-00003.gguf", prefix);
	const struct open_name_opts o = test_opts();
	struct ggufs_model *m = open_name_model(first, &o, &shown, err);
	assert_non_null(m);
	assert_int_equal(model_n_files(m), 3);
	model_close(m);
}

static void test_folder_as_library(void **state)
{
	(void)state;
	char dir[256], mnt[300], err[GGUF_ERR_MAX];
	snprintf(dir, sizeof dir, "%s/lib", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	const struct open_name_opts o = test_opts();
	struct library *lib = open_name_library(dir, name_kind_of(dir), &o, NULL, NULL, err);
	assert_non_null(lib);
	library_free(lib);
	/* a mount point inside the folder: refused, every listing would wait for itself */
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	lib = open_name_library(dir, NAME_KIND_FOLDER, &o, mnt, NULL, err);
	assert_null(lib);
	assert_non_null(strstr(err, "is inside the library's folder"));
	/* one beside it is fine, and so is one of a name that only starts like it */
	snprintf(mnt, sizeof mnt, "%s/lib2", scratch_dir);
	assert_int_equal(mkdir(mnt, 0755), 0);
	lib = open_name_library(dir, NAME_KIND_FOLDER, &o, mnt, NULL, err);
	assert_non_null(lib);
	library_free(lib);
}

static void test_shown(void **state)
{
	(void)state;
	char *shown = open_name_shown("https://alice:Pa55@h.example/m.gguf?sig=SECRET");
	assert_string_equal(shown, "https://h.example/m.gguf");
	free(shown);
	/* nothing to hide: no copy */
	assert_null(open_name_shown("hf://owner/repo/m.gguf"));
	assert_null(open_name_shown(TINY));
}

/* Lays out args (n strings) one after another, each with its NUL, in block as the
 * kernel lays out a process's arguments (what /proc/PID/cmdline shows), with argv
 * pointing into it; the block's length. */
static size_t lay_out_args(char *block, size_t size, char *argv[], const char *args[], int n)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		const size_t len = strlen(args[i]) + 1;
		assert_true(at + len <= size);
		memcpy(block + at, args[i], len);
		argv[i] = block + at;
		at += len;
	}
	return at;
}

static void test_scrub_args(void **state)
{
	(void)state;
	const char *url = "https://alice:Pa55@h.example/m.gguf?sig=SECRET";
	const char *shown = "https://h.example/m.gguf";
	const char *note = "--note=https://alice:Pa55@h.example/m.gguf?sig=SECRET";
	const char *given[] = { "ggufs", "-o", "ro", url, "/mnt/x", note, url, "-f" };
	enum { N = sizeof given / sizeof *given };
	char block[512], expected[512], *argv[N];
	const size_t len = lay_out_args(block, sizeof block, argv, given, N);
	/* expected: each argument that is the URL holds the shown form, then NULs to its
	 * end; the others (one that only holds the URL among them too) as they were */
	memcpy(expected, block, len);
	for (int i = 0; i < N; i++)
		if (given[i] == url) {
			const size_t at = (size_t)(argv[i] - block);
			memset(expected + at, 0, strlen(url));
			memcpy(expected + at, shown, strlen(shown));
		}
	const char *name = argv[3];
	char *copy = open_name_scrub_args(N, argv, &name);
	assert_non_null(copy);
	assert_ptr_equal(name, copy);
	assert_string_equal(name, url);
	assert_memory_equal(block, expected, len);
	assert_string_equal(argv[3], shown);
	assert_string_equal(argv[5], note);
	assert_string_equal(argv[7], "-f");
	free(copy);

	/* a shown form longer than the argument (curl writes 0x7f.1 as 127.0.0.1): cut to
	 * the argument's own bytes, its NUL and the next argument untouched */
	const char *longer[] = { "ggufs", "http://0x7f.1:8080/m.gguf", "/mnt/x" };
	char *argv2[3];
	const size_t len2 = lay_out_args(block, sizeof block, argv2, longer, 3);
	name = argv2[1];
	copy = open_name_scrub_args(3, argv2, &name);
	assert_non_null(copy);
	assert_string_equal(name, "http://0x7f.1:8080/m.gguf");
	assert_memory_equal(block, "ggufs\0http://127.0.0.1:8080/m.g\0/mnt/x\0", len2);
	free(copy);

	/* nothing to hide (a local path, hf://), or no name: no copy, nothing changed */
	const char *plain[] = { "ggufs", TINY, "hf://owner/repo/m.gguf", "/mnt/x" };
	char *argv3[4];
	const size_t len3 = lay_out_args(block, sizeof block, argv3, plain, 4);
	memcpy(expected, block, len3);
	for (int i = 1; i < 3; i++) {
		name = argv3[i];
		assert_null(open_name_scrub_args(4, argv3, &name));
		assert_ptr_equal(name, argv3[i]);
	}
	name = NULL;
	assert_null(open_name_scrub_args(4, argv3, &name));
	assert_null(name);
	assert_memory_equal(block, expected, len3);
}

static void test_other_scheme(void **state)
{
	(void)state;
	expect_refused("ftp://h/m.gguf", "unsupported URL scheme 'ftp'", NULL);
}

static void test_urls_refused_as_shown(void **state)
{
	(void)state;
	/* credentials and query never in the line */
	expect_refused("http://alice:Pa55@127.0.0.1:1/m.gguf?sig=SECRET", "http://127.0.0.1:1/m.gguf",
	               "Pa55");
	expect_refused("http://alice:Pa55@127.0.0.1:1/m.gguf?sig=SECRET", "127.0.0.1", "SECRET");
	expect_refused("http://[::1/m.gguf", "", NULL);
	/* hf:// names are shown as given and expanded on HF_ENDPOINT */
	env_vars[0] = "HF_ENDPOINT=" NOBODY;
	expect_refused("hf://o/r/m.gguf", "hf://o/r/m.gguf", NULL);
	expect_refused("hf://o", "hf://o", NULL);
	env_vars[0] = NULL;
}

static void test_blob_page_read_as_resolve(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], *shown;
	const struct open_name_opts o = test_opts();
	assert_null(open_name_model(NOBODY "/o/r/blob/main/sub/m.gguf", &o, &shown, err));
	assert_non_null(strstr(notes, "is the hub's page of the file: reading "
	                       NOBODY "/o/r/resolve/main/sub/m.gguf"));
	/* not a blob page: no note */
	const struct open_name_opts o2 = test_opts();
	assert_null(open_name_model(NOBODY "/o/r/resolve/main/m.gguf", &o2, &shown, err));
	assert_string_equal(notes, "");
}

static void test_quant_tag(void **state)
{
	(void)state;
	env_vars[0] = "HF_ENDPOINT=" NOBODY;
	char err[GGUF_ERR_MAX], *shown;
	const struct open_name_opts o = test_opts();
	/* the tag is looked up on the hub's API (nobody answers): no model, no note */
	assert_null(open_name_model("hf://o/r:Q4_K_M", &o, &shown, err));
	assert_true(err[0] != 0);
	assert_string_equal(notes, "");
	env_vars[0] = NULL;
}

static void test_s3_names(void **state)
{
	(void)state;
	/* no credentials anywhere: refused, naming the name (HOME has no .aws) */
	env_vars[0] = "HOME=/nonexistent";
	expect_refused("s3://bucket/m.gguf", "s3://bucket/m.gguf:", NULL);
	/* a malformed bucket */
	expect_refused("s3://bad bucket/m.gguf", "s3://bad bucket/m.gguf", NULL);
	/* credentials of the environment, the endpoint nobody's: the line names the
	 * credentials' source and the endpoint, never the secret */
	env_vars[1] = "AWS_ACCESS_KEY_ID=AKIATEST";
	env_vars[2] = "AWS_SECRET_ACCESS_KEY=TopSecret0000";
	env_vars[3] = "AWS_ENDPOINT_URL=" NOBODY;
	expect_refused("s3://bucket/m.gguf", "s3://bucket/m.gguf", "TopSecret");
	/* a prefix is a library, its root listed at open (nobody answers) */
	char err[GGUF_ERR_MAX];
	const struct open_name_opts o = test_opts();
	assert_int_equal(name_kind_of("s3://bucket/pre/"), NAME_KIND_S3_LIBRARY);
	struct library *lib = open_name_library("s3://bucket/pre/", NAME_KIND_S3_LIBRARY, &o,
	                                        NULL, NULL, err);
	assert_null(lib);
	if (!strstr(err, "listing"))
		fail_msg("%s", err);
	assert_null(strstr(err, "TopSecret"));
	memset(env_vars, 0, sizeof env_vars);
}

static void test_hub_library(void **state)
{
	(void)state;
	env_vars[0] = "HF_ENDPOINT=" NOBODY;
	char err[GGUF_ERR_MAX] = "";
	const struct open_name_opts o = test_opts();
	struct library *lib = open_name_library("hf://o/r@v1/sub", NAME_KIND_HUB_LIBRARY, &o,
	                                        NULL, NULL, err);
	assert_null(lib);
	assert_true(err[0] != 0);
	env_vars[0] = NULL;
}

/* A copy of the tiny model at path. */
static void copy_tiny(const char *path)
{
	FILE *in = fopen(TINY, "rb"), *out = fopen(path, "wb");
	assert_non_null(in);
	assert_non_null(out);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

static void test_name_list(void **state)
{
	(void)state;
	char dir[256], p[320], err[GGUF_ERR_MAX], *shown;
	snprintf(dir, sizeof dir, "%s/list", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(p, sizeof p, "%s/z", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/z/b.gguf", dir);
	copy_tiny(p);
	snprintf(p, sizeof p, "%s/a.gguf", dir);
	copy_tiny(p);
	snprintf(p, sizeof p, "%s/notes.txt", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	env_vars[0] = "HOME=/nonexistent";
	/* one model, a folder of two (in the library's order), a bucket without credentials */
	const char *names[] = { TINY, dir, "s3://bucket/pre/" };
	const struct open_name_opts o = test_opts();
	struct name_list l;
	assert_true(name_list_make(&l, names, 3, &o, err));
	assert_int_equal(l.n, 4);
	assert_int_equal(l.n_libs, 1);
	assert_ptr_equal(l.items[0].name, TINY);
	const char *want[] = { "/a.gguf", "/z/b.gguf" };
	for (size_t i = 1; i <= 2; i++) {
		assert_non_null(l.items[i].lib);
		struct ggufs_model *m = name_list_open(&l, i, &o, &shown, err);
		assert_non_null(m);
		assert_null(shown);
		/* named as a single mount of the file is: its path */
		snprintf(p, sizeof p, "%s%s", dir, want[i - 1]);
		char *real = realpath(p, NULL);
		assert_non_null(real);
		assert_string_equal(model_path(m), real);
		free(real);
		model_close(m);
	}
	/* the bucket is one item, its refusal */
	assert_null(l.items[3].name);
	assert_null(l.items[3].lib);
	assert_non_null(l.items[3].error);
	assert_non_null(strstr(l.items[3].error, "s3://bucket/pre/"));
	name_list_free(&l);
	env_vars[0] = NULL;
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_local_file),
	cmocka_unit_test(test_split_by_first_shard),
	cmocka_unit_test(test_folder_as_library),
	cmocka_unit_test(test_shown),
	cmocka_unit_test(test_scrub_args),
	cmocka_unit_test(test_other_scheme),
	cmocka_unit_test(test_urls_refused_as_shown),
	cmocka_unit_test(test_blob_page_read_as_resolve),
	cmocka_unit_test(test_quant_tag),
	cmocka_unit_test(test_s3_names),
	cmocka_unit_test(test_hub_library),
	cmocka_unit_test(test_name_list))
