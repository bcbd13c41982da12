/* A computed file (lib/1-bytes/computed.h) over a fill function that makes known bytes
 * and counts its calls: any range reads the same bytes as the function makes; each
 * block is made once however many readers want it at once; a sequential reader has the
 * blocks ahead of it made on the workers; with a disk cache a second open of the same
 * key and version makes nothing and reads every block from disk, another version makes
 * them again; a failed block fails the reads that need it, is kept nowhere, and is made
 * again by the next read; a second open of the same key in one process shares its disk
 * cache entry; an open of an entry another mount holds computes without it, unless that
 * mount is leaving (computed_leaving): then it waits for its close and reads from disk. */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit.h"

#include "computed.h"
#include "scratch_dir.h"

/* 10 blocks and a short one. */
#define SIZE (10 * (uint64_t)COMPUTED_BLOCK_SIZE + 12345)
#define N_BLOCKS 11

struct maker {
	atomic_int calls[N_BLOCKS];
	atomic_int other_thread;       /* blocks made on a thread other than the reader's */
	pthread_t reader;
	atomic_int fail_block;         /* this block's fill fails with -EIO; -1: none */
};

/* Byte i of the file: a hash of its position, so that a misplaced byte shows. */
static uint8_t byte_at(uint64_t i)
{
	uint64_t x = i * 0x9e3779b97f4a7c15u;
	return (uint8_t)(x >> 56 ^ x >> 29);
}

static int fill(void *ctx, uint64_t off, uint64_t len, void *buf)
{
	struct maker *mk = ctx;
	const uint64_t k = off / COMPUTED_BLOCK_SIZE;
	assert_true(off % COMPUTED_BLOCK_SIZE == 0);   /* whole blocks, one at a time */
	assert_true(len == (k + 1 < N_BLOCKS ? COMPUTED_BLOCK_SIZE : SIZE - off));
	atomic_fetch_add(&mk->calls[k], 1);
	if (!pthread_equal(pthread_self(), mk->reader))
		atomic_fetch_add(&mk->other_thread, 1);
	if (atomic_load(&mk->fail_block) == (int)k)
		return -EIO;
	for (uint64_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = byte_at(off + i);
	return 0;
}

static struct source *open_file(struct maker *mk, unsigned threads, const char *dir,
                                const char *version)
{
	memset(mk, 0, sizeof *mk);
	mk->reader = pthread_self();
	atomic_store(&mk->fail_block, -1);
	const struct computed_opts o = { .size = SIZE, .fill = fill, .ctx = mk, .threads = threads,
	                                 .memory = 64 * (uint64_t)COMPUTED_BLOCK_SIZE,
	                                 .cache_dir = dir, .key = "test:computed",
	                                 .version = version };
	char err[GGUF_ERR_MAX];
	struct source *src = computed_open(&o, err);
	if (!src)
		fail_msg("%s", err);
	return src;
}

static void expect_range(struct source *src, uint64_t off, uint64_t len)
{
	uint8_t *buf = malloc(len + 1);
	assert_non_null(buf);
	assert_int_equal(source_read(src, off, len, buf), 0);
	for (uint64_t i = 0; i < len; i++)
		if (buf[i] != byte_at(off + i))
			fail_msg("byte %llu: %u, not %u", (unsigned long long)(off + i), buf[i],
			         byte_at(off + i));
	free(buf);
}

static int total_calls(struct maker *mk)
{
	int n = 0;
	for (int k = 0; k < N_BLOCKS; k++)
		n += atomic_load(&mk->calls[k]);
	return n;
}

static void test_ranges_and_once(void **state)
{
	(void)state;
	struct maker mk;
	struct source *src = open_file(&mk, 0, NULL, NULL);
	const uint64_t B = COMPUTED_BLOCK_SIZE;
	const uint64_t offs[] = { 0, 1, B - 1, B, 3 * B + 17, SIZE - B - 1, SIZE - 1 };
	const uint64_t lens[] = { 1, 2, B, B + 1, 2 * B + 3, SIZE };
	for (size_t a = 0; a < sizeof offs / sizeof *offs; a++)
		for (size_t b = 0; b < sizeof lens / sizeof *lens; b++)
			expect_range(src, offs[a], lens[b] < SIZE - offs[a] ? lens[b] : SIZE - offs[a]);
	for (int k = 0; k < N_BLOCKS; k++)
		assert_int_equal(atomic_load(&mk.calls[k]), 1);   /* kept in memory */
	struct computed_counters c;
	computed_counters(src, &c);
	assert_int_equal(c.computed, N_BLOCKS);
	assert_int_equal(c.from_disk + c.stored + c.failed, 0);
	source_close(src);
}

struct reader_arg {
	struct source *src;
	unsigned seed;
};

static void *reader_thread(void *p)
{
	struct reader_arg *a = p;
	for (int i = 0; i < 50; i++) {
		a->seed = a->seed * 1103515245u + 12345u;
		const uint64_t off = (a->seed >> 4) % SIZE;
		const uint64_t len = 1 + (a->seed >> 8) % (3 * COMPUTED_BLOCK_SIZE);
		expect_range(a->src, off, len < SIZE - off ? len : SIZE - off);
	}
	return NULL;
}

/* Readers at once, workers too: every block made once. */
static void test_concurrent_readers(void **state)
{
	(void)state;
	struct maker mk;
	struct source *src = open_file(&mk, 2, NULL, NULL);
	pthread_t t[4];
	struct reader_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (struct reader_arg){ src, (unsigned)i * 7919u + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, reader_thread, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int k = 0; k < N_BLOCKS; k++)
		assert_true(atomic_load(&mk.calls[k]) <= 1);
	source_close(src);
}

/* A sequential reader: the workers make the blocks ahead of it. */
static void test_sequential_ahead(void **state)
{
	(void)state;
	struct maker mk;
	struct source *src = open_file(&mk, 2, NULL, NULL);
	/* blocks 0 then 1: a sequential reader, whose next blocks the workers make */
	expect_range(src, 0, 64 << 10);
	expect_range(src, 64 << 10, 64 << 10);
	expect_range(src, COMPUTED_BLOCK_SIZE, 64 << 10);
	for (int waited = 0; waited < 10000; waited++) {   /* 10 s at most */
		if (atomic_load(&mk.calls[2]) && atomic_load(&mk.calls[3]))
			break;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	assert_int_equal(atomic_load(&mk.calls[2]), 1);
	assert_int_equal(atomic_load(&mk.calls[3]), 1);
	assert_int_equal(atomic_load(&mk.other_thread), 2);   /* not the reader's */
	/* the rest, in order: every block made once, by whoever came first */
	for (uint64_t off = COMPUTED_BLOCK_SIZE + (64 << 10); off < SIZE; off += 64 << 10)
		expect_range(src, off, SIZE - off < (64 << 10) ? SIZE - off : 64 << 10);
	assert_int_equal(total_calls(&mk), N_BLOCKS);
	source_close(src);
}

/* The disk cache: made once, read from disk by the next open of the same version. */
static void test_disk_cache(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache", scratch_dir);
	struct maker mk;
	struct source *src = open_file(&mk, 0, dir, "v1");
	expect_range(src, 0, SIZE);
	struct computed_counters c;
	computed_counters(src, &c);
	assert_int_equal(c.computed, N_BLOCKS);
	assert_int_equal(c.stored, N_BLOCKS);
	source_close(src);

	src = open_file(&mk, 2, dir, "v1");
	expect_range(src, 0, SIZE);
	computed_counters(src, &c);
	assert_int_equal(total_calls(&mk), 0);
	assert_int_equal(c.computed, 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	source_close(src);

	/* another version: made again */
	src = open_file(&mk, 0, dir, "v2");
	expect_range(src, SIZE - 10, 10);
	assert_int_equal(total_calls(&mk), 1);
	source_close(src);
}

/* Whether src reads as the fill function makes it, whole (no cmocka: for a child). */
static bool reads_whole(struct source *src)
{
	uint8_t *buf = malloc(SIZE);
	bool ok = buf && source_read(src, 0, SIZE, buf) == 0;
	for (uint64_t i = 0; ok && i < SIZE; i++)
		ok = buf[i] == byte_at(i);
	free(buf);
	return ok;
}

/* The old mount of test_leaving, in a child: opens the file, reads it whole (stored),
 * says 'r'; at 'l' from the parent, leaves (computed_leaving), reads it whole again,
 * says 'L', and closes 300 ms later (a mount that takes a while to exit). Exit status 0
 * when every step went as said. */
static int old_mount(const char *dir, int from_parent, int to_parent)
{
	struct maker mk;
	memset(&mk, 0, sizeof mk);
	mk.reader = pthread_self();
	atomic_store(&mk.fail_block, -1);
	const struct computed_opts o = { .size = SIZE, .fill = fill, .ctx = &mk, .threads = 2,
	                                 .memory = 64 * (uint64_t)COMPUTED_BLOCK_SIZE,
	                                 .cache_dir = dir, .key = "test:computed",
	                                 .version = "v1" };
	char err[GGUF_ERR_MAX], c;
	struct source *old = computed_open(&o, err);
	if (!old || !reads_whole(old) || write(to_parent, "r", 1) != 1)
		return 1;
	if (read(from_parent, &c, 1) != 1 || c != 'l')
		return 2;
	computed_leaving(old);
	if (!reads_whole(old) || write(to_parent, "L", 1) != 1)   /* reads go on */
		return 3;
	const struct timespec pause = { 0, 300 * 1000000L };
	nanosleep(&pause, NULL);
	source_close(old);
	return 0;
}

/* computed_leaving: an entry held by another mount (a child) is not this one's (it
 * computes without the disk cache), until the holder says it is leaving: then an open
 * waits for it to close and reads every block from disk. A second open in this process
 * while the first holds the entry shares it and reads from disk too. A file leaving
 * stores nothing more, its reads go on. */
static void test_leaving(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache-leaving", scratch_dir);
	int down[2], up[2];
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid_t pid = fork();   /* before this process opens the cache: its own descriptors */
	if (pid == 0)
		_exit(old_mount(dir, down[0], up[1]));
	char said = 0;
	assert_int_equal(read(up[0], &said, 1), 1);
	assert_int_equal(said, 'r');

	struct maker mk_new, mk_again;
	struct source *other = open_file(&mk_new, 0, dir, "v1");   /* held: no entry */
	expect_range(other, 0, SIZE);
	struct computed_counters c;
	computed_counters(other, &c);
	assert_int_equal(c.computed, N_BLOCKS);
	assert_int_equal(c.from_disk + c.stored, 0);
	source_close(other);

	assert_int_equal(write(down[1], "l", 1), 1);
	assert_int_equal(read(up[0], &said, 1), 1);
	assert_int_equal(said, 'L');
	struct source *next = open_file(&mk_new, 0, dir, "v1");   /* waits for old's close */
	expect_range(next, 0, SIZE);
	computed_counters(next, &c);
	assert_int_equal(total_calls(&mk_new), 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct source *again = open_file(&mk_again, 0, dir, "v1");   /* shared with next */
	expect_range(again, 0, SIZE);
	computed_counters(again, &c);
	assert_int_equal(total_calls(&mk_again), 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	source_close(again);
	source_close(next);
	close(down[0]);
	close(down[1]);
	close(up[0]);
	close(up[1]);

	/* nothing stored once leaving: block 5, made after, is made again by the next open */
	struct maker mk_old;
	struct source *src = open_file(&mk_old, 0, dir, "v2");
	expect_range(src, 0, 10);
	computed_leaving(src);
	expect_range(src, 5 * COMPUTED_BLOCK_SIZE, 10);
	computed_counters(src, &c);
	assert_int_equal(c.computed, 2);
	assert_int_equal(c.stored, 1);
	source_close(src);
	src = open_file(&mk_new, 0, dir, "v2");
	expect_range(src, 0, 10);
	expect_range(src, 5 * COMPUTED_BLOCK_SIZE, 10);
	assert_int_equal(total_calls(&mk_new), 1);
	assert_int_equal(atomic_load(&mk_new.calls[5]), 1);
	source_close(src);
}

/* A block that fails: its reads fail, others do not, nothing is kept of it, and the
 * next read makes it again. */
static void test_failed_block(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache-fail", scratch_dir);
	struct maker mk;
	struct source *src = open_file(&mk, 0, dir, "v1");
	atomic_store(&mk.fail_block, 3);
	uint8_t *buf = malloc(SIZE);
	assert_non_null(buf);
	assert_int_equal(source_read(src, 0, SIZE, buf), -EIO);
	assert_int_equal(source_read(src, 3 * COMPUTED_BLOCK_SIZE + 5, 1, buf), -EIO);
	expect_range(src, 4 * COMPUTED_BLOCK_SIZE, COMPUTED_BLOCK_SIZE);
	atomic_store(&mk.fail_block, -1);
	expect_range(src, 0, SIZE);
	assert_int_equal(atomic_load(&mk.calls[3]), 3);
	struct computed_counters c;
	computed_counters(src, &c);
	assert_int_equal(c.failed, 2);
	source_close(src);
	free(buf);
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges_and_once),
		cmocka_unit_test(test_concurrent_readers),
		cmocka_unit_test(test_sequential_ahead),
		cmocka_unit_test(test_disk_cache),
		cmocka_unit_test(test_failed_block),
		cmocka_unit_test(test_leaving),
	};
	return cmocka_run_group_tests(tests, scratch_dir_make, scratch_dir_remove);
}
