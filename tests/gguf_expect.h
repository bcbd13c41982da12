/* What the unit tests of the GGUF parser (tests/unit/test_gguf_*.c) share: an image
 * built by gguf_writer parsed from an exact-size heap copy, so that ASan sees a read one
 * byte past the end, and the checks that a parse succeeds, or fails with one line that
 * names the thing at fault. Include after <cmocka.h>. */
#ifndef GGUFS_TESTS_GGUF_EXPECT_H
#define GGUFS_TESTS_GGUF_EXPECT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"

/* A parsed image: the copy must outlive the gguf_file, whose names point into it. */
struct parsed {
	uint8_t *img;
	size_t len;
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	int rc;
};

/* Parses the first len bytes of w; on failure err is one line (checked). */
void parse_n(const struct gw *w, size_t len, struct parsed *p);
void parsed_free(struct parsed *p);
/* The whole of w must parse; the result stays in *p (parsed_free it). */
void expect_ok(const struct gw *w, struct parsed *p);
/* The whole of w must fail, with an error containing each of the NULL-terminated
 * substrings, and leave nothing allocated. */
void expect_fail(const struct gw *w, ...);
/* A file of one metadata key called key, of value type type, its value for the
 * caller to write next: the start of most of the files the parser must refuse. */
void one_key(struct gw *w, const char *key, uint32_t type);
/* A file of one tensor info and its data section: n_dims dims ne, type, offset, then
 * data_bytes zero bytes of data after the aligned header. */
void one_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                uint32_t type, uint64_t offset, size_t data_bytes);

#define assert_contains(hay, needle) do { \
	if (!strstr((hay), (needle))) \
		fail_msg("error '%s' does not contain '%s'", (hay), (needle)); \
} while (0)

#endif
