/* What a mount serves, opened from its name (lib/8-mount/mount_source.h): a model with
 * its tree and mount, its edits file (made absolute, refused inside the mount point), a
 * folder as a library, one warning per tensor that has no .f32, and nothing left open
 * after a refusal. */
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
#include "gguf_writer.h"
#include "scratch_dir.h"

#include "leaving.h"
#include "mount.h"
#include "mount_source.h"

#define TINY TEST_DATA "/tinyllama-q4km.gguf"

/* The notes said, one after another. */
static char notes[4096];

static void keep_note(void *arg, const char *line)
{
	(void)arg;
	size_t n = strlen(notes);
	snprintf(notes + n, sizeof notes - n, "%s\n", line);
}

/* Options for the tests: notes kept, no disk cache, a mount point in the scratch
 * folder (made, empty). */
static struct mount_source_opts test_opts(char mnt[256])
{
	notes[0] = 0;
	snprintf(mnt, 256, "%s/mnt", scratch_dir);
	mkdir(mnt, 0755);
	return (struct mount_source_opts){
		.names = { .note = keep_note, .timeout = 1, .cache_dir = "none" },
		.mountpoint = mnt };
}

static void test_model(void **state)
{
	(void)state;
	char mnt[256], err[GGUF_ERR_MAX];
	const struct mount_source_opts o = test_opts(mnt);
	struct mount_source s;
	assert_true(mount_source_open(&s, TINY, &o, err));
	assert_non_null(s.mount);
	assert_false(s.library);
	assert_false(s.remote);
	assert_false(s.edits);
	assert_null(s.shown);
	assert_string_equal(notes, "");   /* every tensor has a dequantizer */
	/* the mount answers: the root's model.gguf is there */
	struct mount_entry e;
	struct mount_err me;
	assert_true(mount_lookup(s.mount, 1, "model.gguf", &e, &me));
	assert_int_not_equal(e.ino, 0);
	leaving_run(s.leaving);   /* (a local model: nothing) */
	mount_source_close(&s);
	assert_null(s.mount);
	assert_false(mount_source_open(&s, TEST_DATA "/no-such.gguf", &o, err));
	assert_non_null(strstr(err, "no-such.gguf"));
	assert_null(s.mount);
}

static void test_edits_file(void **state)
{
	(void)state;
	char mnt[256], err[GGUF_ERR_MAX], path[300];
	struct mount_source_opts o = test_opts(mnt);
	/* a relative name is made absolute: the daemon moves to "/" */
	char *cwd = getcwd(NULL, 0);
	assert_int_equal(chdir(scratch_dir), 0);
	o.edits_file = "edits.txt";
	struct mount_source s;
	bool opened = mount_source_open(&s, TINY, &o, err);
	assert_int_equal(chdir(cwd), 0);
	free(cwd);
	if (!opened)
		fail_msg("%s", err);
	assert_true(s.edits);
	struct stat st;
	snprintf(path, sizeof path, "%s/edits.txt", scratch_dir);
	assert_int_equal(stat(path, &st), 0);   /* created there */
	mount_source_close(&s);
	/* in the mount point: hidden by the mount, refused before it is made */
	snprintf(path, sizeof path, "%s/edits.txt", mnt);
	o.edits_file = path;
	assert_false(mount_source_open(&s, TINY, &o, err));
	assert_non_null(strstr(err, "inside the mount point"));
	assert_int_not_equal(stat(path, &st), 0);
	assert_null(s.mount);
}

static void test_folder_as_library(void **state)
{
	(void)state;
	char mnt[256], err[GGUF_ERR_MAX], dir[300], link[400];
	const struct mount_source_opts o = test_opts(mnt);
	snprintf(dir, sizeof dir, "%s/lib", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(link, sizeof link, "%s/tiny.gguf", dir);
	assert_int_equal(symlink(TINY, link), 0);
	struct mount_source s;
	assert_true(mount_source_open(&s, dir, &o, err));
	assert_true(s.library);
	assert_false(s.remote);
	struct mount_entry e;
	struct mount_err me;
	assert_true(mount_lookup(s.mount, 1, "tiny", &e, &me));
	assert_int_not_equal(e.ino, 0);
	mount_source_close(&s);
}

/* gw_flat_model's tensors: k 0 an f32, k 1 of a type no dequantizer decodes. */
static void raw_tensor(void *ctx, int k, const char **name, uint32_t *type, uint64_t *n,
                       struct gw *data)
{
	(void)ctx;
	*name = k ? "raw" : "weights";
	*type = k ? 1000 : 0;
	*n = 8;
	gw_fill(data, 0, 32);
}

static void test_raw_only_warned(void **state)
{
	(void)state;
	char mnt[256], err[GGUF_ERR_MAX], path[300];
	const struct mount_source_opts o = test_opts(mnt);
	struct gw w;
	gw_init(&w);
	gw_flat_model(&w, 2, raw_tensor, NULL);
	snprintf(path, sizeof path, "%s/raw.gguf", scratch_dir);
	assert_true(gw_save(&w, path));
	gw_free(&w);
	struct mount_source s;
	if (!mount_source_open(&s, path, &o, err))
		fail_msg("%s", err);
	assert_non_null(strstr(notes, "warning: tensor 'raw' has unknown type 1000: raw file only"));
	assert_null(strstr(notes, "'weights'"));
	mount_source_close(&s);
}

UNIT_TESTS_IN_SCRATCH(cmocka_unit_test(test_model), cmocka_unit_test(test_edits_file),
                      cmocka_unit_test(test_folder_as_library),
                      cmocka_unit_test(test_raw_only_warned))
