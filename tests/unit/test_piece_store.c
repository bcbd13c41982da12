/* The piece store (lib/1-bytes/piece_store.h) over a maker that makes known bytes and
 * counts its calls: any range of a piece reads the bytes the maker makes; many threads
 * reading the same blocks at once make each block once; a second store on the same
 * directory (another mount) makes nothing and loads every block; two keys are two
 * pieces; a failed make fails the read with its why, is kept nowhere, and is made again
 * by the next read, and a block that fails for a byte outside a read's range still
 * gives that range (made alone, not stored); more keys than PIECE_OPEN_MAX read in turn all stay right; a store
 * whose leaving ran stores nothing more. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "leaving.h"
#include "piece_store.h"
#include "scratch_dir.h"

/* 6 blocks and a short one. */
#define SIZE (6 * (uint64_t)PIECE_BLOCK + 4321)
#define N_BLOCKS 7
#define N_THREADS 8

struct maker {
	uint8_t seed;                  /* which piece: its bytes differ */
	atomic_int calls[N_BLOCKS];
	atomic_int fail_block;         /* this block's make fails with -EIO; -1: none */
	atomic_llong fail_byte;        /* a make of a range holding it fails; -1: none */
	atomic_int parts;              /* makes of less than a whole block */
};

/* Byte i of piece seed: a hash of both, so that a misplaced byte shows. */
static uint8_t byte_at(uint8_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15u ^ (uint64_t)seed << 40;
	return (uint8_t)(x >> 56 ^ x >> 29);
}

static int make(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	struct maker *mk = ctx;
	const uint64_t k = off / PIECE_BLOCK;
	assert_true(off + len <= (k + 1) * PIECE_BLOCK);   /* within one block */
	if (off % PIECE_BLOCK || len != (k + 1 < N_BLOCKS ? PIECE_BLOCK : SIZE % PIECE_BLOCK))
		atomic_fetch_add(&mk->parts, 1);
	else
		atomic_fetch_add(&mk->calls[k], 1);
	const long long bad = atomic_load(&mk->fail_byte);
	if (bad >= 0 && (uint64_t)bad >= off && (uint64_t)bad < off + len) {
		snprintf(why, GGUF_ERR_MAX, "byte %lld made to fail", bad);
		return -EIO;
	}
	if (atomic_load(&mk->fail_block) == (int)k) {
		snprintf(why, GGUF_ERR_MAX, "block %d made to fail", (int)k);
		return -EIO;
	}
	for (uint64_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = byte_at(mk->seed, off + i);
	return 0;
}

static void maker_init(struct maker *mk, uint8_t seed)
{
	mk->seed = seed;
	for (int k = 0; k < N_BLOCKS; k++)
		atomic_init(&mk->calls[k], 0);
	atomic_init(&mk->fail_block, -1);
	atomic_init(&mk->fail_byte, -1);
	atomic_init(&mk->parts, 0);
}

static int total_calls(struct maker *mk)
{
	int n = 0;
	for (int k = 0; k < N_BLOCKS; k++)
		n += atomic_load(&mk->calls[k]);
	return n;
}

/* Reads [off, off + len) of piece key and checks its bytes: the how of the read. */
static unsigned read_right(struct piece_store *ps, const char *key, struct maker *mk,
                           uint64_t off, uint64_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	assert_non_null(buf);
	unsigned how = 0;
	char why[GGUF_ERR_MAX] = "";
	assert_int_equal(piece_read(ps, key, SIZE, off, len, buf, make, mk, &how, why), 0);
	for (uint64_t i = 0; i < len; i++)
		if (buf[i] != byte_at(mk->seed, off + i))
			fail_msg("byte %llu of %s", (unsigned long long)(off + i), key);
	free(buf);
	return how;
}

static struct piece_store *store_new(const char *sub, struct leaving *l)
{
	char dir[128], err[GGUF_ERR_MAX];
	snprintf(dir, sizeof dir, "%s/%s", scratch_dir, sub);
	struct piece_store *ps = piece_store_new(dir, 0, l, err);
	if (!ps)
		fail_msg("%s", err);
	return ps;
}

struct reader {
	struct piece_store *ps;
	struct maker *mk;
	unsigned seed;
};

/* Reads ranges across block boundaries, in an order of its own. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	for (int i = 0; i < 40; i++) {
		r->seed = r->seed * 1103515245u + 12345u;
		const uint64_t off = (r->seed >> 4) % SIZE;
		const uint64_t len = (r->seed >> 9) % (2 * PIECE_BLOCK);
		read_right(r->ps, "piece a", r->mk, off, len < SIZE - off ? len : SIZE - off);
	}
	return NULL;
}

static void test_once_and_shared(void **state)
{
	(void)state;
	struct maker mk;
	maker_init(&mk, 1);
	struct piece_store *ps = store_new("once", NULL);
	pthread_t th[N_THREADS];
	struct reader r[N_THREADS];
	for (int i = 0; i < N_THREADS; i++) {
		r[i] = (struct reader){ ps, &mk, (unsigned)i * 2654435761u + 7 };
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(th[i], NULL);
	for (int k = 0; k < N_BLOCKS; k++)
		assert_true(atomic_load(&mk.calls[k]) <= 1);   /* each block made once */
	read_right(ps, "piece a", &mk, 0, SIZE);
	assert_int_equal(total_calls(&mk), N_BLOCKS);

	/* another store on the directory, as another mount: every block loaded */
	struct maker again;
	maker_init(&again, 1);
	struct piece_store *other = store_new("once", NULL);
	assert_int_equal(read_right(other, "piece a", &again, 0, SIZE), PIECE_LOADED);
	assert_int_equal(total_calls(&again), 0);
	/* another key is another piece, of its own bytes */
	struct maker b;
	maker_init(&b, 2);
	assert_int_equal(read_right(other, "piece b", &b, 100, SIZE - 100),
	                 PIECE_MADE | PIECE_STORED);
	assert_int_equal(total_calls(&b), N_BLOCKS);
	piece_store_free(other);
	piece_store_free(ps);
}

static void test_failed_make(void **state)
{
	(void)state;
	struct maker mk;
	maker_init(&mk, 3);
	atomic_store(&mk.fail_block, 2);
	struct piece_store *ps = store_new("fail", NULL);
	uint8_t *buf = malloc(SIZE);
	assert_non_null(buf);
	unsigned how;
	char why[GGUF_ERR_MAX] = "";
	assert_int_equal(piece_read(ps, "piece f", SIZE, 0, SIZE, buf, make, &mk, &how, why),
	                 -EIO);
	assert_string_equal(why, "block 2 made to fail");
	atomic_store(&mk.fail_block, -1);
	read_right(ps, "piece f", &mk, 0, SIZE);
	assert_int_equal(atomic_load(&mk.calls[2]), 2);   /* kept nowhere: made again */
	assert_int_equal(atomic_load(&mk.calls[1]), 1);
	assert_int_equal(atomic_load(&mk.parts), 0);

	/* a byte of block 4 fails: a read of another part of it is made alone, not kept;
	 * a read of the byte fails */
	struct maker part;
	maker_init(&part, 4);
	atomic_store(&part.fail_byte, (long long)(4 * PIECE_BLOCK + 1000));
	assert_int_equal(read_right(ps, "piece p", &part, 4 * PIECE_BLOCK + 2000, 100), PIECE_MADE);
	assert_int_equal(atomic_load(&part.parts), 1);
	assert_int_equal(read_right(ps, "piece p", &part, 4 * PIECE_BLOCK + 2000, 100), PIECE_MADE);
	assert_int_equal(atomic_load(&part.parts), 2);
	assert_int_equal(piece_read(ps, "piece p", SIZE, 4 * PIECE_BLOCK + 900, 200, buf, make,
	                            &part, &how, why), -EIO);
	assert_string_equal(why, "byte 525288 made to fail");
	free(buf);
	piece_store_free(ps);
}

static void test_many_keys(void **state)
{
	(void)state;
	enum { N_KEYS = PIECE_OPEN_MAX + 8 };
	struct maker *mk = calloc(N_KEYS, sizeof *mk);
	assert_non_null(mk);
	struct piece_store *ps = store_new("many", NULL);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N_KEYS; i++) {
			char key[32];
			snprintf(key, sizeof key, "piece %d", i);
			if (round == 0)
				maker_init(&mk[i], (uint8_t)(10 + i));
			const unsigned how = read_right(ps, key, &mk[i], PIECE_BLOCK - 10, 20);
			assert_int_equal(how, round ? PIECE_LOADED : PIECE_MADE | PIECE_STORED);
		}
	}
	piece_store_free(ps);
	free(mk);
}

static void test_leaving(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	struct maker mk;
	maker_init(&mk, 5);
	struct piece_store *ps = store_new("leaving", l);
	assert_int_equal(read_right(ps, "piece l", &mk, 0, PIECE_BLOCK),
	                 PIECE_MADE | PIECE_STORED);
	leaving_run(l);
	assert_int_equal(read_right(ps, "piece l", &mk, 0, PIECE_BLOCK), PIECE_LOADED);
	assert_int_equal(read_right(ps, "piece l", &mk, PIECE_BLOCK, PIECE_BLOCK), PIECE_MADE);
	piece_store_free(ps);
	leaving_free(l);
}

/* A block read in two parts by one thread is had once: its second part comes from the
 * thread's last block (a quant file's blocks straddle its pieces' blocks), said as it was
 * had (made and not stored: made), never for another key or block. */
static void test_parts_of_one_block(void **state)
{
	(void)state;
	struct leaving *l = leaving_new();
	assert_non_null(l);
	leaving_run(l);   /* nothing stored: a block had again would be made again */
	struct maker mk, other;
	maker_init(&mk, 6);
	maker_init(&other, 7);
	struct piece_store *ps = store_new("parts", l);
	const uint64_t b2 = 2 * (uint64_t)PIECE_BLOCK;
	assert_int_equal(read_right(ps, "piece p", &mk, b2 + 100, 1000), PIECE_MADE);
	assert_int_equal(read_right(ps, "piece p", &mk, b2 + 1100, PIECE_BLOCK - 1100),
	                 PIECE_MADE);
	assert_int_equal(atomic_load(&mk.calls[2]), 1);
	/* another key, another block: made */
	assert_int_equal(read_right(ps, "piece q", &other, b2 + 5, 10), PIECE_MADE);
	assert_int_equal(atomic_load(&other.calls[2]), 1);
	assert_int_equal(read_right(ps, "piece p", &mk, b2 + PIECE_BLOCK + 5, 10), PIECE_MADE);
	assert_int_equal(atomic_load(&mk.calls[3]), 1);
	assert_int_equal(read_right(ps, "piece p", &mk, b2 + 7, 10), PIECE_MADE);
	assert_int_equal(atomic_load(&mk.calls[2]), 2);
	piece_store_free(ps);
	leaving_free(l);
}

UNIT_TESTS_IN_SCRATCH(cmocka_unit_test(test_once_and_shared), cmocka_unit_test(test_failed_make),
                      cmocka_unit_test(test_many_keys), cmocka_unit_test(test_leaving),
                      cmocka_unit_test(test_parts_of_one_block))
