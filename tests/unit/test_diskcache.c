/* The disk cache: blocks stored and loaded back, also after reopening; a torn block or a
 * bad map record never loaded; the bound held by evicting unused entries, then the least
 * recently used blocks, also those of another mount's entry; modes 0700/0600; every pair
 * of flipped bits among a few positions caught by the checksum; an entry shared by every
 * mount (process) at once, each loading what the others stored and never a torn block,
 * and never evicted whole while one uses it; every open of it in one process sharing
 * one state; a new version a new entry; a full file system said as such (ENOSPC).
 *
 * Another mount is another process, forked before this one opens the cache (a child
 * forked after would share this process's open directory, its descriptors and locks). */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "diskcache.h"
#include "evlog.h"

#define BS 16384u
#define URL "http://127.0.0.1:8080/m.gguf"
#define ETAG "ETag \"abc\""

static char root[64];   /* a fresh directory per test; the cache is root/cache */
static char dir[PATH_MAX];

/* Block index's bytes: a pattern that differs per block and per version. */
static void fill(uint8_t *buf, size_t len, uint64_t index, unsigned version)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 31 + index * 7 + version * 101 + (i >> 8));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/test_diskcache.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof dir, "%s/cache", root);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The path of file name ("data", "map") of entry e. */
static const char *entry_file(const struct dc_entry *e, const char *name)
{
	static char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s/%s", dir, dc_entry_name(e), name);
	return path;
}

static struct diskcache *open_cache(uint64_t max)
{
	char err[256];
	struct diskcache *dc = dc_open(dir, max, BS, err, sizeof err);
	if (!dc)
		fail_msg("dc_open: %s", err);
	return dc;
}

static struct dc_entry *open_entry(struct diskcache *dc, const char *url, uint64_t size,
                                   const char *version)
{
	struct dc_entry *e = dc_entry_open(dc, url, size, version);
	assert_non_null(e);
	return e;
}

/* Stores block index (version v) and checks that it loads back. */
static void store(struct dc_entry *e, uint64_t index, size_t len, unsigned v)
{
	uint8_t want[BS], got[BS];
	fill(want, len, index, v);
	assert_true(dc_store(e, index, want, len));
	memset(got, 0, sizeof got);
	assert_true(dc_load(e, index, got, len));
	assert_memory_equal(got, want, len);
}

/* The running total the cache keeps is what a walk of the directory counts. */
static void expect_total(struct diskcache *dc)
{
	assert_int_equal(dc_usage_kept(dc), dc_usage(dc));
}

/* Whether block index loads, and with version v's bytes when it does. */
static bool loads(struct dc_entry *e, uint64_t index, size_t len, unsigned v)
{
	uint8_t want[BS], got[BS];
	fill(want, len, index, v);
	if (!dc_load(e, index, got, len))
		return false;
	assert_memory_equal(got, want, len);
	return true;
}

static void test_store_load_reopen(void **state)
{
	(void)state;
	uint64_t size = 3 * BS + 100;   /* the last block is short */
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, size, ETAG);
	assert_false(loads(e, 0, BS, 1));
	store(e, 0, BS, 1);
	store(e, 3, 100, 1);
	assert_false(dc_store(e, 3, (const uint8_t *)"x", 1));   /* not that block's length */
	assert_false(dc_store(e, 4, (const uint8_t *)"x", 1));   /* past the end */
	assert_false(loads(e, 1, BS, 1));
	dc_entry_close(e);
	dc_close(dc);

	dc = open_cache(1 << 30);
	e = open_entry(dc, URL, size, ETAG);
	assert_true(loads(e, 0, BS, 1));
	assert_true(loads(e, 3, 100, 1));
	assert_false(loads(e, 1, BS, 1));
	assert_false(loads(e, 2, BS, 1));
	dc_entry_close(e);
	dc_close(dc);
}

static void test_modes(void **state)
{
	(void)state;
	mode_t old = umask(0);   /* the modes must not depend on a permissive umask */
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 2 * BS, ETAG);
	store(e, 1, BS, 1);
	struct stat st;
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, dc_entry_name(e));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(entry_file(e, "data"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(entry_file(e, "map"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	snprintf(path, sizeof path, "%s/lock", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	umask(old);
	dc_entry_close(e);
	dc_close(dc);
}

/* Overwrites n bytes at off of file path with byte b. */
static void scribble(const char *path, uint64_t off, size_t n, uint8_t b)
{
	uint8_t buf[BS];
	memset(buf, b, n);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
	close(fd);
}

static void test_torn_block_not_served(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 4 * BS, ETAG);
	store(e, 0, BS, 1);
	store(e, 1, BS, 1);
	store(e, 2, BS, 1);
	/* block 0: its second half as a write cut short would leave it */
	scribble(entry_file(e, "data"), BS / 2, BS / 2, 0);
	/* block 3: its bytes written, the daemon killed before its record */
	uint8_t b[BS];
	fill(b, BS, 3, 1);
	int fd = open(entry_file(e, "data"), O_WRONLY);
	assert_int_equal(pwrite(fd, b, BS, 3 * BS), (ssize_t)BS);
	close(fd);
	dc_entry_close(e);
	dc_close(dc);

	dc = open_cache(1 << 30);
	e = open_entry(dc, URL, 4 * BS, ETAG);
	assert_false(loads(e, 0, BS, 1));
	assert_false(loads(e, 3, BS, 1));
	assert_true(loads(e, 1, BS, 1));
	/* the torn block is forgotten, then stored again whole */
	store(e, 0, BS, 1);
	/* torn while mounted (another writer, a bad disk): checked on every load */
	scribble(entry_file(e, "data"), 2 * BS + 10, 1, 0xee);
	assert_false(loads(e, 2, BS, 1));
	dc_entry_close(e);
	dc_close(dc);
}

/* Makes the file path anew with n bytes. */
static void scribble_new(const char *path, size_t n)
{
	uint8_t buf[4 * BS];
	assert_true(n <= sizeof buf);
	memset(buf, 0x11, n);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	close(fd);
}

/* Flips bit a and bit b (bit numbers in the block) of block index on disk. */
static void flip_bits(const char *path, uint64_t index, unsigned a, unsigned b)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	unsigned bits[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		uint8_t byte;
		off_t off = (off_t)(index * BS + bits[i] / 8);
		assert_int_equal(pread(fd, &byte, 1, off), 1);
		byte ^= (uint8_t)(1u << (bits[i] % 8));
		assert_int_equal(pwrite(fd, &byte, 1, off), 1);
	}
	close(fd);
}

/* Every pair of flipped bits among a few positions of a block is caught: the checksum
 * of every such pair differs from the block's (all pairs in its first 16 bytes), and
 * on disk every pair among bytes 7, 15 (where FNV-1a over words cancelled), the middle
 * and the last byte fails the load, so the block is fetched again. */
static void test_two_bit_errors_caught(void **state)
{
	(void)state;
	static uint8_t b[BS];
	fill(b, BS, 1, 1);
	uint64_t sum = dc_checksum(b, BS);
	for (unsigned i = 0; i < 128; i++)
		for (unsigned j = i + 1; j < 128; j++) {
			b[i / 8] ^= (uint8_t)(1u << (i % 8));
			b[j / 8] ^= (uint8_t)(1u << (j % 8));
			assert_true(dc_checksum(b, BS) != sum);
			b[i / 8] ^= (uint8_t)(1u << (i % 8));
			b[j / 8] ^= (uint8_t)(1u << (j % 8));
		}
	assert_true(dc_checksum(b, BS) == sum);

	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 2 * BS, ETAG);
	const unsigned bytes[] = { 7, 15, BS / 2 + 7, BS - 1 };
	unsigned bits[4 * 8], n = 0;
	for (unsigned i = 0; i < 4; i++)
		for (unsigned k = 0; k < 8; k++)
			bits[n++] = bytes[i] * 8 + k;
	unsigned caught = 0;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++) {
			store(e, 1, BS, 1);
			flip_bits(entry_file(e, "data"), 1, bits[i], bits[j]);
			caught += !dc_load(e, 1, b, BS);
			flip_bits(entry_file(e, "data"), 1, bits[i], bits[j]);
		}
	assert_int_equal(caught, n * (n - 1) / 2);
	dc_entry_close(e);
	dc_close(dc);
}

/* A huge claimed size costs nothing until blocks are stored: the files grow with the
 * blocks written (sparse), and blocks at both ends load back after reopening. */
static void test_claimed_size_sizes_nothing(void **state)
{
	(void)state;
	uint64_t size = (1ull << 36) + 100, last = size / BS;
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, size, ETAG);
	struct stat st;
	assert_int_equal(stat(entry_file(e, "data"), &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(stat(entry_file(e, "map"), &st), 0);
	assert_int_equal(st.st_size, 4096);
	store(e, 1, BS, 1);
	store(e, last, 100, 1);
	dc_entry_close(e);
	dc_close(dc);

	dc = open_cache(1 << 30);
	e = open_entry(dc, URL, size, ETAG);
	assert_true(loads(e, 1, BS, 1));
	assert_true(loads(e, last, 100, 1));
	assert_false(loads(e, 2, BS, 1));
	assert_false(loads(e, last - 1, BS, 1));
	assert_true(dc_usage(dc) < (1u << 20));
	dc_entry_close(e);
	dc_close(dc);
}

static void test_bad_map_record_not_trusted(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 4 * BS, ETAG);
	for (uint64_t k = 0; k < 4; k++)
		store(e, k, BS, 1);
	dc_entry_close(e);
	dc_close(dc);

	/* records are 32 bytes after a 4096-byte header */
	char map[PATH_MAX + 64];
	dc = open_cache(1 << 30);
	e = open_entry(dc, URL, 4 * BS, ETAG);
	snprintf(map, sizeof map, "%s", entry_file(e, "map"));
	dc_entry_close(e);
	dc_close(dc);
	scribble(map, 4096 + 0 * 32 + 3, 1, 0x5a);   /* block 0: a flipped checksum byte */
	scribble(map, 4096 + 1 * 32 + 8, 8, 0xff);   /* block 1: its use time, check not redone */
	/* block 2: block 3's record copied over it (a record at the wrong place) */
	uint8_t rec[32];
	int fd = open(map, O_RDWR);
	assert_int_equal(pread(fd, rec, 32, 4096 + 3 * 32), 32);
	assert_int_equal(pwrite(fd, rec, 32, 4096 + 2 * 32), 32);
	close(fd);

	dc = open_cache(1 << 30);
	e = open_entry(dc, URL, 4 * BS, ETAG);
	assert_false(loads(e, 0, BS, 1));
	assert_false(loads(e, 1, BS, 1));
	assert_false(loads(e, 2, BS, 1));
	assert_true(loads(e, 3, BS, 1));
	dc_entry_close(e);

	/* a damaged header: the entry is made afresh, nothing of it served */
	scribble(map, 0, 4, 'X');
	e = open_entry(dc, URL, 4 * BS, ETAG);
	assert_false(loads(e, 3, BS, 1));
	dc_entry_close(e);
	dc_close(dc);
}

static void test_bound_and_lru(void **state)
{
	(void)state;
	uint64_t max = 24 * BS;
	struct diskcache *dc = open_cache(max);
	assert_int_equal(dc_max(dc), max);
	uint64_t n = 64;
	struct dc_entry *e = open_entry(dc, URL, n * BS, ETAG);
	for (uint64_t k = 0; k < n; k++) {
		if (k >= 1)
			assert_true(loads(e, 0, BS, 1));   /* block 0 stays recently used */
		uint8_t b[BS];
		fill(b, BS, k, 1);
		assert_true(dc_store(e, k, b, BS));
		assert_true(dc_usage(dc) <= max);
	}
	assert_true(loads(e, 0, BS, 1));   /* used all along: never evicted */
	uint8_t buf[BS];
	assert_false(dc_load(e, 1, buf, BS));   /* the oldest others went */
	assert_true(loads(e, n - 1, BS, 1));   /* the newest stayed */
	dc_entry_close(e);
	dc_close(dc);
}

static void test_unused_entries_evicted_first(void **state)
{
	(void)state;
	uint64_t max = 24 * BS;
	struct diskcache *dc = open_cache(max);
	struct dc_entry *old = open_entry(dc, "http://127.0.0.1:8080/old.gguf", 8 * BS, ETAG);
	for (uint64_t k = 0; k < 8; k++)
		store(old, k, BS, 1);
	char old_dir[PATH_MAX + 64];
	snprintf(old_dir, sizeof old_dir, "%s/%s", dir, dc_entry_name(old));
	dc_entry_close(old);   /* no mount uses it any more */

	struct dc_entry *e = open_entry(dc, URL, 32 * BS, ETAG);
	for (uint64_t k = 0; k < 20; k++) {   /* more than fits beside the old entry */
		store(e, k, BS, 1);
		assert_true(dc_usage(dc) <= max);
	}
	struct stat st;
	assert_int_equal(stat(old_dir, &st), -1);   /* the unused entry went whole */
	for (uint64_t k = 0; k < 20; k++)
		assert_true(loads(e, k, BS, 1));   /* before any block of the one in use */
	dc_entry_close(e);
	dc_close(dc);
}

static void test_new_entry_within_bound(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *old = open_entry(dc, "http://127.0.0.1:8080/old.gguf", 4 * BS, ETAG);
	for (uint64_t k = 0; k < 4; k++)
		store(old, k, BS, 1);
	char old_dir[PATH_MAX + 64];
	snprintf(old_dir, sizeof old_dir, "%s/%s", dir, dc_entry_name(old));
	dc_entry_close(old);
	/* a mount whose bound the cache nearly fills already: its new entry (a directory
	 * and a map header) does not fit beside the old one */
	uint64_t max = dc_usage(dc) + 1024;
	struct diskcache *tight = open_cache(max);
	struct dc_entry *e = open_entry(tight, URL, 4 * BS, ETAG);
	assert_true(dc_usage(tight) <= max);
	struct stat st;
	assert_int_equal(stat(old_dir, &st), -1);
	dc_entry_close(e);
	dc_close(tight);
	dc_close(dc);
}

/* The exit status of child pid, once it ended; -1 when a signal ended it. */
static int child_status(pid_t pid)
{
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads one byte from fd (a pipe from the other process): c, or 0 at its end. */
static char heard(int fd)
{
	char c = 0;
	return read(fd, &c, 1) == 1 ? c : 0;
}

/* The other mount of test_entry_shared_between_mounts, in a child: at 'g' it opens the
 * entry this process made and stored block 2 in, stores blocks 0 and 1, loads 2, says
 * 'y'; at 'h' it loads block 3, which this process stored after the child's open, and
 * ends. Exit status 0 when all went so. */
static int sharing_mount(int from_parent, int to_parent)
{
	char err[256];
	uint8_t b[BS], got[BS];
	if (heard(from_parent) != 'g')
		return 2;
	struct diskcache *dc = dc_open(dir, 1 << 30, BS, err, sizeof err);
	struct dc_entry *e = dc ? dc_entry_open(dc, URL, 4 * BS, ETAG) : NULL;
	if (!e)
		return 3;
	int bad = 0;
	for (uint64_t k = 0; k < 2; k++) {
		fill(b, BS, k, 1);
		bad += !dc_store(e, k, b, BS);
	}
	fill(b, BS, 2, 1);
	bad += !dc_load(e, 2, got, BS) || memcmp(got, b, BS) != 0;
	if (bad || write(to_parent, "y", 1) != 1 || heard(from_parent) != 'h')
		return 4;
	fill(b, BS, 3, 1);
	bad += !dc_holds(e, 3) || !dc_load(e, 3, got, BS) || memcmp(got, b, BS) != 0;
	dc_entry_close(e);
	dc_close(dc);
	return bad ? 5 : 0;
}

/* Two mounts (processes) use one entry at once: each loads the blocks the other stored,
 * also those stored after it opened the entry (its own record knows nothing of them:
 * the map on disk does), and a store of a block the other stored keeps what is there. */
static void test_entry_shared_between_mounts(void **state)
{
	(void)state;
	int down[2], up[2];
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid_t other = fork();
	if (other == 0) {
		close(down[1]);
		close(up[0]);
		_exit(sharing_mount(down[0], up[1]));
	}
	close(down[0]);   /* (a child that ended is heard as the pipe's end) */
	close(up[1]);
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 4 * BS, ETAG);
	store(e, 2, BS, 1);
	assert_false(dc_holds(e, 0));
	assert_int_equal(write(down[1], "g", 1), 1);
	assert_int_equal(heard(up[0]), 'y');
	assert_true(dc_holds(e, 0));
	assert_true(loads(e, 0, BS, 1));
	assert_true(loads(e, 1, BS, 1));
	uint8_t b[BS];
	fill(b, BS, 1, 1);
	assert_true(dc_store(e, 1, b, BS));   /* the other's, kept */
	store(e, 3, BS, 1);
	assert_int_equal(write(down[1], "h", 1), 1);
	assert_int_equal(child_status(other), 0);
	for (uint64_t k = 0; k < 4; k++)
		assert_true(loads(e, k, BS, 1));
	expect_total(dc);
	dc_entry_close(e);
	/* a version that cannot be told is not cached */
	assert_null(dc_entry_open(dc, URL, 2 * BS, ""));
	dc_close(dc);
	close(down[1]);
	close(up[0]);
}

/* The other mount of test_torn_block_of_another_mount, in a child: at 'g' it opens the
 * entry, stores blocks 0 to 2, then tears block 1's bytes (a write cut short after its
 * record, as a bad disk would) and block 2's (another version's bytes half written over
 * it), says 'y'; at 'h' it loads block 1, stored again whole by this process. */
static int tearing_mount(int from_parent, int to_parent)
{
	char err[256];
	uint8_t b[BS], got[BS];
	if (heard(from_parent) != 'g')
		return 2;
	struct diskcache *dc = dc_open(dir, 1 << 30, BS, err, sizeof err);
	struct dc_entry *e = dc ? dc_entry_open(dc, URL, 4 * BS, ETAG) : NULL;
	if (!e)
		return 3;
	int bad = 0;
	for (uint64_t k = 0; k < 3; k++) {
		fill(b, BS, k, 1);
		bad += !dc_store(e, k, b, BS);
	}
	int fd = open(entry_file(e, "data"), O_WRONLY);
	memset(b, 0, BS);
	bad += fd < 0 || pwrite(fd, b, BS / 2, BS + BS / 2) != (ssize_t)(BS / 2);
	fill(b, BS, 2, 2);
	bad += fd < 0 || pwrite(fd, b, BS / 2, 2 * BS) != (ssize_t)(BS / 2);
	if (fd >= 0)
		close(fd);
	if (bad || write(to_parent, "y", 1) != 1 || heard(from_parent) != 'h')
		return 4;
	fill(b, BS, 1, 1);
	bad += !dc_load(e, 1, got, BS) || memcmp(got, b, BS) != 0;
	dc_entry_close(e);
	dc_close(dc);
	return bad ? 5 : 0;
}

/* Blocks another mount stored and then tore, while this one has the entry open: never
 * loaded (their records check out, their bytes do not), the whole one is; this mount
 * stores the torn one again, and the other loads it whole. */
static void test_torn_block_of_another_mount(void **state)
{
	(void)state;
	int down[2], up[2];
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid_t other = fork();
	if (other == 0) {
		close(down[1]);
		close(up[0]);
		_exit(tearing_mount(down[0], up[1]));
	}
	close(down[0]);   /* (a child that ended is heard as the pipe's end) */
	close(up[1]);
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *e = open_entry(dc, URL, 4 * BS, ETAG);
	assert_int_equal(write(down[1], "g", 1), 1);
	assert_int_equal(heard(up[0]), 'y');
	assert_true(loads(e, 0, BS, 1));
	assert_false(loads(e, 1, BS, 1));
	assert_false(loads(e, 2, BS, 1));
	assert_false(loads(e, 2, BS, 2));
	store(e, 1, BS, 1);
	assert_int_equal(write(down[1], "h", 1), 1);
	assert_int_equal(child_status(other), 0);
	dc_entry_close(e);
	dc_close(dc);
	close(down[1]);
	close(up[0]);
}

/* The other mount of test_entry_in_use_never_evicted_whole, in a child: opens the
 * entry of URL and stores its block 0, says 'y', and holds it until 'h'. */
static int holding_mount(int from_parent, int to_parent)
{
	char err[256];
	uint8_t b[BS];
	struct diskcache *dc = dc_open(dir, 1 << 30, BS, err, sizeof err);
	struct dc_entry *e = dc ? dc_entry_open(dc, URL, 4 * BS, ETAG) : NULL;
	fill(b, BS, 0, 1);
	if (!e || !dc_store(e, 0, b, BS) || write(to_parent, "y", 1) != 1 ||
	    heard(from_parent) != 'h')
		return 2;
	dc_entry_close(e);
	dc_close(dc);
	return 0;
}

/* Whether the cache directory holds an entry directory named name. */
static bool entry_there(const char *name)
{
	char path[PATH_MAX + 64];
	struct stat st;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return stat(path, &st) == 0;
}

/* An entry another mount uses is never evicted whole, however full the cache: not
 * while this process shares it too, not once this one let it go; once the other let it
 * go as well, the next store past the bound removes it whole first. */
static void test_entry_in_use_never_evicted_whole(void **state)
{
	(void)state;
	int down[2], up[2];
	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	pid_t other = fork();
	if (other == 0) {
		close(down[1]);
		close(up[0]);
		_exit(holding_mount(down[0], up[1]));
	}
	close(down[0]);   /* (a child that ended is heard as the pipe's end) */
	close(up[1]);
	assert_int_equal(heard(up[0]), 'y');
	uint64_t max = 12 * BS;
	struct diskcache *dc = open_cache(max);
	struct dc_entry *held = open_entry(dc, URL, 4 * BS, ETAG);
	char name[33];
	snprintf(name, sizeof name, "%s", dc_entry_name(held));
	store(held, 1, BS, 1);
	struct dc_entry *e = open_entry(dc, "http://127.0.0.1:8080/b.gguf", 24 * BS, ETAG);
	for (uint64_t k = 0; k < 12; k++) {
		store(e, k, BS, 1);
		assert_true(dc_usage(dc) <= max);
		assert_true(entry_there(name));
	}
	dc_entry_close(held);
	for (uint64_t k = 12; k < 18; k++) {
		store(e, k, BS, 1);
		assert_true(dc_usage(dc) <= max);
		assert_true(entry_there(name));
	}
	assert_int_equal(write(down[1], "h", 1), 1);
	assert_int_equal(child_status(other), 0);
	store(e, 18, BS, 1);
	assert_false(entry_there(name));
	expect_total(dc);
	dc_entry_close(e);
	dc_close(dc);
	close(down[1]);
	close(up[0]);
}

/* In one process every open of an entry shares it: two handles on the directory (two
 * computed files of one key, as a library with one model at two paths has) and the same
 * handle twice each get the entry, see each other's blocks and store their own; it
 * stays held until the last of them closes. */
static void test_opens_in_one_process_share(void **state)
{
	(void)state;
	struct diskcache *a = open_cache(1 << 30), *b = open_cache(1 << 30);
	struct dc_entry *ea = open_entry(a, URL, 4 * BS, ETAG);
	struct dc_entry *eb = open_entry(b, URL, 4 * BS, ETAG);
	struct dc_entry *ea2 = open_entry(a, URL, 4 * BS, ETAG);
	assert_string_equal(dc_entry_name(ea), dc_entry_name(eb));
	store(ea, 0, BS, 1);
	assert_true(loads(eb, 0, BS, 1));
	assert_true(loads(ea2, 0, BS, 1));
	store(eb, 1, BS, 1);
	store(ea2, 2, BS, 1);
	assert_true(loads(ea, 1, BS, 1));
	assert_true(loads(ea, 2, BS, 1));
	dc_entry_close(ea);
	store(eb, 3, BS, 1);   /* still held */
	assert_true(loads(ea2, 3, BS, 1));
	dc_entry_close(ea2);
	dc_entry_close(eb);
	dc_close(a);
	/* closed by all: held anew, with what they stored */
	struct dc_entry *e = open_entry(b, URL, 4 * BS, ETAG);
	for (uint64_t k = 0; k < 4; k++)
		assert_true(loads(e, k, BS, 1));
	dc_entry_close(e);
	dc_close(b);
}

struct opener {
	struct diskcache *shared;   /* NULL: a dc_open of its own each round */
	unsigned seed;
	int missed;                 /* opens that got no entry */
	int wrong;                  /* loads that gave other bytes than the block's */
	int loaded;
};

/* Opens the entry, stores a block and loads it back, closes it, 40 times: through its
 * own dc_open each time (as a quant file reopened does) or through a shared handle. */
static void *open_close(void *arg)
{
	struct opener *o = arg;
	uint8_t want[BS], got[BS];
	for (int i = 0; i < 40; i++) {
		char err[256];
		struct diskcache *dc = o->shared ? o->shared : dc_open(dir, 1 << 30, BS, err, sizeof err);
		struct dc_entry *e = dc ? dc_entry_open(dc, URL, 8 * BS, ETAG) : NULL;
		if (e) {
			uint64_t k = (uint64_t)(rand_r(&o->seed) % 8);
			fill(want, BS, k, 1);
			dc_store(e, k, want, BS);
			if (dc_load(e, k, got, BS)) {
				o->loaded++;
				o->wrong += memcmp(got, want, BS) != 0;
			}
			dc_entry_close(e);
		} else {
			o->missed++;
		}
		if (!o->shared)
			dc_close(dc);
	}
	return NULL;
}

/* Opens and closes of one entry from several threads at once, each through its own
 * dc_open or through one shared: every open gets the entry (none finds it held by its
 * own process), and every block stored loads back. */
static void test_open_close_from_threads(void **state)
{
	(void)state;
	struct diskcache *shared = open_cache(1 << 30);
	enum { N = 4 };
	pthread_t t[N];
	struct opener o[N];
	for (int i = 0; i < N; i++) {
		o[i] = (struct opener){ .shared = i % 2 ? shared : NULL, .seed = (unsigned)i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, open_close, &o[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(o[i].missed, 0);
		assert_int_equal(o[i].wrong, 0);
		assert_int_equal(o[i].loaded, 40);
	}
	dc_close(shared);
}

static void test_new_version_new_entry(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(1 << 30);
	struct dc_entry *v1 = open_entry(dc, URL, 2 * BS, ETAG);
	store(v1, 0, BS, 1);
	char name1[64];
	snprintf(name1, sizeof name1, "%s", dc_entry_name(v1));
	dc_entry_close(v1);

	struct dc_entry *v2 = open_entry(dc, URL, 2 * BS, "ETag \"def\"");
	assert_string_not_equal(dc_entry_name(v2), name1);
	assert_false(loads(v2, 0, BS, 2));   /* nothing of the old version */
	store(v2, 0, BS, 2);
	dc_entry_close(v2);
	struct dc_entry *v3 = open_entry(dc, URL, 3 * BS, ETAG);   /* another size */
	assert_string_not_equal(dc_entry_name(v3), name1);
	assert_false(loads(v3, 0, BS, 1));
	dc_entry_close(v3);

	v1 = open_entry(dc, URL, 2 * BS, ETAG);   /* the old one is kept until evicted */
	assert_string_equal(dc_entry_name(v1), name1);
	assert_true(loads(v1, 0, BS, 1));
	dc_entry_close(v1);
	dc_close(dc);
}

struct worker {
	struct dc_entry *e;
	unsigned seed;
	int wrong;      /* loads that gave other bytes than the block's */
	int loaded;
};

/* Stores and loads random blocks of a cache too small for them all, so that evictions
 * punch blocks that other threads are loading. */
static void *work(void *arg)
{
	struct worker *w = arg;
	uint8_t want[BS], got[BS];
	for (int i = 0; i < 400; i++) {
		uint64_t k = (uint64_t)(rand_r(&w->seed) % 48);
		fill(want, BS, k, 1);
		if (rand_r(&w->seed) % 2) {
			dc_store(w->e, k, want, BS);
		} else if (dc_load(w->e, k, got, BS)) {
			w->loaded++;
			w->wrong += memcmp(got, want, BS) != 0;
		}
	}
	return NULL;
}

static void test_threads_never_load_wrong_bytes(void **state)
{
	(void)state;
	uint64_t max = 16 * BS;
	struct diskcache *dc = open_cache(max);
	struct dc_entry *e = open_entry(dc, URL, 48 * BS, ETAG);
	pthread_t t[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .e = e, .seed = (unsigned)i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	int loaded = 0;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].wrong, 0);
		loaded += w[i].loaded;
	}
	assert_true(loaded > 0);
	assert_true(dc_usage(dc) <= max);
	dc_entry_close(e);
	dc_close(dc);
}

struct sharer {
	struct dc_entry *e;
	struct diskcache *dc;
	uint64_t max;
	int over;       /* stores after which the directory was above the bound */
	int stored;
};

/* The directory's usage between two stores of any mount: measured holding the cache's
 * lock as the stores do (a walk of the directory while another mount moves a block from
 * one file to another can count it twice: 16 blocks over, once in 40 runs under load). */
static uint64_t usage_at_rest(struct diskcache *dc)
{
	char path[PATH_MAX + 8];
	snprintf(path, sizeof path, "%s/lock", dir);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {   /* no asserts off the main thread */
		if (fd >= 0)
			close(fd);
		return UINT64_MAX;
	}
	uint64_t u = dc_usage(dc);
	close(fd);
	return u;
}

/* Stores every block of its entry in turn, twice, checking the bound after each. */
static void *share(void *arg)
{
	struct sharer *w = arg;
	uint8_t b[BS];
	for (int round = 0; round < 2; round++) {
		for (uint64_t k = 0; k < 24; k++) {
			fill(b, BS, k, 1);
			w->stored += dc_store(w->e, k, b, BS);
			w->over += usage_at_rest(w->dc) > w->max;
		}
	}
	return NULL;
}

/* Two mounts (this process and a child) store into one directory at once, each its
 * own entry: the bound holds after every store of either. */
static void test_two_mounts_share_the_bound(void **state)
{
	(void)state;
	uint64_t max = 20 * BS;
	int result[2];
	assert_int_equal(pipe(result), 0);
	pid_t other = fork();
	if (other == 0) {
		char err[256];
		struct sharer w = { .dc = dc_open(dir, max, BS, err, sizeof err), .max = max };
		w.e = w.dc ? dc_entry_open(w.dc, "http://127.0.0.1:8080/b.gguf", 24 * BS, ETAG)
		           : NULL;
		if (!w.e)
			_exit(2);
		share(&w);
		int got[2] = { w.over, w.stored };
		dc_entry_close(w.e);
		dc_close(w.dc);
		_exit(write(result[1], got, sizeof got) == (ssize_t)sizeof got ? 0 : 3);
	}
	struct sharer w = { .dc = open_cache(max), .max = max };
	w.e = open_entry(w.dc, URL, 24 * BS, ETAG);
	share(&w);
	int got[2] = { -1, -1 };
	assert_int_equal(read(result[0], got, sizeof got), (ssize_t)sizeof got);
	assert_int_equal(child_status(other), 0);
	close(result[0]);
	close(result[1]);
	assert_int_equal(w.over, 0);
	assert_true(w.stored > 0);
	assert_int_equal(got[0], 0);
	assert_true(got[1] > 0);
	expect_total(w.dc);   /* both mounts' changes in it */
	dc_entry_close(w.e);
	dc_close(w.dc);
}

/* Another mount's blocks push out this one's least recently used ones, not its own
 * (it has none to give). The other mount (a child, once this one filled the cache)
 * exits 0 when each of its 4 stores kept the bound and loads back. */
static void test_lru_across_mounts(void **state)
{
	(void)state;
	uint64_t max = 20 * BS;
	int go[2];
	assert_int_equal(pipe(go), 0);
	pid_t other = fork();
	if (other == 0) {
		char c, err[256];
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		struct diskcache *b = dc_open(dir, max, BS, err, sizeof err);
		struct dc_entry *eb = b ? dc_entry_open(b, "http://127.0.0.1:8080/b.gguf", 4 * BS,
		                                        ETAG) : NULL;
		if (!eb)
			_exit(3);
		int bad = 0;
		uint8_t want[BS], got[BS];
		for (uint64_t k = 0; k < 4; k++) {
			fill(want, BS, k, 1);
			bad += !dc_store(eb, k, want, BS) || dc_usage(b) > max;
		}
		for (uint64_t k = 0; k < 4; k++) {
			fill(want, BS, k, 1);
			bad += !dc_load(eb, k, got, BS) || memcmp(got, want, BS) != 0;
		}
		dc_entry_close(eb);
		dc_close(b);
		_exit(bad ? 4 : 0);
	}
	close(go[0]);
	struct diskcache *a = open_cache(max);
	struct dc_entry *ea = open_entry(a, URL, 24 * BS, ETAG);
	for (uint64_t k = 0; k < 24; k++)
		store(ea, k, BS, 1);   /* fills the cache: a's oldest blocks went */
	int before = 0;
	for (uint64_t k = 0; k < 24; k++)
		before += loads(ea, k, BS, 1);
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(child_status(other), 0);
	close(go[1]);
	assert_true(loads(ea, 23, BS, 1));   /* a's most recently used stays */
	int after = 0;
	for (uint64_t k = 0; k < 24; k++)
		after += loads(ea, k, BS, 1);
	assert_true(after < before);
	expect_total(a);   /* with the other mount's evictions of a's blocks */
	dc_entry_close(ea);
	expect_total(a);
	dc_close(a);
}

/* SIGALRM in test_fifos_never_waited_for: an open in the cache directory waited (on a
 * FIFO, an open for reading waits for a writer): the test ends here, failed. */
static void hung(int sig)
{
	(void)sig;
	static const char say[] = "test_diskcache: an open in the cache directory hung "
	                          "(SIGALRM after 20 s)\n";
	if (write(2, say, sizeof say - 1) < 0)
		_exit(2);
	_exit(1);
}

/* Puts a FIFO in place of file (map, data) of entry e, whose name is kept in name. */
static void fifo_for(const struct dc_entry *e, const char *file, char name[64])
{
	snprintf(name, 64, "%s", dc_entry_name(e));
	const char *path = entry_file(e, file);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
}

/* A FIFO anywhere in the cache is never waited on (an alarm bounds the test: an open of
 * one for reading waits for a writer, and eviction waited so holding the directory's
 * lock, hanging every store of every mount on it): as an entry's data or map, the entry
 * is made afresh when opened; as an unused entry's map, eviction removes that entry
 * first; as the lock file, the cache is refused, saying so. */
static void test_fifos_never_waited_for(void **state)
{
	(void)state;
	signal(SIGALRM, hung);
	alarm(20);
	uint64_t max = 24 * BS;
	struct diskcache *dc = open_cache(max);
	char data_fifo[64], map_fifo[64], unused[64];
	const char *const urls[] = { "http://127.0.0.1:8080/data.gguf",
	                             "http://127.0.0.1:8080/map.gguf",
	                             "http://127.0.0.1:8080/unused.gguf" };
	char *names[] = { data_fifo, map_fifo, unused };
	const char *files[] = { "data", "map", "map" };
	for (int i = 0; i < 3; i++) {
		struct dc_entry *e = open_entry(dc, urls[i], 4 * BS, ETAG);
		for (uint64_t k = 0; k < 4; k++)
			store(e, k, BS, 1);
		fifo_for(e, files[i], names[i]);
		dc_entry_close(e);
	}
	for (int i = 0; i < 2; i++) {   /* made afresh, and it works */
		struct dc_entry *e = open_entry(dc, urls[i], 4 * BS, ETAG);
		assert_string_equal(dc_entry_name(e), names[i]);
		assert_false(loads(e, 0, BS, 1));
		store(e, 0, BS, 1);
		struct stat st;
		assert_int_equal(stat(entry_file(e, files[i]), &st), 0);
		assert_true(S_ISREG(st.st_mode));
		dc_entry_close(e);
	}
	/* past the bound: the unused entries go, the one whose map is a FIFO first */
	struct dc_entry *e = open_entry(dc, URL, 32 * BS, ETAG);
	char path[PATH_MAX + 64], other[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, unused);
	struct stat st;
	for (uint64_t k = 0; k < 20; k++) {
		store(e, k, BS, 1);
		assert_true(dc_usage(dc) <= max);
		for (int i = 0; i < 2; i++) {   /* none before it */
			snprintf(other, sizeof other, "%s/%s", dir, names[i]);
			if (lstat(other, &st) != 0)
				assert_int_equal(lstat(path, &st), -1);
		}
	}
	assert_int_equal(lstat(path, &st), -1);
	dc_entry_close(e);
	dc_close(dc);

	snprintf(path, sizeof path, "%s/lock", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	char err[256];
	assert_null(dc_open(dir, max, BS, err, sizeof err));
	assert_non_null(strstr(err, "lock is not a regular file"));
	assert_int_equal(lstat(path, &st), 0);   /* left as it was */
	assert_true(S_ISFIFO(st.st_mode));
	alarm(0);
	signal(SIGALRM, SIG_DFL);
}

/* The opens of the cache directory itself (a listing or a walk of it) that inotify
 * watch in reported since the last call. */
static int directory_opens(int in)
{
	int n = 0;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (ssize_t got; (got = read(in, buf, sizeof buf)) > 0;) {
		for (char *p = buf; p < buf + got;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			n += (ev->mask & IN_OPEN) && ev->len == 0;
			p += sizeof *ev + ev->len;
		}
	}
	return n;
}

/* A store under the bound neither walks nor lists the directory (the usage is a running
 * total): inotify sees the directory itself opened no time in 32 stores, however many
 * entries it holds. */
static void test_stores_walk_nothing(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(1 << 30);
	for (int i = 0; i < 8; i++) {   /* entries beside the one stored into */
		char url[64];
		snprintf(url, sizeof url, "http://127.0.0.1:8080/%d.gguf", i);
		struct dc_entry *other = open_entry(dc, url, BS, ETAG);
		store(other, 0, BS, 1);
		dc_entry_close(other);
	}
	struct dc_entry *e = open_entry(dc, URL, 32 * BS, ETAG);
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, dir, IN_OPEN) >= 0);
	int opens = 0;
	for (uint64_t k = 0; k < 32; k++) {
		store(e, k, BS, 1);
		opens += directory_opens(in);   /* (read each time: repeats are not merged) */
	}
	assert_int_equal(opens, 0);
	close(in);
	expect_total(dc);
	dc_entry_close(e);
	dc_close(dc);
}

/* The running total follows every change, as a walk counts it: what a crash left of an
 * entry being made, removed at the first open; entries made; blocks stored; unused
 * entries evicted and blocks punched at the bound; a data file that took more behind
 * the cache's back (as a file system allocating at writeback does), at the entry's next
 * store; a total damaged in the lock file, counted afresh at the next change. */
static void test_usage_total_follows_changes(void **state)
{
	(void)state;
	char path[PATH_MAX + 64];
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(path, sizeof path, "%s/.new-0123456789abcdef0123456789abcdef", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/.new-0123456789abcdef0123456789abcdef/map", dir);
	scribble_new(path, 3 * BS);
	uint64_t max = 24 * BS;
	struct diskcache *dc = open_cache(max);
	struct stat st;
	assert_int_equal(stat(path, &st), -1);
	expect_total(dc);

	struct dc_entry *old = open_entry(dc, "http://127.0.0.1:8080/old.gguf", 8 * BS, ETAG);
	expect_total(dc);
	for (uint64_t k = 0; k < 8; k++) {
		store(old, k, BS, 1);
		expect_total(dc);
	}
	dc_entry_close(old);
	expect_total(dc);
	struct dc_entry *e = open_entry(dc, URL, 32 * BS, ETAG);
	for (uint64_t k = 0; k < 30; k++) {   /* past the bound: old goes, then e's oldest */
		store(e, k, BS, 1);
		expect_total(dc);
		assert_true(dc_usage(dc) <= max);
	}
	assert_false(loads(e, 0, BS, 1));

	/* 2 blocks' worth written into a hole of the data file (no record: never served) */
	uint8_t junk[2 * BS];
	memset(junk, 0x5a, sizeof junk);
	int fd = open(entry_file(e, "data"), O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
	close(fd);
	store(e, 30, BS, 1);
	expect_total(dc);
	assert_true(dc_usage(dc) <= max);

	/* the total in the lock file damaged: not believed, counted afresh */
	snprintf(path, sizeof path, "%s/lock", dir);
	scribble(path, 8, 4, 0);
	store(e, 31, BS, 1);
	expect_total(dc);
	assert_true(dc_usage(dc) <= max);
	dc_entry_close(e);
	expect_total(dc);
	dc_close(dc);
}

static void test_default_bound(void **state)
{
	(void)state;
	struct diskcache *dc = open_cache(0);
	assert_true(dc_max(dc) > 0);
	assert_true(dc_max(dc) <= DC_DEFAULT_MAX);
	dc_close(dc);
	char err[256];
	assert_null(dc_open("/nonexistent/dir/cache", 0, BS, err, sizeof err));
	assert_non_null(strstr(err, "/nonexistent/dir/cache"));
}

/* The lines the event log said, one after another (test_full_file_system_said). */
static char said[4096];

static void keep_line(void *arg, enum evlog_level level, const char *line)
{
	(void)arg, (void)level;
	size_t n = strlen(said);
	snprintf(said + n, sizeof said - n, "%s\n", line);
}

/* test_full_file_system_said in a child of its own mount namespace, where a tmpfs of
 * 256 KiB at root/fs holds the cache (gone with the namespace): blocks are stored until
 * the file system is full; exit status 0 when a store failed, the log said ENOSPC with
 * the directory and not cache_max, the blocks stored load back, and one more store
 * fails as well; 77 when no file system can be mounted here. */
static int fill_small_fs(void)
{
	char fs[128], err[256];
	snprintf(fs, sizeof fs, "%s/fs", root);
	if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mkdir(fs, 0700) != 0 || mount("tmpfs", fs, "tmpfs", 0, "size=256k,mode=0700") != 0)
		return 77;
	snprintf(dir, sizeof dir, "%s/cache", fs);
	evlog_reset();
	evlog_set_sink(keep_line, NULL);
	struct diskcache *dc = dc_open(dir, 1 << 30, BS, err, sizeof err);
	struct dc_entry *e = dc ? dc_entry_open(dc, URL, 64 * BS, ETAG) : NULL;
	if (!e)
		return 2;
	uint8_t b[BS], got[BS];
	uint64_t stored = 0;
	for (; stored < 64; stored++) {
		fill(b, BS, stored, 1);
		if (!dc_store(e, stored, b, BS))
			break;
	}
	int bad = stored == 64 || stored == 0;
	for (uint64_t k = 0; k < stored; k++) {
		fill(b, BS, k, 1);
		bad += !dc_load(e, k, got, BS) || memcmp(got, b, BS) != 0;
	}
	fill(b, BS, 63, 1);
	bad += dc_store(e, 63, b, BS);
	bad += !strstr(said, "ENOSPC") || !strstr(said, dir) || strstr(said, "cache_max") != NULL;
	if (bad)
		fprintf(stderr, "stored %llu blocks; the log said:\n%s", (unsigned long long)stored,
		        said);
	dc_entry_close(e);
	dc_close(dc);
	return bad ? 3 : 0;
}

/* A store that fails because the file system under the cache is full is said as such
 * (ENOSPC, with the directory), not as the bound, and what was stored loads back.
 * Skipped where no tmpfs can be mounted (not root, no mount namespace). */
static void test_full_file_system_said(void **state)
{
	(void)state;
	pid_t pid = fork();
	if (pid == 0)
		_exit(fill_small_fs());
	int status = child_status(pid);
	if (status == 77)
		skip();
	assert_int_equal(status, 0);
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_load_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_block_not_served, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_bit_errors_caught, setup, teardown),
		cmocka_unit_test_setup_teardown(test_claimed_size_sizes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_map_record_not_trusted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound_and_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unused_entries_evicted_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_entry_within_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_shared_between_mounts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_block_of_another_mount, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_in_use_never_evicted_whole, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_opens_in_one_process_share, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_close_from_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_version_new_entry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_never_load_wrong_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_mounts_share_the_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lru_across_mounts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fifos_never_waited_for, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stores_walk_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage_total_follows_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_file_system_said, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
