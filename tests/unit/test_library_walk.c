/* The library's walks (models.tsv and models.json, library_model_paths for --check
 * FOLDER; lib/7-library/library_table.c, issue 37) over a source written here: a chain
 * of folders d0 .. dN, each level holding two links to the next (a and b, one folder by
 * device and inode), and a model at the bottom. No folder is its own ancestor, so no
 * loop is left out, but there are 2^N paths to the bottom: a walk enters each folder
 * once, at its first path in name order (a/a/...), and so lists each folder once and
 * finds the model once. Browsing by hand still reaches the bottom by any path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "library.h"
#include "library_fixture.h"

/* Links to the next level per level, and levels below d0: 2^LEVELS paths (a walk of
 * each would not end in the test's life; alarm fails it instead of hanging). */
#define LEVELS 40

struct fake {
	unsigned lists;   /* listings asked for */
};

/* The level of the folder at path: 0 the root, 1 d0, 1 + k a folder k links below d0. */
static unsigned level_of(const char *path)
{
	if (!*path)
		return 0;
	unsigned k = 1;
	for (const char *p = path; *p; p++)
		k += *p == '/';
	return k;
}

static void put_entry(struct lib_entry *e, const char *name, bool dir, ino_t ino)
{
	e->name = strdup(name);
	assert_non_null(e->name);
	e->type = dir ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
	e->version = 1;
	e->st.st_mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	e->st.st_dev = 7;
	e->st.st_ino = ino;
}

/* The root holds d0; the folder at level k (inode k + 1) holds a and b, both the folder
 * of level k + 1, and the last level holds m.gguf. */
static int fake_list(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                     uint64_t *version, char err[GGUF_ERR_MAX])
{
	(void)err;
	struct fake *f = ctx;
	f->lists++;
	const unsigned k = level_of(dir);
	assert_true(k <= LEVELS + 1);
	struct lib_entry *e = calloc(2, sizeof *e);
	assert_non_null(e);
	if (k == 0) {
		put_entry(&e[0], "d0", true, 2);
		*n = 1;
	} else if (k == LEVELS + 1) {
		put_entry(&e[0], "m.gguf", false, 1000);
		*n = 1;
	} else {
		put_entry(&e[0], "b", true, k + 2);   /* (the source's order is any) */
		put_entry(&e[1], "a", true, k + 2);
		*n = 2;
	}
	*out = e;
	*version = 1;
	return 0;
}

static bool fake_unchanged(void *ctx, const char *dir, uint64_t version)
{
	(void)ctx;
	(void)dir;
	return version == 1;
}

/* The root, or the model at the bottom (a lookup's fresh look at it). */
static int fake_stat(void *ctx, const char *path, struct lib_entry *e)
{
	(void)ctx;
	memset(e, 0, sizeof *e);
	const bool root = !*path;
	assert_true(root || level_of(path) == LEVELS + 2);
	e->type = root ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
	e->version = 1;
	e->st.st_mode = root ? S_IFDIR | 0755 : S_IFREG | 0644;
	e->st.st_dev = 7;
	e->st.st_ino = root ? 1 : 1000;
	return 0;
}

static struct ggufs_model *fake_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	(void)ctx;
	snprintf(err, GGUF_ERR_MAX, "%s: not a model here", path);
	return NULL;
}

static const struct lib_source_ops fake_ops = {
	.list = fake_list,
	.unchanged = fake_unchanged,
	.stat = fake_stat,
	.open_model = fake_open_model,
	.free = free,
};

static struct library *fake_library(struct fake **f)
{
	*f = calloc(1, sizeof **f);
	assert_non_null(*f);
	return library_fixture_open(&fake_ops, *f, false);
}

/* "d0/a/a/.../a" down to the bottom level, then tail. */
static char *bottom_path(const char *tail)
{
	char *p = malloc(3 + 2 * LEVELS + strlen(tail) + 2);
	assert_non_null(p);
	strcpy(p, "d0");
	for (int i = 0; i < LEVELS; i++)
		strcat(p, "/a");
	strcat(p, "/");
	strcat(p, tail);
	return p;
}

static void test_model_paths_once(void **state)
{
	(void)state;
	alarm(60);
	struct fake *f;
	struct library *lib = fake_library(&f);
	char **paths;
	size_t n;
	assert_int_equal(library_model_paths(lib, &paths, &n), 0);
	assert_int_equal(n, 1);
	char *want = bottom_path("m.gguf");
	assert_string_equal(paths[0], want);
	free(want);
	free(paths[0]);
	free(paths);
	/* the root, d0 and each level below it once */
	assert_int_equal(f->lists, LEVELS + 2);
	/* a second walk is a walk of its own: the model again, no folder listed anew */
	assert_int_equal(library_model_paths(lib, &paths, &n), 0);
	assert_int_equal(n, 1);
	free(paths[0]);
	free(paths);
	assert_int_equal(f->lists, LEVELS + 2);
	alarm(0);
	library_free(lib);
}

static void test_table_once(void **state)
{
	(void)state;
	alarm(60);
	struct fake *f;
	struct library *lib = fake_library(&f);
	for (int json = 0; json < 2; json++) {
		char *text;
		size_t len;
		assert_int_equal(library_table(lib, json, &text, &len), 0);
		text = realloc(text, len + 1);   /* (not a string: its length given) */
		assert_non_null(text);
		text[len] = 0;
		char *want = bottom_path("m");
		char *at = strstr(text, want);
		assert_non_null(at);
		assert_null(strstr(at + 1, want));   /* once */
		assert_null(strstr(text, "/b/"));     /* by no other path */
		free(want);
		free(text);
	}
	assert_int_equal(f->lists, LEVELS + 2);
	alarm(0);
	library_free(lib);
}

/* Browsing is not a walk: d0/b/a/b/... leads to the bottom as d0/a/a/... does. */
static void test_browsing_by_any_path(void **state)
{
	(void)state;
	struct fake *f;
	struct library *lib = fake_library(&f);
	struct node_ref r;
	unsigned dir_flags;
	assert_int_equal(library_lookup(lib, LIB_ROOT_INO, "d0", &r, &dir_flags), 0);
	for (int i = 0; i < LEVELS; i++) {
		struct node_ref next;
		assert_int_equal(library_lookup(lib, r.ino, i % 3 ? "b" : "a", &next, &dir_flags), 0);
		assert_ptr_equal(next.p, &lib_folder_provider);
		library_put(lib, &r);
		r = next;
	}
	struct node_ref m;
	assert_int_equal(library_lookup(lib, r.ino, "m", &m, &dir_flags), 0);
	assert_ptr_equal(m.p, &lib_model_dir_provider);
	assert_null(m.tree);   /* not built by a lookup of its name */
	library_put(lib, &m);
	library_put(lib, &r);
	library_free(lib);
}

UNIT_TESTS(cmocka_unit_test(test_model_paths_once),
           cmocka_unit_test(test_table_once),
           cmocka_unit_test(test_browsing_by_any_path))
