/* Metadata edits through the tree (tree_edit.h), without FUSE: each kind of edit and
 * refusal with its errno; model.gguf of the edited tree parses back with the new values
 * and the same data section; readers on other threads always see one whole state while
 * edits are made (this test runs under ThreadSanitizer in CI). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gguf.h"
#include "model.h"
#include "tree.h"
#include "tree_edit.h"

struct fixture {
	struct ggufs_model *m;
	struct tree *base;
	struct tree_edits *e;
	char dir[64];
	char file[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	char err[GGUF_ERR_MAX];
	strcpy(f->dir, "/tmp/ggufs-tree-edit-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->file, sizeof f->file, "%s/fix.json", f->dir);
	f->m = model_open(TEST_DATA "/tinyllama-q4km.gguf", err);
	f->base = f->m ? tree_build(f->m, err) : NULL;
	f->e = f->base ? tree_edits_open(f->base, f->file, err) : NULL;
	if (!f->e) {
		print_error("%s\n", err);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	tree_edits_close(f->e);
	tree_free(f->base);
	model_close(f->m);
	unlink(f->file);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* The whole content of metadata/name in the current tree ("" when absent), malloc'd. */
static char *content(struct tree_edits *e, const char *name)
{
	struct tree *t = tree_edits_current(e);
	const struct tree_node *n = tree_lookup(t, 2, name);
	char *buf = calloc(1, n ? n->size + 1 : 1);
	if (n)
		assert_int_equal(tree_read(t, n, buf, n->size, 0), (int64_t)n->size);
	tree_release(t);
	return buf;
}

static uint64_t ino_of(struct tree_edits *e, const char *name)
{
	struct tree *t = tree_edits_current(e);
	const struct tree_node *n = tree_lookup(t, 2, name);
	uint64_t ino = n ? n->ino : 0;
	tree_release(t);
	return ino;
}

static void expect_content(struct tree_edits *e, const char *name, const char *want)
{
	char *got = content(e, name);
	assert_string_equal(got, want);
	free(got);
}

static void test_each_edit(void **state)
{
	struct fixture *f = *state;
	char err[GGUF_ERR_MAX];
	uint64_t name_ino = ino_of(f->e, "general.name"), ino;
	assert_int_equal(tree_edits_write(f->e, name_ino, "fixed\n", 6, err), 0);
	expect_content(f->e, "general.name", "fixed\n");

	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), 0);
	assert_int_equal(ino, ino_of(f->e, "my.key"));
	assert_true(ino > TREE_FIRST_META + f->m->meta->n_kv + 4 * f->m->n_tensors - 1);
	assert_int_equal(tree_edits_set_type(f->e, ino, "uint32", 6, err), 0);
	expect_content(f->e, "my.key", "0\n");
	assert_int_equal(tree_edits_write(f->e, ino, "7", 1, err), 0);
	assert_int_equal(tree_edits_write(f->e, ino, "x\n", 2, err), -EINVAL);
	assert_non_null(strstr(err, "my.key"));
	assert_int_equal(tree_edits_set_type(f->e, ino, "bool", 4, err), -EINVAL);
	assert_int_equal(tree_edits_set_type(f->e, ino, "int64", 5, err), 0);
	expect_content(f->e, "my.key", "7\n");
	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), -EEXIST);

	/* a rename keeps the ino; the name it takes is replaced */
	uint64_t arch = ino_of(f->e, "general.architecture");
	assert_int_equal(tree_edits_rename(f->e, "general.architecture", "general.arch", err), 0);
	assert_int_equal(ino_of(f->e, "general.arch"), arch);
	assert_int_equal(ino_of(f->e, "general.architecture"), 0);
	assert_int_equal(tree_edits_rename(f->e, "general.arch", "general.name", err), 0);
	expect_content(f->e, "general.name", "llama\n");
	assert_int_equal(tree_edits_unlink(f->e, "general.name", &ino, err), 0);
	assert_int_equal(ino, arch);
	assert_int_equal(tree_edits_unlink(f->e, "general.name", &ino, err), -ENOENT);

	/* refusals */
	assert_int_equal(tree_edits_create(f->e, "general.alignment", &ino, err), -EPERM);
	assert_non_null(strstr(err, "general.alignment"));
	assert_int_equal(tree_edits_create(f->e, "split.count", &ino, err), -EPERM);
	assert_int_equal(tree_edits_create(f->e, "a%2", &ino, err), -EINVAL);
	assert_int_equal(tree_edits_create(f->e, "a%2Fb", &ino, err), 0);   /* the key "a/b" */
	uint64_t bos = ino_of(f->e, "tokenizer.ggml.add_bos_token");
	assert_int_equal(tree_edits_precheck(f->e, bos, "tr", 2, err), 0);
	assert_int_equal(tree_edits_precheck(f->e, bos, "1", 1, err), -EINVAL);
	uint64_t bc = ino_of(f->e, "llama.block_count");
	assert_int_equal(tree_edits_precheck(f->e, bc, " 12\n", 4, err), 0);
	assert_int_equal(tree_edits_precheck(f->e, bc, "1x", 2, err), -EINVAL);

	/* model.gguf parses back: the edits in it, the data section byte for byte */
	struct tree *t = tree_edits_current(f->e);
	const struct tree_node *mn = tree_node(t, TREE_MODEL_INO);
	uint8_t *img = malloc(mn->size);
	assert_int_equal(tree_read(t, mn, (char *)img, mn->size, 0), (int64_t)mn->size);
	struct gguf_file g;
	assert_int_equal(gguf_parse(img, mn->size, &g, err), 0);
	assert_null(gguf_find_kv(&g, "general.name"));
	const struct gguf_kv *k = gguf_find_kv(&g, "my.key");
	assert_non_null(k);
	assert_int_equal(k->value.type, GGUF_TYPE_INT64);
	assert_int_equal(gguf_le64(k->value.data), 7);
	assert_ptr_equal(k, &g.kv[g.n_kv - 2]);   /* new keys last, in order */
	const struct gguf_file *own = &f->m->shards[0].gf;
	assert_int_equal(g.n_tensors, own->n_tensors);
	assert_int_equal(mn->size - g.data_offset, f->m->shards[0].size - own->data_offset);
	assert_memory_equal(img + g.data_offset, f->m->shards[0].map + own->data_offset,
	                    mn->size - g.data_offset);
	for (uint64_t i = 0; i < g.n_tensors; i++)
		assert_int_equal(g.tensors[i].offset - g.data_offset,
		                 own->tensors[i].offset - own->data_offset);
	gguf_file_free(&g);
	free(img);
	tree_release(t);

	/* a second open of FILE gives the same metadata */
	struct tree_edits *again = tree_edits_open(f->base, f->file, err);
	assert_non_null(again);
	expect_content(again, "my.key", "7\n");
	assert_int_equal(ino_of(again, "general.name"), 0);
	tree_edits_close(again);
}

struct race {
	struct tree_edits *e;
	const char *orig;       /* the model's own value's text */
	atomic_bool stop;
	atomic_int reads;
};

/* Reads general.name over and over: always one whole value, "vN\n" or the model's. */
static void *reader(void *arg)
{
	struct race *r = arg;
	while (!atomic_load(&r->stop)) {
		char *s = content(r->e, "general.name");
		size_t n = strlen(s);
		if (strcmp(s, r->orig) != 0) {
			if (n < 3 || s[0] != 'v' || s[n - 1] != '\n' || strspn(s + 1, "0123456789") != n - 2) {
				fprintf(stderr, "torn: '%s'\n", s);
				abort();
			}
		}
		free(s);
		atomic_fetch_add(&r->reads, 1);
	}
	return NULL;
}

static void test_readers_while_editing(void **state)
{
	struct fixture *f = *state;
	char err[GGUF_ERR_MAX], text[32];
	char *orig = content(f->e, "general.name");
	struct race r = { .e = f->e, .orig = orig };
	pthread_t th[2];
	uint64_t ino = ino_of(f->e, "general.name");
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
	for (int i = 0; i < 40; i++) {
		int n = snprintf(text, sizeof text, "v%d\n", i * 1000);
		assert_int_equal(tree_edits_write(f->e, ino, text, (uint64_t)n, err), 0);
	}
	atomic_store(&r.stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	assert_true(atomic_load(&r.reads) > 0);
	expect_content(f->e, "general.name", "v39000\n");
	free(orig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_each_edit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readers_while_editing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
