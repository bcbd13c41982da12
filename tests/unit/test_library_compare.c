/* compare/ in a library (lib/7-library/library_compare.c, library.c): a local folder of
 * models written here, looked at through library.h and its providers as the mount
 * does. compare/ in a
 * model directory lists every other model of its folder (and no folder, no plain file,
 * not the model itself) without opening any; compare/OTHER holds exactly the text
 * diff_text_make gives for the two models, made by the first read only; a pair with
 * nothing in common is a report too; a model that does not parse gives -EIO; a model
 * in another folder is not there; a file replaced is a new name's number with its new
 * figures; readers at once of one pair wait for one comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "diff_text.h"
#include "gguf_writer.h"
#include "guard.h"
#include "library.h"
#include "node.h"
#include "model.h"
#include "scratch_dir.h"
#include "test_kit.h"

/* A model at scratch_dir/rel of n f32 tensors called prefix0.. of 1000 values each,
 * value i of tensor k being (k + 1) * i * scale. */
static void write_model(const char *rel, const char *prefix, int n, float scale)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, rel);
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, (uint64_t)n, 1);
	gw_kv_str(&w, "general.architecture", prefix);
	const uint64_t ne[1] = { 1000 };
	for (int k = 0; k < n; k++) {
		char name[32];
		snprintf(name, sizeof name, "%s%d", prefix, k);
		gw_tensor(&w, name, 1, ne, GGML_TYPE_F32, (uint64_t)k * 4000);
	}
	gw_align(&w, 32);
	for (int k = 0; k < n; k++)
		for (int i = 0; i < 1000; i++)
			gw_f32(&w, (float)(k + 1) * (float)i * scale);
	size_t len;
	uint8_t *img = gw_take(&w, &len);
	char tmp[520];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(img, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0);   /* a new file: a new version */
	free(img);
}

static void write_file(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, rel);
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The text of `ggufs --diff` of the two files, made directly. */
static char *direct(const char *rel_a, const char *rel_b, size_t *len)
{
	char pa[512], pb[512], err[GGUF_ERR_MAX];
	snprintf(pa, sizeof pa, "%s/%s", scratch_dir, rel_a);
	snprintf(pb, sizeof pb, "%s/%s", scratch_dir, rel_b);
	struct ggufs_model *a = model_open(pa, err), *b = model_open(pb, err);
	assert_non_null(a);
	assert_non_null(b);
	char *text;
	uint64_t total;
	struct diff_text_failure fail;
	assert_int_equal(diff_text_make(a, b, false, NULL, NULL, &total, &text, len, &fail, err), 0);
	model_close(a);
	model_close(b);
	return text;
}

/* The whole of r's compare file, read 100 bytes at a time (as many reads do) by its
 * provider. */
static int64_t read_all(const struct node_ref *r, char *buf, size_t size)
{
	char err[GGUF_ERR_MAX];
	uint64_t off = 0;
	for (;;) {
		int64_t n = r->p->read(r, NULL, buf + off, off + 100 <= size ? 100 : size - off, off,
		                       err);
		if (n <= 0)
			return n < 0 ? n : (int64_t)off;
		off += (uint64_t)n;
	}
}

static struct library *open_lib(void)
{
	char err[GGUF_ERR_MAX];
	struct lib_source *src = lib_source_local(scratch_dir, false, err);
	assert_non_null(src);
	struct library *lib = library_open(src, test_kit(), err);
	assert_non_null(lib);
	return lib;
}

/* The ref of path's parts under the root, each looked up in turn. */
static int walk(struct library *lib, const char *const *parts, struct node_ref *r)
{
	uint64_t ino = LIB_ROOT_INO;
	int ret = 0;
	unsigned dir_flags;
	for (; *parts; parts++) {
		ret = library_lookup(lib, ino, *parts, r, &dir_flags);
		if (ret < 0)
			return ret;
		ino = r->ino;
		if (parts[1])
			library_put(lib, r);
	}
	return ret;
}

/* Model a's compare/b (into *r, held) reads as ggufs --diff a.gguf b.gguf: that text
 * (free it). */
static char *expect_compare(struct library *lib, const char *a, const char *b,
                            struct node_ref *r)
{
	static char buf[1 << 16];
	char pa[64], pb[64];
	size_t len;
	snprintf(pa, sizeof pa, "%s.gguf", a);
	snprintf(pb, sizeof pb, "%s.gguf", b);
	assert_int_equal(walk(lib, (const char *[]){ a, LIB_COMPARE_NAME, b, NULL }, r), 0);
	char *text = direct(pa, pb, &len);
	assert_int_equal(read_all(r, buf, sizeof buf), (int64_t)len);
	assert_memory_equal(buf, text, len);
	return text;
}

static void test_compare(void **state)
{
	(void)state;
	guard_install();
	assert_int_equal(mkdir(strcat(strcpy((char[600]){ 0 }, scratch_dir), "/sub"), 0755), 0);
	write_model("q.gguf", "t", 3, 1.0f);
	write_model("r.gguf", "t", 2, 1.001f);   /* t0, t1 differ a little; q's t2 is unpaired */
	write_model("x.gguf", "other", 2, 1.0f); /* nothing in common with q */
	write_file("bad.gguf", "GGUF but not a model");
	write_file("notes.txt", "a plain file\n");
	write_model("sub/s.gguf", "t", 1, 1.0f); /* another folder */
	struct library *lib = open_lib();
	struct ns *ns = library_ns_new(lib);
	assert_non_null(ns);
	uint64_t opened, built;

	/* compare/ of q: the other models of its folder, none opened for the listing */
	struct node_ref dir;
	assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, NULL }, &dir), 0);
	assert_ptr_equal(dir.p, &lib_compare_dir_provider);
	struct stat st;
	node_stat(&dir, NULL, &st);
	assert_true(S_ISDIR(st.st_mode));
	void *listing;
	char err[GGUF_ERR_MAX];
	assert_int_equal(dir.p->open(&dir, O_RDONLY, &listing, err), 0);
	assert_int_equal(dir.p->count(&dir, listing), 3);
	const char *want[] = { "bad", "r", "x" };
	for (uint64_t i = 0; i < 3; i++) {
		struct node_dirent e;
		assert_true(dir.p->entry(&dir, listing, i, &e));
		assert_string_equal(e.name, want[i]);
		assert_false(e.dir);
	}
	dir.p->close(&dir, listing);
	library_counts(lib, &opened, &built);
	assert_int_equal(opened, 1);   /* q itself, to look inside it */

	/* the model directory lists compare/ after its tree's own entries */
	struct node_ref q;
	assert_int_equal(walk(lib, (const char *[]){ "q", "gguf.json", NULL }, &q), 0);
	library_put(lib, &q);
	assert_int_equal(library_get(lib, dir.parent, true, &q), 0);
	const uint64_t count = q.p->count(&q, NULL);
	struct node_dirent e;
	assert_true(q.p->entry(&q, NULL, count - 1, &e));
	assert_string_equal(e.name, LIB_COMPARE_NAME);
	assert_int_equal(e.ino + q.ino_base, dir.ino);
	assert_true(e.dir);
	library_put(lib, &q);
	library_put(lib, &dir);

	/* not there: q itself, a plain file, a folder, a model of another folder */
	struct node_ref r;
	const char *absent[] = { "q", "notes", "notes.txt", "sub", "s", "nothing" };
	for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
		assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, absent[i], NULL },
		                      &r), -ENOENT);

	/* compare/r: no size known from the listing alone; its size (the namespace's get
	 * and lookup, which the mount asks) makes the text of --diff q r, once, and stat
	 * says it from then on */
	assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, "r", NULL }, &r), 0);
	assert_ptr_equal(r.p, &lib_compare_provider);
	node_stat(&r, NULL, &st);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 0);
	assert_int_equal(r.parent, dir.ino);
	library_counts(lib, &opened, &built);
	assert_int_equal(opened, 1);
	static char buf[1 << 16];
	size_t len;
	char *text = direct("q.gguf", "r.gguf", &len);
	assert_true(len > 0 && len < sizeof buf);
	struct node_ref sized;
	assert_int_equal(ns->ops->get(ns, r.ino, 0, &sized, err), 0);
	node_stat(&sized, NULL, &st);
	ns->ops->put(ns, &sized);
	assert_int_equal(st.st_size, (off_t)len);
	assert_int_equal(library_compares_made(lib), 1);
	node_stat(&r, NULL, &st);
	assert_int_equal(st.st_size, (off_t)len);
	assert_true(strstr(text, "only_a\tt2") != NULL);
	for (int round = 0; round < 2; round++) {
		assert_int_equal(read_all(&r, buf, sizeof buf), (int64_t)len);
		assert_memory_equal(buf, text, len);
		assert_int_equal(library_compares_made(lib), 1);
	}
	free(text);
	library_put(lib, &r);

	/* the other way round is another comparison: r the reference */
	text = expect_compare(lib, "r", "q", &r);
	assert_true(strstr(text, "only_b\tt2") != NULL);
	assert_int_equal(library_compares_made(lib), 2);
	free(text);
	library_put(lib, &r);

	/* nothing in common: every tensor unpaired, still a report */
	text = expect_compare(lib, "q", "x", &r);
	assert_true(strstr(text, "only_a\tt0") && strstr(text, "only_b\tother1"));
	free(text);
	library_put(lib, &r);

	/* a model that does not parse: EIO, every time */
	assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, "bad", NULL }, &r), 0);
	assert_int_equal(r.p->read(&r, NULL, buf, sizeof buf, 0, err), -EIO);
	err[0] = 0;
	assert_int_equal(ns->ops->get(ns, r.ino, 0, &sized, err), -EIO);
	assert_true(strstr(err, "compare/bad: cannot compare: ") != NULL);
	unsigned dir_flags;
	err[0] = 0;
	assert_int_equal(ns->ops->lookup(ns, dir.ino, "bad", &sized, &dir_flags, err), -EIO);
	assert_true(strstr(err, "compare/bad: cannot compare: ") != NULL);
	library_put(lib, &r);
	/* and it has no compare/ of its own */
	assert_int_equal(walk(lib, (const char *[]){ "bad", LIB_COMPARE_NAME, NULL }, &r), -ENOENT);

	/* r replaced: compare/r is a new number with the new file's figures */
	struct node_ref old;
	assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, "r", NULL }, &old), 0);
	library_put(lib, &old);
	write_model("r.gguf", "t", 3, 2.0f);
	assert_int_equal(walk(lib, (const char *[]){ "q", LIB_COMPARE_NAME, "r", NULL }, &r), 0);
	assert_int_not_equal(r.ino, old.ino);
	assert_int_equal(library_get(lib, old.ino, false, &old), -ESTALE);
	text = direct("q.gguf", "r.gguf", &len);
	assert_int_equal(read_all(&r, buf, sizeof buf), (int64_t)len);
	assert_memory_equal(buf, text, len);
	assert_null(strstr(text, "only_a"));
	free(text);
	library_put(lib, &r);

	ns->ops->free(ns);
	library_free(lib);
}

struct reader_arg {
	struct library *lib;
	struct node_ref r;
	char buf[1 << 16];
	int64_t n;
};

static void *read_thread(void *p)
{
	struct reader_arg *a = p;
	a->n = read_all(&a->r, a->buf, sizeof a->buf);
	return NULL;
}

/* Four readers of one compare file at once, and one of another pair: each pair's
 * comparison is made once, and every reader gets the whole text. */
static void test_concurrent_reads(void **state)
{
	(void)state;
	guard_install();
	char dir[600];
	snprintf(dir, sizeof dir, "%s/c", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	write_model("c/a.gguf", "t", 4, 1.0f);
	write_model("c/b.gguf", "t", 4, 1.5f);
	struct library *lib = open_lib();
	enum { READERS = 5 };
	static struct reader_arg arg[READERS];
	pthread_t th[READERS];
	for (int k = 0; k < READERS; k++) {
		arg[k].lib = lib;
		const char *this = k < READERS - 1 ? "a" : "b", *other = k < READERS - 1 ? "b" : "a";
		assert_int_equal(walk(lib, (const char *[]){ "c", this, LIB_COMPARE_NAME, other, NULL },
		                      &arg[k].r), 0);
	}
	for (int k = 0; k < READERS; k++)
		assert_int_equal(pthread_create(&th[k], NULL, read_thread, &arg[k]), 0);
	for (int k = 0; k < READERS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	assert_int_equal(library_compares_made(lib), 2);
	size_t len;
	char *ab = direct("c/a.gguf", "c/b.gguf", &len);
	for (int k = 0; k < READERS - 1; k++) {
		assert_int_equal(arg[k].n, (int64_t)len);
		assert_memory_equal(arg[k].buf, ab, len);
	}
	free(ab);
	char *ba = direct("c/b.gguf", "c/a.gguf", &len);
	assert_int_equal(arg[READERS - 1].n, (int64_t)len);
	assert_memory_equal(arg[READERS - 1].buf, ba, len);
	free(ba);
	for (int k = 0; k < READERS; k++)
		library_put(lib, &arg[k].r);
	library_free(lib);
}

UNIT_TESTS_IN_SCRATCH(
	cmocka_unit_test(test_compare),
	cmocka_unit_test(test_concurrent_reads))
