/* A computed file (lib/1-bytes/computed.h) over a fill function that makes known bytes
 * and counts its calls: any range reads the same bytes as the function makes; each
 * block is made once however many readers want it at once; a sequential reader has the
 * blocks ahead of it made by the pool's workers; with a disk cache a second open of the
 * same key and version makes nothing and reads every block from disk, another version
 * makes them again; a failed block fails the reads that need it, is kept nowhere, and is
 * made again by the next read; a second open of the same key in one process shares its
 * disk cache entry, and so does an open while another mount (a child) has it open,
 * before and after that mount's leaving ran: every block it stored is read from disk;
 * a pool that is leaving stores nothing more, its loads go on. The pool: many files read at once by many threads never have
 * more workers than the pool's bound, and the workers end once idle; a close cancels
 * the blocks queued for the workers and waits only for those being made (the workers
 * live on). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
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
#include "leaving.h"
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

static int fill(void *ctx, uint64_t off, uint64_t len, void *buf, char why[GGUF_ERR_MAX])
{
	struct maker *mk = ctx;
	const uint64_t k = off / COMPUTED_BLOCK_SIZE;
	assert_true(off % COMPUTED_BLOCK_SIZE == 0);   /* whole blocks, one at a time */
	assert_true(len == (k + 1 < N_BLOCKS ? COMPUTED_BLOCK_SIZE : SIZE - off));
	atomic_fetch_add(&mk->calls[k], 1);
	if (!pthread_equal(pthread_self(), mk->reader))
		atomic_fetch_add(&mk->other_thread, 1);
	if (atomic_load(&mk->fail_block) == (int)k) {
		gguf_errf(why, "block %" PRIu64 " could not be made", k);
		return -EIO;
	}
	for (uint64_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = byte_at(off + i);
	return 0;
}

/* A pool of threads workers (ending after 0.2 s idle) and 64 blocks of memory, in
 * leaving (or NULL). */
static struct computed_pool *new_pool_in(unsigned threads, struct leaving *leaving)
{
	const struct computed_pool_opts o = { .threads = threads, .idle_s = 0.2,
	                                      .memory = 64 * (uint64_t)COMPUTED_BLOCK_SIZE,
	                                      .leaving = leaving };
	char err[GGUF_ERR_MAX];
	struct computed_pool *p = computed_pool_new(&o, err);
	if (!p)
		fail_msg("%s", err);
	return p;
}

/* The same in no leaving. */
static struct computed_pool *new_pool(unsigned threads)
{
	return new_pool_in(threads, NULL);
}

static struct source *open_file(struct maker *mk, struct computed_pool *pool, const char *dir,
                                const char *version)
{
	memset(mk, 0, sizeof *mk);
	mk->reader = pthread_self();
	atomic_store(&mk->fail_block, -1);
	const struct computed_opts o = { .size = SIZE, .fill = fill, .ctx = mk, .pool = pool,
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
	assert_int_equal(source_read(src, off, len, buf, NULL), 0);
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
	struct computed_pool *pool = new_pool(0);
	struct source *src = open_file(&mk, pool, NULL, NULL);
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
	assert_int_equal(computed_pool_threads(pool), 0);   /* none: nothing made ahead */
	source_close(src);
	computed_pool_free(pool);
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
	struct computed_pool *pool = new_pool(2);
	struct source *src = open_file(&mk, pool, NULL, NULL);
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
	computed_pool_free(pool);
}

/* Waits (1 ms at a time, 10 s at most) until block k of mk is made. */
static void wait_made(struct maker *mk, int k)
{
	for (int waited = 0; waited < 10000 && !atomic_load(&mk->calls[k]); waited++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

/* A sequential reader: the workers make the blocks ahead of it. */
static void test_sequential_ahead(void **state)
{
	(void)state;
	struct maker mk;
	struct computed_pool *pool = new_pool(2);
	struct source *src = open_file(&mk, pool, NULL, NULL);
	/* blocks 0 then 1: a sequential reader, whose next blocks the workers make */
	expect_range(src, 0, 64 << 10);
	expect_range(src, 64 << 10, 64 << 10);
	expect_range(src, COMPUTED_BLOCK_SIZE, 64 << 10);
	wait_made(&mk, 2);
	wait_made(&mk, 3);
	assert_int_equal(atomic_load(&mk.calls[2]), 1);
	assert_int_equal(atomic_load(&mk.calls[3]), 1);
	assert_int_equal(atomic_load(&mk.other_thread), 2);   /* not the reader's */
	/* the rest, in order: every block made once, by whoever came first */
	for (uint64_t off = COMPUTED_BLOCK_SIZE + (64 << 10); off < SIZE; off += 64 << 10)
		expect_range(src, off, SIZE - off < (64 << 10) ? SIZE - off : 64 << 10);
	assert_int_equal(total_calls(&mk), N_BLOCKS);
	source_close(src);
	computed_pool_free(pool);
}

/* The disk cache: made once, read from disk by the next open of the same version. */
static void test_disk_cache(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache", scratch_dir);
	struct maker mk;
	struct computed_pool *pool = new_pool(0), *pool2 = new_pool(2);
	struct source *src = open_file(&mk, pool, dir, "v1");
	expect_range(src, 0, SIZE);
	struct computed_counters c;
	computed_counters(src, &c);
	assert_int_equal(c.computed, N_BLOCKS);
	assert_int_equal(c.stored, N_BLOCKS);
	source_close(src);

	src = open_file(&mk, pool2, dir, "v1");
	expect_range(src, 0, SIZE);
	computed_counters(src, &c);
	assert_int_equal(total_calls(&mk), 0);
	assert_int_equal(c.computed, 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	source_close(src);

	/* another version: made again */
	src = open_file(&mk, pool, dir, "v2");
	expect_range(src, SIZE - 10, 10);
	assert_int_equal(total_calls(&mk), 1);
	source_close(src);
	computed_pool_free(pool2);
	computed_pool_free(pool);
}

/* Whether src reads as the fill function makes it, from off to the end (no cmocka: for
 * a child). */
static bool reads_from(struct source *src, uint64_t off)
{
	uint8_t *buf = malloc(SIZE);
	bool ok = buf && source_read(src, off, SIZE - off, buf, NULL) == 0;
	for (uint64_t i = 0; ok && i < SIZE - off; i++)
		ok = buf[i] == byte_at(off + i);
	free(buf);
	return ok;
}

/* Another mount, in a child: a pool of threads workers, the file of key version v1
 * opened, read from off to the end (stored), 'r' said; then at 'l' from the parent its
 * pool's leaving runs, the file is read whole again (reads go on), 'L'
 * said, and it closes 300 ms later (a mount that takes a while to exit). Exit status 0
 * when every step went as said. */
static int other_mount(const char *dir, unsigned threads, uint64_t off, int from_parent,
                       int to_parent)
{
	struct maker mk;
	memset(&mk, 0, sizeof mk);
	mk.reader = pthread_self();
	atomic_store(&mk.fail_block, -1);
	char err[GGUF_ERR_MAX], c;
	struct leaving *leave = leaving_new();
	const struct computed_pool_opts po = { .threads = threads, .idle_s = 0.2,
	                                       .leaving = leave };
	struct computed_pool *pool = leave ? computed_pool_new(&po, err) : NULL;
	const struct computed_opts o = { .size = SIZE, .fill = fill, .ctx = &mk, .pool = pool,
	                                 .cache_dir = dir, .key = "test:computed",
	                                 .version = "v1" };
	struct source *src = pool ? computed_open(&o, err) : NULL;
	if (!src || !reads_from(src, off) || write(to_parent, "r", 1) != 1)
		return 1;
	if (read(from_parent, &c, 1) != 1 || c != 'l')
		return 2;
	leaving_run(leave);
	if (!reads_from(src, 0) || write(to_parent, "L", 1) != 1)
		return 3;
	const struct timespec pause = { 0, 300 * 1000000L };
	nanosleep(&pause, NULL);
	source_close(src);
	computed_pool_free(pool);
	leaving_free(leave);
	return 0;
}

/* A child running other_mount, and the pipes to it. */
struct child {
	pid_t pid;
	int down[2], up[2];
};

/* Starts other_mount in a child (before this process opens the cache: its own
 * descriptors) and waits for its 'r'. */
static void child_start(struct child *ch, const char *dir, unsigned threads, uint64_t off)
{
	assert_int_equal(pipe(ch->down), 0);
	assert_int_equal(pipe(ch->up), 0);
	ch->pid = fork();
	assert_true(ch->pid >= 0);
	if (ch->pid == 0) {   /* (its ends only: a parent that failed is heard as the end) */
		close(ch->down[1]);
		close(ch->up[0]);
		_exit(other_mount(dir, threads, off, ch->down[0], ch->up[1]));
	}
	char said = 0;
	assert_int_equal(read(ch->up[0], &said, 1), 1);
	assert_int_equal(said, 'r');
}

/* Tells the child what (l) and waits for its answer (L). */
static void child_tell(struct child *ch, char what, char answer)
{
	char said = 0;
	assert_int_equal(write(ch->down[1], &what, 1), 1);
	assert_int_equal(read(ch->up[0], &said, 1), 1);
	assert_int_equal(said, answer);
}

/* Waits for the child's exit status 0 and closes the pipes. */
static void child_end(struct child *ch)
{
	int status;
	assert_int_equal(waitpid(ch->pid, &status, 0), ch->pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (int i = 0; i < 2; i++) {
		close(ch->down[i]);
		close(ch->up[i]);
	}
}

/* Another mount (a child) has the file open, its blocks stored: this process shares the
 * disk cache entry at once and reads every block from disk, computing none, also after
 * that mount's leaving ran (its reads go on) and while it takes its time to exit; a
 * second open in this process shares it too. A pool that is leaving stores nothing
 * more: a block made after is made again by the next open; a file opened in it loads
 * what is stored, and stores nothing either. */
static void test_shared_and_leaving(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache-leaving", scratch_dir);
	struct child ch;
	child_start(&ch, dir, 2, 0);

	struct maker mk_new, mk_again;
	struct computed_pool *pool0 = new_pool(0);
	struct source *next = open_file(&mk_new, pool0, dir, "v1");   /* shared with the child */
	expect_range(next, 0, SIZE);
	struct computed_counters c;
	computed_counters(next, &c);
	assert_int_equal(total_calls(&mk_new), 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	child_tell(&ch, 'l', 'L');
	struct source *again = open_file(&mk_again, pool0, dir, "v1");   /* shared with next */
	expect_range(again, 0, SIZE);
	computed_counters(again, &c);
	assert_int_equal(total_calls(&mk_again), 0);
	assert_int_equal(c.from_disk, N_BLOCKS);
	child_end(&ch);
	source_close(again);
	source_close(next);

	/* nothing stored once leaving: block 5, made after, is made again by the next open */
	struct maker mk_old;
	struct leaving *leave = leaving_new();
	assert_non_null(leave);
	struct computed_pool *pool = new_pool_in(0, leave);
	struct source *src = open_file(&mk_old, pool, dir, "v2");
	expect_range(src, 0, 10);
	leaving_run(leave);
	expect_range(src, 5 * COMPUTED_BLOCK_SIZE, 10);
	computed_counters(src, &c);
	assert_int_equal(c.computed, 2);
	assert_int_equal(c.stored, 1);
	/* a file opened in the leaving pool loads block 0, and stores nothing */
	struct maker mk_late;
	struct source *late = open_file(&mk_late, pool, dir, "v2");
	expect_range(late, 0, 10);
	expect_range(late, 7 * COMPUTED_BLOCK_SIZE, 10);
	computed_counters(late, &c);
	assert_int_equal(c.from_disk, 1);
	assert_int_equal(c.computed, 1);
	assert_int_equal(c.stored, 0);
	source_close(late);
	source_close(src);
	src = open_file(&mk_new, pool0, dir, "v2");
	expect_range(src, 0, 10);
	expect_range(src, 5 * COMPUTED_BLOCK_SIZE, 10);
	expect_range(src, 7 * COMPUTED_BLOCK_SIZE, 10);
	assert_int_equal(total_calls(&mk_new), 2);
	assert_int_equal(atomic_load(&mk_new.calls[5]), 1);
	assert_int_equal(atomic_load(&mk_new.calls[7]), 1);
	source_close(src);
	computed_pool_free(pool);
	computed_pool_free(pool0);
	leaving_free(leave);
}

/* A block that fails: its reads fail with its fill's why, others do not, nothing is
 * kept of it, and the next read makes it again. */
static void test_failed_block(void **state)
{
	(void)state;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/cache-fail", scratch_dir);
	struct maker mk;
	struct computed_pool *pool = new_pool(0);
	struct source *src = open_file(&mk, pool, dir, "v1");
	atomic_store(&mk.fail_block, 3);
	uint8_t *buf = malloc(SIZE);
	assert_non_null(buf);
	char why[GGUF_ERR_MAX];
	assert_int_equal(source_read(src, 0, SIZE, buf, why), -EIO);
	assert_string_equal(why, "block 3 could not be made");
	assert_int_equal(source_read(src, 3 * COMPUTED_BLOCK_SIZE + 5, 1, buf, NULL), -EIO);
	expect_range(src, 4 * COMPUTED_BLOCK_SIZE, COMPUTED_BLOCK_SIZE);
	atomic_store(&mk.fail_block, -1);
	expect_range(src, 0, SIZE);
	assert_int_equal(atomic_load(&mk.calls[3]), 3);
	struct computed_counters c;
	computed_counters(src, &c);
	assert_int_equal(c.failed, 2);
	source_close(src);
	computed_pool_free(pool);
	free(buf);
}

/* The pool under many files: POOL_FILES files, each read whole, in order, by its own
 * thread at once, in a pool of POOL_THREADS workers. */
#define POOL_FILES 12
#define POOL_THREADS 3

struct pool_reader {
	struct computed_pool *pool;
	struct maker mk;
	struct source *src;
};

static void *read_whole(void *arg)
{
	struct pool_reader *r = arg;
	for (uint64_t off = 0; off < SIZE; off += 32 << 10)
		expect_range(r->src, off, SIZE - off < (32 << 10) ? SIZE - off : 32 << 10);
	return NULL;
}

struct watch {
	struct computed_pool *pool;
	atomic_bool done;
	atomic_uint most;   /* the most workers seen alive at once */
};

static void *watch_threads(void *arg)
{
	struct watch *w = arg;
	while (!atomic_load(&w->done)) {
		const unsigned n = computed_pool_threads(w->pool);
		if (n > atomic_load(&w->most))
			atomic_store(&w->most, n);
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
	return NULL;
}

/* Every file's bytes right; never more than POOL_THREADS workers, however many files;
 * some blocks made by the workers; all of them gone within a moment of the last read
 * (0.2 s idle here; 10 s as a hang guard); the pool made again and ended a second time. */
static void test_pool_bound(void **state)
{
	(void)state;
	struct computed_pool *pool = new_pool(POOL_THREADS);
	struct watch w = { .pool = pool };
	pthread_t watcher;
	assert_int_equal(pthread_create(&watcher, NULL, watch_threads, &w), 0);
	for (int round = 0; round < 2; round++) {
		static struct pool_reader r[POOL_FILES];
		pthread_t t[POOL_FILES];
		for (int i = 0; i < POOL_FILES; i++)
			r[i].src = open_file(&r[i].mk, pool, NULL, NULL);
		for (int i = 0; i < POOL_FILES; i++)
			assert_int_equal(pthread_create(&t[i], NULL, read_whole, &r[i]), 0);
		for (int i = 0; i < POOL_FILES; i++) {
			pthread_join(t[i], NULL);
			assert_true(total_calls(&r[i].mk) >= N_BLOCKS);
			source_close(r[i].src);
		}
		for (int waited = 0; waited < 10000 && computed_pool_threads(pool); waited++)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		assert_int_equal(computed_pool_threads(pool), 0);
	}
	atomic_store(&w.done, true);
	pthread_join(watcher, NULL);
	assert_true(atomic_load(&w.most) >= 1);
	assert_true(atomic_load(&w.most) <= POOL_THREADS);
	computed_pool_free(pool);
}

/* A fill that takes SLOW_MS a block: a close while the workers make blocks ahead. */
#define SLOW_MS 30

struct slow_maker {
	atomic_int made, after_close;
	atomic_bool closed;
};

static int slow_fill(void *ctx, uint64_t off, uint64_t len, void *buf,
                     char why[GGUF_ERR_MAX])
{
	(void)why;
	struct slow_maker *sm = ctx;
	nanosleep(&(struct timespec){ 0, SLOW_MS * 1000000L }, NULL);
	for (uint64_t i = 0; i < len; i++)
		((uint8_t *)buf)[i] = byte_at(off + i);
	atomic_fetch_add(&sm->made, 1);
	if (atomic_load(&sm->closed))
		atomic_fetch_add(&sm->after_close, 1);
	return 0;
}

/* A close cancels the file's blocks queued for the workers and waits for those being
 * made, and no more: nothing of it is made after its close returns, it leaves blocks of
 * its window unmade, and the workers live on (no join) until idle. */
static void test_close_cancels(void **state)
{
	(void)state;
	const struct computed_pool_opts po = { .threads = 2, .idle_s = 60 };
	char err[GGUF_ERR_MAX];
	struct computed_pool *pool = computed_pool_new(&po, err);
	assert_non_null(pool);
	struct slow_maker sm = { 0 };
	const struct computed_opts o = { .size = SIZE, .fill = slow_fill, .ctx = &sm,
	                                 .pool = pool };
	struct source *src = computed_open(&o, err);
	assert_non_null(src);
	/* three blocks in order: the window ahead grows to 8 blocks of the 11 */
	for (uint64_t k = 0; k < 3; k++)
		expect_range(src, k * COMPUTED_BLOCK_SIZE, COMPUTED_BLOCK_SIZE);
	source_close(src);
	atomic_store(&sm.closed, true);
	const int made = atomic_load(&sm.made);
	assert_true(made < N_BLOCKS);   /* its window cancelled */
	assert_true(computed_pool_threads(pool) > 0);   /* closed without a join */
	nanosleep(&(struct timespec){ 0, 4 * SLOW_MS * 1000000L }, NULL);
	assert_int_equal(atomic_load(&sm.after_close), 0);
	assert_int_equal(atomic_load(&sm.made), made);
	computed_pool_free(pool);
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges_and_once),
		cmocka_unit_test(test_concurrent_readers),
		cmocka_unit_test(test_sequential_ahead),
		cmocka_unit_test(test_disk_cache),
		cmocka_unit_test(test_failed_block),
		cmocka_unit_test(test_shared_and_leaving),
		cmocka_unit_test(test_pool_bound),
		cmocka_unit_test(test_close_cancels),
	};
	return cmocka_run_group_tests(tests, scratch_dir_make, scratch_dir_remove);
}
