/* What the unit tests of lib/8-mount share: a small model to mount, and the bytes a
 * read gives (mount.h's mount_data_fn). */
#ifndef GGUFS_TEST_MOUNT_FIXTURE_H
#define GGUFS_TEST_MOUNT_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

struct ggufs_model;
struct tree;

/* Writes at path a model of architecture "test", general.name "old" and
 * test.context_length 2048 (u32), with one f32 tensor "w" of n values, value i being
 * i * scale. False when it could not be written. */
bool mount_fixture_model(const char *path, int n, float scale);

/* A cmocka group's setup: that model written as scratch_dir/m.gguf (scratch_dir.h),
 * opened and its tree built into *model and *tree. 0, or -1. */
int mount_fixture_open(void **state, int n, float scale, struct ggufs_model **model,
                       struct tree **tree);
/* Its teardown: the tree and model freed, the scratch folder removed. */
int mount_fixture_close(void **state, struct ggufs_model *model, struct tree *tree);

/* What reads gave: their bytes joined, and how many replies. */
struct mount_got {
	char buf[1 << 16];
	size_t len;
	int calls;
};
/* mount_data_fn (ctx: struct mount_got): the bytes appended (the test fails past the
 * buffer). */
void mount_got_take(void *ctx, const struct iovec *iov, int count);

#endif
