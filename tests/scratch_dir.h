/* A scratch directory for the files a unit test writes: made fresh by the group's
 * setup, removed with all it holds by its teardown. */
#ifndef GGUFS_TEST_SCRATCH_DIR_H
#define GGUFS_TEST_SCRATCH_DIR_H

/* The directory's path while the group runs ("/tmp/ggufs-test-XXXXXX" made unique). */
extern char scratch_dir[64];

/* cmocka group setup: makes scratch_dir. 0, or -1. */
int scratch_dir_make(void **state);
/* cmocka group teardown: removes scratch_dir and everything in it. 0, or nonzero. */
int scratch_dir_remove(void **state);

#endif
