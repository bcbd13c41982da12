/* A single model's mount (lib/8-mount/mount.h over tree_ns.c), asked as the front
 * end asks it, with no FUSE: a lookup of metadata/general.architecture is one call that
 * answers the entry with its attributes (the tree's stat rule) and timeouts; a read of
 * a .f32 at an offset is one call and one reply; the root's user.ggufs.* counters come
 * after the tree's own attributes and count the reads; model.gguf names its file for
 * passthrough and asks the front end's passthrough for its attribute; statfs, EROFS,
 * EISDIR, ENOTDIR and EBADF as the mount answered them before. */
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
#include <cmocka.h>

#include "unit.h"

#include "guard.h"
#include "model.h"
#include "mount.h"
#include "mount_fixture.h"
#include "scratch_dir.h"
#include "tree.h"

#define N_VALUES 4096

static struct ggufs_model *model;
static struct tree *tree;

/* scratch_dir/m.gguf: a model of one f32 tensor "w" of N_VALUES values i * 0.25,
 * opened, its tree built (mount_fixture_open). */
static int setup(void **state)
{
	guard_install();   /* the SIGBUS guard of mapped reads, before any read */
	return mount_fixture_open(state, N_VALUES, 0.25f, &model, &tree);
}

static int teardown(void **state)
{
	return mount_fixture_close(state, model, tree);
}

static void test_lookup_one_call(void **state)
{
	(void)state;
	struct mount *m = mount_new(tree_ns_new(tree));
	assert_non_null(m);
	struct mount_entry e;
	struct mount_err err;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "general.architecture", &e, &err));
	assert_int_equal(e.ino, TREE_FIRST_META);
	assert_true(S_ISREG(e.attr.st_mode));
	assert_int_equal(e.attr.st_ino, e.ino);
	assert_int_equal(e.attr.st_size, 5);   /* "test\n" */
	assert_int_equal(e.attr.st_blocks, 1);
	assert_true(e.entry_ttl >= MOUNT_TTL_FOREVER && e.attr_ttl >= MOUNT_TTL_FOREVER);
	/* a name that is not there: a negative entry, kept as long (no name ever appears) */
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "general.nothing", &e, &err));
	assert_int_equal(e.ino, 0);
	assert_true(e.entry_ttl >= MOUNT_TTL_FOREVER);
	/* in a file, or a number never given */
	assert_false(mount_lookup(m, TREE_JSON_INO, "x", &e, &err));
	assert_int_equal(err.no, ENOTDIR);
	assert_false(mount_lookup(m, 999999, "x", &e, &err));
	assert_int_equal(err.no, ENOENT);
	/* model.gguf holds the model's bytes */
	assert_true(mount_lookup(m, TREE_ROOT_INO, "model.gguf", &e, &err));
	assert_int_equal(e.attr.st_blocks, (e.attr.st_size + 511) / 512);
	mount_free(m);
}

static long long reads_of(struct mount *m)
{
	char buf[32] = "";
	struct mount_err err;
	assert_true(mount_xattr(m, TREE_ROOT_INO, "user.ggufs.reads", buf, sizeof buf - 1, &err) > 0);
	return atoll(buf);
}

static void test_read_f32_one_call(void **state)
{
	(void)state;
	struct mount *m = mount_new(tree_ns_new(tree));
	struct mount_entry e;
	struct mount_err err;
	assert_true(mount_lookup(m, TREE_TENSORS_DIR_INO, "w.f32", &e, &err));
	struct mount_open o;
	assert_false(mount_open(m, e.ino, O_RDWR, 0, &o, &err));
	assert_int_equal(err.no, EROFS);
	assert_true(mount_open(m, e.ino, O_RDONLY, 0, &o, &err));
	assert_true(o.keep_cache && !o.direct_io);
	assert_int_equal(o.pt_fd, -1);
	long long before = reads_of(m);
	struct mount_got g = { .len = 0 };
	assert_true(mount_read(m, e.ino, o.fh, 400, 8, false, mount_got_take, &g, &err));
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.len, 8);
	float v[2];
	memcpy(v, g.buf, sizeof v);
	assert_true(v[0] == 25.0f && v[1] == 25.25f);   /* values 100 and 101 */
	assert_int_equal(reads_of(m), before + 1);
	mount_release(m, e.ino, o.fh);
	assert_false(mount_read(m, e.ino, o.fh, 0, 8, false, mount_got_take, &g, &err));
	assert_int_equal(err.no, EBADF);
	/* a directory opened as a file, a file listed */
	assert_false(mount_open(m, TREE_TENSORS_DIR_INO, O_RDONLY, 0, &o, &err));
	assert_int_equal(err.no, EISDIR);
	assert_false(mount_opendir(m, e.ino, &o, &err));
	assert_int_equal(err.no, ENOTDIR);
	mount_free(m);
}

/* The front end's passthrough, as the mount asks it: what it was asked, and "hook". */
static int asked_fd = -2;
static uint64_t asked_ino = 99;

static void why_not(void *arg, uint64_t ino, int fd, const char *not_file, const char *path,
                    char *buf, size_t size)
{
	(void)arg, (void)not_file, (void)path;
	asked_fd = fd;
	asked_ino = ino;
	snprintf(buf, size, "hook");
}

static bool add_name(void *ctx, const char *name, uint64_t ino, bool dir, uint64_t next)
{
	(void)ino, (void)dir, (void)next;
	char *names = ctx;
	strcat(names, name);
	strcat(names, " ");
	return true;
}

static void test_attributes_listing_statfs(void **state)
{
	(void)state;
	struct mount *m = mount_new(tree_ns_new(tree));
	struct mount_err err;
	/* the root's names: the tree's, then the counters */
	char names[2048];
	int64_t r = mount_xattr(m, TREE_ROOT_INO, NULL, names, sizeof names, &err);
	assert_true(r > 0);
	assert_int_equal(mount_xattr(m, TREE_ROOT_INO, NULL, NULL, 0, &err), r);
	assert_true(memmem(names, (size_t)r, "user.ggufs.reads", 17) != NULL);
	assert_true(memmem(names, (size_t)r, "user.ggufs.url", 15) == NULL);   /* local */
	assert_true(mount_xattr(m, TREE_ROOT_INO, NULL, names, (size_t)r - 1, &err) < 0);
	assert_int_equal(err.no, ERANGE);
	/* model.gguf: its passthrough attribute, from the front end */
	char value[64] = "";
	struct mount_entry e;
	assert_true(mount_lookup(m, TREE_ROOT_INO, "model.gguf", &e, &err));
	r = mount_xattr(m, e.ino, MOUNT_PASSTHROUGH_XATTR, value, sizeof value, &err);
	assert_int_equal(r, 23);
	assert_memory_equal(value, "off (-o passthrough=no)", 23);   /* none asked */
	mount_set_passthrough(m, &(struct mount_passthrough){ .why_not = why_not });
	r = mount_xattr(m, e.ino, MOUNT_PASSTHROUGH_XATTR, value, sizeof value, &err);
	assert_int_equal(r, 4);
	assert_memory_equal(value, "hook", 4);
	assert_true(asked_fd >= 0);   /* the model is its one local file */
	assert_int_equal(asked_ino, e.ino);   /* model.gguf's number */
	struct mount_open o;
	assert_true(mount_open(m, e.ino, O_RDONLY, 0, &o, &err));
	assert_int_equal(o.pt_fd, asked_fd);
	assert_null(o.pt_not_file);
	mount_release(m, e.ino, o.fh);
	/* the root's listing */
	char listed[512] = "";
	assert_true(mount_opendir(m, TREE_ROOT_INO, &o, &err));
	assert_true(mount_readdir(m, TREE_ROOT_INO, o.fh, 0, add_name, listed, &err));
	mount_releasedir(m, o.fh);
	assert_string_equal(listed, ". .. metadata tensors gguf.json summary.txt stats stats.tsv "
	                    "model.gguf quants ");
	struct statvfs sv;
	mount_statfs(m, &sv);
	assert_true(sv.f_flag & ST_RDONLY);
	assert_int_equal(sv.f_blocks, (model_stat(model)->st_size + 4095) / 4096);
	/* the three keys of mount_fixture_model, "w" and its three files */
	assert_int_equal(sv.f_files, TREE_FIRST_META + 3 + 4);
	mount_free(m);
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_lookup_one_call),
	cmocka_unit_test(test_read_f32_one_call),
	cmocka_unit_test(test_attributes_listing_statfs))
