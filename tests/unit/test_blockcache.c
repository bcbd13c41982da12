/* The block cache: bounded, least recently used out first, one fetch per block however
 * many readers want it at once, failures not kept. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "unit.h"

#include "blockcache.h"

#define BS 4096

static atomic_int fetches;
static atomic_int fail_next;

/* Fills a block with its index (so a reader can tell whose bytes it got), counting. */
static int fetch(void *arg, uint64_t index, uint8_t *buf, size_t len)
{
	unsigned delay_ms = arg ? *(unsigned *)arg : 0;
	atomic_fetch_add(&fetches, 1);
	if (delay_ms) {   /* widens the window for the readers that must wait, asserts nothing */
		struct timespec ts = { 0, (long)delay_ms * 1000000 };
		nanosleep(&ts, NULL);
	}
	if (atomic_exchange(&fail_next, 0))
		return -EIO;
	memset(buf, (int)(index & 0xff), len);
	return 0;
}

/* Gets block index of owner and checks its bytes; released at once. */
static void get_check(struct blockcache *bc, const void *owner, uint64_t index)
{
	struct bc_block *held;
	const uint8_t *p;
	assert_int_equal(bc_get(bc, owner, index, BS, fetch, NULL, &p, &held), 0);
	assert_non_null(p);
	assert_int_equal(p[0], index & 0xff);
	assert_int_equal(p[BS - 1], index & 0xff);
	bc_release(bc, held);
}

static void test_bound_and_lru(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(8 * BS, BS);
	atomic_store(&fetches, 0);
	for (uint64_t k = 0; k < 8; k++)
		get_check(bc, &owner, k);
	assert_int_equal(atomic_load(&fetches), 8);
	assert_int_equal(bc_count(bc), 8);
	get_check(bc, &owner, 0);              /* a hit: 0 becomes the newest */
	assert_int_equal(atomic_load(&fetches), 8);
	get_check(bc, &owner, 8);              /* pushes out 1, the least recently used */
	assert_int_equal(bc_count(bc), 8);
	assert_true(bc_contains(bc, &owner, 0));
	assert_false(bc_contains(bc, &owner, 1));
	assert_true(bc_contains(bc, &owner, 2));
	for (uint64_t k = 100; k < 200; k++)
		get_check(bc, &owner, k);
	assert_int_equal(bc_count(bc), 8);
	assert_true(bc_contains(bc, &owner, 199));
	assert_false(bc_contains(bc, &owner, 0));
	/* another owner's block of the same index is another block */
	int other;
	get_check(bc, &other, 199);
	assert_int_equal(atomic_load(&fetches), 8 + 1 + 100 + 1);
	bc_drop_owner(bc, &other);
	assert_false(bc_contains(bc, &other, 199));
	assert_true(bc_contains(bc, &owner, 199));
	bc_free(bc);
}

static void test_held_blocks_survive(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(4 * BS, BS);
	struct bc_block *held[6];
	const uint8_t *data[6];
	for (uint64_t k = 0; k < 6; k++) {
		assert_int_equal(bc_get(bc, &owner, k, BS, fetch, NULL, &data[k], &held[k]), 0);
		assert_non_null(data[k]);
	}
	/* over the bound while readers hold them, and every one intact */
	assert_int_equal(bc_count(bc), 6);
	for (uint64_t k = 0; k < 6; k++)
		assert_int_equal(data[k][BS / 2], k);
	/* no room for read-ahead while they are held */
	assert_null(bc_claim(bc, &owner, 50, BS));
	for (uint64_t k = 0; k < 6; k++)
		bc_release(bc, held[k]);
	get_check(bc, &owner, 7);
	assert_true(bc_count(bc) <= 4);
	bc_free(bc);
}

static void test_failure_not_kept(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(8 * BS, BS);
	struct bc_block *held;
	const uint8_t *p;
	atomic_store(&fail_next, 1);
	assert_int_equal(bc_get(bc, &owner, 3, BS, fetch, NULL, &p, &held), -EIO);
	assert_null(p);
	assert_false(bc_contains(bc, &owner, 3));
	get_check(bc, &owner, 3);
	bc_free(bc);
}

static void test_claim(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(8 * BS, BS);
	struct bc_block *b = bc_claim(bc, &owner, 5, BS);
	assert_non_null(b);
	assert_null(bc_claim(bc, &owner, 5, BS));   /* being fetched already */
	memset(bc_block_data(b), 5, BS);
	bc_fill_done(bc, b, 0);
	atomic_store(&fetches, 0);
	get_check(bc, &owner, 5);
	assert_int_equal(atomic_load(&fetches), 0);
	b = bc_claim(bc, &owner, 6, BS);
	bc_fill_done(bc, b, -EIO);
	assert_false(bc_contains(bc, &owner, 6));
	bc_free(bc);
}

/* Claims block index for read-ahead and fills it as fetch() would. */
static void claim_fill(struct blockcache *bc, const void *owner, uint64_t index)
{
	struct bc_block *b = bc_claim(bc, owner, index, BS);
	assert_non_null(b);
	memset(bc_block_data(b), (int)(index & 0xff), BS);
	bc_fill_done(bc, b, 0);
}

/* A streaming reader: read-ahead blocks read once keep their place, so the next claim
 * pushes out the oldest block read, never one still ahead of the reader; a block read
 * again counts as used again. */
static void test_read_ahead_blocks_leave_in_order(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(4 * BS, BS);
	for (uint64_t k = 0; k < 4; k++)
		claim_fill(bc, &owner, k);
	atomic_store(&fetches, 0);
	get_check(bc, &owner, 0);
	get_check(bc, &owner, 1);
	claim_fill(bc, &owner, 4);   /* pushes out 0, read; not 2 or 3, ahead */
	assert_false(bc_contains(bc, &owner, 0));
	assert_true(bc_contains(bc, &owner, 2));
	assert_true(bc_contains(bc, &owner, 3));
	get_check(bc, &owner, 1);    /* a second read: 1 is the newest now */
	claim_fill(bc, &owner, 5);   /* pushes out 2, the oldest */
	assert_true(bc_contains(bc, &owner, 1));
	assert_false(bc_contains(bc, &owner, 2));
	assert_int_equal(atomic_load(&fetches), 0);
	bc_free(bc);
}

struct reader {
	struct blockcache *bc;
	const void *owner;
	unsigned delay_ms;
	int ok;
};

static void *read_block_9(void *arg)
{
	struct reader *r = arg;
	struct bc_block *held;
	const uint8_t *p;
	if (bc_get(r->bc, r->owner, 9, BS, fetch, &r->delay_ms, &p, &held) == 0) {
		r->ok = p[0] == 9 && p[BS - 1] == 9;
		bc_release(r->bc, held);
	}
	return NULL;
}

static void test_one_fetch_for_concurrent_readers(void **state)
{
	(void)state;
	int owner;
	struct blockcache *bc = bc_new(8 * BS, BS);
	struct reader readers[8];
	pthread_t threads[8];
	atomic_store(&fetches, 0);
	for (int i = 0; i < 8; i++) {
		readers[i] = (struct reader){ bc, &owner, 100, 0 };
		assert_int_equal(pthread_create(&threads[i], NULL, read_block_9, &readers[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(threads[i], NULL);
		assert_true(readers[i].ok);
	}
	assert_int_equal(atomic_load(&fetches), 1);
	bc_free(bc);
}

UNIT_TESTS(cmocka_unit_test(test_bound_and_lru),
           cmocka_unit_test(test_held_blocks_survive),
           cmocka_unit_test(test_failure_not_kept),
           cmocka_unit_test(test_claim),
           cmocka_unit_test(test_read_ahead_blocks_leave_in_order),
           cmocka_unit_test(test_one_fetch_for_concurrent_readers))
