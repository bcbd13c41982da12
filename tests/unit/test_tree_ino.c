/* The zones of a tree's numbers (lib/6-tree/tree_ino.h): which zone a number is in,
 * ranges placed in a zone without passing its end, and an edit state's range found
 * and refused at the zone's end, all without overflow at the edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "unit.h"

#include "tree_ino.h"

static void test_zones(void **state)
{
	(void)state;
	assert_false(tree_ino_per_state(TREE_ZONE_P - 1));
	assert_true(tree_ino_per_state(TREE_ZONE_P));
	assert_true(tree_ino_per_state(TREE_ZONE_X - 1));
	assert_false(tree_ino_per_state(TREE_ZONE_X));
	assert_false(tree_ino_ns_own(TREE_ZONE_X - 1));
	assert_true(tree_ino_ns_own(TREE_ZONE_X));
	assert_true(tree_ino_ns_own(TREE_ZONE_END - 1));
	assert_false(tree_ino_ns_own(TREE_ZONE_END));
	assert_false(tree_ino_ns_own(UINT64_MAX));
	/* today's fixed numbers are in the root entries' zone, the first key after it */
	assert_true(TREE_METADATA_DIR_INO >= TREE_ZONE_ROOT && TREE_STATS_TSV_INO < TREE_ZONE_S);
	assert_int_equal(TREE_FIRST_META, TREE_ZONE_S);
	assert_int_equal(TREE_ROOT_ENTRIES_MAX, 14);
	/* state 0 of the widest kit ends below a library's compare/ numbers (2^31 - 1) */
	assert_true(TREE_ZONE_P + TREE_STATE_WIDTH_MAX - 1 < (UINT64_C(1) << 31) - 1);
}

static void test_place(void **state)
{
	(void)state;
	uint64_t next = TREE_ZONE_S, first = 0;
	assert_true(tree_zone_place(&next, 5, TREE_ZONE_P, &first));   /* 5 keys */
	assert_int_equal(first, 16);
	assert_true(tree_zone_place(&next, 0, TREE_ZONE_P, &first));   /* nothing */
	assert_int_equal(first, 21);
	assert_true(tree_zone_place(&next, 4 * 3, TREE_ZONE_P, &first));
	assert_int_equal(first, 21);
	assert_int_equal(next, 33);
	/* up to the end exactly, then nothing more but 0 */
	assert_true(tree_zone_place(&next, TREE_ZONE_P - 33, TREE_ZONE_P, &first));
	assert_int_equal(next, TREE_ZONE_P);
	assert_false(tree_zone_place(&next, 1, TREE_ZONE_P, &first));
	assert_true(tree_zone_place(&next, 0, TREE_ZONE_P, &first));
	/* a width that would wrap around is refused, nothing moved */
	next = 100;
	first = 7;
	assert_false(tree_zone_place(&next, UINT64_MAX - 50, TREE_ZONE_P, &first));
	assert_false(tree_zone_place(&next, UINT64_MAX, UINT64_MAX, &first));
	assert_int_equal(next, 100);
	assert_int_equal(first, 7);
	next = TREE_ZONE_P + 1;   /* past the end already */
	assert_false(tree_zone_place(&next, 0, TREE_ZONE_P, &first));
}

static void test_states(void **state)
{
	(void)state;
	const uint64_t w = 27;   /* model.gguf, 25 NAMEs, quants.tsv */
	uint64_t first, gen, off;
	assert_true(tree_zone_state_first(0, w, &first));
	assert_int_equal(first, TREE_ZONE_P);
	assert_true(tree_zone_state_first(3, w, &first));
	assert_int_equal(first, TREE_ZONE_P + 3 * w);
	assert_true(tree_zone_state_of(first + 26, w, &gen, &off));
	assert_int_equal(gen, 3);
	assert_int_equal(off, 26);
	/* the last state that fits ends inside zone P; the next is refused */
	const uint64_t states = (TREE_ZONE_X - TREE_ZONE_P) / w;
	assert_true(tree_zone_state_first(states - 1, w, &first));
	assert_true(first + w <= TREE_ZONE_X);
	assert_false(tree_zone_state_first(states, w, &first));
	assert_false(tree_zone_state_first(UINT64_MAX, w, &first));
	assert_false(tree_zone_state_first(UINT64_MAX, 1, &first));
	/* widths out of bounds */
	assert_false(tree_zone_state_first(0, 0, &first));
	assert_false(tree_zone_state_first(0, TREE_STATE_WIDTH_MAX + 1, &first));
	assert_true(tree_zone_state_first(1, TREE_STATE_WIDTH_MAX, &first));
	assert_int_equal(first, TREE_ZONE_P + TREE_STATE_WIDTH_MAX);
	assert_false(tree_zone_state_of(TREE_ZONE_P, 0, &gen, &off));
	/* numbers outside zone P are no state's */
	assert_false(tree_zone_state_of(TREE_ZONE_P - 1, w, &gen, &off));
	assert_false(tree_zone_state_of(TREE_ZONE_X, w, &gen, &off));
	assert_true(tree_zone_state_of(TREE_ZONE_X - 1, 1, &gen, &off));
	assert_int_equal(gen, TREE_ZONE_X - 1 - TREE_ZONE_P);
	assert_int_equal(off, 0);
}

UNIT_TESTS(
	cmocka_unit_test(test_zones),
	cmocka_unit_test(test_place),
	cmocka_unit_test(test_states),
)
