/* A library's slots (lib/7-library/library.c, issue 37 item 6), over a source written
 * here whose one file gets a new version at every listing: the slot of a version gone
 * is freed unless held, its place taken again under the next generation only after
 * the thousand places freed before it, a place whose generations are used up never
 * again; so no number is given twice, the places stay about as many as the versions
 * held, a number freed is -ESTALE and one never given -ENOENT, and a version held by a
 * ref keeps its slot until let go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "unit.h"

#include "library.h"
#include "node.h"
#include "library_fixture.h"

/* The source: a root folder holding f.txt, whose version is the count of listings so
 * far, and so is the root's (its listing changes every time). */
struct fake {
	uint64_t version;
};

static int fake_list(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                     uint64_t *version, char err[GGUF_ERR_MAX])
{
	(void)err;
	struct fake *f = ctx;
	assert_string_equal(dir, "");
	struct lib_entry *e = calloc(1, sizeof *e);
	assert_non_null(e);
	e->name = strdup("f.txt");
	assert_non_null(e->name);
	e->type = LIB_ENTRY_FILE;
	e->version = ++f->version;
	e->st.st_mode = S_IFREG | 0644;
	*out = e;
	*n = 1;
	*version = f->version;
	return 0;
}

static bool fake_unchanged(void *ctx, const char *dir, uint64_t version)
{
	(void)ctx;
	(void)dir;
	(void)version;
	return false;
}

static int fake_stat(void *ctx, const char *path, struct lib_entry *e)
{
	const struct fake *f = ctx;
	memset(e, 0, sizeof *e);
	e->type = *path ? LIB_ENTRY_FILE : LIB_ENTRY_DIR;
	e->version = f->version;
	e->st.st_mode = *path ? S_IFREG | 0644 : S_IFDIR | 0755;
	return 0;
}

static const struct lib_source_ops fake_ops = {
	.list = fake_list,
	.unchanged = fake_unchanged,
	.stat = fake_stat,
	.free = free,
};

static struct library *fake_library(void)
{
	struct fake *f = calloc(1, sizeof *f);
	assert_non_null(f);
	return library_fixture_open(&fake_ops, f, false);
}

/* f.txt looked up (a listing: its next version), held in *r. */
static uint64_t next_version(struct library *lib, struct node_ref *r)
{
	unsigned dir_flags;
	assert_int_equal(library_lookup(lib, LIB_ROOT_INO, "f.txt", r, &dir_flags), 0);
	assert_ptr_equal(r->p, &lib_plain_provider);
	return r->ino;
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t place_of(uint64_t ino)
{
	return (ino >> LIB_LOW_BITS) & (LIB_SLOTS_MAX - 1);
}

/* Enough versions for the first places' generations to be used up: each of the ~1,026
 * places in turn takes the next version, LIB_GENERATIONS times. */
static void test_numbers_never_given_twice(void **state)
{
	(void)state;
	struct library *lib = fake_library();
	const size_t n = 1100 * LIB_GENERATIONS;
	uint64_t *inos = malloc(n * sizeof *inos);
	assert_non_null(inos);
	uint64_t max_place = 0, first = 0;
	for (size_t i = 0; i < n; i++) {
		struct node_ref r;
		inos[i] = next_version(lib, &r);
		if (!i)
			first = inos[i];
		library_put(lib, &r);
		if (place_of(inos[i]) > max_place)
			max_place = place_of(inos[i]);
	}
	/* the places: the live version's, the thousand-odd waiting, and those that took
	 * over from the places used up (one in about a thousand versions at the end) */
	assert_true(max_place < 1100 + 1100);
	assert_true(max_place > 1100);   /* the first places were used up */
	qsort(inos, n, sizeof *inos, u64_cmp);
	for (size_t i = 1; i < n; i++)
		assert_true(inos[i] != inos[i - 1]);
	free(inos);
	/* the first version's number names nothing now; a place never used, nothing ever */
	struct node_ref r;
	assert_int_equal(library_get(lib, first, false, &r), -ESTALE);
	assert_int_equal(r.hold[LIB_HOLD_FLAGS], 0);   /* holding nothing */
	library_put(lib, &r);
	assert_int_equal(library_get(lib, (LIB_SLOTS_MAX - 1) << LIB_LOW_BITS | 1, false, &r),
	                 -ENOENT);
	library_free(lib);
}

/* A version held (an open file) keeps its slot and number through later versions, and
 * is freed when let go; a second ref of it (another open file's) needs its own put. */
static void test_held_versions_stay(void **state)
{
	(void)state;
	struct library *lib = fake_library();
	struct node_ref held;
	const uint64_t ino = next_version(lib, &held);
	struct node_ref copy;   /* another ref that outlives the request: a hold of its own */
	assert_int_equal(library_get(lib, ino, false, &copy), 0);
	for (int i = 0; i < 3000; i++) {
		struct node_ref r;
		assert_true(next_version(lib, &r) != ino);
		library_put(lib, &r);
	}
	struct node_ref again;
	struct stat st;
	assert_int_equal(library_get(lib, ino, false, &again), 0);
	assert_true(again.hold[LIB_HOLD_SLOT] == held.hold[LIB_HOLD_SLOT]);
	node_stat(&again, NULL, &st);   /* (a use after free, for ASan) */
	assert_int_equal(st.st_ino, ino);
	library_put(lib, &again);
	library_put(lib, &held);
	assert_int_equal(held.hold[LIB_HOLD_FLAGS], 0);
	library_put(lib, &held);   /* a ref let go: nothing */
	assert_int_equal(library_get(lib, ino, false, &again), 0);   /* the copy's hold */
	library_put(lib, &again);
	library_put(lib, &copy);
	assert_int_equal(library_get(lib, ino, false, &again), -ESTALE);
	library_free(lib);
}

UNIT_TESTS(cmocka_unit_test(test_numbers_never_given_twice),
           cmocka_unit_test(test_held_versions_stay))
