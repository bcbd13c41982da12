/* A library's mount (lib/8-mount/mount.h over mount_library.c), asked as the front end
 * asks it, with no FUSE: a lookup answers the entry with its attributes and timeouts in
 * one call (a negative entry for a missing name); a model's files inside the library
 * have the stat of the tree's one rule (du counts the model once); an open file reads
 * and, once released, answers EBADF; a listing gives ".", ".." and the names from
 * offsets; writes are EROFS; the root's user.ggufs.* counters count reads; and a read
 * of a model that shrank fails with EIO carrying its cause, counted in eio_replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"
#include "open_watch.h"
#include "test_kit.h"

#include "gguf_writer.h"
#include "guard.h"
#include "library.h"
#include "mount.h"
#include "mount_fixture.h"
#include "scratch_dir.h"

#define N_VALUES 4096

/* scratch_dir/rel: a model of one f32 tensor "w" of N_VALUES values i * 0.5. */
static void write_model(const char *rel)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, rel);
	assert_true(mount_fixture_model(path, N_VALUES, 0.5f));
}

static struct library *lib;

/* A library of folder dir and its mount; confine: as with allow_other. */
static struct mount *mount_at(const char *dir, bool confine)
{
	char err[GGUF_ERR_MAX];
	struct lib_source *src = lib_source_local(dir, confine, err);
	assert_non_null(src);
	lib = library_open(src, test_kit(), err);
	assert_non_null(lib);
	struct mount *m = mount_library(lib);
	assert_non_null(m);
	return m;
}

/* The library of scratch_dir mounted; confine: as with allow_other. */
static struct mount *mount_scratch_as(bool confine)
{
	return mount_at(scratch_dir, confine);
}

static struct mount *mount_scratch(void)
{
	return mount_scratch_as(false);
}

/* The mount and its library freed. */
static void unmount(struct mount *m)
{
	mount_free(m);
	library_free(lib);
}

/* The entry of path (names apart by '/') from the root. */
static struct mount_entry walk(struct mount *m, const char *path)
{
	char copy[256];
	snprintf(copy, sizeof copy, "%s", path);
	struct mount_entry e = { .ino = LIB_ROOT_INO };
	struct mount_err err;
	for (char *save, *name = strtok_r(copy, "/", &save); name; name = strtok_r(NULL, "/", &save))
		assert_true(mount_lookup(m, e.ino, name, &e, &err));
	return e;
}

/* The model directory at path, whose entry was old, gone stale: a lookup of name in
 * the old one is ESTALE, path looked up anew is another inode with name in it. The new
 * entry. */
static struct mount_entry expect_stale(struct mount *m, const char *path,
                                       const struct mount_entry *old, const char *name)
{
	struct mount_entry e;
	struct mount_err err;
	assert_false(mount_lookup(m, old->ino, name, &e, &err));
	assert_int_equal(err.no, ESTALE);
	struct mount_entry now = walk(m, path);
	assert_int_not_equal(now.ino, old->ino);
	assert_true(mount_lookup(m, now.ino, name, &e, &err));
	assert_int_not_equal(e.ino, 0);
	return now;
}

/* A file at path that only its owner reads (mode 600), holding "TOPSECRET\n": what a
 * model's error must never quote. */
static void write_secret(const char *path)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("TOPSECRET\n", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
}

/* The file at path (from the root) opened to read into *o, and in *g a new buffer for
 * what its reads give (free it): the file's entry. */
static struct mount_entry open_to_read(struct mount *m, const char *path, struct mount_open *o,
                                       struct mount_got **g)
{
	struct mount_err err;
	struct mount_entry f = walk(m, path);
	assert_true(mount_open(m, f.ino, O_RDONLY, 0, o, &err));
	*g = calloc(1, sizeof **g);
	assert_non_null(*g);
	return f;
}

static int setup(void **state)
{
	guard_install();   /* the SIGBUS guard of mapped reads, before any read */
	if (scratch_dir_make(state) != 0)
		return -1;
	write_model("tiny.gguf");
	return 0;
}

static void test_lookup_is_one_call_with_attributes(void **state)
{
	(void)state;
	struct mount *m = mount_scratch();
	struct mount_err err;
	struct mount_entry e;
	assert_true(mount_lookup(m, LIB_ROOT_INO, "no-such-model", &e, &err));
	assert_int_equal(e.ino, 0);   /* a negative entry */
	assert_true(mount_lookup(m, LIB_ROOT_INO, "tiny", &e, &err));
	assert_int_not_equal(e.ino, 0);
	assert_true(S_ISDIR(e.attr.st_mode));
	/* inside a model, names and attributes never change; library folders' names do */
	assert_true(e.entry_ttl == 0);
	struct mount_entry f = walk(m, "tiny/tensors/w.f32");
	assert_true(S_ISREG(f.attr.st_mode));
	assert_int_equal(f.attr.st_size, N_VALUES * 4);
	assert_true(f.attr_ttl > 0 && f.entry_ttl > 0);
	/* the tree's stat rule: a computed file one block, model.gguf the model's bytes */
	assert_int_equal(f.attr.st_blocks, 1);
	assert_int_equal(walk(m, "tiny/gguf.json").attr.st_blocks, 1);
	struct mount_entry g = walk(m, "tiny/model.gguf");
	assert_int_equal(g.attr.st_blocks, (g.attr.st_size + 511) / 512);
	/* getattr agrees with the lookup */
	struct stat st;
	double ttl;
	assert_true(mount_getattr(m, f.ino, 0, &st, &ttl, &err));
	assert_int_equal(st.st_ino, f.ino);
	assert_int_equal(st.st_size, f.attr.st_size);
	assert_int_equal(st.st_blocks, 1);
	unmount(m);
}

static void test_read_then_release(void **state)
{
	(void)state;
	struct mount *m = mount_scratch();
	struct mount_open o;
	struct mount_got *g;
	struct mount_entry f = open_to_read(m, "tiny/tensors/w.f32", &o, &g);
	assert_int_not_equal(o.fh, 0);
	assert_int_equal(o.pt_fd, -1);   /* only model.gguf is a file to pass through */
	struct mount_err err;
	struct mount_open w;
	assert_false(mount_open(m, f.ino, O_WRONLY, 0, &w, &err));
	assert_int_equal(err.no, EROFS);
	assert_true(mount_read(m, f.ino, o.fh, 8, 16, false, mount_got_take, g, &err));
	assert_int_equal(g->calls, 1);
	assert_int_equal(g->len, 16);
	float v[4];
	memcpy(v, g->buf, sizeof v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == (float)(i + 2) * 0.5f);
	/* past the end: nothing, in one reply */
	g->len = 0;
	g->calls = 0;
	assert_true(mount_read(m, f.ino, o.fh, N_VALUES * 4, 16, false, mount_got_take, g, &err));
	assert_int_equal(g->calls, 1);
	assert_int_equal(g->len, 0);
	mount_release(m, f.ino, o.fh);
	assert_false(mount_read(m, f.ino, o.fh, 0, 16, false, mount_got_take, g, &err));
	assert_int_equal(err.no, EBADF);
	/* model.gguf names its file for passthrough */
	struct mount_entry mg = walk(m, "tiny/model.gguf");
	assert_true(mount_open(m, mg.ino, O_RDONLY, 0, &o, &err));
	assert_true(o.pt_fd >= 0);
	assert_non_null(o.pt_path);
	mount_release(m, mg.ino, o.fh);
	free(g);
	unmount(m);
}

/* A listing's names, in order, joined by spaces, from offset off. */
struct names {
	char text[512];
	int max;   /* entries the "buffer" takes */
	uint64_t next;
};

static bool add_name(void *ctx, const char *name, uint64_t ino, bool dir, uint64_t next)
{
	(void)ino, (void)dir;
	struct names *n = ctx;
	if (n->max-- == 0)
		return false;
	size_t at = strlen(n->text);
	snprintf(n->text + at, sizeof n->text - at, "%s%s", at ? " " : "", name);
	n->next = next;
	return true;
}

static void test_readdir_from_offsets(void **state)
{
	(void)state;
	struct mount *m = mount_scratch();
	struct mount_err err;
	struct mount_entry t = walk(m, "tiny/tensors");
	struct mount_open o;
	assert_true(mount_opendir(m, t.ino, &o, &err));
	assert_true(o.cache_readdir);
	struct names n = { .max = 2 };
	assert_true(mount_readdir(m, t.ino, o.fh, 0, add_name, &n, &err));
	assert_string_equal(n.text, ". ..");   /* the "buffer" was full */
	uint64_t next = n.next;
	n = (struct names){ .max = 100 };
	assert_true(mount_readdir(m, t.ino, o.fh, next, add_name, &n, &err));
	assert_string_equal(n.text, "w w.f32 w.npy");
	mount_releasedir(m, o.fh);
	assert_false(mount_readdir(m, t.ino, o.fh, 0, add_name, &n, &err));
	assert_int_equal(err.no, EBADF);
	/* a file is not a directory */
	assert_false(mount_opendir(m, walk(m, "tiny/gguf.json").ino, &o, &err));
	assert_int_equal(err.no, ENOTDIR);
	unmount(m);
}

/* The value of attribute name of ino as a number. */
static long long xattr_number(struct mount *m, uint64_t ino, const char *name)
{
	char buf[64] = "";
	struct mount_err err;
	int64_t r = mount_xattr(m, ino, name, buf, sizeof buf - 1, &err);
	assert_true(r > 0);
	return atoll(buf);
}

static void test_counters_and_eio_cause(void **state)
{
	(void)state;
	write_model("shrinks.gguf");
	struct mount *m = mount_scratch();
	struct mount_err err;
	char names[1024];
	int64_t r = mount_xattr(m, LIB_ROOT_INO, NULL, names, sizeof names, &err);
	assert_true(r > 0);
	assert_true(memmem(names, (size_t)r, "user.ggufs.reads", 17) != NULL);
	assert_true(memmem(names, (size_t)r, "user.ggufs.models_opened", 25) != NULL);
	assert_false(mount_xattr(m, LIB_ROOT_INO, NULL, names, 4, &err) >= 0);
	assert_int_equal(err.no, ERANGE);
	assert_false(mount_xattr(m, LIB_ROOT_INO, "user.ggufs.nothing", names, 0, &err) >= 0);
	assert_int_equal(err.no, ENODATA);
	long long reads = xattr_number(m, LIB_ROOT_INO, "user.ggufs.reads");

	struct mount_open o;
	struct mount_got *g;
	struct mount_entry f = open_to_read(m, "shrinks/tensors/w", &o, &g);
	assert_true(mount_read(m, f.ino, o.fh, 0, 64, false, mount_got_take, g, &err));
	assert_int_equal(xattr_number(m, LIB_ROOT_INO, "user.ggufs.reads"), reads + 1);
	assert_int_equal(xattr_number(m, LIB_ROOT_INO, "user.ggufs.eio_replies"), 0);

	/* the file shrinks under the mount: the read fails with its cause said */
	char path[512];
	snprintf(path, sizeof path, "%s/shrinks.gguf", scratch_dir);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 1024), 0);
	assert_false(mount_read(m, f.ino, o.fh, (uint64_t)N_VALUES * 4 - 64, 64, false, mount_got_take, g,
	                        &err));
	assert_int_equal(err.no, EIO);
	assert_non_null(strstr(err.cause, "EIO to a read of tensors/w"));
	assert_non_null(strstr(err.cause, "shrank"));
	assert_true(err.key[0] != 0);   /* said once per cause */
	assert_int_equal(xattr_number(m, LIB_ROOT_INO, "user.ggufs.eio_replies"), 1);
	char last[1024] = "";
	assert_true(mount_xattr(m, LIB_ROOT_INO, "user.ggufs.last_error", last, sizeof last - 1,
	                        &err) > 0);
	assert_non_null(strstr(last, "shrank"));
	mount_release(m, f.ino, o.fh);
	free(g);
	unmount(m);
}

/* The symbolic link DAG: DAG_LEVELS folders, each holding f.txt and two links, a and
 * b, to the next (the last holds f.txt alone), the first the library's root: 2^k paths
 * to the k-th. */
#define DAG_LEVELS 13

/* Makes the DAG under scratch_dir/dag (the root: scratch_dir/dag/d0). */
static void make_dag(char root[512])
{
	char path[512], target[512];
	snprintf(path, sizeof path, "%s/dag", scratch_dir);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int i = 0; i < DAG_LEVELS; i++) {
		snprintf(path, sizeof path, "%s/dag/d%d", scratch_dir, i);
		assert_int_equal(mkdir(path, 0755), 0);
		snprintf(path, sizeof path, "%s/dag/d%d/f.txt", scratch_dir, i);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fclose(f);
		for (int k = 0; i + 1 < DAG_LEVELS && k < 2; k++) {
			snprintf(target, sizeof target, "%s/dag/d%d", scratch_dir, i + 1);
			snprintf(path, sizeof path, "%s/dag/d%d/%c", scratch_dir, i, "ab"[k]);
			assert_int_equal(symlink(target, path), 0);
		}
	}
	snprintf(root, 512, "%s/dag/d0", scratch_dir);
}

/* The numbers the "kernel" was given by lookups (one each; forgotten one by one). */
struct known {
	uint64_t *ino;
	size_t n, cap;
};

/* The entry of name in parent, looked up as the kernel would (known keeps it). */
static struct mount_entry known_lookup(struct mount *m, struct known *k, uint64_t parent,
                                       const char *name)
{
	struct mount_entry e;
	struct mount_err err;
	assert_true(mount_lookup(m, parent, name, &e, &err));
	assert_int_not_equal(e.ino, 0);
	if (k->n == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 1024;
		k->ino = realloc(k->ino, k->cap * sizeof *k->ino);
		assert_non_null(k->ino);
	}
	k->ino[k->n++] = e.ino;
	return e;
}

/* Every path under folder dir, as find walks them: f.txt, a and b looked up, and a and b
 * walked in turn. */
static void walk_all(struct mount *m, struct known *k, uint64_t dir, int level)
{
	known_lookup(m, k, dir, "f.txt");
	for (int i = 0; level + 1 < DAG_LEVELS && i < 2; i++)
		walk_all(m, k, known_lookup(m, k, dir, i ? "b" : "a").ino, level + 1);
}

/* Everything in k forgotten. */
static void forget_all(struct mount *m, struct known *k)
{
	for (size_t i = 0; i < k->n; i++)
		mount_forget(m, k->ino[i], 1);
	k->n = 0;
}

/* Issue 43 item 8: a walk of every path of a symbolic link DAG (2^13 paths to the last
 * folder) makes a slot for each; once the kernel forgets them, the listings of the
 * folders nobody uses are let go past LIB_KEEP_IDLE_ENTRIES slots, and the slots come
 * back near their start, while a path the kernel still knows keeps its numbers; the
 * rest are listed again when next looked up. */
static void test_forgotten_paths_let_go(void **state)
{
	(void)state;
	char root[512];
	make_dag(root);
	struct mount *m = mount_at(root, false);
	const uint64_t start = library_slots(lib);
	assert_int_equal(start, 1 + 3);   /* the root and its listing */
	struct known k = { 0 }, chain = { 0 };
	walk_all(m, &k, LIB_ROOT_INO, 0);
	const uint64_t paths = (UINT64_C(1) << DAG_LEVELS) - 1;   /* folders walked */
	assert_int_equal(k.n, 2 * paths - 1);
	assert_true(library_slots(lib) >= 2 * paths);
	/* one path the kernel keeps (a shell's cwd): a/b/a/b and its f.txt */
	uint64_t kept[5], dir = LIB_ROOT_INO;
	for (int i = 0; i < 5; i++)
		dir = kept[i] = known_lookup(m, &chain, dir, i == 4 ? "f.txt" : i % 2 ? "b" : "a").ino;
	forget_all(m, &k);
	const uint64_t after = library_slots(lib);
	assert_true(after <= start + LIB_KEEP_IDLE_ENTRIES + 5 * 3);
	assert_true(after < paths);
	/* the path kept has its numbers, and what it names is served */
	dir = LIB_ROOT_INO;
	struct mount_err err;
	for (int i = 0; i < 5; i++) {
		struct stat st;
		double ttl;
		assert_true(mount_getattr(m, kept[i], 0, &st, &ttl, &err));
		dir = known_lookup(m, &chain, dir, i == 4 ? "f.txt" : i % 2 ? "b" : "a").ino;
		assert_int_equal(dir, kept[i]);
	}
	/* more forgets than lookups, and numbers never given: nothing */
	mount_forget(m, kept[4], 1000);
	mount_forget(m, (UINT64_C(1) << 40) | 1, 1);
	forget_all(m, &chain);
	assert_true(library_slots(lib) <= start + LIB_KEEP_IDLE_ENTRIES);
	/* a walk again: every path there, listed anew */
	walk_all(m, &k, LIB_ROOT_INO, 0);
	assert_int_equal(k.n, 2 * paths - 1);
	forget_all(m, &k);
	assert_true(library_slots(lib) <= start + LIB_KEEP_IDLE_ENTRIES);
	char value[32] = "";
	assert_true(mount_xattr(m, LIB_ROOT_INO, "user.ggufs.slots", value, sizeof value - 1, &err) > 0);
	assert_int_equal(strtoull(value, NULL, 10), library_slots(lib));
	free(k.ino);
	free(chain.ino);
	unmount(m);
}

/* scratch_dir/rel: shard no (from 1) of count of a model whose shards each hold one f32
 * tensor of 4 values, "tNO". */
static void write_shard(const char *rel, unsigned no, unsigned count)
{
	char path[512], name[32];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, rel);
	snprintf(name, sizeof name, "t%u", no);
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 1, no == 1 ? 4 : 3);
	if (no == 1)
		gw_kv_str(&w, "general.architecture", "test");
	gw_kv_u32(&w, "split.no", no - 1);
	gw_kv_u32(&w, "split.count", count);
	gw_kv_u32(&w, "split.tensors.count", count);
	const uint64_t ne[1] = { 4 };
	gw_tensor(&w, name, 1, ne, GGML_TYPE_F32, 0);
	gw_align(&w, 32);
	for (int i = 0; i < 4; i++)
		gw_f32(&w, (float)i);
	assert_true(gw_save(&w, path));
	gw_free(&w);
	assert_int_equal(chmod(path, 0644), 0);
}

/* The whole text of file path (from the root) into out, NUL-ended. */
static void read_text(struct mount *m, const char *path, char *out, size_t n)
{
	struct mount_err err;
	struct mount_open o;
	struct mount_got *g;
	struct mount_entry f = open_to_read(m, path, &o, &g);
	assert_true(mount_read(m, f.ino, o.fh, 0, sizeof g->buf, false, mount_got_take, g, &err));
	mount_release(m, f.ino, o.fh);
	assert_true(g->len < n);
	memcpy(out, g->buf, g->len);
	out[g->len] = 0;
	free(g);
}

/* A model's error is "ggufs: " and want, a line. */
static void expect_error(struct mount *m, const char *model, const char *want)
{
	char path[128], text[1024], line[1024];
	snprintf(path, sizeof path, "%s/error", model);
	read_text(m, path, text, sizeof text);
	snprintf(line, sizeof line, "ggufs: %s\n", want);
	if (strcmp(text, line))
		print_error("%s: '%s', not '%s'\n", model, text, line);
	assert_string_equal(text, line);
}

/* A library others read (confined): each later shard is checked as the first file is
 * before it is opened: a device (a symlink to /dev/zero), one that leads out of the
 * folder, a FIFO (never opened: inotify sees no open), one of another owner, one that
 * lets fewer read it (a symlink to a root-only file of the folder) is refused, the
 * error naming it and why, never its bytes. Without confinement the owner rule does
 * not apply. */
static void test_shards_checked_as_the_first_file(void **state)
{
	(void)state;
	char dir[128], path[256], want[1024];
	snprintf(dir, sizeof dir, "%s/shards", scratch_dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	const char *models[] = { "o", "p", "q", "r", "s", "ok" };
	for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
		for (unsigned no = 1; no <= 2; no++) {
			snprintf(path, sizeof path, "shards/%s-%05u-of-00002.gguf", models[i], no);
			write_shard(path, no, 2);
		}
	}
	/* p: shard 2 a symlink to /dev/zero */
	snprintf(path, sizeof path, "%s/p-00002-of-00002.gguf", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/dev/zero", path), 0);
	/* o: shard 2 a symlink to a GGUF file outside the library */
	snprintf(path, sizeof path, "%s/o-00002-of-00002.gguf", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(TEST_DATA "/tinyllama-q4km.gguf", path), 0);
	/* q: shard 2 another user's */
	const bool root = geteuid() == 0;
	snprintf(path, sizeof path, "%s/q-00002-of-00002.gguf", dir);
	if (root)
		assert_int_equal(chown(path, 65534, 65534), 0);
	/* r: shard 2 a FIFO */
	char fifo[256];
	snprintf(fifo, sizeof fifo, "%s/r-00002-of-00002.gguf", dir);
	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	int in = open_watch(fifo);
	/* s: shard 2 a symlink to a file of the folder that only its owner reads */
	snprintf(path, sizeof path, "%s/vault", dir);
	write_secret(path);
	snprintf(path, sizeof path, "%s/s-00002-of-00002.gguf", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("vault", path), 0);

	struct mount *m = mount_scratch_as(true);
	snprintf(want, sizeof want, "%s/p-00002-of-00002.gguf: not a regular file (a character "
	         "device)", dir);
	expect_error(m, "shards/p", want);
	snprintf(want, sizeof want, "%s/o-00002-of-00002.gguf: it leads out of the library's "
	         "folder", dir);
	expect_error(m, "shards/o", want);
	if (root) {
		snprintf(want, sizeof want, "%s/q-00002-of-00002.gguf: not read, as other users read "
		         "the library: owned by uid 65534, not by uid 0 as the first file is", dir);
		expect_error(m, "shards/q", want);
	}
	snprintf(want, sizeof want, "%s: not a regular file (a FIFO)", fifo);
	expect_error(m, "shards/r", want);
	assert_int_equal(open_watch_count(in), 0);
	snprintf(want, sizeof want, "%s/s-00002-of-00002.gguf: not read, as other users read "
	         "the library: its mode 600 (group %lu) lets fewer users read it than the first "
	         "file's 644 (group %lu)", dir, (unsigned long)getegid(), (unsigned long)getegid());
	expect_error(m, "shards/s", want);
	char text[256];
	read_text(m, "shards/ok/tensors/t2", text, sizeof text);
	unmount(m);

	/* the mounting user's alone: another owner's shard is read, as by the user */
	m = mount_scratch_as(false);
	read_text(m, "shards/q/tensors/t2", text, sizeof text);
	snprintf(want, sizeof want, "%s/s-00002-of-00002.gguf: not a GGUF file: it starts with "
	         "bytes 54 4f 50 53, not 'GGUF'", dir);
	expect_error(m, "shards/s", want);   /* the user's own to read */
	unmount(m);
}

/* A model's first file given to another file after the model's lookup and before its
 * build (a rename over it, as an exchange would): the build opens nothing of the other
 * file, whose first bytes an error line quoted; the model is stale, and a new lookup
 * finds the new version. */
static void test_first_file_swapped_before_build(void **state)
{
	(void)state;
	char path[256], other[256];
	assert_int_equal(mkdir(strcat(strcpy(path, scratch_dir), "/swap"), 0755), 0);
	write_model("swap/x.gguf");
	struct mount *m = mount_scratch_as(true);
	struct mount_entry x = walk(m, "swap/x");   /* looked up, not built */
	snprintf(other, sizeof other, "%s/swap/other", scratch_dir);
	write_secret(other);
	snprintf(path, sizeof path, "%s/swap/x.gguf", scratch_dir);
	assert_int_equal(rename(other, path), 0);
	/* the name now: the new version, with its own owner and mode */
	struct mount_entry y = expect_stale(m, "swap/x", &x, "error");
	assert_int_equal(y.attr.st_mode & 0777, 0500);
	unmount(m);
}

/* A later shard replaced after the listing: the model is stale, not built from files
 * other than those listed, and the next lookup lists the folder again and builds it. */
static void test_shard_replaced_is_stale_then_listed(void **state)
{
	(void)state;
	char path[256];
	assert_int_equal(mkdir(strcat(strcpy(path, scratch_dir), "/later"), 0755), 0);
	write_shard("later/t-00001-of-00002.gguf", 1, 2);
	write_shard("later/t-00002-of-00002.gguf", 2, 2);
	struct mount *m = mount_scratch_as(false);
	struct mount_entry t = walk(m, "later/t");
	snprintf(path, sizeof path, "%s/later/t-00002-of-00002.gguf", scratch_dir);
	struct timeval times[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	assert_int_equal(utimes(path, times), 0);   /* another version: mtime and ctime */
	expect_stale(m, "later/t", &t, "summary.txt");
	unmount(m);
}

/* scratch_dir/rel: a model of n f32 tensors t0, t1 ... of 8 values each. */
static void write_tensors(const char *rel, int n)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, rel);
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, (uint64_t)n, 1);
	gw_kv_str(&w, "general.architecture", "test");
	const uint64_t ne[1] = { 8 };
	for (int k = 0; k < n; k++) {
		char name[32];
		snprintf(name, sizeof name, "t%d", k);
		gw_tensor(&w, name, 1, ne, GGML_TYPE_F32, (uint64_t)k * 32);
	}
	gw_align(&w, 32);
	for (int i = 0; i < 8 * n; i++)
		gw_f32(&w, (float)i);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* The size and blocks of the file at parent/name, read whole first (a table's size is
 * its last rendering's). */
static struct stat read_then_stat(struct mount *m, uint64_t parent, const char *name)
{
	struct mount_entry e;
	struct mount_err err;
	struct mount_open o;
	assert_true(mount_lookup(m, parent, name, &e, &err));
	assert_int_not_equal(e.ino, 0);
	assert_true(mount_open(m, e.ino, O_RDONLY, 0, &o, &err));
	struct mount_got *g = calloc(1, sizeof *g);
	assert_non_null(g);
	assert_true(mount_read(m, e.ino, o.fh, 0, sizeof g->buf, false, mount_got_take, g, &err));
	mount_release(m, e.ino, o.fh);
	free(g);
	assert_true(mount_lookup(m, parent, name, &e, &err));
	return e.attr;
}

/* The stat rule of every mount (node.h): a library's own computed files, models.tsv,
 * compare/OTHER and a broken model's error, count one block each, as a model's
 * computed files do, whatever their size (each past 512 bytes here: its size's blocks
 * would be 2 or more); a plain file counts its size's blocks, as it is stored. */
static void test_computed_files_count_one_block(void **state)
{
	(void)state;
	char path[1024], name[201];
	snprintf(path, sizeof path, "%s/blocks", scratch_dir);
	assert_int_equal(mkdir(path, 0755), 0);
	for (int i = 0; i < 8; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "blocks/m%d.gguf", i);
		write_model(rel);
	}
	write_tensors("blocks/many.gguf", 40);   /* compare/many: a line for each */
	/* a broken model whose error names a path past 512 bytes */
	memset(name, 'd', 200);
	name[200] = 0;
	snprintf(path, sizeof path, "%s/blocks/%s", scratch_dir, name);
	assert_int_equal(mkdir(path, 0755), 0);
	size_t at = strlen(path);
	snprintf(path + at, sizeof path - at, "/%s", name);
	path[at + 1] = 'e';
	assert_int_equal(mkdir(path, 0755), 0);
	at = strlen(path);
	snprintf(path + at, sizeof path - at, "/%.150s.gguf", name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("not a model", f);
	fclose(f);
	/* a plain file of 2,000 bytes */
	snprintf(path, sizeof path, "%s/blocks/plain.txt", scratch_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	for (int i = 0; i < 2000; i++)
		fputc('x', f);
	fclose(f);

	struct mount *m = mount_scratch();
	struct stat st = read_then_stat(m, LIB_ROOT_INO, "models.tsv");
	assert_true(st.st_size > 512);
	assert_int_equal(st.st_blocks, 1);
	struct mount_entry mc = walk(m, "blocks/m0/compare");
	st = read_then_stat(m, mc.ino, "many");
	assert_true(st.st_size > 512);
	assert_int_equal(st.st_blocks, 1);
	struct mount_entry e, d = walk(m, "blocks");
	struct mount_err err;
	name[0] = 'd';
	assert_true(mount_lookup(m, d.ino, name, &e, &err));
	name[0] = 'e';
	assert_true(mount_lookup(m, e.ino, name, &e, &err));
	snprintf(path, sizeof path, "%.150s", name);
	path[0] = 'd';
	assert_true(mount_lookup(m, e.ino, path, &e, &err));
	st = read_then_stat(m, e.ino, "error");
	assert_true(st.st_size > 512);
	assert_int_equal(st.st_blocks, 1);
	assert_int_equal(walk(m, "blocks/plain.txt").attr.st_blocks, (2000 + 511) / 512);
	unmount(m);
}

UNIT_TESTS_IN_GROUP(setup, scratch_dir_remove,
	cmocka_unit_test(test_lookup_is_one_call_with_attributes),
	cmocka_unit_test(test_read_then_release),
	cmocka_unit_test(test_readdir_from_offsets),
	cmocka_unit_test(test_counters_and_eio_cause),
	cmocka_unit_test(test_forgotten_paths_let_go),
	cmocka_unit_test(test_shards_checked_as_the_first_file),
	cmocka_unit_test(test_first_file_swapped_before_build),
	cmocka_unit_test(test_shard_replaced_is_stale_then_listed),
	cmocka_unit_test(test_computed_files_count_one_block))
