/* The kit of providers a mount makes (mount_source.c), for tests that build trees and
 * libraries without one: the core's providers and quants/ with the default options (no
 * disk cache, no -o requantize, workers on the online cores). */
#ifndef GGUFS_TEST_KIT_H
#define GGUFS_TEST_KIT_H

struct tree_kit;

/* The kit, one per process, made at the first call (the test fails when it cannot be)
 * and kept for the process's life. */
const struct tree_kit *test_kit(void);

#endif
