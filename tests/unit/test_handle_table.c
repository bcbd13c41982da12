/* The mount's table of open files (lib/8-mount/handle_table.h): a handle held by a request
 * outlives its release until that request lets go; after the release nothing finds it;
 * ids are never 0 and a slot's next id differs; threads taking and dropping while the
 * open is released free each handle exactly once (this test runs under ThreadSanitizer
 * in CI, and under ASan a use after free or a double free fails it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <cmocka.h>

#include "unit.h"

#include "handle_table.h"

static void test_hold_outlives_release(void **state)
{
	(void)state;
	struct handle_table tab = HANDLE_TABLE_INIT;
	int a, b;
	uint64_t ia = handle_table_add(&tab, &a), ib = handle_table_add(&tab, &b);
	assert_true(ia != 0 && ib != 0 && ia != ib);
	assert_ptr_equal(handle_table_take(&tab, ia), &a);   /* a read in flight */
	assert_false(handle_table_drop(&tab, ia, true));     /* the release: a is still held */
	assert_null(handle_table_take(&tab, ia));            /* nothing new finds it */
	assert_true(handle_table_drop(&tab, ia, false));     /* the read's end frees it */
	assert_false(handle_table_drop(&tab, ia, false));    /* gone: no second free */
	assert_null(handle_table_take(&tab, 0));
	uint64_t ic = handle_table_add(&tab, &a);            /* a's slot again, a new id */
	assert_true(ic != ia && (ic & 0xffffffffu) == (ia & 0xffffffffu));
	assert_null(handle_table_take(&tab, ia));
	assert_true(handle_table_drop(&tab, ib, true));
	assert_true(handle_table_drop(&tab, ic, true));
	free(tab.slots);
}

struct race {
	struct handle_table *tab;
	uint64_t *ids;
	size_t n;
	atomic_int *freed;   /* per handle: how many times its last hold went */
};

enum { RACE_HANDLES = 2000, RACE_READERS = 4 };

/* A reader: takes each handle, "reads", lets go, freeing it when it was the last. */
static void *reader(void *arg)
{
	struct race *r = arg;
	for (size_t i = 0; i < r->n; i++) {
		if (!handle_table_take(r->tab, r->ids[i]))
			continue;
		if (handle_table_drop(r->tab, r->ids[i], false))
			atomic_fetch_add(&r->freed[i], 1);
	}
	return NULL;
}

static void test_release_while_reading(void **state)
{
	(void)state;
	static uint64_t ids[RACE_HANDLES];
	static atomic_int freed[RACE_HANDLES];
	static int handles[RACE_HANDLES];
	struct handle_table tab = HANDLE_TABLE_INIT;
	for (size_t i = 0; i < RACE_HANDLES; i++) {
		ids[i] = handle_table_add(&tab, &handles[i]);
		assert_true(ids[i] != 0);
		atomic_init(&freed[i], 0);
	}
	struct race r = { .tab = &tab, .ids = ids, .n = RACE_HANDLES, .freed = freed };
	pthread_t th[RACE_READERS];
	for (int k = 0; k < RACE_READERS; k++)
		assert_int_equal(pthread_create(&th[k], NULL, reader, &r), 0);
	for (size_t i = 0; i < RACE_HANDLES; i++)   /* the releases, meanwhile */
		if (handle_table_drop(&tab, ids[i], true))
			atomic_fetch_add(&freed[i], 1);
	for (int k = 0; k < RACE_READERS; k++)
		pthread_join(th[k], NULL);
	for (size_t i = 0; i < RACE_HANDLES; i++) {
		assert_int_equal(atomic_load(&freed[i]), 1);
		assert_null(handle_table_take(&tab, ids[i]));
	}
	free(tab.slots);
}

UNIT_TESTS(cmocka_unit_test(test_hold_outlives_release),
           cmocka_unit_test(test_release_while_reading))
