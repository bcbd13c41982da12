/* What the tree of an edit state holds of its own and what it shares with the trees
 * before it (issue 24 item 9): the tensor part (tree_tensors.c) with the model's own
 * tree, key names, index and nodes with the state before after an edit of values
 * (tree.c), measured with tree_held_bytes. Without FUSE. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "edits_fixture.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "model.h"
#include "tree.h"
#include "tree_edit.h"

/* The ino of metadata/name in the current tree of e (0 when absent). */
static uint64_t key_ino(struct tree_edits *e, const char *name)
{
	struct tree *t = tree_edits_current(e);
	const struct tree_node *n = tree_lookup(t, TREE_METADATA_DIR_INO, name);
	uint64_t ino = n ? n->ino : 0;
	tree_release(t);
	return ino;
}

/* A model of n_t f32 tensors of 8 elements called t.N and two keys, at path. */
static void write_many_tensors(const char *path, uint64_t n_t)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, n_t, 2);
	gw_kv_str(&w, "general.name", "many");
	gw_kv_u32(&w, "general.file_type", 0);
	uint64_t ne = 8;
	char name[32];
	for (uint64_t i = 0; i < n_t; i++) {
		snprintf(name, sizeof name, "t.%" PRIu64, i);
		gw_tensor(&w, name, 1, &ne, 0 /* f32 */, i * 32);
	}
	gw_align(&w, 32);
	for (uint64_t i = 0; i < n_t; i++)
		for (int j = 0; j < 8; j++)
			gw_f32(&w, (float)i + (float)j / 8);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* A model of n uint32 keys k.0000 ... (value i) and one tensor, at path. */
static void write_many_keys(const char *path, uint64_t n)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 1, n);
	char name[32];
	for (uint64_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "k.%04" PRIu64, i);
		gw_kv_u32(&w, name, (uint32_t)i);
	}
	uint64_t ne = 8;
	gw_tensor(&w, "t", 1, &ne, 0, 0);
	gw_align(&w, 32);
	gw_fill(&w, 0, 32);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* What no edit changes is built once and shared (issue 24 item 9): the tree of each
 * edit state of a model of 4000 tensors holds a few KiB of its own (its keys, model.gguf's
 * header up to the last key), not the 4000 tensors' nodes, names and tensor infos
 * again, and its tensor files are the very nodes of the base's; an edit of a value
 * shares the key names and their index of the state before; model.gguf and gguf.json
 * of a state are still whole and right: the edited value in them, every tensor's bytes
 * where the header says. */
static void test_states_share_tensors(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	const uint64_t n_t = 4000;
	struct edits_fixture f;
	assert_int_equal(edits_fixture_open(&f, "/tmp/ggufs-share-XXXXXX", "many.gguf",
	                                    write_many_tensors, n_t), 0);
	struct ggufs_model *m = f.m;
	struct tree *base = f.base;
	struct tree_edits *e = f.e;
	struct tree *held[5];
	for (int i = 0; i < 5; i++) {
		char text[32];
		int len = snprintf(text, sizeof text, "edit %d\n", i);
		assert_int_equal(tree_edits_write(e, key_ino(e, "general.name"), text, (uint64_t)len,
		                                  err), 0);
		held[i] = tree_edits_current(e);
	}
	uint64_t base_bytes = tree_held_bytes(base);
	assert_true(base_bytes > n_t * 100);
	for (int i = 0; i < 5; i++) {
		uint64_t b = tree_held_bytes(held[i]);
		if (b > 16384)
			print_error("state %d holds %" PRIu64 " bytes (base %" PRIu64 ")\n", i, b,
			            base_bytes);
		assert_true(b <= 16384);
		assert_ptr_equal(tree_lookup(held[i], TREE_TENSORS_DIR_INO, "t.3999.npy"),
		                 tree_lookup(base, TREE_TENSORS_DIR_INO, "t.3999.npy"));
		assert_ptr_equal(tree_lookup(held[i], TREE_STATS_DIR_INO, "t.7"),
		                 tree_lookup(base, TREE_STATS_DIR_INO, "t.7"));
		/* an edit of a value keeps every name: the names and their index are the
		 * state before's, the nodes (their sizes) the state's own */
		const struct tree_node *a = tree_lookup(held[i], TREE_METADATA_DIR_INO, "general.name");
		const struct tree_node *ft = tree_lookup(held[i], TREE_METADATA_DIR_INO,
		                                         "general.file_type");
		assert_non_null(a);
		assert_non_null(ft);
		assert_int_equal(a->index, 0);
		assert_int_equal(ft->index, 1);
		assert_int_equal(ft->ino, tree_key_ino(held[i], 1));
		if (i) {
			const struct tree_node *was = tree_lookup(held[i - 1], TREE_METADATA_DIR_INO,
			                                          "general.name");
			assert_ptr_equal(a->name, was->name);
			assert_ptr_not_equal(a, was);
		}
	}
	/* the oldest state held still reads whole: its model.gguf parses with its value and
	 * every tensor's bytes at its offset are the file's */
	struct tree *t = held[1];
	const struct tree_node *mn = tree_node(t, tree_model_ino(t));
	assert_non_null(mn);
	uint8_t *whole = malloc(mn->size), *file_bytes = malloc(model_stat(m)->st_size);
	assert_int_equal(tree_read(t, mn, (char *)whole, mn->size, 0, NULL), (int64_t)mn->size);
	const struct tree_node *on = tree_node(base, tree_model_ino(base));
	assert_int_equal(tree_read(base, on, (char *)file_bytes, on->size, 0, NULL), (int64_t)on->size);
	struct gguf_file gf;
	assert_int_equal(gguf_parse(whole, mn->size, &gf, err), 0);
	assert_int_equal(gf.n_tensors, n_t);
	assert_int_equal(gf.kv[0].value.size, 8 + 6);
	assert_memory_equal(gf.kv[0].value.data + 8, "edit 1", 6);
	for (uint64_t i = 0; i < n_t; i += 333)
		assert_memory_equal(whole + gf.tensors[i].offset,
		                    file_bytes + model_tensor(m, i)->offset, 32);
	gguf_file_free(&gf);
	/* gguf.json, sized when first asked for, holds the state's value, whole */
	const struct tree_node *jn = tree_lookup(t, TREE_ROOT_INO, "gguf.json");
	assert_non_null(jn);
	assert_true(jn->size > n_t * 50);
	char *json = malloc(jn->size + 1);
	assert_int_equal(tree_read(t, jn, json, jn->size, 0, NULL), (int64_t)jn->size);
	json[jn->size] = 0;
	assert_non_null(strstr(json, "\"edit 1\""));
	assert_non_null(strstr(json, "\"t.3999\""));
	assert_int_equal(json[jn->size - 1], '\n');
	free(json);
	free(whole);
	free(file_bytes);
	for (int i = 0; i < 5; i++)
		tree_release(held[i]);
	edits_fixture_close(&f);
}

/* Every key file of t has the size of its text, found by name and by number. */
static void expect_key_sizes(struct tree *t, uint64_t n)
{
	char name[32], text[64];
	for (uint64_t i = 0; i < n; i++) {
		snprintf(name, sizeof name, "k.%04" PRIu64, i);
		const struct tree_node *a = tree_lookup(t, TREE_METADATA_DIR_INO, name);
		assert_non_null(a);
		assert_ptr_equal(tree_node(t, a->ino), a);
		assert_ptr_equal(tree_dir_child(t, TREE_METADATA_DIR_INO, a->index), a);
		assert_true(a->size < sizeof text);
		assert_int_equal(tree_read(t, a, text, a->size, 0, NULL), (int64_t)a->size);
		assert_true(a->size >= 2 && text[a->size - 1] == '\n');
	}
}

/* An edit of values keeps its tree's key nodes too (issue 24 item 9): a state holds the
 * nodes of only the keys whose size changed since the nodes were made, not one per key
 * (200 keys, 5 edits: a few hundred bytes besides its key table and times), and past
 * n / 8 + 16 such keys it has all its own again; every key's size stays right in every
 * state, held or current. */
static void test_value_edits_share_nodes(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], name[32], text[32];
	const uint64_t n = 200;
	struct edits_fixture f;
	assert_int_equal(edits_fixture_open(&f, "/tmp/ggufs-nodes-XXXXXX", "keys.gguf",
	                                    write_many_keys, n), 0);
	struct tree_edits *e = f.e;
	struct tree *first = NULL;
	for (uint64_t i = 0; i < 60; i++) {
		snprintf(name, sizeof name, "k.%04" PRIu64, i);
		int len = snprintf(text, sizeof text, "%" PRIu64 "\n", 1000000 + i);
		assert_int_equal(tree_edits_write(e, key_ino(e, name), text, (uint64_t)len, err), 0);
		if (i == 4) {
			first = tree_edits_current(e);
			uint64_t own = tree_held_bytes(first), table = ov_state_bytes(tree_state(first));
			if (own > table + n * 16 + 4096)
				print_error("a state holds %" PRIu64 " bytes, its key table %" PRIu64 "\n",
				            own, table);
			assert_true(own <= table + n * 16 + 4096);
			expect_key_sizes(first, n);
		}
	}
	struct tree *t = tree_edits_current(e);
	expect_key_sizes(t, n);
	const struct tree_node *k3 = tree_lookup(t, TREE_METADATA_DIR_INO, "k.0003");
	const struct tree_node *k59 = tree_lookup(t, TREE_METADATA_DIR_INO, "k.0059");
	const struct tree_node *k60 = tree_lookup(t, TREE_METADATA_DIR_INO, "k.0060");
	assert_int_equal(k3->size, 8);
	assert_int_equal(k59->size, 8);
	assert_int_equal(k60->size, 3);
	/* the state held after 5 edits: k.0004 edited, k.0005 not yet */
	assert_int_equal(tree_lookup(first, TREE_METADATA_DIR_INO, "k.0004")->size, 8);
	assert_int_equal(tree_lookup(first, TREE_METADATA_DIR_INO, "k.0005")->size, 2);
	expect_key_sizes(first, n);
	tree_release(t);
	tree_release(first);
	edits_fixture_close(&f);
}

/* Writes text to metadata/name of e: tree_edits_write's result. */
static int write_key(struct tree_edits *e, const char *name, const char *text)
{
	char err[GGUF_ERR_MAX];
	return tree_edits_write(e, key_ino(e, name), text, strlen(text), err);
}

/* model.gguf is a new inode in each state (issue 38 item 1): tree_edits_holding answers
 * an older state's from that state while something holds it, and for the last states
 * whether held or not (two always, eight for a second); once no one holds an older one
 * and it is past those, the next edit lets it go (NULL: the kernel is told ESTALE and
 * looks the name up again). A key's inode is the current tree's. */
static void test_older_states_held(void **state)
{
	(void)state;
	struct edits_fixture f;
	assert_int_equal(edits_fixture_open(&f, "/tmp/ggufs-held-XXXXXX", "keys.gguf",
	                                    write_many_keys, 4), 0);
	struct tree *first = tree_edits_current(f.e);
	uint64_t first_model = tree_model_ino(first);
	char text[16];
	for (int i = 0; i < 5; i++) {
		snprintf(text, sizeof text, "%d\n", 100 + i);
		assert_int_equal(write_key(f.e, "k.0000", text), 0);
	}
	struct tree *now = tree_edits_current(f.e);
	assert_int_not_equal(tree_model_ino(now), first_model);
	/* model.gguf's number in a state far past the current one */
	const uint64_t far = first_model + 1000 * (tree_model_ino(now) - first_model);
	struct tree *t = tree_edits_holding(f.e, first_model);
	assert_ptr_equal(t, first);   /* held by us: answered from it */
	tree_release(t);
	t = tree_edits_holding(f.e, key_ino(f.e, "k.0001"));
	assert_ptr_equal(t, now);
	tree_release(t);
	tree_release(now);
	/* the state before the current one, held by no one: kept for a lookup just made */
	assert_int_equal(write_key(f.e, "k.0000", "7\n"), 0);
	now = tree_edits_current(f.e);
	uint64_t model_before = tree_model_ino(now);
	tree_release(now);
	assert_int_equal(write_key(f.e, "k.0000", "8\n"), 0);
	t = tree_edits_holding(f.e, model_before);
	assert_non_null(t);
	assert_int_equal(tree_model_ino(t), model_before);
	tree_release(t);
	/* let go of: kept for a while (8 states, 1 s), then gone at the next edits */
	tree_release(first);
	for (int i = 0; i < 3; i++)
		assert_int_equal(write_key(f.e, "k.0000", i % 2 ? "9\n" : "10\n"), 0);
	t = tree_edits_holding(f.e, model_before);
	assert_non_null(t);   /* young */
	tree_release(t);
	for (int i = 0; i < 8; i++)
		assert_int_equal(write_key(f.e, "k.0000", i % 2 ? "9\n" : "10\n"), 0);
	assert_null(tree_edits_holding(f.e, first_model));
	assert_null(tree_edits_holding(f.e, model_before));
	assert_null(tree_edits_holding(f.e, far));
	edits_fixture_close(&f);
}

/* tree_edits_check says what tree_edits_write would, making nothing (an empty number is
 * refused at the close of a truncation before the last without counting a refusal). */
static void test_check_makes_nothing(void **state)
{
	(void)state;
	struct edits_fixture f;
	char err[GGUF_ERR_MAX];
	assert_int_equal(edits_fixture_open(&f, "/tmp/ggufs-check-XXXXXX", "keys.gguf",
	                                    write_many_keys, 4), 0);
	uint64_t ino = key_ino(f.e, "k.0002");
	struct tree *before = tree_edits_current(f.e);
	assert_int_equal(tree_edits_check(f.e, ino, "", 0, err), -EINVAL);
	assert_non_null(strstr(err, "k.0002"));
	assert_int_equal(tree_edits_check(f.e, ino, "x\n", 2, err), -EINVAL);
	assert_int_equal(tree_edits_check(f.e, ino, "77\n", 3, err), 0);
	assert_int_equal(tree_edits_check(f.e, ino, "2\n", 2, err), 0);   /* its rendering */
	struct tree *after = tree_edits_current(f.e);
	assert_ptr_equal(after, before);   /* no new state */
	tree_release(after);
	tree_release(before);
	edits_fixture_close(&f);
}

UNIT_TESTS(cmocka_unit_test(test_states_share_tensors),
           cmocka_unit_test(test_value_edits_share_nodes),
           cmocka_unit_test(test_older_states_held),
           cmocka_unit_test(test_check_makes_nothing))
