#include "diskcache.h"
#include "clock.h"
#include "flock_handover.h"
#include "evlog.h"
#include "hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define MAP_MAGIC "GGUFSDC1"
#define MAP_VERSION 2u       /* 2: XXH3 checksums (1's FNV-1a entries are made afresh) */
#define MAP_HEADER 4096u     /* the map's header; the records follow */
#define NEW_PREFIX ".new-"   /* an entry being made; left over only by a crash */

static bool make_room(struct diskcache *dc, const struct dc_entry *e, uint64_t index,
                      uint64_t need);
static bool evict_entry(struct diskcache *dc);
static bool evict_block(struct diskcache *dc, const struct dc_entry *keep, uint64_t keep_index);

/* One block's record in the map, in the machine's byte order. check covers the other
 * fields and the block's index, so that a record torn or written at the wrong place is
 * not believed. */
struct dc_record {
	uint64_t sum;        /* dc_checksum of the block's bytes */
	uint64_t tick;       /* last use: microseconds since the epoch (next_tick) */
	uint32_t len;
	uint32_t zero;
	uint64_t check;
};

struct diskcache {
	pthread_mutex_t lock;        /* ticks of every entry, the tick counter, entries */
	pthread_mutex_t store_lock;  /* one store, open or eviction at a time (with the flock) */
	int dirfd;
	int lockfd;                  /* flock'ed by whoever stores, makes or removes entries */
	uint64_t max;
	uint32_t block_size;
	uint64_t tick;               /* the last use given out (next_tick) */
	struct dc_entry *entries;    /* open in this process */
	bool leaving;                /* dc_leaving: nothing more is stored */
};

struct dc_entry {
	struct diskcache *dc;
	struct dc_entry *next;
	char name[33];
	int mapfd;                   /* flock'ed for the entry's life */
	int datafd;
	uint64_t size, nblocks;
	/* per block: last use, 0 when not on disk; in chunks of TICK_CHUNK blocks made only
	 * when one of theirs is stored, so that what this takes follows what is cached, not
	 * the size the server claims (under dc->lock) */
	uint64_t **ticks;
	uint64_t n_chunks;
};

#define TICK_CHUNK 4096u     /* blocks per chunk of an entry's ticks: 32 KiB */

/* Block index's last use (0: not on disk). Called with dc->lock held (or before the
 * entry is shared). */
static uint64_t tick_of(const struct dc_entry *e, uint64_t index)
{
	const uint64_t *c = e->ticks[index / TICK_CHUNK];
	return c ? c[index % TICK_CHUNK] : 0;
}

/* Sets block index's last use, making its chunk if need be: false when out of memory
 * (then the block is just not recorded as held). Called as tick_of. */
static bool set_tick(struct dc_entry *e, uint64_t index, uint64_t tick)
{
	uint64_t **c = &e->ticks[index / TICK_CHUNK];
	if (!*c && tick)
		*c = calloc(TICK_CHUNK, sizeof **c);
	if (!*c)
		return !tick;
	(*c)[index % TICK_CHUNK] = tick;
	return true;
}

/* Forgets every block's last use (the chunks go). */
static void clear_ticks(struct dc_entry *e)
{
	for (uint64_t i = 0; i < e->n_chunks; i++) {
		free(e->ticks[i]);
		e->ticks[i] = NULL;
	}
}

/* A new last use: the time in microseconds, so that mounts can compare theirs, and
 * larger than any this process gave out before. Called with dc->lock held. */
static uint64_t next_tick(struct diskcache *dc)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
	dc->tick = now > dc->tick ? now : dc->tick + 1;
	return dc->tick;
}

/* XXH3 (libxxhash): every bit of the input reaches every bit of the result, so that
 * errors of a few bits do not cancel out as they did in FNV-1a over 64-bit words (bit 7
 * of bytes 7 and 15 flipped together went unseen); its length is hashed too. */
uint64_t dc_checksum(const uint8_t *p, size_t n)
{
	return XXH3_64bits(p, n);
}

/* The check of record r as block index's: never 0, so a zeroed record fails it. */
static uint64_t record_check(const struct dc_record *r, uint64_t index)
{
	uint64_t v[4] = { index, r->sum, r->tick, r->len };
	uint64_t h = XXH3_64bits(v, sizeof v);
	return h ? h : 1;
}

/* pread, or with write pwrite, of exactly n bytes at off: 0, or -1 (a short file counts
 * as an error). */
static int io_full(int fd, uint8_t *p, size_t n, uint64_t off, bool write)
{
	while (n) {
		ssize_t k = write ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	return io_full(fd, buf, n, off, false);
}

/* (pwrite only reads buf) */
static int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	return io_full(fd, (uint8_t *)(uintptr_t)buf, n, off, true);
}

/* Where block index's record is in the map. */
static uint64_t record_offset(uint64_t index)
{
	return MAP_HEADER + index * sizeof(struct dc_record);
}

/* The length of block index of a file of size bytes. */
static size_t block_len(const struct dc_entry *e, uint64_t index)
{
	uint64_t first = index * e->dc->block_size;
	uint64_t left = e->size - first;
	return left < e->dc->block_size ? (size_t)left : e->dc->block_size;
}

/* Bytes that the files under directory fd take on disk (one level of subdirectories,
 * as the cache has), closing fd. */
static uint64_t usage_of(int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	uint64_t total = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		total += (uint64_t)st.st_blocks * 512;
		if (S_ISDIR(st.st_mode) && depth > 0) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				total += usage_of(sub, depth - 1);
		}
	}
	closedir(d);
	return total;
}

uint64_t dc_usage(struct diskcache *dc)
{
	int fd = openat(dc->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? 0 : usage_of(fd, 1);
}

/* Whether what fd is open on may be trusted as part of the cache: owned by the user
 * running ggufs, writable by nobody else, a directory (dir) or else a regular file with
 * one name (another user could otherwise have made or changed its bytes, or linked it
 * in from elsewhere). */
static bool trusted_fd(int fd, bool dir)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_uid == geteuid() && !(st.st_mode & 022) &&
	       (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && st.st_nlink == 1);
}

/* Opens file (map or data) of the entry directory name with flags, never through a
 * symlink (neither the entry nor the file), and only when both are trusted_fd: -1
 * otherwise. */
static int open_in_entry(int parent, const char *name, const char *file, int flags)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int f = trusted_fd(fd, true) ? openat(fd, file, flags | O_NOFOLLOW | O_CLOEXEC) : -1;
	close(fd);
	if (f >= 0 && !trusted_fd(f, false)) {
		close(f);
		f = -1;
	}
	return f;
}

/* Removes the entry directory name (its files, then itself); anything else there by
 * that name (a symlink, a file) is unlinked itself, never what it leads to. 0, or -1. */
static int remove_entry(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
		return unlinkat(parent, name, 0);
	if (fd >= 0) {
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -1;
		}
		for (struct dirent *de; (de = readdir(d));)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	return unlinkat(parent, name, AT_REMOVEDIR);
}

/* Whether name is an entry directory's (32 hex digits). */
static bool is_entry_name(const char *name)
{
	return strlen(name) == 32 && strspn(name, "0123456789abcdef") == 32;
}

/* The cache directory open for a listing, on a descriptor of its own (closedir closes
 * the one fdopendir was given, and dc->dirfd stays open for the cache's life), or NULL. */
static DIR *list_cache(const struct diskcache *dc)
{
	int fd = openat(dc->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* Removes what a crash left of entries being made. Called with the flock held. */
static void remove_leftovers(struct diskcache *dc)
{
	DIR *d = list_cache(dc);
	if (!d)
		return;
	for (struct dirent *de; (de = readdir(d));)
		if (!strncmp(de->d_name, NEW_PREFIX, strlen(NEW_PREFIX)))
			remove_entry(dc->dirfd, de->d_name);
	closedir(d);
}

struct diskcache *dc_open(const char *dir, uint64_t max, uint32_t block_size, char *err,
                          size_t errlen)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
		return NULL;
	}
	/* a directory that another user made, or can write to, or that leads elsewhere
	 * could hold blocks that are not the server's: refused, never used */
	struct stat st;
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "cache_dir %s: is a symlink; give the directory itself", dir);
		return NULL;
	}
	if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid != geteuid()) {
		snprintf(err, errlen, "cache_dir %s: owned by uid %u, not by the user mounting "
		         "(uid %u)", dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return NULL;
	}
	if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 022)) {
		snprintf(err, errlen, "cache_dir %s: writable by group or others (mode %04o); "
		         "chmod go-w it", dir, (unsigned)(st.st_mode & 07777));
		return NULL;
	}
	struct diskcache *dc = calloc(1, sizeof *dc);
	if (!dc) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	dc->block_size = block_size;
	dc->lockfd = -1;
	dc->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dc->dirfd >= 0)
		dc->lockfd = openat(dc->dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	/* checked again on what was opened: the name may have been swapped meanwhile */
	bool trusted = dc->dirfd >= 0 && trusted_fd(dc->dirfd, true);
	if (dc->dirfd < 0 || dc->lockfd < 0 || access(dir, W_OK) != 0 || !trusted) {
		snprintf(err, errlen, "cache_dir %s: %s", dir,
		         dc->dirfd >= 0 && !trusted ? "changed while being opened" : strerror(errno));
		if (dc->dirfd >= 0)
			close(dc->dirfd);
		if (dc->lockfd >= 0)
			close(dc->lockfd);
		free(dc);
		return NULL;
	}
	pthread_mutex_init(&dc->lock, NULL);
	pthread_mutex_init(&dc->store_lock, NULL);
	if (flock_retry(dc->lockfd, LOCK_EX) == 0) {
		remove_leftovers(dc);
		flock_retry(dc->lockfd, LOCK_UN);
	}
	dc->max = max;
	if (!max) {
		struct statvfs vfs;
		uint64_t free_bytes = fstatvfs(dc->dirfd, &vfs) == 0 ?
			(uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
		uint64_t room = (free_bytes + dc_usage(dc)) / DC_DEFAULT_FREE_DIVISOR;
		dc->max = room < DC_DEFAULT_MAX ? room : DC_DEFAULT_MAX;
	}
	/* a bound smaller than what the directory holds (a smaller cache_max than the last
	 * mount's) holds from the mount on, not only from the first store */
	if (flock_retry(dc->lockfd, LOCK_EX) == 0) {
		while (dc_usage(dc) > dc->max && (evict_entry(dc) || evict_block(dc, NULL, UINT64_MAX)))
			;
		flock_retry(dc->lockfd, LOCK_UN);
	}
	return dc;
}

void dc_leaving(struct diskcache *dc)
{
	if (!dc)
		return;
	pthread_mutex_lock(&dc->store_lock);   /* no store under way */
	dc->leaving = true;
	pthread_mutex_lock(&dc->lock);
	for (struct dc_entry *e = dc->entries; e; e = e->next)
		flock_leave(e->mapfd);
	pthread_mutex_unlock(&dc->lock);
	pthread_mutex_unlock(&dc->store_lock);
}

void dc_close(struct diskcache *dc)
{
	if (!dc)
		return;
	close(dc->lockfd);
	close(dc->dirfd);
	pthread_mutex_destroy(&dc->lock);
	pthread_mutex_destroy(&dc->store_lock);
	free(dc);
}

uint64_t dc_max(const struct diskcache *dc)
{
	return dc->max;
}

const char *dc_entry_name(const struct dc_entry *e)
{
	return e->name;
}

/* The map header of an entry for key (a file of size bytes) into h[MAP_HEADER]. */
static void make_header(uint8_t h[MAP_HEADER], const struct diskcache *dc, const char *key,
                        uint64_t size, uint64_t nblocks)
{
	uint32_t version = MAP_VERSION, bs = dc->block_size, klen = (uint32_t)strlen(key);
	memset(h, 0, MAP_HEADER);
	memcpy(h, MAP_MAGIC, 8);
	memcpy(h + 8, &version, 4);
	memcpy(h + 12, &bs, 4);
	memcpy(h + 16, &size, 8);
	memcpy(h + 24, &nblocks, 8);
	memcpy(h + 32, &klen, 4);
	memcpy(h + 36, key, klen);
}

/* Makes the entry directory name for key, whole or not at all: built under a temporary
 * name and renamed. 0, or -1. Called with the flock held. */
static int create_entry(struct diskcache *dc, const char *name, const char *key, uint64_t size,
                        uint64_t nblocks)
{
	char tmp[64];
	snprintf(tmp, sizeof tmp, NEW_PREFIX "%s", name);
	remove_entry(dc->dirfd, tmp);
	if (mkdirat(dc->dirfd, tmp, 0700) != 0)
		return -1;
	int fd = openat(dc->dirfd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int mapfd = fd < 0 ? -1 : openat(fd, "map", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int datafd = fd < 0 ? -1 : openat(fd, "data", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	uint8_t *h = malloc(MAP_HEADER);
	int r = -1;
	if (mapfd >= 0 && datafd >= 0 && h) {
		make_header(h, dc, key, size, nblocks);
		/* no file is sized from the claimed size: each grows (sparse) as blocks and
		 * their records are written where they belong */
		if (pwrite_full(mapfd, h, MAP_HEADER, 0) == 0 && fsync(mapfd) == 0 && fsync(datafd) == 0 &&
		    fsync(fd) == 0 && renameat(dc->dirfd, tmp, dc->dirfd, name) == 0) {
			fsync(dc->dirfd);
			r = 0;
		}
	}
	free(h);
	if (mapfd >= 0)
		close(mapfd);
	if (datafd >= 0)
		close(datafd);
	if (fd >= 0)
		close(fd);
	if (r)
		remove_entry(dc->dirfd, tmp);
	return r;
}

/* Opens the existing entry name as e's, checking that its header is key's and its files
 * have the sizes it says, and loads which blocks it holds. 0; -1 when it is not there
 * or not usable; -2 when another mount holds it. Called with the flock held. */
static int open_entry(struct dc_entry *e, const char *key)
{
	struct diskcache *dc = e->dc;
	/* an entry or file that is not trusted_fd is not this user's: made afresh */
	e->mapfd = open_in_entry(dc->dirfd, e->name, "map", O_RDWR);
	e->datafd = open_in_entry(dc->dirfd, e->name, "data", O_RDWR);
	if (e->mapfd < 0 || e->datafd < 0)
		return -1;
	if (flock_retry(e->mapfd, LOCK_EX | LOCK_NB) != 0)
		return errno == EWOULDBLOCK ? -2 : -1;
	enum { CHUNK = 2048 };   /* records read at a time: a large model's map is megabytes */
	uint8_t *want = malloc(MAP_HEADER), *have = malloc(MAP_HEADER);
	struct dc_record *recs = malloc(CHUNK * sizeof *recs);
	struct stat mst, dst;
	int r = -1;
	if (!want || !have || !recs)
		goto out;
	make_header(want, dc, key, e->size, e->nblocks);
	if (pread_full(e->mapfd, have, MAP_HEADER, 0) != 0 || memcmp(want, have, MAP_HEADER) != 0 ||
	    fstat(e->mapfd, &mst) != 0 || fstat(e->datafd, &dst) != 0 ||
	    (uint64_t)dst.st_size > e->size || (uint64_t)mst.st_size > record_offset(e->nblocks))
		goto out;
	uint64_t newest = 0;
	/* only the records written: the holes of a sparse map are skipped, not read */
	uint64_t n_recs = ((uint64_t)mst.st_size - MAP_HEADER) / sizeof *recs;
	for (uint64_t at = 0; at < n_recs; at += CHUNK) {
		off_t data = lseek(e->mapfd, (off_t)record_offset(at), SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break;   /* nothing written past at */
		if (data >= 0)   /* (a file system without SEEK_DATA: every record is read) */
			at = ((uint64_t)data - MAP_HEADER) / sizeof *recs;
		if (at >= n_recs)
			break;
		size_t n = n_recs - at < CHUNK ? (size_t)(n_recs - at) : CHUNK;
		if (pread_full(e->mapfd, recs, n * sizeof *recs, record_offset(at)) != 0)
			goto out;
		for (size_t j = 0; j < n; j++) {
			const struct dc_record *rec = &recs[j];
			uint64_t i = at + j;
			bool ok = rec->len == block_len(e, i) && rec->len && rec->tick &&
			          rec->check == record_check(rec, i);
			if (ok && !set_tick(e, i, rec->tick))
				goto out;
			if (ok && rec->tick > newest)
				newest = rec->tick;
		}
	}
	pthread_mutex_lock(&dc->lock);
	if (dc->tick < newest)
		dc->tick = newest;
	pthread_mutex_unlock(&dc->lock);
	r = 0;
out:
	free(want);
	free(have);
	free(recs);
	return r;
}

/* Closes e's files (not yet in the list). */
static void close_files(struct dc_entry *e)
{
	if (e->mapfd >= 0)
		close(e->mapfd);
	if (e->datafd >= 0)
		close(e->datafd);
	e->mapfd = e->datafd = -1;
}

struct dc_entry *dc_entry_open(struct diskcache *dc, const char *url, uint64_t size,
                               const char *version, bool *busy)
{
	*busy = false;
	if (!version[0] || size == 0)
		return NULL;
	size_t klen = strlen(url) + strlen(version) + 32;
	char *key = malloc(klen);
	struct dc_entry *e = calloc(1, sizeof *e);
	if (!key || !e)
		goto fail;
	snprintf(key, klen, "%s\n%" PRIu64 "\n%s", url, size, version);
	if (strlen(key) > DC_KEY_MAX)
		goto fail;
	e->dc = dc;
	e->mapfd = e->datafd = -1;
	e->size = size;
	e->nblocks = (size - 1) / dc->block_size + 1;
	e->n_chunks = (e->nblocks - 1) / TICK_CHUNK + 1;
	e->ticks = calloc(e->n_chunks, sizeof *e->ticks);
	if (!e->ticks)
		goto fail;
	snprintf(e->name, sizeof e->name, "%016" PRIx64 "%016" PRIx64,
	         hash_fnv1a(key, strlen(key), HASH_FNV1A_BASIS),
	         hash_fnv1a(key, strlen(key), 0x84222325cbf29ce4ull));

	pthread_mutex_lock(&dc->store_lock);
	int r = -1;
	/* an entry held by a mount that is ending (dc_leaving) is waited for, a moment */
	const double give_up = clock_now_s() + DC_LEAVING_WAIT_S;
	while (flock_retry(dc->lockfd, LOCK_EX) == 0) {
		r = open_entry(e, key);
		/* held by a mount that is ending (dc_leaving made its lock shared) */
		if (r == -2 && flock_holder_leaving(e->mapfd) && clock_now_s() < give_up) {
			flock_retry(dc->lockfd, LOCK_UN);   /* (the holder may want it to end) */
			close_files(e);
			struct timespec pause = { 0, DC_LEAVING_POLL_MS * 1000000L };
			nanosleep(&pause, NULL);
			continue;
		}
		if (r == -1) {   /* missing, or not this version's, or damaged: made afresh */
			close_files(e);
			remove_entry(dc->dirfd, e->name);
			clear_ticks(e);
			/* a new entry takes a directory and the map's header: within the bound too */
			struct stat st;
			uint64_t fsblock = fstat(dc->dirfd, &st) == 0 && st.st_blksize > 0 ?
				(uint64_t)st.st_blksize : 4096;
			uint64_t need = 2 * (MAP_HEADER > fsblock ? MAP_HEADER : fsblock);
			if (make_room(dc, e, UINT64_MAX, need) &&
			    create_entry(dc, e->name, key, size, e->nblocks) == 0)
				r = open_entry(e, key);
		}
		flock_retry(dc->lockfd, LOCK_UN);
		break;
	}
	if (r == 0) {
		pthread_mutex_lock(&dc->lock);
		e->next = dc->entries;
		dc->entries = e;
		pthread_mutex_unlock(&dc->lock);
	}
	pthread_mutex_unlock(&dc->store_lock);
	if (r == 0) {
		free(key);
		return e;
	}
	*busy = r == -2;
	close_files(e);
fail:
	free(key);
	if (e && e->ticks) {
		clear_ticks(e);
		free(e->ticks);
	}
	free(e);
	return NULL;
}

void dc_entry_close(struct dc_entry *e)
{
	if (!e)
		return;
	struct diskcache *dc = e->dc;
	pthread_mutex_lock(&dc->lock);
	for (struct dc_entry **p = &dc->entries; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&dc->lock);
	close_files(e);   /* ends the flock */
	clear_ticks(e);
	free(e->ticks);
	free(e);
}

/* Drops block index of e from the map (on disk and here) if its last use is still tick.
 * Called with dc->lock held. */
static void forget_locked(struct dc_entry *e, uint64_t index, uint64_t tick)
{
	if (!tick || tick_of(e, index) != tick)
		return;
	static const struct dc_record zero;
	set_tick(e, index, 0);
	pwrite_full(e->mapfd, &zero, sizeof zero, record_offset(index));
}

bool dc_load(struct dc_entry *e, uint64_t index, uint8_t *buf, size_t len)
{
	struct diskcache *dc = e->dc;
	if (index >= e->nblocks || len != block_len(e, index))
		return false;
	pthread_mutex_lock(&dc->lock);
	uint64_t tick = tick_of(e, index);
	pthread_mutex_unlock(&dc->lock);
	if (!tick)
		return false;
	struct dc_record rec = { 0 };   /* a read that failed leaves no record that checks */
	bool ok = pread_full(e->mapfd, &rec, sizeof rec, record_offset(index)) == 0 &&
	          rec.check == record_check(&rec, index) && rec.len == len &&
	          pread_full(e->datafd, buf, len, index * dc->block_size) == 0 &&
	          dc_checksum(buf, len) == rec.sum;
	if (!ok && rec.check == record_check(&rec, index) && rec.len == len && rec.sum)
		evlog(EVLOG_WARNING, "dc damaged", "the disk cache held a damaged block (its bytes "
		      "do not match their checksum): it is dropped and fetched again");
	pthread_mutex_lock(&dc->lock);
	if (!ok) {
		forget_locked(e, index, tick);
	} else if (tick_of(e, index) == tick) {
		/* the use is recorded for the next mount's eviction order too */
		rec.tick = next_tick(dc);
		rec.check = record_check(&rec, index);
		if (pwrite_full(e->mapfd, &rec, sizeof rec, record_offset(index)) == 0)
			set_tick(e, index, rec.tick);   /* a chunk that is there: cannot fail */
	}
	pthread_mutex_unlock(&dc->lock);
	return ok;
}

bool dc_holds(struct dc_entry *e, uint64_t index)
{
	if (index >= e->nblocks)
		return false;
	pthread_mutex_lock(&e->dc->lock);
	bool yes = tick_of(e, index) != 0;
	pthread_mutex_unlock(&e->dc->lock);
	return yes;
}

/* Removes the least recently used entry directory that no mount holds (by its map's
 * modification time, which every store and load moves on). True when one went.
 * Called with the flock held. */
static bool evict_entry(struct diskcache *dc)
{
	DIR *d = list_cache(dc);
	if (!d)
		return false;
	char oldest[33] = "";
	struct timespec oldest_t = { 0, 0 };
	for (struct dirent *de; (de = readdir(d));) {
		if (!is_entry_name(de->d_name))
			continue;
		int mfd = open_in_entry(dc->dirfd, de->d_name, "map", O_RDONLY);
		struct stat st;
		bool unused = mfd >= 0 && flock_retry(mfd, LOCK_EX | LOCK_NB) == 0;
		if (mfd < 0 || (unused && fstat(mfd, &st) != 0)) {
			/* no map: what is left of an entry is removed first */
			memset(&st, 0, sizeof st);
			unused = true;
		}
		if (mfd >= 0)
			close(mfd);
		if (unused && (!oldest[0] || st.st_mtim.tv_sec < oldest_t.tv_sec ||
		               (st.st_mtim.tv_sec == oldest_t.tv_sec &&
		                st.st_mtim.tv_nsec < oldest_t.tv_nsec))) {
			memcpy(oldest, de->d_name, sizeof oldest);
			oldest_t = st.st_mtim;
		}
	}
	closedir(d);
	/* the flock keeps any other process from opening it in between */
	return oldest[0] && remove_entry(dc->dirfd, oldest) == 0;
}

/* A block of an entry that another mount uses. */
struct foreign_block {
	char name[33];       /* the entry's directory */
	uint64_t index, tick;
	uint32_t len;
};

/* Whether the entry directory name is one of this process's. */
static bool ours(struct diskcache *dc, const char *name)
{
	bool yes = false;
	pthread_mutex_lock(&dc->lock);
	for (struct dc_entry *e = dc->entries; e && !yes; e = e->next)
		yes = strcmp(e->name, name) == 0;
	pthread_mutex_unlock(&dc->lock);
	return yes;
}

/* The least recently used block, by its map on disk, of the entries that other mounts
 * use (what is left once the unused ones went) into *v; false if they hold none.
 * Called with the flock held, so that no record is being stored meanwhile. */
static bool oldest_foreign(struct diskcache *dc, struct foreign_block *v)
{
	enum { CHUNK = 2048 };
	DIR *d = list_cache(dc);
	struct dc_record *recs = malloc(CHUNK * sizeof *recs);
	bool found = false;
	v->tick = UINT64_MAX;
	for (struct dirent *de; d && recs && (de = readdir(d));) {
		if (!is_entry_name(de->d_name) || ours(dc, de->d_name))
			continue;
		int mfd = open_in_entry(dc->dirfd, de->d_name, "map", O_RDONLY);
		if (mfd < 0)
			continue;
		for (uint64_t at = 0;; at += CHUNK) {
			off_t data = lseek(mfd, (off_t)record_offset(at), SEEK_DATA);   /* holes skipped */
			if (data < 0 && errno == ENXIO)
				break;
			if (data >= 0)
				at = ((uint64_t)data - MAP_HEADER) / sizeof *recs;
			ssize_t got = pread(mfd, recs, CHUNK * sizeof *recs, (off_t)record_offset(at));
			if (got <= 0)
				break;
			for (size_t j = 0; j < (size_t)got / sizeof *recs; j++) {
				const struct dc_record *rec = &recs[j];
				if (rec->tick && rec->tick < v->tick && rec->len &&
				    rec->len <= dc->block_size && rec->check == record_check(rec, at + j)) {
					memcpy(v->name, de->d_name, sizeof v->name);
					v->index = at + j;
					v->tick = rec->tick;
					v->len = rec->len;
					found = true;
				}
			}
		}
		close(mfd);
	}
	free(recs);
	if (d)
		closedir(d);
	return found;
}

/* Punches out block v of another mount's entry, its record first. Its mount finds the
 * record gone (or, if it wrote the record back meanwhile, the bytes not matching it)
 * at its next load of the block, and fetches it again. True when it went. */
static bool evict_foreign(struct diskcache *dc, const struct foreign_block *v)
{
	int mfd = open_in_entry(dc->dirfd, v->name, "map", O_RDWR);
	int dfd = open_in_entry(dc->dirfd, v->name, "data", O_RDWR);
	static const struct dc_record zero;
	struct dc_record rec;
	bool ok = mfd >= 0 && dfd >= 0 &&
	          pread_full(mfd, &rec, sizeof rec, record_offset(v->index)) == 0 &&
	          rec.tick == v->tick &&
	          pwrite_full(mfd, &zero, sizeof zero, record_offset(v->index)) == 0 &&
	          fallocate(dfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                    (off_t)(v->index * dc->block_size), (off_t)v->len) == 0;
	if (mfd >= 0)
		close(mfd);
	if (dfd >= 0)
		close(dfd);
	return ok;
}

/* Punches out the least recently used block of the entries in use, this process's
 * (other than block index of keep) and other mounts'. True when one went. Called with
 * the flock held. */
static bool evict_block(struct diskcache *dc, const struct dc_entry *keep, uint64_t keep_index)
{
	struct foreign_block other;
	bool have_other = oldest_foreign(dc, &other);
	pthread_mutex_lock(&dc->lock);
	struct dc_entry *victim = NULL;
	uint64_t vi = 0, vt = UINT64_MAX;
	for (struct dc_entry *e = dc->entries; e; e = e->next) {
		for (uint64_t i = 0; i < e->nblocks; i++) {
			if (!e->ticks[i / TICK_CHUNK]) {   /* none held in this chunk */
				i += TICK_CHUNK - 1 - i % TICK_CHUNK;
				continue;
			}
			uint64_t t = tick_of(e, i);
			if (t && t < vt && !(e == keep && i == keep_index)) {
				victim = e;
				vi = i;
				vt = t;
			}
		}
	}
	if (!victim || (have_other && other.tick < vt)) {
		pthread_mutex_unlock(&dc->lock);
		return have_other && evict_foreign(dc, &other);
	}
	/* the record goes first: a crash between the two leaves a hole nobody trusts */
	forget_locked(victim, vi, vt);
	pthread_mutex_unlock(&dc->lock);
	return fallocate(victim->datafd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                 (off_t)(vi * dc->block_size), (off_t)block_len(victim, vi)) == 0;
}

/* Frees disk space until need more bytes fit under the bound: whole unused entries
 * first, then the least recently used blocks of those in use. Called with the flock
 * held. */
static bool make_room(struct diskcache *dc, const struct dc_entry *e, uint64_t index, uint64_t need)
{
	if (need > dc->max)
		return false;
	for (;;) {
		if (dc_usage(dc) + need <= dc->max)
			return true;
		if (!evict_entry(dc) && !evict_block(dc, e, index))
			return false;
		evlog(EVLOG_WARNING, "dc trimmed", "the disk cache is at its bound (cache_max): "
		      "the least recently used blocks make room for new ones");
	}
}

bool dc_store(struct dc_entry *e, uint64_t index, const uint8_t *buf, size_t len)
{
	struct diskcache *dc = e->dc;
	if (index >= e->nblocks || len != block_len(e, index))
		return false;
	struct stat st;
	if (fstat(e->datafd, &st) != 0)
		return false;
	/* what the write may allocate: the block in whole file system blocks, the page of
	 * the map its record lands in, and a block of the data file's extent tree */
	uint64_t fsblock = st.st_blksize > 0 ? (uint64_t)st.st_blksize : 4096;
	uint64_t need = (len + fsblock - 1) / fsblock * fsblock + 2 * fsblock;
	bool ok = false;
	pthread_mutex_lock(&dc->store_lock);
	pthread_mutex_lock(&dc->lock);
	bool present = tick_of(e, index) != 0;
	pthread_mutex_unlock(&dc->lock);
	if (present || dc->leaving) {   /* (leaving: a new mount may hold the entry now) */
		ok = true;
	} else if (flock_retry(dc->lockfd, LOCK_EX) == 0) {
		/* no fdatasync between the bytes and the record: whatever a crash keeps of
		 * either, a block is served only when its bytes match its record's checksum,
		 * and a sync per block would halve the speed of a cold read */
		if (make_room(dc, e, index, need) &&
		    pwrite_full(e->datafd, buf, len, index * dc->block_size) == 0) {
			struct dc_record rec = { .sum = dc_checksum(buf, len), .len = (uint32_t)len };
			pthread_mutex_lock(&dc->lock);
			rec.tick = next_tick(dc);
			rec.check = record_check(&rec, index);
			if (set_tick(e, index, rec.tick) &&
			    pwrite_full(e->mapfd, &rec, sizeof rec, record_offset(index)) == 0) {
				ok = true;
			} else {
				set_tick(e, index, 0);
			}
			pthread_mutex_unlock(&dc->lock);
			/* a file system that allocated more than foreseen: back under at once */
			while (dc_usage(dc) > dc->max && (evict_entry(dc) || evict_block(dc, e, index)))
				;
		}
		flock_retry(dc->lockfd, LOCK_UN);
	}
	pthread_mutex_unlock(&dc->store_lock);
	return ok;
}
