/* The names of a library folder (library_names.h): models from single files and split
 * sets, folders and other files as themselves, and each collision rule the man page
 * states, with the sets and versions the library keeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "library_names.h"

/* Entries named by names (a trailing '/' makes a folder), version i + 1 each. */
static struct lib_entry *entries(const char *const *names, size_t n)
{
	struct lib_entry *e = calloc(n, sizeof *e);
	assert_non_null(e);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]);
		bool dir = names[i][len - 1] == '/';
		e[i].name = strndup(names[i], dir ? len - 1 : len);
		e[i].type = dir ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
		e[i].version = i + 1;
	}
	return e;
}

/* A folder's entries and the names lib_names gave them, as each test reads them. */
struct named {
	struct lib_entry *e;
	size_t n;
	struct lib_name *ln;
	size_t count;
};

/* Names the entries of l anew (root: as the library's root), which must succeed. */
static void name_all(struct named *l, bool root)
{
	assert_int_equal(lib_names(l->e, l->n, root, &l->ln, &l->count), 0);
}

/* The names, at the root, of the entries called src[0..n) (as entries() makes them). */
static struct named named_of(const char *const *src, size_t n)
{
	struct named l = { .e = entries(src, n), .n = n };
	name_all(&l, true);
	return l;
}

/* Frees what named_of made and name_all named last. */
static void named_free(struct named *l)
{
	lib_names_free(l->ln, l->count);
	lib_entries_free(l->e, l->n);
}

/* The name shown for the entry called source, or fails. */
static const struct lib_name *shown_for(const struct named *l, const char *source)
{
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->e[l->ln[i].entry].name, source) == 0)
			return &l->ln[i];
	fail_msg("no name for %s", source);
	return NULL;
}

static void test_models_and_sets(void **state)
{
	(void)state;
	const char *src[] = { "q-00002-of-00003.gguf", "README.md", "q-00001-of-00003.gguf",
	                      "pub/", "one.gguf", "q-00003-of-00003.gguf", "imatrix.dat",
	                      "lone-00002-of-00002.gguf", ".gguf", "x.GGUF" };
	struct named l = named_of(src, sizeof src / sizeof src[0]);
	const char *want[] = { ".gguf", "README.md", "imatrix.dat", "lone", "one", "pub", "q",
	                       "x.GGUF" };
	assert_int_equal(l.count, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < l.count; i++)
		assert_string_equal(l.ln[i].name, want[i]);   /* sorted by name */
	const struct lib_name *q = shown_for(&l, "q-00001-of-00003.gguf");
	assert_string_equal(q->name, "q");
	assert_int_equal(q->type, LIB_NODE_MODEL);
	assert_int_equal(q->files, 3);
	/* a set's version changes with any of its files' */
	uint64_t v = q->version;
	/* a set without its first shard: named all the same, its lowest shard first */
	const struct lib_name *lone = shown_for(&l, "lone-00002-of-00002.gguf");
	assert_int_equal(lone->type, LIB_NODE_MODEL);
	assert_int_equal(lone->files, 1);
	/* ".gguf" alone has no NAME, and only lower-case .gguf makes a model */
	assert_int_equal(shown_for(&l, ".gguf")->type, LIB_NODE_FILE);
	assert_int_equal(shown_for(&l, "x.GGUF")->type, LIB_NODE_FILE);
	assert_int_equal(shown_for(&l, "pub")->type, LIB_NODE_DIR);
	lib_names_free(l.ln, l.count);
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.e[i].name, "q-00003-of-00003.gguf") == 0)
			l.e[i].version = 99;
	name_all(&l, true);
	assert_true(shown_for(&l, "q-00001-of-00003.gguf")->version != v);
	named_free(&l);
}

static void test_collisions(void **state)
{
	(void)state;
	/* a folder a/ beside a.gguf; two sets of one NAME (3 and 2 shards) and a single
	 * file of it; models.tsv taken at the root only; k.gguf beside a folder k/ and a
	 * model whose NAME is k.gguf */
	const char *src[] = { "a/", "a.gguf", "s-00001-of-00003.gguf", "s-00001-of-00002.gguf",
	                      "s-00002-of-00002.gguf", "s.gguf", "models.tsv", "models.json/",
	                      "k/", "k.gguf", "k.gguf.gguf" };
	struct named l = named_of(src, sizeof src / sizeof src[0]);
	assert_string_equal(shown_for(&l, "a")->name, "a");
	assert_int_equal(shown_for(&l, "a")->type, LIB_NODE_DIR);
	assert_string_equal(shown_for(&l, "a.gguf")->name, "a.gguf");
	/* byte order of first files: s-00001-of-00002 < s-00001-of-00003 < s.gguf */
	assert_string_equal(shown_for(&l, "s-00001-of-00002.gguf")->name, "s");
	assert_int_equal(shown_for(&l, "s-00001-of-00002.gguf")->files, 2);
	assert_string_equal(shown_for(&l, "s-00001-of-00003.gguf")->name,
	                    "s-00001-of-00003.gguf");
	assert_string_equal(shown_for(&l, "s.gguf")->name, "s.gguf");
	assert_string_equal(shown_for(&l, "k.gguf")->name, "k.gguf");
	assert_string_equal(shown_for(&l, "k.gguf.gguf")->name, "k.gguf.gguf");
	for (size_t i = 0; i < l.count; i++) {
		assert_string_not_equal(l.ln[i].name, "models.tsv");
		assert_string_not_equal(l.ln[i].name, "models.json");
		for (size_t j = i + 1; j < l.count; j++)
			assert_string_not_equal(l.ln[i].name, l.ln[j].name);
	}
	assert_int_equal(l.count, l.n - 3);   /* the two of the root's names, one set of two */
	lib_names_free(l.ln, l.count);
	/* below the root, models.tsv is a file like any other */
	name_all(&l, false);
	assert_int_equal(l.count, l.n - 1);
	named_free(&l);
}

/* A model folder (model_folder set by the source) is a model of its own name, one file,
 * its entry's version; a model file of that NAME beside it is named after its file. */
static void test_model_folder(void **state)
{
	(void)state;
	const char *src[] = { "qwen/", "qwen.gguf", "plain/" };
	struct named l = { .e = entries(src, 3), .n = 3 };
	l.e[0].model_folder = true;
	name_all(&l, true);
	const struct lib_name *q = shown_for(&l, "qwen");
	assert_string_equal(q->name, "qwen");
	assert_int_equal(q->type, LIB_NODE_MODEL);
	assert_int_equal(q->files, 1);
	assert_int_equal(q->version, 1);
	assert_string_equal(shown_for(&l, "qwen.gguf")->name, "qwen.gguf");
	assert_int_equal(shown_for(&l, "plain")->type, LIB_NODE_DIR);
	named_free(&l);
}

static void test_empty(void **state)
{
	(void)state;
	struct lib_name *ln;
	size_t count = 7;
	assert_int_equal(lib_names(NULL, 0, true, &ln, &count), 0);
	assert_int_equal(count, 0);
	lib_names_free(ln, count);
}

UNIT_TESTS(cmocka_unit_test(test_models_and_sets),
           cmocka_unit_test(test_collisions),
           cmocka_unit_test(test_model_folder),
           cmocka_unit_test(test_empty))
