/* A writer's text of metadata/KEY (edit_text.h): loaded as the key shows, written past
 * its end with zeros between, cut and extended, bounded by EDIT_TEXT_MAX, and left as
 * it was by a refused call. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"
#include "tiny_model.h"

#include "edit_text.h"
#include "model.h"
#include "test_kit.h"
#include "tree.h"
#include "tree_ino.h"

static void test_write_and_resize(void **state)
{
	(void)state;
	struct vbytes text = { 0 };
	assert_string_equal(edit_text_bytes(&text), "");
	assert_int_equal(edit_text_write(&text, 0, "abc", 3), 0);
	assert_int_equal(edit_text_write(&text, 5, "xy", 2), 0);   /* a hole of two zeros */
	assert_int_equal(text.len, 7);
	assert_memory_equal(text.p, "abc\0\0xy", 7);
	assert_int_equal(edit_text_write(&text, 1, "Z", 1), 0);    /* inside: no growth */
	assert_int_equal(text.len, 7);
	assert_memory_equal(text.p, "aZc\0\0xy", 7);
	assert_int_equal(edit_text_resize(&text, 2), 0);
	assert_int_equal(text.len, 2);
	assert_int_equal(edit_text_resize(&text, 4), 0);            /* zeros, not the old bytes */
	assert_memory_equal(text.p, "aZ\0\0", 4);
	free(text.p);
}

static void test_bounds(void **state)
{
	(void)state;
	struct vbytes text = { 0 };
	assert_int_equal(edit_text_write(&text, 0, "abc", 3), 0);
	assert_int_equal(edit_text_write(&text, EDIT_TEXT_MAX, "x", 1), -EFBIG);
	assert_int_equal(edit_text_write(&text, UINT64_MAX, "x", 1), -EFBIG);   /* wraps */
	assert_int_equal(edit_text_resize(&text, EDIT_TEXT_MAX + 1), -EFBIG);
	assert_int_equal(text.len, 3);
	assert_memory_equal(text.p, "abc", 3);
	assert_int_equal(edit_text_write(&text, 6, "", 0), 0);   /* nothing written, zeros up to 6 */
	assert_int_equal(text.len, 6);
	assert_memory_equal(text.p, "abc\0\0\0", 6);
	free(text.p);
}

/* The text of general.architecture as the tree shows it, then edited. */
static void test_load(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = tiny_model_open();
	struct tree *t = tree_build(m, test_kit(), err);
	assert_non_null(t);
	const struct tree_node *n = tree_lookup(t, TREE_METADATA_DIR_INO, "general.architecture");
	assert_non_null(n);
	struct vbytes text = { 0 };
	assert_int_equal(edit_text_load(&text, t, n), 0);
	assert_int_equal(text.len, n->size);
	assert_memory_equal(text.p, "llama", 5);
	assert_int_equal(edit_text_write(&text, text.len, "!", 1), 0);
	assert_int_equal(text.len, n->size + 1);
	assert_int_equal(text.p[n->size], '!');
	free(text.p);
	tree_free(t);
	model_close(m);
}

UNIT_TESTS(cmocka_unit_test(test_write_and_resize),
           cmocka_unit_test(test_bounds),
           cmocka_unit_test(test_load))
