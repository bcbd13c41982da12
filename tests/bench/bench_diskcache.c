/* The disk cache's stores against the number of entries in its directory (issue 43,
 * item 5), printed, never asserted: `meson test --benchmark diskcache`.
 *
 *     bench_diskcache [DIR]   (its scratch directories go under DIR, default /tmp)
 *
 * A cache directory is filled with N small entries, made by hand as the disk cache
 * lays them out (a directory, a 4 KiB map, a 4 KiB data file), N = 0, 1,500 and 20,000;
 * then one file of 6.9 MB (53 blocks of 128 KiB, a small model's Q8_0 quantization) is
 * stored block by block, as a first read of it does, under a bound that needs no
 * eviction. Printed per N: the seconds of dc_open and dc_entry_open, of the 53 stores,
 * and of one walk of the whole directory (dc_usage), which is what each store cost
 * twice when the usage was counted by walking the directory. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "computed.h"
#include "diskcache.h"

#define BENCH_DC_FILE_SIZE 6900000u
#define BENCH_DC_SMALL 4096u

/* Ends the benchmark with what failed. */
static void die(const char *what, const char *path)
{
	fprintf(stderr, "bench_diskcache: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

/* Writes n zero bytes to the new file path, mode 0600. */
static void write_zeros(const char *path, size_t n)
{
	static const uint8_t zeros[BENCH_DC_SMALL];
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, zeros, n) != (ssize_t)n)
		die("cannot write", path);
	close(fd);
}

/* Makes n entries in the cache directory dir: 32 hex digits each, as the cache names
 * them, each with a map and a data file of BENCH_DC_SMALL bytes. */
static void fill_entries(const char *dir, unsigned n)
{
	char path[2200];
	for (unsigned i = 0; i < n; i++) {
		uint64_t h = (i + 1) * 0x9e3779b97f4a7c15u;
		snprintf(path, sizeof path, "%s/%016" PRIx64 "%016" PRIx64, dir, h, h ^ 0xabcdefu);
		if (mkdir(path, 0700) != 0)
			die("cannot make", path);
		size_t at = strlen(path);
		snprintf(path + at, sizeof path - at, "/map");
		write_zeros(path, BENCH_DC_SMALL);
		snprintf(path + at, sizeof path - at, "/data");
		write_zeros(path, BENCH_DC_SMALL);
	}
}

/* Removes the scratch tree at path (what fill_entries and the cache made). */
static void remove_tree(const char *path)
{
	char cmd[1200];
	snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_diskcache: could not remove %s\n", path);
}

/* One run with n entries under base: prints its row. */
static void run(const char *base, unsigned n, const uint8_t *bytes)
{
	char root[1024], dir[1100];
	snprintf(root, sizeof root, "%s/bench_diskcache.XXXXXX", base);
	if (!mkdtemp(root))
		die("cannot make", root);
	snprintf(dir, sizeof dir, "%s/cache", root);
	if (mkdir(dir, 0700) != 0)
		die("cannot make", dir);
	fill_entries(dir, n);

	char err[512];
	double t0 = bench_now();
	struct diskcache *dc = dc_open(dir, 1ull << 40, COMPUTED_BLOCK_SIZE, err, sizeof err);
	if (!dc) {
		fprintf(stderr, "bench_diskcache: %s\n", err);
		exit(1);
	}
	struct dc_entry *e = dc_entry_open(dc, "bench:Q8_0", BENCH_DC_FILE_SIZE, "v1");
	if (!e) {
		fprintf(stderr, "bench_diskcache: no entry\n");
		exit(1);
	}
	double t1 = bench_now();
	const uint64_t blocks = (BENCH_DC_FILE_SIZE + COMPUTED_BLOCK_SIZE - 1) / COMPUTED_BLOCK_SIZE;
	unsigned stored = 0;
	for (uint64_t k = 0; k < blocks; k++) {
		uint64_t off = k * COMPUTED_BLOCK_SIZE;
		size_t len = BENCH_DC_FILE_SIZE - off < COMPUTED_BLOCK_SIZE ?
			(size_t)(BENCH_DC_FILE_SIZE - off) : COMPUTED_BLOCK_SIZE;
		stored += dc_store(e, k, bytes + off, len);
	}
	double t2 = bench_now();
	uint64_t usage = dc_usage(dc);
	double t3 = bench_now();
	printf("%8u %10.3f %10.3f %9.2f %10.3f %9u %10.1f\n", n, t1 - t0, t2 - t1,
	       (t2 - t1) / (double)blocks * 1e3, t3 - t2, stored, usage / 1e6);
	fflush(stdout);
	dc_entry_close(e);
	dc_close(dc);
	remove_tree(root);
}

int main(int argc, char **argv)
{
	const char *base = argc > 1 ? argv[1] : "/tmp";
	uint8_t *bytes = malloc(BENCH_DC_FILE_SIZE);
	if (!bytes)
		return 1;
	bench_fill_random(bytes, BENCH_DC_FILE_SIZE, 43);
	printf("one %.1f MB file stored in %u KiB blocks into a cache directory of N entries "
	       "(under %s)\n", BENCH_DC_FILE_SIZE / 1e6, COMPUTED_BLOCK_SIZE >> 10, base);
	printf("%8s %10s %10s %9s %10s %9s %10s\n", "entries", "open s", "stores s",
	       "ms/store", "1 walk s", "stored", "usage MB");
	const unsigned counts[] = { 0, 1500, 20000 };
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
		run(base, counts[i], bytes);
	free(bytes);
	return 0;
}
