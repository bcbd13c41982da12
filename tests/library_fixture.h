/* What the unit tests of lib/7-library over a source of their own share: the library
 * opened over a source a test writes (its listings, stats and models made up), as
 * lib_source_local and the others are opened. */
#ifndef GGUFS_TEST_LIBRARY_FIXTURE_H
#define GGUFS_TEST_LIBRARY_FIXTURE_H

#include <stdbool.h>

struct library;
struct lib_source_ops;

/* The library over a new source of ops and ctx (ctx is the library's from here on:
 * ops->free frees it, `free` where it is one block or NULL), whose folders may show
 * under many paths when links (lib_source's links). Fails the test (cmocka) where
 * library_open refuses it. */
struct library *library_fixture_open(const struct lib_source_ops *ops, void *ctx, bool links);

#endif
