/* A model's mount with edits (lib/8-mount/edits_ns.c, edits_writer.c), asked as the
 * front end asks it, with no FUSE: a writer of metadata/KEY opened, written and closed
 * makes the value, the kernel told to forget the key, metadata/ and the files every edit
 * changes; a write that can never parse fails at once with EINVAL and its cause, counted
 * in user.ggufs.edits_refused, and the close fails with it too; a released writer gives
 * its place back, and at most 16 are open at once; only the mount's owner
 * may open for writing (EACCES), and only a key (EROFS); a created key is an entry and a
 * writer in one call; rm and mv of keys; statfs is writable; an ftruncate past the
 * bound refuses the writer as a write past it does; a truncation alone is made at its
 * close. */
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
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "guard.h"
#include "model.h"
#include "mount.h"
#include "mount_edits.h"
#include "mount_fixture.h"
#include "scratch_dir.h"
#include "tree.h"
#include "tree_edit.h"

static struct ggufs_model *model;
static struct tree *tree;
static struct tree_kit *kit;
static struct edits_mount em;   /* metadata/'s provider's, and each mount's namespace's */

/* scratch_dir/m.gguf: general.name "old" and a u32 context length, one f32 tensor of
 * 8 values 0 to 7 (mount_fixture_model), its tree built as a mount with edits builds it
 * (mount_source.c): metadata/ the edits' provider. */
static int setup(void **state)
{
	guard_install();   /* the SIGBUS guard of mapped reads, before any read */
	if (mount_fixture_open(state, 8, 1.0f, &model, &tree) != 0)
		return -1;
	char err[GGUF_ERR_MAX];
	tree_free(tree);
	kit = tree_kit_new(err);
	tree = kit && tree_kit_replace(kit, &tree_meta_provider, &edits_meta_provider, &em, err)
	               ? tree_build(model, kit, err) : NULL;
	return tree ? 0 : -1;
}

static int teardown(void **state)
{
	int r = mount_fixture_close(state, model, tree);
	tree_kit_free(kit);
	return r;
}

/* What the mount told the front end to forget. */
static uint64_t forgotten[64];
static int n_forgotten;

static void forget(void *arg, uint64_t ino, bool pages)
{
	(void)arg, (void)pages;
	if (n_forgotten < 64)
		forgotten[n_forgotten++] = ino;
}

static bool was_forgotten(uint64_t ino)
{
	for (int i = 0; i < n_forgotten; i++)
		if (forgotten[i] == ino)
			return true;
	return false;
}

static struct tree_edits *edits;

/* A mount over a fresh edits file (name). */
static struct mount *mount_edits(const char *name)
{
	char path[512], err[GGUF_ERR_MAX];
	snprintf(path, sizeof path, "%s/%s", scratch_dir, name);
	edits = tree_edits_open(tree, path, NULL, err);
	assert_non_null(edits);
	em.edits = edits;
	em.base = tree;
	struct mount *m = mount_new(edits_ns_new(&em));
	assert_non_null(m);
	mount_set_notify(m, &(struct mount_notify){ .forget = forget });
	n_forgotten = 0;
	return m;
}

static void unmount(struct mount *m)
{
	mount_free(m);
	tree_edits_close(edits);
}

/* The text of metadata/name now, read through a fresh open. */
static void read_key(struct mount *m, const char *name, struct mount_got *g)
{
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, name, &e, &err));
	assert_int_not_equal(e.ino, 0);
	assert_true(mount_open(m, e.ino, O_RDONLY, getuid(), &o, &err));
	assert_true(o.direct_io);   /* an edit changes it: past the page cache */
	memset(g, 0, sizeof *g);
	assert_true(mount_read(m, e.ino, o.fh, 0, sizeof g->buf, false, mount_got_take, g, &err));
	assert_int_equal(g->len, (size_t)e.attr.st_size);
	mount_release(m, e.ino, o.fh);
}

static void test_writer_makes_the_value(void **state)
{
	(void)state;
	struct mount *m = mount_edits("a.json");
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "general.name", &e, &err));
	assert_true(e.entry_ttl == 0);   /* metadata/'s names change */
	assert_true(e.attr.st_mode & S_IWUSR);
	/* the owner only, and keys only */
	assert_false(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid() + 1, &o, &err));
	assert_int_equal(err.no, EACCES);
	assert_false(mount_open(m, TREE_JSON_INO, O_WRONLY, getuid(), &o, &err));
	assert_int_equal(err.no, EROFS);
	assert_true(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid(), &o, &err));
	assert_true(mount_write(m, e.ino, o.fh, "new\n", 4, 0, &err));
	assert_true(mount_flush(m, e.ino, o.fh, &err));
	mount_release(m, e.ino, o.fh);
	struct mount_got g;
	read_key(m, "general.name", &g);
	assert_int_equal(g.len, 4);
	assert_memory_equal(g.buf, "new\n", 4);
	assert_true(was_forgotten(e.ino));
	assert_true(was_forgotten(TREE_METADATA_DIR_INO));
	assert_true(was_forgotten(TREE_JSON_INO));
	struct statvfs sv;
	mount_statfs(m, &sv);
	assert_false(sv.f_flag & ST_RDONLY);
	/* a writer released gives its place back: more than EDIT_WRITERS_MAX (16) in turn */
	for (int i = 0; i < 40; i++) {
		assert_true(mount_open(m, e.ino, O_RDWR, getuid(), &o, &err));
		mount_release(m, e.ino, o.fh);
	}
	/* but 16 at once at most: ENFILE, said as a refusal */
	uint64_t fh[17];
	for (int i = 0; i < 16; i++) {
		assert_true(mount_open(m, e.ino, O_RDWR, getuid(), &o, &err));
		fh[i] = o.fh;
	}
	assert_false(mount_open(m, e.ino, O_RDWR, getuid(), &o, &err));
	assert_int_equal(err.no, ENFILE);
	for (int i = 0; i < 16; i++)
		mount_release(m, e.ino, fh[i]);
	unmount(m);
}

/* The value of a root counter as a number. */
static long long counter(struct mount *m, const char *name)
{
	char buf[64] = "";
	struct mount_err err;
	assert_true(mount_xattr(m, TREE_ROOT_INO, name, buf, sizeof buf - 1, &err) > 0);
	return atoll(buf);
}

static void test_refusal_carries_its_cause(void **state)
{
	(void)state;
	struct mount *m = mount_edits("b.json");
	assert_int_equal(counter(m, "user.ggufs.edits_refused"), 0);
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "test.context_length", &e, &err));
	assert_true(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid(), &o, &err));
	assert_false(mount_write(m, e.ino, o.fh, "abc", 3, 0, &err));
	assert_int_equal(err.no, EINVAL);
	assert_non_null(strstr(err.cause, "edit refused"));
	assert_int_equal(err.level, EVLOG_WARNING);
	assert_int_equal(counter(m, "user.ggufs.edits_refused"), 1);
	/* the close fails with it too, and nothing is made */
	assert_false(mount_flush(m, e.ino, o.fh, &err));
	assert_int_equal(err.no, EINVAL);
	mount_release(m, e.ino, o.fh);
	struct mount_got g;
	read_key(m, "test.context_length", &g);
	assert_memory_equal(g.buf, "2048\n", 5);
	unmount(m);
}

static void test_create_unlink_rename(void **state)
{
	(void)state;
	struct mount *m = mount_edits("c.json");
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	assert_false(mount_create(m, TREE_ROOT_INO, "x", O_WRONLY, getuid(), &e, &o, &err));
	assert_int_equal(err.no, EROFS);   /* only metadata/'s names change */
	assert_true(mount_create(m, TREE_METADATA_DIR_INO, "user.note", O_WRONLY, getuid(), &e, &o,
	                         &err));
	assert_int_not_equal(e.ino, 0);
	assert_true(o.direct_io);
	assert_true(mount_write(m, e.ino, o.fh, "hi\n", 3, 0, &err));
	mount_release(m, e.ino, o.fh);   /* the last close makes it */
	struct mount_got g;
	read_key(m, "user.note", &g);
	assert_memory_equal(g.buf, "hi\n", 3);
	assert_true(mount_rename(m, TREE_METADATA_DIR_INO, "user.note", TREE_METADATA_DIR_INO,
	                         "user.memo", 0, getuid(), &err));
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "user.note", &e, &err));
	assert_int_equal(e.ino, 0);
	assert_false(mount_unlink(m, TREE_METADATA_DIR_INO, "user.memo", getuid() + 1, &err));
	assert_int_equal(err.no, EACCES);
	assert_true(mount_unlink(m, TREE_METADATA_DIR_INO, "user.memo", getuid(), &err));
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "user.memo", &e, &err));
	assert_int_equal(e.ino, 0);
	unmount(m);
}

/* An ftruncate of a writer past the 64 MiB a key's text takes is EFBIG and refuses the
 * open file as a write past it does (issue 43 item 10): later writes and truncations
 * fail with it, so does the close, and nothing of its text is made. */
static void test_refused_truncation_refuses_the_writer(void **state)
{
	(void)state;
	struct mount *m = mount_edits("d.json");
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	struct stat st;
	double ttl;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "general.name", &e, &err));
	assert_true(mount_open(m, e.ino, O_RDWR, getuid(), &o, &err));
	assert_true(mount_write(m, e.ino, o.fh, "abc\n", 4, 0, &err));
	assert_false(mount_setattr(m, e.ino, o.fh, MOUNT_SET_SIZE, (UINT64_C(64) << 20) + 1,
	                           getuid(), &st, &ttl, &err));
	assert_int_equal(err.no, EFBIG);
	assert_false(mount_write(m, e.ino, o.fh, "new\n", 4, 0, &err));
	assert_int_equal(err.no, EFBIG);
	assert_false(mount_setattr(m, e.ino, o.fh, MOUNT_SET_SIZE, 0, getuid(), &st, &ttl, &err));
	assert_int_equal(err.no, EFBIG);
	assert_false(mount_flush(m, e.ino, o.fh, &err));
	assert_int_equal(err.no, EFBIG);
	assert_false(mount_flush(m, e.ino, o.fh, &err));   /* every close */
	assert_int_equal(err.no, EFBIG);
	mount_release(m, e.ino, o.fh);
	struct mount_got g;
	read_key(m, "general.name", &g);
	assert_int_equal(g.len, 4);
	assert_memory_equal(g.buf, "old\n", 4);
	/* without an open writer, a truncation past it refuses that call only */
	assert_false(mount_setattr(m, e.ino, 0, MOUNT_SET_SIZE, (UINT64_C(64) << 20) + 1, getuid(),
	                           &st, &ttl, &err));
	assert_int_equal(err.no, EFBIG);
	assert_true(mount_setattr(m, e.ino, 0, MOUNT_SET_SIZE, 2, getuid(), &st, &ttl, &err));
	read_key(m, "general.name", &g);
	assert_int_equal(g.len, 3);
	assert_memory_equal(g.buf, "ol\n", 3);
	unmount(m);
}

/* A truncation at open with nothing written after it is made at the close, before the
 * release (issue 43 item 12), as every edit is; a number's empty text fails a close
 * before the last with EINVAL, uncounted, so "echo 7 > KEY" (a first descriptor closed
 * before the write) makes 7 with nothing refused, and the last close of a truncation
 * alone refuses it, counted, the value kept. */
static void test_truncation_made_at_close(void **state)
{
	(void)state;
	struct mount *m = mount_edits("e.json");
	struct mount_entry e;
	struct mount_open o;
	struct mount_err err;
	struct mount_got g;
	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "general.name", &e, &err));
	assert_true(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid(), &o, &err));
	assert_true(mount_flush(m, e.ino, o.fh, &err));
	read_key(m, "general.name", &g);   /* before the release */
	assert_int_equal(g.len, 1);
	assert_memory_equal(g.buf, "\n", 1);
	mount_release(m, e.ino, o.fh);
	read_key(m, "general.name", &g);
	assert_int_equal(g.len, 1);

	assert_true(mount_lookup(m, TREE_METADATA_DIR_INO, "test.context_length", &e, &err));
	assert_true(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid(), &o, &err));
	assert_false(mount_flush(m, e.ino, o.fh, &err));
	assert_int_equal(err.no, EINVAL);
	assert_int_equal(counter(m, "user.ggufs.edits_refused"), 0);
	assert_true(mount_write(m, e.ino, o.fh, "7\n", 2, 0, &err));
	assert_true(mount_flush(m, e.ino, o.fh, &err));
	mount_release(m, e.ino, o.fh);
	read_key(m, "test.context_length", &g);
	assert_int_equal(g.len, 2);
	assert_memory_equal(g.buf, "7\n", 2);
	assert_int_equal(counter(m, "user.ggufs.edits_refused"), 0);

	assert_true(mount_open(m, e.ino, O_WRONLY | O_TRUNC, getuid(), &o, &err));
	assert_false(mount_flush(m, e.ino, o.fh, &err));
	assert_int_equal(err.no, EINVAL);
	mount_release(m, e.ino, o.fh);
	assert_int_equal(counter(m, "user.ggufs.edits_refused"), 1);
	read_key(m, "test.context_length", &g);
	assert_memory_equal(g.buf, "7\n", 2);
	unmount(m);
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_writer_makes_the_value),
	cmocka_unit_test(test_refusal_carries_its_cause),
	cmocka_unit_test(test_create_unlink_rename),
	cmocka_unit_test(test_refused_truncation_refuses_the_writer),
	cmocka_unit_test(test_truncation_made_at_close))
