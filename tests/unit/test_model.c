/* Opening models: a single file, and split models found from any one shard. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"
#include "open_watch.h"
#include "tiny_model.h"

#include "gguf_split.h"
#include "model.h"
#include "scratch_dir.h"
#include "render_summary.h"
#include "render_util.h"
#include "test_kit.h"
#include "tree.h"
#include "vectors.h"

static void shard_path(char *out, size_t n, const char *prefix, unsigned no, unsigned count)
{
	snprintf(out, n, "%s/%s-%05u-of-%05u.gguf", scratch_dir, prefix, no, count);
}

/* The bundled model split in count shards as scratch_dir/NAME-0000K-of-0000N.gguf, each
 * shard's split keys through tweak (gguf_split.h; NULL: as they are). */
static void split_as(const char *name, unsigned count,
                     void (*tweak)(unsigned, struct split_keys *))
{
	char prefix[128];
	snprintf(prefix, sizeof prefix, "%s/%s", scratch_dir, name);
	assert_int_equal(gguf_split(TEST_DATA "/tinyllama-q4km.gguf", prefix, count, tweak), 0);
}

static void test_single(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = tiny_model_open();
	assert_int_equal(model_n_files(m), 1);
	assert_int_equal(model_n_tensors(m), 21);
	assert_string_equal(model_file_name(m), "tinyllama-q4km.gguf");
	model_close(m);

	m = model_open(TEST_DATA "/no-such-model.gguf", err);
	assert_null(m);
	assert_non_null(strstr(err, "no-such-model.gguf: No such file or directory"));
	m = model_open(TEST_DATA, err);
	assert_null(m);
	assert_non_null(strstr(err, "is a directory"));
}

/* Every shard of a 3-way split opens the same model: same metadata, every tensor's
 * bytes identical to the original's. */
static void test_split(void **state)
{
	(void)state;
	char path[256], err[GGUF_ERR_MAX];
	split_as("llama", 3, NULL);
	struct ggufs_model *orig = tiny_model_open();
	for (unsigned no = 1; no <= 3; no++) {
		shard_path(path, sizeof path, "llama", no, 3);
		struct ggufs_model *m = model_open(path, err);
		if (!m)
			print_error("%s\n", err);
		assert_non_null(m);
		assert_int_equal(model_n_files(m), 3);
		assert_string_equal(model_file_name(m), "llama-00001-of-00003.gguf");
		assert_int_equal(model_meta(m)->n_kv, model_meta(orig)->n_kv + 3);
		assert_int_equal(model_n_tensors(m), model_n_tensors(orig));
		for (uint64_t i = 0; i < model_n_tensors(m); i++) {
			const struct gguf_tensor *a = model_tensor(m, i), *b = model_tensor(orig, i);
			assert_int_equal(a->name.len, b->name.len);
			assert_memory_equal(a->name.ptr, b->name.ptr, a->name.len);
			assert_int_equal(a->size, b->size);
			assert_memory_equal(model_tensor_mapped(m, i), model_tensor_mapped(orig, i), a->size);
		}
		assert_int_equal(model_tensor_file(m, 0), 0);
		assert_int_equal(model_tensor_file(m, model_n_tensors(m) - 1), 2);
		model_close(m);
	}
	model_close(orig);
}

static void summary_fn(struct sink *s, const void *arg)
{
	render_summary(s, arg);
}

/* Which shard holds what, whichever shard was given: each tensor's user.gguf.shard
 * names its file, and summary.txt lists every shard with its size. A single file has
 * no user.gguf.shard. */
static void test_split_shards_named(void **state)
{
	(void)state;
	char path[256], err[GGUF_ERR_MAX], val[64];
	split_as("named", 3, NULL);
	for (unsigned given = 1; given <= 3; given += 2) {
		shard_path(path, sizeof path, "named", given, 3);
		struct ggufs_model *m = model_open(path, err);
		assert_non_null(m);
		struct tree *t = tree_build(m, test_kit(), err);
		assert_non_null(t);
		for (uint64_t i = 0; i < model_n_tensors(m); i++) {
			char want[64];
			snprintf(want, sizeof want, "named-%05u-of-00003.gguf", model_tensor_file(m, i) + 1);
			for (uint64_t j = 0; j < 3; j++) {
				const struct tree_node *n =
					tree_node(t, TREE_FIRST_META + model_meta(m)->n_kv + 3 * i + j);
				assert_non_null(n);
				int64_t r = tree_getxattr(t, n, "user.gguf.shard", val, sizeof val);
				assert_int_equal(r, (int64_t)strlen(want));
				assert_memory_equal(val, want, (size_t)r);
				char list[256];
				int64_t l = tree_listxattr(t, n, list, sizeof list);
				assert_true(l > 16);
				assert_string_equal(list + l - 16, "user.gguf.shard");
			}
		}
		size_t len;
		char *txt = render_all(summary_fn, m, &len);
		assert_non_null(strstr(txt, "\nshards:           3\n"));
		for (unsigned no = 1; no <= 3; no++) {
			struct stat st;
			char line[128];
			shard_path(path, sizeof path, "named", no, 3);
			assert_int_equal(stat(path, &st), 0);
			snprintf(line, sizeof line, "\n  named-%05u-of-00003.gguf (%lld bytes)\n", no,
			         (long long)st.st_size);
			if (!strstr(txt, line))
				print_error("no %s in the summary\n", line);
			assert_non_null(strstr(txt, line));
		}
		free(txt);
		tree_free(t);
		model_close(m);
	}
	struct ggufs_model *m = tiny_model_open();
	struct tree *t = tree_build(m, test_kit(), err);
	assert_non_null(t);
	const struct tree_node *n = tree_node(t, TREE_FIRST_META + model_meta(m)->n_kv);
	assert_int_equal(tree_getxattr(t, n, "user.gguf.shard", val, sizeof val), -ENODATA);
	size_t len;
	char *txt = render_all(summary_fn, m, &len);
	assert_null(strstr(txt, "shards:"));
	free(txt);
	tree_free(t);
	model_close(m);
}

static void test_split_missing(void **state)
{
	(void)state;
	char path[256], err[GGUF_ERR_MAX];
	split_as("gap", 3, NULL);
	shard_path(path, sizeof path, "gap", 2, 3);
	unlink(path);
	shard_path(path, sizeof path, "gap", 3, 3);
	assert_null(model_open(path, err));
	assert_non_null(strstr(err, "gap-00002-of-00003.gguf: shard 2 of 3 is missing"));
}

static unsigned tweak_shard;
static void wrong_count(unsigned s, struct split_keys *k)
{
	if (s == tweak_shard)
		k->count = 4;
}
static void wrong_total(unsigned s, struct split_keys *k)
{
	if (s == tweak_shard)
		k->tensors_count += 1;
}
static void wrong_no(unsigned s, struct split_keys *k)
{
	if (s == tweak_shard)
		k->no = 0;
}

/* A shard of another model or another split is refused, naming that shard's file. */
static void test_split_foreign(void **state)
{
	(void)state;
	void (*tweaks[])(unsigned, struct split_keys *) = { wrong_count, wrong_total, wrong_no };
	const char *words[] = { "split.count 4", "split.tensors.count", "split.no is 0" };
	for (int k = 0; k < 3; k++) {
		char prefix[128], path[256], bad[256], err[GGUF_ERR_MAX];
		snprintf(prefix, sizeof prefix, "%s/foreign%d", scratch_dir, k);
		tweak_shard = 1;
		assert_int_equal(gguf_split(TEST_DATA "/tinyllama-q4km.gguf", prefix, 3, tweaks[k]), 0);
		snprintf(bad, sizeof bad, "foreign%d-00002-of-00003.gguf:", k);
		shard_path(path, sizeof path, prefix + strlen(scratch_dir) + 1, 1, 3);
		assert_null(model_open(path, err));
		if (!strstr(err, bad) || !strstr(err, words[k]))
			print_error("%s\n", err);
		assert_non_null(strstr(err, bad));
		assert_non_null(strstr(err, words[k]));
	}
}

/* Shard 2 starts one tensor early, so the last tensor of shard 1 is in both (the
 * counts made to agree): refused, naming the later shard. */
static void overlap(unsigned s, struct split_keys *k)
{
	k->tensors_count += 1;
	if (s == 1)
		k->first -= 1;
}

static void test_split_duplicate(void **state)
{
	(void)state;
	char path[256], err[GGUF_ERR_MAX];
	split_as("dup", 2, overlap);
	shard_path(path, sizeof path, "dup", 1, 2);
	assert_null(model_open(path, err));
	assert_non_null(strstr(err, "dup-00002-of-00002.gguf: tensor '"));
	assert_non_null(strstr(err, "' is also in an earlier shard"));
}

/* What record_open saw: each path asked for, and whether the file named came with it. */
struct opens {
	char paths[4][256];
	bool with_named[4];
	ino_t named_ino[4];
	unsigned n;
	unsigned refuse;   /* the call (from 1) to refuse, 0 for none */
};

/* model_opener.open recording each call into ctx (struct opens), then opening as
 * model_open does, or refusing the call numbered refuse with a line of its own. */
static int record_open(void *ctx, const char *path, const struct stat *named,
                       char err[GGUF_ERR_MAX])
{
	struct opens *o = ctx;
	assert_true(o->n < 4);
	snprintf(o->paths[o->n], sizeof o->paths[o->n], "%s", path);
	o->with_named[o->n] = named != NULL;
	o->named_ino[o->n] = named ? named->st_ino : 0;
	if (++o->n == o->refuse) {
		snprintf(err, GGUF_ERR_MAX, "%s: refused by the opener", path);
		return -EACCES;
	}
	const struct model_opener plain = model_opener_local(false);
	return plain.open(plain.ctx, path, named, err);
}

/* The opener is asked for the file named first, then the other shards in order, each
 * with the named file's stat; a file it refuses is named with its line, unread. */
static void test_opener_order_and_refusal(void **state)
{
	(void)state;
	char path[256], err[GGUF_ERR_MAX];
	split_as("order", 3, NULL);
	shard_path(path, sizeof path, "order", 2, 3);
	struct stat named;
	assert_int_equal(stat(path, &named), 0);
	struct opens o = { .n = 0 };
	const struct model_opener opener = { record_open, &o };
	struct ggufs_model *m = model_open_by(path, &opener, err);
	assert_non_null(m);
	assert_int_equal(o.n, 3);
	const unsigned order[3] = { 2, 1, 3 };
	for (unsigned i = 0; i < 3; i++) {
		char want[256];
		shard_path(want, sizeof want, "order", order[i], 3);
		assert_string_equal(o.paths[i], want);
		assert_int_equal(o.with_named[i], i > 0);
		if (i > 0)
			assert_int_equal(o.named_ino[i], named.st_ino);
	}
	/* the model's stat and each shard's are those of the descriptors mapped */
	assert_int_equal(model_stat(m)->st_ino, named.st_ino);
	struct model_file_info f0, f1;
	model_file(m, 0, &f0);
	model_file(m, 1, &f1);
	assert_int_equal(f1.st->st_ino, named.st_ino);
	assert_int_not_equal(f0.st->st_ino, named.st_ino);
	model_close(m);

	o = (struct opens){ .refuse = 3 };
	assert_null(model_open_by(path, &opener, err));
	shard_path(path, sizeof path, "order", 3, 3);
	char want[512];
	snprintf(want, sizeof want, "%s: refused by the opener", path);
	assert_string_equal(err, want);
}

/* A shard that is a FIFO is refused with what it is and never opened: inotify sees no
 * open of it (a reader's open, even O_NONBLOCK, would wake a writer waiting in it). */
static void test_split_fifo_never_opened(void **state)
{
	(void)state;
	char path[256], fifo[256], err[GGUF_ERR_MAX];
	split_as("pipe", 2, NULL);
	shard_path(fifo, sizeof fifo, "pipe", 2, 2);
	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	int in = open_watch(fifo);
	shard_path(path, sizeof path, "pipe", 1, 2);
	assert_null(model_open(path, err));
	assert_int_equal(open_watch_count(in), 0);
	char want[512];
	snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
	assert_string_equal(err, want);
}

/* Shared (a mount others read under the named file's owner and mode): a shard of
 * another owner, or one that lets fewer read it, is refused, naming it and why; the
 * mounting user's own model (not shared) opens. */
static void test_shared_shards_read_as_the_named(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();   /* chown needs root */
	char path[256], shard[256], err[GGUF_ERR_MAX];
	split_as("owned", 2, NULL);
	shard_path(path, sizeof path, "owned", 1, 2);
	shard_path(shard, sizeof shard, "owned", 2, 2);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(chmod(shard, 0644), 0);
	const struct model_opener shared = model_opener_local(true);
	struct ggufs_model *m = model_open_by(path, &shared, err);
	assert_non_null(m);
	model_close(m);

	assert_int_equal(chown(shard, 65534, 65534), 0);
	assert_null(model_open_by(path, &shared, err));
	char want[512];
	snprintf(want, sizeof want, "%s: not read, as other users read the model: owned by "
	         "uid 65534, not by uid 0 as the first file is", shard);
	assert_string_equal(err, want);
	m = model_open(path, err);   /* the mounting user's alone */
	assert_non_null(m);
	model_close(m);

	assert_int_equal(chown(shard, 0, getegid()), 0);
	assert_int_equal(chown(path, 0, getegid()), 0);
	assert_int_equal(chmod(shard, 0600), 0);
	assert_null(model_open_by(path, &shared, err));
	assert_non_null(strstr(err, "owned-00002-of-00002.gguf: not read, as other users read "
	                            "the model: its mode 600"));
	/* named shard 2, the rule is the other way round: shard 1 lets more read, fine */
	assert_non_null(m = model_open_by(shard, &shared, err));
	model_close(m);
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_single),
	cmocka_unit_test(test_split),
	cmocka_unit_test(test_split_shards_named),
	cmocka_unit_test(test_split_missing),
	cmocka_unit_test(test_split_foreign),
	cmocka_unit_test(test_split_duplicate),
	cmocka_unit_test(test_opener_order_and_refusal),
	cmocka_unit_test(test_split_fifo_never_opened),
	cmocka_unit_test(test_shared_shards_read_as_the_named))
