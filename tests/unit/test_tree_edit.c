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
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "edits_file.h"
#include "gguf.h"
#include "gguf_write.h"
#include "edits_fixture.h"
#include "gguf_writer.h"
#include "model.h"
#include "scratch.h"
#include "test_kit.h"
#include "tree.h"
#include "tree_edit.h"

static int setup(void **state)
{
	struct edits_fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	if (edits_fixture_open(f, "/tmp/ggufs-tree-edit-XXXXXX", TEST_DATA "/tinyllama-q4km.gguf",
	                       NULL, 0) < 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	edits_fixture_close(*state);
	free(*state);
	return 0;
}

/* The whole content of metadata/name in the current tree ("" when absent), malloc'd. */
static char *content(struct tree_edits *e, const char *name)
{
	struct tree *t = tree_edits_current(e);
	const struct tree_node *n = tree_lookup(t, 2, name);
	char *buf = calloc(1, n ? n->size + 1 : 1);
	if (n)
		assert_int_equal(tree_read(t, n, buf, n->size, 0, NULL), (int64_t)n->size);
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
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	uint64_t name_ino = ino_of(f->e, "general.name"), ino;
	assert_int_equal(tree_edits_write(f->e, name_ino, "fixed\n", 6, err), 0);
	expect_content(f->e, "general.name", "fixed\n");

	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), 0);
	assert_int_equal(ino, ino_of(f->e, "my.key"));
	assert_true(ino > TREE_FIRST_META + model_meta(f->m)->n_kv + 4 * model_n_tensors(f->m) - 1);
	assert_int_equal(tree_edits_set_type(f->e, ino, "uint32", 6, err), 0);
	expect_content(f->e, "my.key", "0\n");
	assert_int_equal(tree_edits_write(f->e, ino, "7", 1, err), 0);
	assert_int_equal(tree_edits_write(f->e, ino, "x\n", 2, err), -EINVAL);
	assert_non_null(strstr(err, "my.key"));
	assert_int_equal(tree_edits_set_type(f->e, ino, "bool", 4, err), -EINVAL);
	assert_int_equal(tree_edits_set_type(f->e, ino, "int64", 5, err), 0);
	expect_content(f->e, "my.key", "7\n");
	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), -EEXIST);

	/* a rename keeps the ino; a rename over a key sets that key's value, parsed by its
	 * type, in its place and with its ino (sed -i), and the renamed key is gone */
	uint64_t arch = ino_of(f->e, "general.architecture");
	uint64_t gname = ino_of(f->e, "general.name");
	assert_int_equal(tree_edits_rename(f->e, "general.architecture", "general.arch", err), 0);
	assert_int_equal(ino_of(f->e, "general.arch"), arch);
	assert_int_equal(ino_of(f->e, "general.architecture"), 0);
	assert_int_equal(tree_edits_rename(f->e, "general.arch", "general.name", err), 0);
	expect_content(f->e, "general.name", "llama\n");
	assert_int_equal(ino_of(f->e, "general.arch"), 0);
	assert_int_equal(tree_edits_create(f->e, "sedAbc123", &ino, err), 0);
	uint64_t eos = ino_of(f->e, "tokenizer.ggml.eos_token_id");
	assert_int_equal(tree_edits_write(f->e, ino, "7\n", 2, err), 0);
	assert_int_equal(tree_edits_rename(f->e, "sedAbc123", "tokenizer.ggml.eos_token_id", err), 0);
	assert_int_equal(ino_of(f->e, "tokenizer.ggml.eos_token_id"), eos);
	assert_int_equal(ino_of(f->e, "sedAbc123"), 0);
	{
		struct tree *t = tree_edits_current(f->e);
		const struct tree_node *n = tree_node(t, eos);
		assert_int_equal(model_meta(tree_model(t))->kv[n->index].value.type, GGUF_TYPE_UINT32);
		tree_release(t);
	}
	expect_content(f->e, "tokenizer.ggml.eos_token_id", "7\n");
	assert_int_equal(tree_edits_create(f->e, "bad.tmp", &ino, err), 0);   /* not a number */
	assert_int_equal(tree_edits_write(f->e, ino, "x\n", 2, err), 0);
	assert_int_equal(tree_edits_rename(f->e, "bad.tmp", "tokenizer.ggml.eos_token_id", err),
	                 -EINVAL);
	expect_content(f->e, "tokenizer.ggml.eos_token_id", "7\n");
	assert_int_equal(tree_edits_unlink(f->e, "bad.tmp", &ino, err), 0);
	assert_int_equal(tree_edits_unlink(f->e, "general.name", &ino, err), 0);
	assert_int_equal(ino, gname);
	assert_int_equal(tree_edits_unlink(f->e, "general.name", &ino, err), -ENOENT);

	/* refusals */
	assert_int_equal(tree_edits_create(f->e, "general.alignment", &ino, err), -EPERM);
	assert_non_null(strstr(err, "general.alignment"));
	assert_int_equal(tree_edits_create(f->e, "split.count", &ino, err), -EPERM);
	assert_int_equal(tree_edits_create(f->e, "a%2", &ino, err), -EINVAL);
	assert_int_equal(tree_edits_create(f->e, "a%2Fb", &ino, err), 0);   /* the key "a/b" */
	uint64_t bos = ino_of(f->e, "tokenizer.ggml.add_bos_token");
	assert_int_equal(tree_edits_precheck(f->e, bos, "tr", 2, NULL, err), 0);
	assert_int_equal(tree_edits_precheck(f->e, bos, "1", 1, NULL, err), -EINVAL);
	uint64_t bc = ino_of(f->e, "llama.block_count");
	assert_int_equal(tree_edits_precheck(f->e, bc, " 12\n", 4, NULL, err), 0);
	assert_int_equal(tree_edits_precheck(f->e, bc, "1x", 2, NULL, err), -EINVAL);

	/* model.gguf parses back: the edits in it, the data section byte for byte */
	struct tree *t = tree_edits_current(f->e);
	/* a file of its own per state: the number of no other state */
	const struct tree_node *mn = tree_node(t, tree_model_ino(t));
	assert_ptr_equal(mn, tree_lookup(t, TREE_ROOT_INO, "model.gguf"));
	assert_null(tree_node(t, tree_model_ino(f->base)));
	assert_true(tree_ino_per_state(mn->ino) && tree_ino_state_root(t, mn->ino));
	assert_true(mn->ino > tree_model_ino(f->base));
	assert_int_equal(tree_model_ino(f->base), TREE_ZONE_P);   /* state 0's first number */
	uint8_t *img = malloc(mn->size);
	assert_int_equal(tree_read(t, mn, (char *)img, mn->size, 0, NULL), (int64_t)mn->size);
	struct gguf_file g;
	assert_int_equal(gguf_parse(img, mn->size, &g, err), 0);
	assert_null(gguf_find_kv(&g, "general.name"));
	const struct gguf_kv *k = gguf_find_kv(&g, "my.key");
	assert_non_null(k);
	assert_int_equal(k->value.type, GGUF_TYPE_INT64);
	assert_int_equal(gguf_le64(k->value.data), 7);
	assert_ptr_equal(k, &g.kv[g.n_kv - 2]);   /* new keys last, in order */
	const struct gguf_file *own = model_own_meta(f->m);
	struct model_file_info file;
	model_file(f->m, 0, &file);
	assert_int_equal(g.n_tensors, own->n_tensors);
	assert_int_equal(mn->size - g.data_offset, file.size - own->data_offset);
	/* the file's mapping: where its first tensor's bytes are, less their offset */
	const uint8_t *map = model_tensor_mapped(f->m, 0) - model_tensor(f->m, 0)->offset;
	assert_memory_equal(img + g.data_offset, map + own->data_offset, mn->size - g.data_offset);
	for (uint64_t i = 0; i < g.n_tensors; i++)
		assert_int_equal(g.tensors[i].offset - g.data_offset,
		                 own->tensors[i].offset - own->data_offset);
	gguf_file_free(&g);
	free(img);
	tree_release(t);

	/* FILE is held: a second open while it is is refused; once closed, an open gives
	 * the same metadata */
	assert_null(tree_edits_open(f->base, f->file, NULL, err));
	assert_non_null(strstr(err, "in use by another mount"));
	tree_edits_close(f->e);
	f->e = tree_edits_open(f->base, f->file, NULL, err);
	assert_non_null(f->e);
	expect_content(f->e, "my.key", "7\n");
	assert_int_equal(ino_of(f->e, "general.name"), 0);
}

struct race {
	struct tree_edits *e;
	const char *orig;       /* the model's own value's text */
	atomic_bool stop;
	atomic_int reads;
};

/* Reads general.name over and over: always one whole value, "vN\n" or the model's. */
/* An edit whose FILE would be larger than a mount loads is EFBIG and changes nothing,
 * in the tree or in FILE (the cap made small here: the real one is 1 GiB, and the patch
 * inflates a value, x6 for control bytes). */
static void test_file_too_large(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX], before[4096], after[4096];
	FILE *in = fopen(f->file, "r");
	assert_non_null(in);
	size_t n = fread(before, 1, sizeof before, in);
	fclose(in);
	tree_edits_set_file_max(f->e, n + 64);
	uint64_t name = ino_of(f->e, "general.name");
	char ctl[40];
	memset(ctl, 1, sizeof ctl);   /* 40 bytes of \x01: 240 in JSON */
	assert_int_equal(tree_edits_write(f->e, name, ctl, sizeof ctl, err), -EFBIG);
	assert_non_null(strstr(err, "more than the"));
	expect_content(f->e, "general.name", "tinyllama-test\n");
	in = fopen(f->file, "r");
	assert_non_null(in);
	assert_int_equal(fread(after, 1, sizeof after, in), n);
	fclose(in);
	assert_memory_equal(before, after, n);
	assert_int_equal(tree_edits_write(f->e, name, "ok\n", 3, err), 0);   /* within it */
}

/* A name longer than any key's file name (217 bytes: a cut name with its hash) is
 * ENAMETOOLONG before it is decoded, to create and to rename alike, up to 1,024 bytes
 * of letters or of escapes; the longest name that is a key's is still taken. Nothing
 * changes for a refused one. */
/* The fd of the file model.gguf of the current tree is byte for byte, or -1. */
static int file_fd_now(struct tree_edits *e)
{
	struct tree *t = tree_edits_current(e);
	int fd = tree_model_file_fd(t);
	tree_release(t);
	return fd;
}

/* model.gguf is the file itself (passthrough may hand it to the kernel) before any
 * edit, not after one, and again once the edit is undone; the model's own tree always. */
static void test_model_is_the_file(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	int fd = tree_model_file_fd(f->base);
	assert_true(fd >= 0);
	assert_int_equal(file_fd_now(f->e), fd);
	char *old = content(f->e, "general.name");
	uint64_t ino = ino_of(f->e, "general.name");
	assert_int_equal(tree_edits_write(f->e, ino, "another\n", 8, err), 0);
	assert_int_equal(file_fd_now(f->e), -1);
	assert_int_equal(tree_edits_write(f->e, ino, old, strlen(old), err), 0);
	assert_int_equal(file_fd_now(f->e), fd);
	/* a key that is new is never undone by a value */
	uint64_t added;
	assert_int_equal(tree_edits_create(f->e, "x.new", &added, err), 0);
	assert_int_equal(file_fd_now(f->e), -1);
	assert_int_equal(tree_model_file_fd(f->base), fd);
	free(old);
}

static void test_long_names(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX], name[1025];
	uint64_t ino;
	static const size_t lens[] = { 218, 226, 255, 256, 1000, 1024 };
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		for (int esc = 0; esc < 2; esc++) {
			for (size_t k = 0; k < lens[i]; k++)
				name[k] = esc ? "%2F"[k % 3] : 'A';
			name[lens[i]] = 0;
			assert_int_equal(tree_edits_create(f->e, name, &ino, err), -ENAMETOOLONG);
			assert_non_null(strstr(err, "longer than any key's file name"));
			assert_int_equal(tree_edits_rename(f->e, "general.name", name, err), -ENAMETOOLONG);
			assert_int_not_equal(ino_of(f->e, "general.name"), 0);
		}
	memset(name, 'A', 200);   /* 200 bytes: the longest name shown uncut */
	name[200] = 0;
	assert_int_equal(tree_edits_create(f->e, name, &ino, err), 0);
	assert_int_equal(ino_of(f->e, name), ino);
	name[201] = 0;
	name[200] = 'A';   /* 201 bytes would be shown cut with a hash: no key's name */
	assert_int_equal(tree_edits_create(f->e, name, &ino, err), -EINVAL);
}

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
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX], text[32];
	char *orig = content(f->e, "general.name");
	struct race r = { .e = f->e, .orig = orig };
	pthread_t th[2];
	uint64_t ino = ino_of(f->e, "general.name");
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, reader, &r), 0);
	/* the readers under way first (10 s at most): 40 edits take a few ms, and a loaded
	 * machine may not run a reader before they are done */
	for (int w = 0; w < 10000 && atomic_load(&r.reads) < 2; w++)
		usleep(1000);
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

/* A model with a key of every value type, and the values whose text or JSON loses
 * bytes: a NaN with a payload, a bool byte of 2, a string that is not UTF-8, arrays of
 * arrays, the extremes of every integer type. */
static void write_every_type(const char *path)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 1, 20);
	gw_kv_str(&w, "general.architecture", "test");
	gw_key(&w, "u8", GGUF_TYPE_UINT8), gw_u8(&w, 255);
	gw_key(&w, "i8", GGUF_TYPE_INT8), gw_u8(&w, 0x80);
	gw_key(&w, "u16", GGUF_TYPE_UINT16), gw_u16(&w, 65535);
	gw_key(&w, "i16", GGUF_TYPE_INT16), gw_u16(&w, 0x8000);
	gw_kv_u32(&w, "u32", 4294967295u);
	gw_key(&w, "i32", GGUF_TYPE_INT32), gw_u32(&w, 0x80000000u);
	gw_kv_u64(&w, "u64", UINT64_MAX);
	gw_key(&w, "i64", GGUF_TYPE_INT64), gw_u64(&w, 0x8000000000000000u);
	gw_key(&w, "f32.nan", GGUF_TYPE_FLOAT32), gw_u32(&w, 0x7fc01234u);
	gw_key(&w, "f64", GGUF_TYPE_FLOAT64), gw_f64(&w, -2.2250738585072014e-308);
	gw_key(&w, "f32.tiny", GGUF_TYPE_FLOAT32), gw_u32(&w, 1);   /* the least subnormal */
	gw_key(&w, "bool.two", GGUF_TYPE_BOOL), gw_u8(&w, 2);
	gw_key(&w, "str.bytes", GGUF_TYPE_STRING), gw_strn(&w, "a\0\r\n\xff\n\n", 7);
	gw_key(&w, "arr.str", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_STRING, 3);
	gw_str(&w, "x\\y\tz"), gw_strn(&w, "\x7f\x01\xc3", 3), gw_str(&w, "");
	gw_key(&w, "arr.f64", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_FLOAT64, 2);
	gw_f64(&w, 0.1), gw_u64(&w, 0xfff0000000000000u);
	gw_key(&w, "arr.arr", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_ARRAY, 2);
	gw_array(&w, GGUF_TYPE_INT16, 2), gw_u16(&w, 1), gw_u16(&w, 0xffff);
	gw_array(&w, GGUF_TYPE_UINT8, 1), gw_u8(&w, 9);   /* another inner type: lost in text */
	gw_key(&w, "arr.empty", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_BOOL, 0);
	gw_key(&w, "arr.arr.str", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_ARRAY, 1);
	gw_array(&w, GGUF_TYPE_STRING, 1), gw_strn(&w, "\xfe", 1);
	gw_key(&w, "arr.bool", GGUF_TYPE_ARRAY), gw_array(&w, GGUF_TYPE_BOOL, 2);
	gw_u8(&w, 1), gw_u8(&w, 3);
	uint64_t ne[1] = { 8 };
	gw_tensor(&w, "t", 1, ne, 0, 0);
	gw_align(&w, 32);
	gw_fill(&w, 0x3f, 32);
	size_t len;
	uint8_t *img = gw_take(&w, &len);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(img, 1, len, f), len);
	fclose(f);
	free(img);
}

/* Every key of the every-type model written back as it shows changes nothing (even
 * where parsing the text alone would: the NaN's payload, the bool's 2, the inner
 * array's own type); each also set on a new key keeps its bytes through the edits file
 * (payload_hex where JSON would lose them) and a second open. */
static void test_every_type_round_trip(void **state)
{
	(void)state;
	char dir[] = "/tmp/ggufs-every-XXXXXX", path[64], file[64], err[GGUF_ERR_MAX];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/every.gguf", dir);
	snprintf(file, sizeof file, "%s/fix.json", dir);
	write_every_type(path);
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		print_error("%s\n", err);
	assert_non_null(m);
	struct tree *base = tree_build(m, test_kit(), err);
	struct tree_edits *e = tree_edits_open(base, file, NULL, err);
	assert_non_null(e);
	uint64_t n = model_meta(m)->n_kv;
	for (uint64_t k = 0; k < n; k++) {
		struct tree *t = tree_edits_current(e);
		const struct tree_node *nd = tree_node(t, TREE_FIRST_META + k);
		char *text = malloc(nd->size + 1);
		assert_int_equal(tree_read(t, nd, text, nd->size, 0, NULL), (int64_t)nd->size);
		assert_int_equal(tree_edits_write(e, nd->ino, text, nd->size, err), 0);
		/* the same text under a new name: a value of the same type and rendering */
		char name[80];
		uint64_t ino;
		snprintf(name, sizeof name, "copy.%s", nd->name);
		assert_int_equal(tree_edits_create(e, name, &ino, err), 0);
		char tname[128];
		int64_t tl = tree_getxattr(t, nd, "user.gguf.type", tname, sizeof tname);
		assert_true(tl > 0);
		if (strcmp(tname, "string") != 0 || tl != 6)
			assert_int_equal(tree_edits_set_type(e, ino, tname, (uint64_t)tl, err), 0);
		int r = tree_edits_write(e, ino, text, nd->size, err);
		if (r)
			print_error("%s: %s\n", nd->name, err);
		assert_int_equal(r, 0);
		free(text);
		tree_release(t);
	}
	/* the model's own keys are untouched: the same bytes, in the same place */
	struct tree *t = tree_edits_current(e);
	const struct ov_state *st = tree_state(t);
	assert_int_equal(st->n, 2 * n);
	for (uint64_t k = 0; k < n; k++)
		assert_true(ov_value_equal(&st->keys[k].kv.value, &model_meta(m)->kv[k].value));
	/* FILE holds the copies exactly: an open after close reads the same state (t, held,
	 * keeps the old one) */
	tree_edits_close(e);
	e = NULL;
	struct tree_edits *again = tree_edits_open(base, file, NULL, err);
	if (!again)
		print_error("%s\n", err);
	assert_non_null(again);
	struct tree *t2 = tree_edits_current(again);
	const struct ov_state *s2 = tree_state(t2);
	assert_int_equal(s2->n, st->n);
	for (uint64_t i = 0; i < st->n; i++) {
		assert_int_equal(s2->keys[i].kv.key.len, st->keys[i].kv.key.len);
		assert_true(ov_value_equal(&s2->keys[i].kv.value, &st->keys[i].kv.value));
	}
	tree_release(t2);
	tree_release(t);
	tree_edits_close(again);
	tree_edits_close(e);
	tree_free(base);
	model_close(m);
	unlink(file);
	unlink(path);
	rmdir(dir);
}

/* The text of scratch file name (NULL when there is none), malloc'd. */
static char *scratch_content(struct tree_edits *e, const char *name)
{
	struct scratch_file *sf = scratch_by_name(tree_edits_scratch(e), name);
	char *text = NULL;
	uint64_t len;
	if (sf)
		assert_int_equal(scratch_text(sf, &text, &len), 0);
	scratch_drop(sf);
	return text;
}

/* True when the current tree's metadata holds a key called key. */
static bool has_key(struct tree_edits *e, const char *key)
{
	struct tree *t = tree_edits_current(e);
	const struct ggufs_model *m = tree_model(t);
	bool found = false;
	for (uint64_t k = 0; k < model_meta(m)->n_kv; k++)
		found |= model_meta(m)->kv[k].key.len == strlen(key) &&
		         memcmp(model_meta(m)->kv[k].key.ptr, key, strlen(key)) == 0;
	tree_release(t);
	return found;
}

/* Editors' scratch files (issue 24 items 10, 11): they never become keys; a key renamed to
 * one is moved aside, in the metadata still, until its name is made again (vim's save:
 * KEY -> KEY~, create KEY, write, remove KEY~: the key keeps its type, place and ino) or
 * the scratch file goes (the key with it); a scratch file renamed over a key sets it. */
/* prechecks text as one writer writing it in order from the start, in pieces of step
 * bytes: the return of the first refusal (with the bytes written by then in *at), or 0. */
static int precheck_in_pieces(struct tree_edits *e, uint64_t ino, const char *text,
                              size_t step, size_t *at, char err[GGUF_ERR_MAX])
{
	struct edit_lines lines = { .from = 0, .line = 1, .end = 0 };
	size_t len = strlen(text);
	for (*at = 0; *at < len; ) {
		*at += len - *at < step ? len - *at : step;
		lines.end = *at;
		int r = tree_edits_precheck(e, ino, text, *at, &lines, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* An array's text is refused at the write that holds a whole line that is no element
 * (or, for numbers, a line begun that can no longer be one), named by its number; a
 * text that parses, and a copy of the file as shown, pass every write. */
static void test_precheck_arrays(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	size_t at;
	uint64_t types = ino_of(f->e, "tokenizer.ggml.token_type");     /* array[int32] */
	uint64_t scores = ino_of(f->e, "tokenizer.ggml.scores");        /* array[float32] */
	uint64_t tokens = ino_of(f->e, "tokenizer.ggml.tokens");        /* array[string] */
	assert_int_equal(precheck_in_pieces(f->e, types, "1\n2\n-3\n", 1, &at, err), 0);
	assert_int_equal(precheck_in_pieces(f->e, types, "1\n2\nabc\n4\n", 3, &at, err), -EINVAL);
	assert_int_equal(at, 6);   /* "a" can begin no int32 */
	assert_non_null(strstr(err, "tokenizer.ggml.token_type: line 3 "));
	assert_int_equal(precheck_in_pieces(f->e, types, "1\n99999999999\n", 64, &at, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: "));
	assert_int_equal(precheck_in_pieces(f->e, scores, "0.5\n-1e-05\nnan\n", 2, &at, err), 0);
	assert_int_equal(precheck_in_pieces(f->e, scores, "0.5\n1.5.5\n", 64, &at, err), -EINVAL);
	assert_non_null(strstr(err, "line 2: "));
	assert_int_equal(precheck_in_pieces(f->e, tokens, "a\n\\x4\n", 64, &at, err), 0 - EINVAL);
	assert_non_null(strstr(err, "line 2: \\x is not followed by two hex digits"));
	/* the end of a string line is not known until its newline: "\\" may follow */
	assert_int_equal(precheck_in_pieces(f->e, tokens, "a\nb\\", 64, &at, err), 0);
	/* lines after a part that parses are numbered on (the part is not parsed again) */
	struct edit_lines lines = { .from = 0, .line = 1, .end = 4 };
	assert_int_equal(tree_edits_precheck(f->e, types, "1\n2\nx\n", 4, &lines, err), 0);
	assert_int_equal(lines.from, 4);
	assert_int_equal(lines.line, 3);
	lines.end = 6;
	assert_int_equal(tree_edits_precheck(f->e, types, "1\n2\nx\n", 6, &lines, err), -EINVAL);
	assert_non_null(strstr(err, "line 3"));
	/* without lines, an array's text passes until close */
	assert_int_equal(tree_edits_precheck(f->e, types, "x\n", 2, NULL, err), 0);
	/* the file as shown, written back in pieces, passes */
	char *shown = content(f->e, "tokenizer.ggml.tokens");
	assert_int_equal(precheck_in_pieces(f->e, tokens, shown, 4096, &at, err), 0);
	free(shown);
	shown = content(f->e, "tokenizer.ggml.scores");
	assert_int_equal(precheck_in_pieces(f->e, scores, shown, 4096, &at, err), 0);
	free(shown);
}

static void test_scratch_files(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	uint64_t ino, held;
	struct tree *t0 = tree_edits_current(f->e);
	uint64_t n_kv = model_meta(tree_model(t0))->n_kv, gen = tree_state(t0)->gen;
	tree_release(t0);
	const char *probes[] = { "4913", ".KEY.swp", "#KEY#", "KEY~", ".rsync.XXXXXX" };
	for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
		assert_true(scratch_is_name(probes[i]));
		assert_int_equal(tree_edits_create(f->e, probes[i], &ino, err), 0);
		assert_true(tree_ino_ns_own(ino));
		assert_int_equal(tree_edits_create(f->e, probes[i], &ino, err), -EEXIST);
		assert_true(tree_edits_taken(f->e, probes[i]));
		assert_int_equal(tree_edits_unlink(f->e, probes[i], &ino, err), 0);
		assert_false(tree_edits_taken(f->e, probes[i]));
	}
	assert_false(scratch_is_name("4914") || scratch_is_name("a~b") || scratch_is_name("#"));
	t0 = tree_edits_current(f->e);
	assert_int_equal(model_meta(tree_model(t0))->n_kv, n_kv);   /* no key made, no edit */
	assert_int_equal(tree_state(t0)->gen, gen);
	tree_release(t0);

	/* vim's save of a uint32 */
	const char *eos = "tokenizer.ggml.eos_token_id";
	uint64_t eos_ino = ino_of(f->e, eos);
	assert_int_equal(tree_edits_rename(f->e, eos, "tokenizer.ggml.eos_token_id~", err), 0);
	assert_false(tree_edits_taken(f->e, eos));
	assert_true(has_key(f->e, eos));   /* moved aside: still in the metadata */
	char *text = scratch_content(f->e, "tokenizer.ggml.eos_token_id~");
	assert_string_equal(text, "2\n");
	free(text);
	assert_int_equal(tree_edits_unlink(f->e, eos, &ino, err), -ENOENT);
	assert_int_equal(tree_edits_create(f->e, eos, &ino, err), 1);
	assert_int_equal(ino, eos_ino);
	assert_true(tree_edits_taken(f->e, eos));
	assert_int_equal(tree_edits_write(f->e, ino, "7\n", 2, err), 0);
	assert_int_equal(tree_edits_unlink(f->e, "tokenizer.ggml.eos_token_id~", &ino, err), 0);
	assert_true(has_key(f->e, eos));
	expect_content(f->e, eos, "7\n");
	assert_int_equal(ino_of(f->e, eos), eos_ino);

	/* a key moved aside whose scratch file is removed is deleted */
	assert_int_equal(tree_edits_rename(f->e, "general.name", ".general.name.bak", err), 0);
	assert_int_equal(tree_edits_unlink(f->e, ".general.name.bak", &held, err), 0);
	assert_false(has_key(f->e, "general.name"));

	/* a scratch file renamed over a key (rsync's .KEY.XXXXXX) sets it by its type; one
	 * that does not parse is refused and changes nothing; to a new name, a string key */
	struct scratch_set *ss = tree_edits_scratch(f->e);
	assert_int_equal(scratch_put_file(ss, ".eos.XXXX", "9\n", 2, SCRATCH_NO_KEY, &ino), 0);
	assert_int_equal(tree_edits_rename(f->e, ".eos.XXXX", eos, err), 0);
	expect_content(f->e, eos, "9\n");
	assert_false(tree_edits_taken(f->e, ".eos.XXXX"));
	assert_int_equal(scratch_put_file(ss, ".eos.YYYY", "x\n", 2, SCRATCH_NO_KEY, &ino), 0);
	assert_int_equal(tree_edits_rename(f->e, ".eos.YYYY", eos, err), -EINVAL);
	expect_content(f->e, eos, "9\n");
	assert_int_equal(tree_edits_rename(f->e, ".eos.YYYY", "my.new", err), 0);
	expect_content(f->e, "my.new", "x\n");

	/* a key moved aside and its scratch file renamed back, or to a new name */
	uint64_t bos = ino_of(f->e, "tokenizer.ggml.bos_token_id");
	assert_int_equal(tree_edits_rename(f->e, "tokenizer.ggml.bos_token_id", "b~", err), 0);
	assert_int_equal(tree_edits_rename(f->e, "b~", "tokenizer.ggml.bos_token_id", err), 0);
	assert_int_equal(ino_of(f->e, "tokenizer.ggml.bos_token_id"), bos);
	assert_int_equal(tree_edits_rename(f->e, "tokenizer.ggml.bos_token_id", "b~", err), 0);
	assert_int_equal(tree_edits_rename(f->e, "b~", "my.bos", err), 0);
	assert_int_equal(ino_of(f->e, "my.bos"), bos);
	assert_false(has_key(f->e, "tokenizer.ggml.bos_token_id"));

	/* a key deleted, then its name created (install): the key again, in its place */
	uint64_t eos_at = ino_of(f->e, eos);
	assert_int_equal(tree_edits_unlink(f->e, eos, &ino, err), 0);
	assert_int_equal(tree_edits_create(f->e, eos, &ino, err), 1);
	assert_int_equal(ino, eos_at);
	assert_int_equal(tree_edits_write(f->e, ino, "11\n", 3, err), 0);
	expect_content(f->e, eos, "11\n");
	assert_int_equal(tree_edits_create(f->e, eos, &ino, err), -EEXIST);

	/* vim's way back from a save refused: the KEY it made removed, KEY~ renamed back;
	 * the key again in its place and type, not a new string key; text that does not
	 * parse by its type is refused and changes nothing */
	assert_int_equal(tree_edits_rename(f->e, eos, "e~", err), 0);
	assert_int_equal(tree_edits_create(f->e, eos, &ino, err), 1);
	assert_int_equal(tree_edits_unlink(f->e, eos, &ino, err), 0);
	assert_false(has_key(f->e, eos));
	assert_int_equal(scratch_put_file(ss, ".eos.ZZZZ", "x\n", 2, SCRATCH_NO_KEY, &ino), 0);
	assert_int_equal(tree_edits_rename(f->e, ".eos.ZZZZ", eos, err), -EINVAL);
	assert_non_null(strstr(err, eos));
	assert_false(has_key(f->e, eos));
	assert_int_equal(tree_edits_unlink(f->e, ".eos.ZZZZ", &ino, err), 0);
	assert_int_equal(tree_edits_rename(f->e, "e~", eos, err), 0);
	assert_int_equal(ino_of(f->e, eos), eos_at);
	expect_content(f->e, eos, "11\n");
	{
		struct tree *t = tree_edits_current(f->e);
		const struct tree_node *n = tree_node(t, eos_at);
		assert_int_equal(model_meta(tree_model(t))->kv[n->index].value.type, GGUF_TYPE_UINT32);
		tree_release(t);
	}
	assert_false(tree_edits_taken(f->e, "e~"));
	/* and with new text: parsed by its type */
	assert_int_equal(tree_edits_unlink(f->e, eos, &ino, err), 0);
	assert_int_equal(scratch_put_file(ss, ".eos.WWWW", "12\n", 3, SCRATCH_NO_KEY, &ino), 0);
	assert_int_equal(tree_edits_rename(f->e, ".eos.WWWW", eos, err), 0);
	assert_int_equal(ino_of(f->e, eos), eos_at);
	expect_content(f->e, eos, "12\n");

	/* keys whose names look like scratch files have escaped file names */
	assert_int_equal(tree_edits_create(f->e, "%2Ehidden%7E", &ino, err), 0);
	assert_true(has_key(f->e, ".hidden~"));
	assert_int_equal(tree_edits_create(f->e, "%34913", &ino, err), 0);
	assert_true(has_key(f->e, "4913"));
	assert_int_equal(tree_edits_create(f->e, "%2Ehidden~", &ino, err), 0);   /* scratch */
	assert_int_equal(tree_edits_create(f->e, "x%7E%7E", &ino, err), -EINVAL);
	/* refused keys cannot be moved aside */
	assert_int_equal(tree_edits_rename(f->e, "general.alignment", "general.alignment~", err),
	                 has_key(f->e, "general.alignment") ? -EPERM : -ENOENT);
}

/* What the commit hook saw: whether a reader on another thread got the current tree
 * (and which text it read) while the commit was in progress. */
struct during {
	struct tree_edits *e;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool got, started;
	pthread_t th;
	char name[64];
};

static void *read_current(void *arg)
{
	struct during *d = arg;
	char *text = content(d->e, "general.name");
	pthread_mutex_lock(&d->lock);
	snprintf(d->name, sizeof d->name, "%s", text);
	d->got = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	free(text);
	return NULL;
}

/* Inside the commit (edit lock held, FILE not yet written): a reader on another thread
 * must get the current tree, not wait for the commit to end. Waits at most 10 s. */
static void reader_in_commit(void *ctx)
{
	struct during *d = ctx;
	if (pthread_create(&d->th, NULL, read_current, d) != 0)
		return;
	d->started = true;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&d->lock);
	while (!d->got && pthread_cond_timedwait(&d->cond, &d->lock, &until) == 0)
		;
	if (!d->got)   /* blocked on the commit: it ends once we return */
		snprintf(d->name, sizeof d->name, "(blocked)");
	pthread_mutex_unlock(&d->lock);
}

/* Item 8 of issue 24: the commit (tree build, FILE rendered and fsync'd) runs outside
 * the lock readers take; they read the state before it meanwhile, whole. */
static void test_readers_during_commit(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	struct during d = { .e = f->e, .lock = PTHREAD_MUTEX_INITIALIZER,
	                    .cond = PTHREAD_COND_INITIALIZER };
	char *before = content(f->e, "general.name");
	tree_edits_set_commit_hook(f->e, reader_in_commit, &d);
	assert_int_equal(tree_edits_write(f->e, ino_of(f->e, "general.name"), "during\n", 7, err), 0);
	tree_edits_set_commit_hook(f->e, NULL, NULL);
	assert_true(d.started);
	pthread_join(d.th, NULL);   /* (a reader that was blocked ends with the commit) */
	assert_string_equal(d.name, before);   /* read during the commit: the old state */
	expect_content(f->e, "general.name", "during\n");
	free(before);
}

/* A state's tree takes the sizes and marks of the keys an edit left alone from the tree
 * before it (issue 24 item 9): every key file of the current tree, read whole and from
 * offsets deep inside (where reads start from a mark), is what a tree built afresh for
 * the same state shows. */
static void test_kept_keys_as_fresh(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	uint64_t ino;
	assert_int_equal(tree_edits_write(f->e, ino_of(f->e, "general.name"), "kept\n", 5, err), 0);
	assert_int_equal(tree_edits_unlink(f->e, "general.file_type", &ino, err), 0);
	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), 0);
	assert_int_equal(tree_edits_write(f->e, ino, "x\n", 2, err), 0);
	assert_int_equal(tree_edits_write(f->e, ino_of(f->e, "tokenizer.ggml.bos_token_id"), "3\n", 2,
	                                  err), 0);
	struct tree *t = tree_edits_current(f->e);
	struct tree *fresh = tree_build_state(f->base, (struct ov_state *)tree_state(t), NULL, err);
	assert_non_null(fresh);
	uint64_t n_kv = model_meta(tree_model(t))->n_kv;
	assert_int_equal(model_meta(tree_model(fresh))->n_kv, n_kv);
	for (uint64_t k = 0; k < n_kv; k++) {
		const struct tree_node *a = tree_node(t, tree_key_ino(t, k));
		const struct tree_node *b = tree_node(fresh, tree_key_ino(fresh, k));
		assert_non_null(a);
		assert_non_null(b);
		assert_int_equal(a->size, b->size);
		char *x = malloc(a->size + 1), *y = malloc(b->size + 1);
		for (uint64_t off = 0; off < a->size; off += a->size / 7 + 1) {
			uint64_t len = a->size - off < 70000 ? a->size - off : 70000;
			assert_int_equal(tree_read(t, a, x, len, off, NULL), (int64_t)len);
			assert_int_equal(tree_read(fresh, b, y, len, off, NULL), (int64_t)len);
			assert_memory_equal(x, y, len);
		}
		free(x);
		free(y);
	}
	tree_release(fresh);
	tree_release(t);
}

/* A loop that creates and removes keys does not grow later trees (issue 24 item 9): a
 * state's tree is its keys, however many were ever made, so after 200 keys made and
 * removed the tree holds what it held before, to the byte. Their inode numbers are
 * never used again (each new key's is past every earlier one's), so no page or
 * attribute the kernel cached of a removed key can be taken for a new one's. */
static void test_create_remove_loop(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX], name[32];
	uint64_t ino, last = 0;
	struct tree *t = tree_edits_current(f->e);
	uint64_t before = tree_held_bytes(t);
	tree_release(t);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "loop.%d", i);
		assert_int_equal(tree_edits_create(f->e, name, &ino, err), 0);
		assert_true(ino > last);
		last = ino;
		assert_int_equal(tree_edits_write(f->e, ino, "x\n", 2, err), 0);
		uint64_t gone;
		assert_int_equal(tree_edits_unlink(f->e, name, &gone, err), 0);
		assert_int_equal(gone, ino);
	}
	t = tree_edits_current(f->e);
	assert_int_equal(tree_held_bytes(t), before);
	assert_null(tree_node(t, last));
	tree_release(t);
}

/* model.gguf's header of an edit state is pieces (issue 24 item 9): the keys an edit left
 * alone are read from the file where it has them, so a state keeps a few KiB of header
 * of its own, not a copy of a 32,000-token vocabulary; and the pieces are byte for byte
 * the header written whole from the state's keys (gguf_header_write), after a value
 * edit, a rename, a delete and a new key. */
static void test_header_pieces(void **state)
{
	struct edits_fixture *f = *state;
	char err[GGUF_ERR_MAX];
	uint64_t ino;
	const uint64_t file_header = model_own_meta(f->m)->data_offset;
	assert_int_equal(tree_edits_write(f->e, ino_of(f->e, "general.name"), "pieces\n", 7, err), 0);
	struct tree *t = tree_edits_current(f->e);
	if (tree_held_bytes(t) * 8 > file_header)
		print_error("a state holds %" PRIu64 " bytes, the header is %" PRIu64 "\n",
		            tree_held_bytes(t), file_header);
	assert_true(tree_held_bytes(t) * 8 < file_header);
	tree_release(t);
	assert_int_equal(tree_edits_rename(f->e, "general.architecture", "general.arch", err), 0);
	assert_int_equal(tree_edits_unlink(f->e, "general.file_type", &ino, err), 0);
	assert_int_equal(tree_edits_create(f->e, "my.key", &ino, err), 0);
	assert_int_equal(tree_edits_write(f->e, ino, "new\n", 4, err), 0);
	for (int round = 0; round < 2; round++) {
		t = tree_edits_current(f->e);
		const struct ggufs_model *m = tree_model(t);
		const struct gguf_file *g = model_meta(m);
		const struct gguf_kv **kv = calloc(g->n_kv + 1, sizeof *kv);
		const struct gguf_tensor **ts = calloc(model_n_tensors(m) + 1, sizeof *ts);
		uint64_t *offs = calloc(model_n_tensors(m) + 1, sizeof *offs), len;
		for (uint64_t k = 0; k < g->n_kv; k++)
			kv[k] = &g->kv[k];
		for (uint64_t i = 0; i < model_n_tensors(m); i++) {
			ts[i] = model_tensor(m, i);
			offs[i] = ts[i]->offset - model_own_meta(m)->data_offset;
		}
		assert_int_equal(gguf_header_write(g->version, kv, g->n_kv, ts, offs, model_n_tensors(m),
		                                   model_own_meta(m)->alignment, NULL, 0, &len, err), 0);
		uint8_t *want = malloc(len), *got = malloc(len);
		assert_int_equal(gguf_header_write(g->version, kv, g->n_kv, ts, offs, model_n_tensors(m),
		                                   model_own_meta(m)->alignment, want, len, &len, err), 0);
		const struct tree_node *mn = tree_node(t, tree_model_ino(t));
		assert_true(mn->size > len);
		assert_int_equal(tree_read(t, mn, (char *)got, len, 0, NULL), (int64_t)len);
		assert_memory_equal(got, want, len);
		/* and in odd windows, across the pieces' edges */
		for (uint64_t off = 0; off < len; off += 4093) {
			uint64_t n = len - off < 777 ? len - off : 777;
			assert_int_equal(tree_read(t, mn, (char *)got, n, off, NULL), (int64_t)n);
			assert_memory_equal(got, want + off, n);
		}
		free(want);
		free(got);
		free(kv);
		free(ts);
		free(offs);
		tree_release(t);
		/* then the rename undone: the keys before the deleted one are the file's */
		if (round == 0)
			assert_int_equal(tree_edits_rename(f->e, "general.arch", "general.architecture",
			                                   err), 0);
	}
}

UNIT_TESTS(
	cmocka_unit_test_setup_teardown(test_each_edit, setup, teardown),
	cmocka_unit_test_setup_teardown(test_scratch_files, setup, teardown),
	cmocka_unit_test_setup_teardown(test_precheck_arrays, setup, teardown),
	cmocka_unit_test_setup_teardown(test_readers_during_commit, setup, teardown),
	cmocka_unit_test_setup_teardown(test_kept_keys_as_fresh, setup, teardown),
	cmocka_unit_test_setup_teardown(test_create_remove_loop, setup, teardown),
	cmocka_unit_test_setup_teardown(test_header_pieces, setup, teardown),
	cmocka_unit_test_setup_teardown(test_readers_while_editing, setup, teardown),
	cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
	cmocka_unit_test_setup_teardown(test_model_is_the_file, setup, teardown),
	cmocka_unit_test_setup_teardown(test_file_too_large, setup, teardown),
	cmocka_unit_test(test_every_type_round_trip))
