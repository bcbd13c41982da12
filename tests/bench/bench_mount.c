/* The mount half of the benchmark: ggufs serving real models from a temporary folder.
 *
 * A model with one 2048 x 32000 tensor of random block bytes per type (named after its
 * type) is mounted with ggufs -f. Per type, .f32 and the raw file are read whole, 1 MiB
 * at a time: cold (posix_fadvise DONTNEED on the mounted file first, while the .gguf
 * stays in the page cache) and warm (again, from the mount's page cache). Then two
 * readers on two tensors at once against one, the daemon's RssAnon after all that, and
 * the mount time of a model with 300 tensors and a 150,000-entry vocabulary. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "dequant.h"
#include "types.h"

#define ALIGNMENT 32
#define META_TENSORS 300
#define META_TOKENS 150000
#define MOUNT_TRIES 5
#define READ_TRIES 5    /* every read figure is the best of this many: a shared
                         * 2-core machine is noisy */

/* ---- writing GGUF files ---- */

static void put_kv_str(FILE *f, const char *key, const char *value)
{
	bench_put_str(f, key);
	bench_put_u32(f, 8);   /* string */
	bench_put_str(f, value);
}

/* The padding that brings offset up to the alignment. */
static uint64_t pad(uint64_t off)
{
	return (ALIGNMENT - off % ALIGNMENT) % ALIGNMENT;
}

static void put_zeros(FILE *f, uint64_t n)
{
	static const uint8_t zeros[ALIGNMENT];
	bench_put(f, zeros, n);
}

struct wtensor {
	char name[64];
	const struct ggml_type *type;
	uint64_t ne0, ne1;
	uint64_t size, offset;
};

/* Writes the tensor infos and then, aligned, the data of each tensor (random bytes);
 * returns the file offset of the data section. */
static uint64_t put_tensors(FILE *f, struct wtensor *t, size_t n)
{
	uint64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		t[i].size = t[i].ne0 * t[i].ne1 / t[i].type->block_elems * t[i].type->block_bytes;
		t[i].offset = off;
		off += t[i].size + pad(t[i].size);
		bench_put_str(f, t[i].name);
		bench_put_u32(f, 2);
		bench_put_u64(f, t[i].ne0);
		bench_put_u64(f, t[i].ne1);
		bench_put_u32(f, t[i].type->id);
		bench_put_u64(f, t[i].offset);
	}
	put_zeros(f, pad((uint64_t)ftell(f)));
	uint64_t data = (uint64_t)ftell(f);
	for (size_t i = 0; i < n; i++) {
		uint8_t *bytes = malloc(t[i].size);
		if (!bytes) {
			fprintf(stderr, "bench_mount: out of memory\n");
			exit(1);
		}
		bench_fill_random(bytes, t[i].size, 0x9e3779b97f4a7c15u + i);
		bench_put(f, bytes, t[i].size);
		put_zeros(f, pad(t[i].size));
		free(bytes);
	}
	return data;
}

/* Closes a written model only once it is on disk, so that the kernel is not writing
 * 1.5 GB back while the first types are measured. */
static void close_synced(FILE *f, const char *path)
{
	if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* One 2048 x 32000 tensor per type, named after it; t gets where each one lies (its
 * offset made absolute). */
static void write_big_model(const char *path, const struct ggml_type *const *types, size_t n,
                            struct wtensor *t)
{
	for (size_t i = 0; i < n; i++) {
		t[i] = (struct wtensor){ .type = types[i], .ne0 = BENCH_NE0, .ne1 = BENCH_NE1 };
		snprintf(t[i].name, sizeof t[i].name, "%s", types[i]->name);
	}
	FILE *f = bench_open_gguf(path, n, 1);
	put_kv_str(f, "general.architecture", "bench");
	uint64_t data = put_tensors(f, t, n);
	close_synced(f, path);
	for (size_t i = 0; i < n; i++)
		t[i].offset += data;
}

/* Reads tensor t's bytes from the .gguf itself, so that a cold read through the mount
 * finds them in the page cache as the issue asks: this machine's proactive reclaim
 * (kdamond) drops page cache untouched for a few seconds, and reads of a model written
 * earlier then went to disk (0.5 GB/s, whatever ggufs did). */
static void cache_source(const char *model, const struct wtensor *t)
{
	int fd = open(model, O_RDONLY);
	if (fd < 0)
		return;
	char *buf = malloc(BENCH_CHUNK);
	for (uint64_t off = 0; buf && off < t->size; off += BENCH_CHUNK)
		if (pread(fd, buf, BENCH_CHUNK, (off_t)(t->offset + off)) <= 0)
			break;
	free(buf);
	close(fd);
}

/* 300 small tensors and a llama-style vocabulary of 150,000 tokens, scores and types:
 * the metadata the mount renders to size its files. */
static void write_meta_model(const char *path)
{
	struct wtensor t[META_TENSORS];
	for (int i = 0; i < META_TENSORS; i++) {
		t[i] = (struct wtensor){ .type = ggml_type_get(GGML_TYPE_Q4_K), .ne0 = 256, .ne1 = 4 };
		snprintf(t[i].name, sizeof t[i].name, "blk.%d.ffn_up.weight", i);
	}
	FILE *f = bench_open_gguf(path, META_TENSORS, 4);
	put_kv_str(f, "general.architecture", "llama");

	bench_put_str(f, "tokenizer.ggml.tokens");
	bench_put_u32(f, 9);   /* array */
	bench_put_u32(f, 8);   /* of strings */
	bench_put_u64(f, META_TOKENS);
	for (int i = 0; i < META_TOKENS; i++) {
		char tok[32];
		snprintf(tok, sizeof tok, "\xe2\x96\x81tok%d", i);
		bench_put_str(f, tok);
	}
	bench_put_str(f, "tokenizer.ggml.scores");
	bench_put_u32(f, 9);
	bench_put_u32(f, 6);   /* of float32 */
	bench_put_u64(f, META_TOKENS);
	for (int i = 0; i < META_TOKENS; i++) {
		float score = -(float)i / 7.0f;
		bench_put(f, &score, 4);
	}
	bench_put_str(f, "tokenizer.ggml.token_type");
	bench_put_u32(f, 9);
	bench_put_u32(f, 5);   /* of int32 */
	bench_put_u64(f, META_TOKENS);
	for (int i = 0; i < META_TOKENS; i++)
		bench_put_u32(f, i < 3 ? 3 : 1);
	put_tensors(f, t, META_TENSORS);
	close_synced(f, path);
}

/* ---- mounting ---- */

struct mount {
	pid_t pid;
	char path[4096];
	double seconds;   /* from fork to the mount answering */
};

/* Mounts model at path with ggufs -f; the mount time runs until stat of the mount point
 * shows another device, i.e. until the daemon answers. */
static bool mount_model(const char *ggufs, const char *model, const char *path, struct mount *m)
{
	struct stat before, now;
	if (stat(path, &before) != 0) {
		perror(path);
		return false;
	}
	snprintf(m->path, sizeof m->path, "%s", path);
	double t0 = bench_now();
	m->pid = fork();
	if (m->pid == 0) {
		execl(ggufs, ggufs, "-f", model, path, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		if (stat(path, &now) == 0 && now.st_dev != before.st_dev)
			break;
		int status;
		if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
			fprintf(stderr, "bench_mount: ggufs exited before mounting %s\n", model);
			return false;
		}
		if (bench_now() - t0 > 60) {
			kill(m->pid, SIGKILL);
			return false;
		}
		usleep(100);
	}
	m->seconds = bench_now() - t0;
	return true;
}

static void unmount(struct mount *m)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", m->path, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
	waitpid(m->pid, NULL, 0);
}

/* The daemon's RssAnon in MB, or -1. */
static double rss_anon_mb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	double kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "RssAnon: %lf kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

/* ---- reading ---- */

/* Reads fd to its end, BENCH_CHUNK bytes at a time, into buf: the bytes read, or 0
 * after a read error. */
static uint64_t read_through(int fd, void *buf)
{
	uint64_t total = 0;
	for (;;) {
		ssize_t r = read(fd, buf, BENCH_CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return 0;
		if (r == 0)
			return total;
		total += (uint64_t)r;
	}
}

/* GB/s of reading the whole file at path 1 MiB at a time; cold drops the mounted file's
 * page cache first. -1 on an error. */
static double read_rate(const char *path, bool cold)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return -1;
	}
	if (cold)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	void *buf;
	if (posix_memalign(&buf, 4096, BENCH_CHUNK) != 0) {
		close(fd);
		return -1;
	}
	double t0 = bench_now();
	uint64_t total = read_through(fd, buf);
	double dt = bench_now() - t0;
	if (!total)
		perror(path);
	free(buf);
	close(fd);
	return total ? total / dt / 1e9 : -1;
}

/* Busy and total jiffies of all CPUs from /proc/stat; false when it can't be read. */
static bool cpu_jiffies(uint64_t *busy, uint64_t *total)
{
	FILE *f = fopen("/proc/stat", "r");
	unsigned long long v[8] = { 0 };
	int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
	                     &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
	            : 0;
	if (f)
		fclose(f);
	if (got != 8)
		return false;
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	*busy = *total - v[3] - v[4];   /* all but idle and iowait */
	return true;
}

struct reader {
	int fd;
	uint64_t bytes;
	pthread_barrier_t *start;
};

static void *reader_thread(void *arg)
{
	struct reader *r = arg;
	void *buf = NULL;
	if (posix_memalign(&buf, 4096, BENCH_CHUNK) != 0)
		buf = NULL;
	pthread_barrier_wait(r->start);
	r->bytes = buf ? read_through(r->fd, buf) : 0;
	free(buf);
	return NULL;
}

/* Aggregate GB/s of n cold readers, one per file, started together: every file is
 * opened and its page cache dropped before the clock starts, so one reader and two
 * are timed alike. *cores is how many CPUs were busy on average meanwhile (all
 * processes: the readers in the kernel and the daemon). -1 on an error. */
static double cold_readers(const char *const *paths, int n, double *cores)
{
	struct reader r[2];
	pthread_t th[2];
	pthread_barrier_t start;
	*cores = -1;
	if (n < 1 || n > 2)
		return -1;
	for (int i = 0; i < n; i++) {
		r[i] = (struct reader){ .fd = open(paths[i], O_RDONLY), .start = &start };
		if (r[i].fd < 0) {
			perror(paths[i]);
			while (i-- > 0)
				close(r[i].fd);
			return -1;
		}
		posix_fadvise(r[i].fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++)
		pthread_create(&th[i], NULL, reader_thread, &r[i]);
	uint64_t b0 = 0, t0j = 0, b1 = 0, t1j = 0;
	bool have_cpu = cpu_jiffies(&b0, &t0j);
	pthread_barrier_wait(&start);
	double t0 = bench_now();
	uint64_t bytes = 0;
	bool all_read = true;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		bytes += r[i].bytes;
		all_read &= r[i].bytes > 0;
		close(r[i].fd);
	}
	double dt = bench_now() - t0;
	pthread_barrier_destroy(&start);
	have_cpu = have_cpu && cpu_jiffies(&b1, &t1j) && t1j > t0j;
	*cores = have_cpu ? (double)(b1 - b0) / (double)(t1j - t0j) * (double)sysconf(_SC_NPROCESSORS_ONLN)
	                  : -1;
	return all_read ? bytes / dt / 1e9 : -1;
}

/* Cold .f32 over cold raw that each type must reach (issue 4), or 0 for none. */
static double raw_target(const char *name)
{
	static const char *const types[] = { "q4_K", "q6_K", "q8_0", "bf16" };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcmp(name, types[i]) == 0)
			return 0.8;
	return strcmp(name, "iq4_xs") == 0 ? 0.6 : 0;
}

/* Cold .f32 over memcpy that q4_K and q8_0 must reach. */
static double mem_target(const char *name)
{
	return strcmp(name, "q4_K") == 0 || strcmp(name, "q8_0") == 0 ? 0.25 : 0;
}

static const char *verdict(bool ok)
{
	return ok ? "ok" : "MISSED";
}

/* One row per type: cold and warm .f32 and raw reads; false when a target is missed. */
static bool bench_types(const char *mnt, const char *model, const struct wtensor *wt,
                        const struct ggml_type *const *types, size_t n, double mem)
{
	bool ok = true;
	printf("\nthrough the mount, 1 MiB reads, GB/s (x memcpy), best of %d; cold = DONTNEED on"
	       " the mounted file, .gguf cached\n", READ_TRIES);
	printf("%-8s %15s %15s %15s %15s %9s  %s\n", "type", ".f32 cold", ".f32 warm", "raw cold",
	       "raw warm", "f32/raw", "targets");
	for (size_t i = 0; i < n; i++) {
		char f32[4200], raw[4200];
		snprintf(raw, sizeof raw, "%s/tensors/%s", mnt, types[i]->name);
		snprintf(f32, sizeof f32, "%s/tensors/%s.f32", mnt, types[i]->name);
		double fc = 0, fw = 0, rc = 0, rw = 0;
		for (int k = 0; k < READ_TRIES; k++) {
			cache_source(model, &wt[i]);
			fc = fmax(fc, read_rate(f32, true));
			fw = fmax(fw, read_rate(f32, false));
			cache_source(model, &wt[i]);
			rc = fmax(rc, read_rate(raw, true));
			rw = fmax(rw, read_rate(raw, false));
		}
		char note[128] = "";
		int len = 0;
		double rt = raw_target(types[i]->name), mt = mem_target(types[i]->name);
		if (rt > 0) {
			ok &= fc >= rt * rc;
			len += snprintf(note + len, sizeof note - len, "f32/raw>=%.1f %s  ", rt,
			                verdict(fc >= rt * rc));
		}
		if (mt > 0) {
			ok &= fc >= mt * mem;
			len += snprintf(note + len, sizeof note - len, "cold>=%.2fxmem %s  ", mt,
			                verdict(fc >= mt * mem));
		}
		ok &= fw >= 0.5 * mem;
		snprintf(note + len, sizeof note - len, "warm>=0.5xmem %s", verdict(fw >= 0.5 * mem));
		printf("%-8s %6.2f (%5.2fx) %6.2f (%5.2fx) %6.2f (%5.2fx) %6.2f (%5.2fx) %8.2fx  %s\n",
		       types[i]->name, fc, fc / mem, fw, fw / mem, rc, rc / mem, rw, rw / mem, fc / rc,
		       note);
	}
	return ok;
}

bool bench_mount(const char *ggufs, double mem, const char *const *names, size_t count)
{
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		printf("\nno /dev/fuse: mount half skipped\n");
		return true;
	}
	const struct ggml_type **types = calloc(count, sizeof *types);
	size_t n = 0;
	for (size_t i = 0; i < count; i++)
		for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++)
			if (dequant_get(id)->to_float &&
			    strcmp(ggml_type_get(id)->name, names[i]) == 0)
				types[n++] = ggml_type_get(id);

	char dir[] = "/tmp/ggufs-bench-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return false;
	}
	char big[64], meta[64], mnt[64];
	snprintf(big, sizeof big, "%s/big.gguf", dir);
	snprintf(meta, sizeof meta, "%s/meta.gguf", dir);
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	mkdir(mnt, 0755);
	struct wtensor *wt = calloc(n, sizeof *wt);
	write_big_model(big, types, n, wt);
	write_meta_model(meta);

	bool ok = true;
	struct mount m;
	if (!mount_model(ggufs, big, mnt, &m)) {
		ok = false;
		goto out;
	}
	ok &= bench_types(mnt, big, wt, types, n, mem);

	/* two readers: two tensors (the first two types) at once against the first alone */
	if (n >= 2) {
		char a[4200], b[4200];
		snprintf(a, sizeof a, "%s/tensors/%s.f32", mnt, types[0]->name);
		snprintf(b, sizeof b, "%s/tensors/%s.f32", mnt, types[1]->name);
		const char *const both_paths[2] = { a, b };
		double one = 0, both = 0, one_cores = 0, both_cores = 0;
		for (int k = 0; k < READ_TRIES; k++) {
			double c1, c2;
			cache_source(big, &wt[0]);
			double r1 = cold_readers(both_paths, 1, &c1);
			cache_source(big, &wt[0]);
			cache_source(big, &wt[1]);
			double r2 = cold_readers(both_paths, 2, &c2);
			if (r1 > one) {
				one = r1;
				one_cores = c1;
			}
			if (r2 > both) {
				both = r2;
				both_cores = c2;
			}
		}
		ok &= both >= 1.5 * one;
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		printf("\ntwo readers (%s.f32 + %s.f32, cold): %.2f GB/s, one: %.2f GB/s, "
		       "ratio %.2fx  (>=1.5x %s)\n", types[0]->name, types[1]->name, both, one,
		       both / one, verdict(both >= 1.5 * one));
		/* Why two readers can't simply double: one reader already keeps most CPUs
		 * busy, with its own page-cache copies and the daemon's. */
		if (one_cores > 0 && both_cores > 0)
			printf("  CPUs busy (of %ld): %.2f with one reader, %.2f with two\n", ncpu,
			       one_cores, both_cores);
	}
	double rss = rss_anon_mb(m.pid);
	ok &= rss >= 0 && rss <= 64;
	printf("daemon RssAnon after reading everything: %.1f MB  (<=64 MB %s)\n", rss,
	       verdict(rss >= 0 && rss <= 64));
	printf("mount time, %zu x 2048 x 32000 model: %.1f ms\n", n, m.seconds * 1e3);
	unmount(&m);

	double best = 1e30;
	for (int i = 0; i < MOUNT_TRIES; i++) {
		if (!mount_model(ggufs, meta, mnt, &m)) {
			ok = false;
			goto out;
		}
		if (m.seconds < best)
			best = m.seconds;
		unmount(&m);
	}
	ok &= best <= 0.050;
	printf("mount time, %d tensors + %d-token vocabulary (best of %d): %.1f ms  "
	       "(<=50 ms %s)\n", META_TENSORS, META_TOKENS, MOUNT_TRIES, best * 1e3,
	       verdict(best <= 0.050));
out:
	unlink(big);
	unlink(meta);
	rmdir(mnt);
	rmdir(dir);
	free(wt);
	free(types);
	return ok;
}
