#include "diskcache.h"
#include "flock_handover.h"
#include "evlog.h"
#include "hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
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
#define TALLY_MAGIC "GGUFSDU1"
/* How every directory in the cache is opened: never through a symlink, and never
 * waiting (O_DIRECTORY fails on a FIFO or device before opening it; O_NONBLOCK all the
 * same, as on every open here) */
#define OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

struct dc_dir;
struct dc_held;
static bool make_room(struct diskcache *dc, const struct dc_held *keep, uint64_t keep_index,
                      uint64_t need);
static bool evict_entries(struct diskcache *dc, uint64_t need);
static bool evict_block(struct dc_dir *d, const struct dc_held *keep, uint64_t keep_index);
static void write_failed(const struct dc_dir *d, int err);
static int open_lock(int fd, const char *path, char *err, size_t errlen);

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

/* A cache directory as this process has it open: one for every dc_open of it (by device
 * and inode), so that its entries are held once per process, whoever opens them. */
/* The running total of the directory's usage, at the start of its lock file, read and
 * written under the lock's flock by every process that changes the directory. */
struct dc_tally {
	char magic[8];               /* TALLY_MAGIC */
	uint64_t bytes;              /* what the directory's files take (st_blocks * 512) */
	uint64_t gen;                /* one more at every change, by any process */
	uint64_t busy;               /* 1 while a change is under way: so if its process died */
	uint64_t check;              /* XXH3 of the fields above, never 0 */
};

struct dc_dir {
	struct dc_dir *next;         /* in dc_dirs */
	dev_t dev;
	ino_t ino;
	unsigned handles;            /* dc_open handles on it (under dc_dirs_lock) */
	pthread_mutex_t lock;        /* ticks of every held entry, the tick counter, held,
	                              * and their refs */
	pthread_mutex_t store_lock;  /* one store, open, close or eviction at a time (with the
	                              * flock): no held entry's files close under one */
	char *path;                  /* as the first dc_open named it: for messages */
	int dirfd;
	int lockfd;                  /* flock'ed by whoever stores, makes or removes entries,
	                              * or changes a record (by any process) */
	uint64_t tick;               /* the last use given out (next_tick) */
	struct dc_held *held;        /* entries open in this process */
	/* while this process changes the directory (change_begin to change_end, so under
	 * store_lock and the flock): */
	uint64_t usage;              /* the running total, as the tally had it, kept up */
	uint64_t gen;                /* the tally's generation as this process last wrote it */
	uint64_t epoch;              /* moves on when held entries' seen may be stale */
	bool walk_due;               /* the next change counts the directory afresh first */
};

/* One dc_open: its bound and block size on the shared directory. */
struct diskcache {
	struct dc_dir *dir;
	uint64_t max;
	uint32_t block_size;
	bool leaving;                /* dc_leaving: nothing more is stored (under store_lock) */
};

/* An entry this process holds (a shared flock on its map, as every process that uses it
 * holds), shared by every dc_entry_open of it in the process. */
struct dc_held {
	struct dc_dir *dir;
	struct dc_held *next;        /* in dir->held */
	char name[33];
	char *key;                   /* as its map's header names it */
	uint32_t block_size;
	unsigned refs;               /* its dc_entry's (under dir->lock) */
	int mapfd;                   /* flock'ed (shared) while held */
	int datafd;
	uint64_t size, nblocks;
	/* per block: last use, 0 when not on disk as far as this process knows (another
	 * may have stored it since, or evicted it: the map on disk says); in chunks of
	 * TICK_CHUNK blocks made only when one of theirs is stored, so that what this takes
	 * follows what is cached, not the size the server claims (under dir->lock) */
	uint64_t **ticks;
	uint64_t n_chunks;
	/* what its map and data took when last accounted (account_held), valid while
	 * seen_epoch is the directory's epoch (under store_lock) */
	uint64_t seen, seen_epoch;
};

/* One dc_entry_open: the handle it came through and the entry it holds. */
struct dc_entry {
	struct diskcache *dc;
	struct dc_held *held;
};

static pthread_mutex_t dc_dirs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dc_dir *dc_dirs;   /* the directories open in this process */

#define TICK_CHUNK 4096u     /* blocks per chunk of an entry's ticks: 32 KiB */

/* Block index's last use (0: not on disk). Called with dir->lock held (or before the
 * entry is shared). */
static uint64_t tick_of(const struct dc_held *e, uint64_t index)
{
	const uint64_t *c = e->ticks[index / TICK_CHUNK];
	return c ? c[index % TICK_CHUNK] : 0;
}

/* Sets block index's last use, making its chunk if need be: false when out of memory
 * (then the block is just not recorded as held). Called as tick_of. */
static bool set_tick(struct dc_held *e, uint64_t index, uint64_t tick)
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
static void clear_ticks(struct dc_held *e)
{
	for (uint64_t i = 0; i < e->n_chunks; i++) {
		free(e->ticks[i]);
		e->ticks[i] = NULL;
	}
}

/* A new last use: the time in microseconds, so that mounts can compare theirs, and
 * larger than any this process gave out before. Called with d->lock held. */
static uint64_t next_tick(struct dc_dir *d)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
	d->tick = now > d->tick ? now : d->tick + 1;
	return d->tick;
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
		if (k == 0)
			errno = EIO;   /* (no progress: a read past the end) */
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
static size_t block_len(const struct dc_held *e, uint64_t index)
{
	uint64_t first = index * e->block_size;
	uint64_t left = e->size - first;
	return left < e->block_size ? (size_t)left : e->block_size;
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
			int sub = openat(dirfd(d), de->d_name, OPEN_DIR);
			if (sub >= 0)
				total += usage_of(sub, depth - 1);
		}
	}
	closedir(d);
	return total;
}

/* Bytes that the directory's files take on disk now, by a walk of it. */
static uint64_t walk(const struct dc_dir *d)
{
	int fd = openat(d->dirfd, ".", OPEN_DIR);
	return fd < 0 ? 0 : usage_of(fd, 1);
}

uint64_t dc_usage(struct diskcache *dc)
{
	return walk(dc->dir);
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

/* Opens name in directory dirfd with flags (O_CREAT: mode) when it is a regular file, or
 * is missing and O_CREAT makes it: -1 otherwise (EINVAL: something else is there). A
 * FIFO, socket or device is looked at, never opened (an open for reading waits for a
 * writer, or has a device's effects); one swapped in meanwhile is opened without
 * waiting (O_NONBLOCK) and refused by its descriptor's type. Never through a symlink. */
static int open_regular(int dirfd, const char *name, int flags, mode_t mode)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISREG(st.st_mode)) {
			errno = EINVAL;
			return -1;
		}
	} else if (errno != ENOENT || !(flags & O_CREAT)) {
		return -1;
	}
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* Opens file (map or data) of the entry directory name with flags, never through a
 * symlink (neither the entry nor the file), never anything but a regular file
 * (open_regular), and only when both are trusted_fd: -1 otherwise. */
static int open_in_entry(int parent, const char *name, const char *file, int flags)
{
	int fd = openat(parent, name, OPEN_DIR);
	if (fd < 0)
		return -1;
	int f = trusted_fd(fd, true) ? open_regular(fd, file, flags, 0) : -1;
	close(fd);
	if (f >= 0 && !trusted_fd(f, false)) {
		close(f);
		f = -1;
	}
	return f;
}

/* Removes the entry directory name (its files, then itself); anything else there by
 * that name (a symlink, a file) is unlinked itself, never what it leads to. 0, or -1. */
static int unlink_entry(int parent, const char *name)
{
	int fd = openat(parent, name, OPEN_DIR);
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
 * the one fdopendir was given, and d->dirfd stays open for the cache's life), or NULL. */
static DIR *list_cache(const struct dc_dir *d)
{
	int fd = openat(d->dirfd, ".", OPEN_DIR);
	DIR *list = fd < 0 ? NULL : fdopendir(fd);
	if (!list && fd >= 0)
		close(fd);
	return list;
}

/* The directory's lock file, the running total in it and its generation (dc_tally):
 *
 * Every process changes the directory only between change_begin and change_end, which
 * hold the flock. change_begin reads the total (a full walk when it is missing,
 * damaged, or marked busy: a process died in the middle of a change), marks it busy;
 * each change in between adds to it what st_blocks says changed, and change_end writes
 * it back, not busy, one generation on. A held entry's files are accounted against
 * what they took when last accounted here (account_held), so that the file system
 * allocating or freeing for them later (metadata at writeback, a preallocation let go
 * at close) is counted when it shows, as long as no other process changed the
 * directory in between (then they are taken as they are: the other process accounted
 * its own changes). A total that would go below zero is counted afresh. */

static uint64_t tally_check(const struct dc_tally *t)
{
	uint64_t h = XXH3_64bits(t, offsetof(struct dc_tally, check));
	return h ? h : 1;
}

/* Whether the tally in the lock file reads and checks out, into *t. */
static bool tally_read(const struct dc_dir *d, struct dc_tally *t)
{
	return pread_full(d->lockfd, t, sizeof *t, 0) == 0 && !memcmp(t->magic, TALLY_MAGIC, 8) &&
	       t->check == tally_check(t);
}

/* Writes d's total and generation to the lock file, busy or not. */
static void tally_write(const struct dc_dir *d, bool busy)
{
	struct dc_tally t = { .bytes = d->usage, .gen = d->gen, .busy = busy };
	memcpy(t.magic, TALLY_MAGIC, 8);
	t.check = tally_check(&t);
	pwrite_full(d->lockfd, &t, sizeof t, 0);
}

/* Counts the directory afresh by a walk: the total, and every held entry's files from
 * what they take now. Called in a change. */
static void recount(struct dc_dir *d)
{
	d->usage = walk(d);
	d->walk_due = false;
	d->epoch++;
}

/* Takes the flock for a change of the directory and the running total with it: false
 * when the flock cannot be had. Called with store_lock held. */
static bool change_begin(struct dc_dir *d)
{
	if (flock_retry(d->lockfd, LOCK_EX) != 0)
		return false;
	struct dc_tally t;
	bool valid = tally_read(d, &t);
	if (valid && t.gen != d->gen)
		d->epoch++;   /* another process changed the directory since this one did */
	d->gen = (valid ? t.gen : d->gen) + 1;
	d->usage = valid ? t.bytes : 0;
	tally_write(d, true);   /* (first: the lock file's own block is there for a walk) */
	if (!valid || t.busy || d->walk_due)
		recount(d);
	return true;
}

/* Writes the total back and lets go of the flock. */
static void change_end(struct dc_dir *d)
{
	tally_write(d, false);
	flock_retry(d->lockfd, LOCK_UN);
}

uint64_t dc_usage_kept(struct diskcache *dc)
{
	struct dc_dir *d = dc->dir;
	uint64_t bytes = UINT64_MAX;
	pthread_mutex_lock(&d->store_lock);
	if (flock_retry(d->lockfd, LOCK_EX) == 0) {
		struct dc_tally t;
		if (tally_read(d, &t) && !t.busy)
			bytes = t.bytes;
		flock_retry(d->lockfd, LOCK_UN);
	}
	pthread_mutex_unlock(&d->store_lock);
	return bytes;
}

/* Adds to the total what went from before to after bytes on disk. Called in a change. */
static void usage_change(struct dc_dir *d, uint64_t before, uint64_t after)
{
	if (after >= before)
		d->usage += after - before;
	else if (d->usage >= before - after)
		d->usage -= before - after;
	else
		recount(d);   /* more went than the total held: it was wrong */
}

/* What the files mapfd and datafd take on disk into *bytes: false when fstat fails. */
static bool files_usage(int mapfd, int datafd, uint64_t *bytes)
{
	struct stat m, dst;
	if (fstat(mapfd, &m) != 0 || fstat(datafd, &dst) != 0)
		return false;
	*bytes = ((uint64_t)m.st_blocks + (uint64_t)dst.st_blocks) * 512;
	return true;
}

/* Brings the total in step with e's files: what they take now against what they took
 * when last accounted (while that holds), then notes what they take now. Called in a
 * change, before and after each change to them. */
static void account_held(struct dc_held *e)
{
	struct dc_dir *d = e->dir;
	uint64_t now;
	if (!files_usage(e->mapfd, e->datafd, &now)) {
		e->seen_epoch = 0;
		return;
	}
	if (e->seen_epoch == d->epoch)
		usage_change(d, e->seen, now);
	e->seen = now;
	e->seen_epoch = d->epoch;
}

/* What the directory's child name takes on disk, as walk counts it (itself, and what is
 * in it when it is a directory); 0 when it is not there. */
static uint64_t entry_usage(const struct dc_dir *d, const char *name)
{
	struct stat st;
	if (fstatat(d->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	uint64_t bytes = (uint64_t)st.st_blocks * 512;
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(d->dirfd, name, OPEN_DIR);
		if (fd >= 0)
			bytes += usage_of(fd, 0);
	}
	return bytes;
}

/* Removes the entry directory name (unlink_entry), taking what went off the total.
 * 0, or -1. Called in a change. */
static int remove_entry(struct dc_dir *d, const char *name)
{
	uint64_t before = entry_usage(d, name);
	int r = unlink_entry(d->dirfd, name);
	usage_change(d, before, entry_usage(d, name));
	return r;
}

/* Whether need more bytes fit under dc's bound, by the total. Called in a change. */
static bool fits(const struct diskcache *dc, uint64_t need)
{
	return dc->dir->usage <= dc->max && need <= dc->max - dc->dir->usage;
}

/* Removes what a crash left of entries being made. Called in a change. */
static void remove_leftovers(struct dc_dir *d)
{
	DIR *list = list_cache(d);
	if (!list)
		return;
	for (struct dirent *de; (de = readdir(list));)
		if (!strncmp(de->d_name, NEW_PREFIX, strlen(NEW_PREFIX)))
			remove_entry(d, de->d_name);
	closedir(list);
}

/* The directory of this process's that is (dev, ino), or NULL. Called with dc_dirs_lock
 * held. */
static struct dc_dir *find_dir(dev_t dev, ino_t ino)
{
	for (struct dc_dir *d = dc_dirs; d; d = d->next)
		if (d->dev == dev && d->ino == ino)
			return d;
	return NULL;
}

/* Sets the directory open on fd (checked, st its fstat) up as this process's, taking
 * fd: its lock file opened, what crashes left removed. NULL with one phrase in err (path
 * names it). Called with dc_dirs_lock held. */
static struct dc_dir *open_dir(int fd, const struct stat *st, const char *path, char *err,
                               size_t errlen)
{
	struct dc_dir *d = calloc(1, sizeof *d);
	if (!d) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return NULL;
	}
	d->dev = st->st_dev;
	d->ino = st->st_ino;
	d->handles = 1;
	d->dirfd = fd;
	d->path = strdup(path);
	d->lockfd = d->path ? open_lock(fd, path, err, errlen) : -1;
	if (!d->path)
		snprintf(err, errlen, "out of memory");
	if (d->lockfd < 0) {
		close(fd);
		free(d->path);
		free(d);
		return NULL;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->store_lock, NULL);
	d->epoch = 1;
	d->walk_due = true;   /* counted afresh when this process first opens it */
	pthread_mutex_lock(&d->store_lock);
	if (change_begin(d)) {
		remove_leftovers(d);
		change_end(d);
	}
	pthread_mutex_unlock(&d->store_lock);
	d->next = dc_dirs;
	dc_dirs = d;
	return d;
}

/* The cache directory dir opened (made mode 0700 when missing) when it may be used: the
 * user's own, a directory (not a symlink), writable by nobody else, into *st; -1 with
 * one phrase in err otherwise (a directory another user made or can write to, or that
 * leads elsewhere, could hold blocks that are not the server's: never used). */
static int open_checked_dir(const char *dir, struct stat *st, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "cache_dir %s: %s", dir, strerror(errno));
		return -1;
	}
	if (lstat(dir, st) == 0 && S_ISLNK(st->st_mode)) {
		snprintf(err, errlen, "cache_dir %s: is a symlink; give the directory itself", dir);
		return -1;
	}
	if (lstat(dir, st) == 0 && S_ISDIR(st->st_mode) && st->st_uid != geteuid()) {
		snprintf(err, errlen, "cache_dir %s: owned by uid %u, not by the user mounting "
		         "(uid %u)", dir, (unsigned)st->st_uid, (unsigned)geteuid());
		return -1;
	}
	if (lstat(dir, st) == 0 && S_ISDIR(st->st_mode) && (st->st_mode & 022)) {
		snprintf(err, errlen, "cache_dir %s: writable by group or others (mode %04o); "
		         "chmod go-w it", dir, (unsigned)(st->st_mode & 07777));
		return -1;
	}
	int fd = open(dir, OPEN_DIR);
	/* checked again on what was opened: the name may have been swapped meanwhile */
	bool trusted = fd >= 0 && trusted_fd(fd, true) && fstat(fd, st) == 0;
	if (fd < 0 || access(dir, W_OK) != 0 || !trusted) {
		snprintf(err, errlen, "cache_dir %s: %s", dir,
		         fd >= 0 && !trusted ? "changed while being opened" : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The lock file of the cache directory open on fd (path names it), opened (made when
 * missing): trusted as the directory is, a regular file of the user's alone, or -1
 * with one phrase in err and the cache is not used (never removed: another mount may
 * hold its flock). */
static int open_lock(int fd, const char *path, char *err, size_t errlen)
{
	int lockfd = open_regular(fd, "lock", O_RDWR | O_CREAT, 0600);
	if (lockfd >= 0 && trusted_fd(lockfd, false))
		return lockfd;
	if (lockfd >= 0 || errno == EINVAL)
		snprintf(err, errlen, "cache_dir %s: %s/lock is not a regular file of the user's "
		         "alone (mode 0600, one name): remove it", path, path);
	else
		snprintf(err, errlen, "cache_dir %s: lock: %s", path, strerror(errno));
	if (lockfd >= 0)
		close(lockfd);
	return -1;
}

bool dc_usable(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	int fd = open_checked_dir(dir, &st, err, errlen);
	int lockfd = fd >= 0 ? open_lock(fd, dir, err, errlen) : -1;
	if (fd >= 0)
		close(fd);
	if (lockfd >= 0)
		close(lockfd);
	return lockfd >= 0;
}

struct diskcache *dc_open(const char *dir, uint64_t max, uint32_t block_size, char *err,
                          size_t errlen)
{
	struct stat st;
	int fd = open_checked_dir(dir, &st, err, errlen);
	if (fd < 0)
		return NULL;
	struct diskcache *dc = calloc(1, sizeof *dc);
	if (!dc) {
		snprintf(err, errlen, "out of memory");
		close(fd);
		return NULL;
	}
	pthread_mutex_lock(&dc_dirs_lock);
	struct dc_dir *d = find_dir(st.st_dev, st.st_ino);
	if (d) {
		d->handles++;
		close(fd);
	} else {
		d = open_dir(fd, &st, dir, err, errlen);
	}
	pthread_mutex_unlock(&dc_dirs_lock);
	if (!d) {
		free(dc);
		return NULL;
	}
	dc->dir = d;
	dc->block_size = block_size;
	dc->max = max;
	pthread_mutex_lock(&d->store_lock);
	bool changing = change_begin(d);
	if (!max) {
		struct statvfs vfs;
		uint64_t free_bytes = fstatvfs(d->dirfd, &vfs) == 0 ?
			(uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
		uint64_t room = (free_bytes + (changing ? d->usage : walk(d))) / DC_DEFAULT_FREE_DIVISOR;
		dc->max = room < DC_DEFAULT_MAX ? room : DC_DEFAULT_MAX;
	}
	/* a bound smaller than what the directory holds (a smaller cache_max than the last
	 * mount's) holds from the mount on, not only from the first store */
	if (changing) {
		while (!fits(dc, 0) && (evict_entries(dc, 0) || evict_block(d, NULL, UINT64_MAX)))
			;
		change_end(d);
	}
	pthread_mutex_unlock(&d->store_lock);
	return dc;
}

void dc_leaving(struct diskcache *dc)
{
	if (!dc)
		return;
	struct dc_dir *d = dc->dir;
	pthread_mutex_lock(&d->store_lock);   /* after a store under way */
	dc->leaving = true;
	pthread_mutex_unlock(&d->store_lock);
}

void dc_close(struct diskcache *dc)
{
	if (!dc)
		return;
	struct dc_dir *d = dc->dir;
	pthread_mutex_lock(&dc_dirs_lock);
	bool last = --d->handles == 0;
	if (last) {
		for (struct dc_dir **p = &dc_dirs; *p; p = &(*p)->next) {
			if (*p == d) {
				*p = d->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&dc_dirs_lock);
	if (last) {
		close(d->lockfd);
		close(d->dirfd);
		free(d->path);
		pthread_mutex_destroy(&d->lock);
		pthread_mutex_destroy(&d->store_lock);
		free(d);
	}
	free(dc);
}

uint64_t dc_max(const struct diskcache *dc)
{
	return dc->max;
}

const char *dc_entry_name(const struct dc_entry *e)
{
	return e->held->name;
}

/* The map header of an entry for key (a file of size bytes in blocks of block_size)
 * into h[MAP_HEADER]. */
static void make_header(uint8_t h[MAP_HEADER], uint32_t block_size, const char *key,
                        uint64_t size, uint64_t nblocks)
{
	uint32_t version = MAP_VERSION, bs = block_size, klen = (uint32_t)strlen(key);
	memset(h, 0, MAP_HEADER);
	memcpy(h, MAP_MAGIC, 8);
	memcpy(h + 8, &version, 4);
	memcpy(h + 12, &bs, 4);
	memcpy(h + 16, &size, 8);
	memcpy(h + 24, &nblocks, 8);
	memcpy(h + 32, &klen, 4);
	memcpy(h + 36, key, klen);
}

/* Makes the directory of entry e (its name, key, size and block size), whole or not at
 * all: built under a temporary name and renamed. 0, or -1. Called in a change. */
static int create_entry(const struct dc_held *e)
{
	struct dc_dir *d = e->dir;
	char tmp[64];
	snprintf(tmp, sizeof tmp, NEW_PREFIX "%s", e->name);
	remove_entry(d, tmp);
	if (mkdirat(d->dirfd, tmp, 0700) != 0) {
		write_failed(d, errno);
		return -1;
	}
	int fd = openat(d->dirfd, tmp, OPEN_DIR);
	const int make = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
	int mapfd = fd < 0 ? -1 : openat(fd, "map", make, 0600);
	int datafd = fd < 0 ? -1 : openat(fd, "data", make, 0600);
	uint8_t *h = malloc(MAP_HEADER);
	int r = -1;
	if (mapfd >= 0 && datafd >= 0 && h) {
		make_header(h, e->block_size, e->key, e->size, e->nblocks);
		/* no file is sized from the claimed size: each grows (sparse) as blocks and
		 * their records are written where they belong */
		if (pwrite_full(mapfd, h, MAP_HEADER, 0) == 0 && fsync(mapfd) == 0 && fsync(datafd) == 0 &&
		    fsync(fd) == 0)
			r = 0;
		else
			write_failed(d, errno);
	} else if (h) {
		write_failed(d, errno);
	}
	usage_change(d, 0, entry_usage(d, tmp));   /* (whatever was made: removed below if r) */
	if (r == 0 && renameat(d->dirfd, tmp, d->dirfd, e->name) == 0)
		fsync(d->dirfd);
	else
		r = -1;
	free(h);
	if (mapfd >= 0)
		close(mapfd);
	if (datafd >= 0)
		close(datafd);
	if (fd >= 0)
		close(fd);
	if (r)
		remove_entry(d, tmp);
	return r;
}

/* Opens the existing entry e->name as e's, its map's flock taken shared (as every process
 * that uses it holds it), checking that its header is e->key's and its files have the
 * sizes it says, and loads which blocks it holds. 0; -1 when it is not there or not
 * usable; -2 when another process holds it exclusively (a ggufs older than shared
 * entries: eviction never holds it outside a change). Called in a change. */
static int open_entry(struct dc_held *e)
{
	struct dc_dir *d = e->dir;
	/* an entry or file that is not trusted_fd is not this user's: made afresh */
	e->mapfd = open_in_entry(d->dirfd, e->name, "map", O_RDWR);
	e->datafd = open_in_entry(d->dirfd, e->name, "data", O_RDWR);
	if (e->mapfd < 0 || e->datafd < 0)
		return -1;
	if (flock_retry(e->mapfd, LOCK_SH | LOCK_NB) != 0)
		return errno == EWOULDBLOCK ? -2 : -1;
	enum { CHUNK = 2048 };   /* records read at a time: a large model's map is megabytes */
	uint8_t *want = malloc(MAP_HEADER), *have = malloc(MAP_HEADER);
	struct dc_record *recs = malloc(CHUNK * sizeof *recs);
	struct stat mst, dst;
	int r = -1;
	if (!want || !have || !recs)
		goto out;
	make_header(want, e->block_size, e->key, e->size, e->nblocks);
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
	pthread_mutex_lock(&d->lock);
	if (d->tick < newest)
		d->tick = newest;
	pthread_mutex_unlock(&d->lock);
	r = 0;
out:
	free(want);
	free(have);
	free(recs);
	return r;
}

/* Closes e's files (not in the list, or taken out of it). */
static void close_files(struct dc_held *e)
{
	if (e->mapfd >= 0)
		close(e->mapfd);
	if (e->datafd >= 0)
		close(e->datafd);
	e->mapfd = e->datafd = -1;
}

/* Frees e (its files closed) with what it owns; NULL: nothing. */
static void free_held(struct dc_held *e)
{
	if (!e)
		return;
	if (e->ticks) {
		clear_ticks(e);
		free(e->ticks);
	}
	free(e->key);
	free(e);
}

/* The held entry named name, or NULL. Called with d->lock held. */
static struct dc_held *find_held(const struct dc_dir *d, const char *name)
{
	for (struct dc_held *e = d->held; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* The entry of key for a file of size bytes in blocks of block_size, not yet open: its
 * name (a hash of the key) made, nothing on disk looked at. NULL when out of memory or
 * the key is too long. */
static struct dc_held *new_held(struct dc_dir *d, const char *url, uint64_t size,
                                const char *version, uint32_t block_size)
{
	struct dc_held *e = calloc(1, sizeof *e);
	size_t klen = strlen(url) + strlen(version) + 32;
	if (!e || !(e->key = malloc(klen))) {
		free(e);
		return NULL;
	}
	snprintf(e->key, klen, "%s\n%" PRIu64 "\n%s", url, size, version);
	e->dir = d;
	e->block_size = block_size;
	e->mapfd = e->datafd = -1;
	e->size = size;
	e->nblocks = (size - 1) / block_size + 1;
	e->n_chunks = (e->nblocks - 1) / TICK_CHUNK + 1;
	e->ticks = calloc(e->n_chunks, sizeof *e->ticks);
	if (strlen(e->key) > DC_KEY_MAX || !e->ticks) {
		free_held(e);
		return NULL;
	}
	snprintf(e->name, sizeof e->name, "%016" PRIx64 "%016" PRIx64,
	         hash_fnv1a(e->key, strlen(e->key), HASH_FNV1A_BASIS),
	         hash_fnv1a(e->key, strlen(e->key), 0x84222325cbf29ce4ull));
	return e;
}

/* Whether another process uses entry e, whose map is open but not usable as e's (not
 * its key's, damaged): its flock cannot be had exclusively. Then it is left as it is:
 * removing it would take its files from under that process. */
static bool used_elsewhere(const struct dc_held *e)
{
	return e->mapfd >= 0 && flock_retry(e->mapfd, LOCK_EX | LOCK_NB) != 0;
}

/* Opens e on disk, as new_held made it, once: made afresh when missing, damaged or not
 * this key's (unless another process uses it as it is). 0; -1 when it cannot be had;
 * -3 when this process holds it already: then *found is that held entry (referenced).
 * Never waits for another process. Called with store_lock held. */
static int open_held(struct diskcache *dc, struct dc_held *e, struct dc_held **found)
{
	struct dc_dir *d = dc->dir;
	pthread_mutex_lock(&d->lock);
	struct dc_held *have = find_held(d, e->name);
	bool same = have && have->block_size == e->block_size && !strcmp(have->key, e->key);
	if (same)
		have->refs++;
	pthread_mutex_unlock(&d->lock);
	if (same) {
		*found = have;
		return -3;
	}
	if (have)
		return -1;   /* another key by the same name (a hash collision): not shared */
	if (!change_begin(d))
		return -1;
	int r = open_entry(e);
	if (r == -1 && !used_elsewhere(e)) {   /* missing, not this version's, or damaged */
		close_files(e);
		remove_entry(d, e->name);
		clear_ticks(e);
		/* a new entry takes a directory and the map's header: within the bound too */
		struct stat st;
		uint64_t fsblock = fstat(d->dirfd, &st) == 0 && st.st_blksize > 0 ?
			(uint64_t)st.st_blksize : 4096;
		uint64_t need = 2 * (MAP_HEADER > fsblock ? MAP_HEADER : fsblock);
		if (make_room(dc, NULL, UINT64_MAX, need) && create_entry(e) == 0)
			r = open_entry(e);
	}
	if (r == 0)
		account_held(e);   /* what its files take from now on */
	change_end(d);
	return r == 0 ? 0 : -1;
}

struct dc_entry *dc_entry_open(struct diskcache *dc, const char *url, uint64_t size,
                               const char *version)
{
	if (!version[0] || size == 0)
		return NULL;
	struct dc_dir *d = dc->dir;
	struct dc_held *e = new_held(d, url, size, version, dc->block_size);
	struct dc_entry *ref = calloc(1, sizeof *ref);
	if (!e || !ref) {
		free_held(e);
		free(ref);
		return NULL;
	}
	pthread_mutex_lock(&d->store_lock);
	struct dc_held *found = NULL;
	int r = open_held(dc, e, &found);
	if (r == 0) {
		e->refs = 1;
		found = e;
	}
	if (found) {
		pthread_mutex_lock(&d->lock);
		if (found == e) {
			e->next = d->held;
			d->held = e;
		}
		pthread_mutex_unlock(&d->lock);
		ref->dc = dc;
		ref->held = found;
	}
	pthread_mutex_unlock(&d->store_lock);
	if (found) {
		if (found != e)
			free_held(e);
		return ref;
	}
	close_files(e);
	free_held(e);
	free(ref);
	return NULL;
}

void dc_entry_close(struct dc_entry *ref)
{
	if (!ref)
		return;
	struct dc_held *e = ref->held;
	struct dc_dir *d = e->dir;
	pthread_mutex_lock(&d->store_lock);   /* no store or eviction uses its files */
	pthread_mutex_lock(&d->lock);
	bool last = --e->refs == 0;
	if (last) {
		for (struct dc_held **p = &d->held; *p; p = &(*p)->next) {
			if (*p == e) {
				*p = e->next;
				break;
			}
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (last) {
		/* a file system may let go of blocks at the close (a preallocation past the
		 * end): what the data file takes after it is counted, by its name */
		bool changing = change_begin(d);
		uint64_t before = 0;
		if (changing) {
			account_held(e);
			struct stat st;
			if (e->seen_epoch == d->epoch && fstat(e->datafd, &st) == 0)
				before = (uint64_t)st.st_blocks * 512;
		}
		close(e->datafd);
		e->datafd = -1;
		char data[sizeof e->name + 8];
		snprintf(data, sizeof data, "%s/data", e->name);
		struct stat st;
		if (before && fstatat(d->dirfd, data, &st, AT_SYMLINK_NOFOLLOW) == 0)
			usage_change(d, before, (uint64_t)st.st_blocks * 512);
		if (changing)
			change_end(d);
		/* the entry's flock ends after the directory's: a close that takes long (an
		 * ending mount's many entries) never holds up another process's changes */
		close_files(e);
	}
	pthread_mutex_unlock(&d->store_lock);
	if (last)
		free_held(e);
	free(ref);
}

/* Drops block index of e from the map (on disk and here) if its last use is still tick.
 * Called with d->lock held. */
static void forget_locked(struct dc_held *e, uint64_t index, uint64_t tick)
{
	if (!tick || tick_of(e, index) != tick)
		return;
	static const struct dc_record zero;
	set_tick(e, index, 0);
	pwrite_full(e->mapfd, &zero, sizeof zero, record_offset(index));
}

/* Block index's record in e's map on disk into *rec, when it checks out as the record
 * of a block of that length: false when it is not there (never stored, or evicted by
 * any process) or does not check out (torn, or written as another block's). */
static bool disk_record(const struct dc_held *e, uint64_t index, struct dc_record *rec)
{
	return pread_full(e->mapfd, rec, sizeof *rec, record_offset(index)) == 0 &&
	       rec->check == record_check(rec, index) && rec->tick &&
	       rec->len == block_len(e, index);
}

/* Takes the directory's flock for a short change of one record, without waiting: true
 * when had (then flock_end lets go of both). A record changes only under it, so that
 * what a process read of it stays so meanwhile: an eviction, a store, or another such
 * change never crosses it. */
static bool flock_now(struct dc_dir *d)
{
	if (pthread_mutex_trylock(&d->store_lock) != 0)
		return false;
	if (flock_retry(d->lockfd, LOCK_EX | LOCK_NB) == 0)
		return true;
	pthread_mutex_unlock(&d->store_lock);
	return false;
}

static void flock_end(struct dc_dir *d)
{
	flock_retry(d->lockfd, LOCK_UN);
	pthread_mutex_unlock(&d->store_lock);
}

/* Whether e's map on disk holds rec as block index's record still. */
static bool record_still(const struct dc_held *e, uint64_t index, const struct dc_record *rec)
{
	struct dc_record now;
	return pread_full(e->mapfd, &now, sizeof now, record_offset(index)) == 0 &&
	       !memcmp(&now, rec, sizeof now);
}

/* Block index of e, its record rec, had bytes that do not match it: forgotten here; on
 * disk, when the flock can be had at once and the record and bytes are still so (no
 * eviction went on meanwhile: then it is damaged), its record is zeroed and the damage
 * said. buf (len bytes) is scratch. */
static void drop_mismatch(struct dc_held *e, uint64_t index, const struct dc_record *rec,
                          uint8_t *buf, size_t len)
{
	struct dc_dir *d = e->dir;
	pthread_mutex_lock(&d->lock);
	set_tick(e, index, 0);
	pthread_mutex_unlock(&d->lock);
	if (!flock_now(d))
		return;
	if (record_still(e, index, rec) &&
	    (pread_full(e->datafd, buf, len, index * e->block_size) != 0 ||
	     dc_checksum(buf, len) != rec->sum)) {
		static const struct dc_record zero;
		pwrite_full(e->mapfd, &zero, sizeof zero, record_offset(index));
		evlog(EVLOG_WARNING, "dc damaged", "the disk cache held a damaged block (its bytes "
		      "do not match their checksum): it is dropped and fetched again");
	}
	flock_end(d);
}

/* Block index of e, its record rec, was loaded: its use now noted here, and on disk for
 * every process's eviction order when the flock can be had at once and the record is
 * still rec (one an eviction zeroed meanwhile is never written back). */
static void note_use(struct dc_held *e, uint64_t index, struct dc_record rec)
{
	struct dc_dir *d = e->dir;
	pthread_mutex_lock(&d->lock);
	const uint64_t tick = next_tick(d);
	set_tick(e, index, tick);   /* (out of memory: not known here; the map says) */
	pthread_mutex_unlock(&d->lock);
	if (!flock_now(d))
		return;
	if (record_still(e, index, &rec)) {
		rec.tick = tick;
		rec.check = record_check(&rec, index);
		pwrite_full(e->mapfd, &rec, sizeof rec, record_offset(index));
	}
	flock_end(d);
}

bool dc_load(struct dc_entry *ref, uint64_t index, uint8_t *buf, size_t len)
{
	struct dc_held *e = ref->held;
	struct dc_dir *d = e->dir;
	if (index >= e->nblocks || len != block_len(e, index))
		return false;
	/* the map on disk, whatever this process knows: another may have stored the block
	 * since, or evicted it */
	struct dc_record rec;
	if (!disk_record(e, index, &rec)) {
		pthread_mutex_lock(&d->lock);
		set_tick(e, index, 0);
		pthread_mutex_unlock(&d->lock);
		return false;
	}
	if (pread_full(e->datafd, buf, len, index * e->block_size) != 0 ||
	    dc_checksum(buf, len) != rec.sum) {
		drop_mismatch(e, index, &rec, buf, len);
		return false;
	}
	note_use(e, index, rec);
	return true;
}

bool dc_holds(struct dc_entry *ref, uint64_t index)
{
	struct dc_held *e = ref->held;
	if (index >= e->nblocks)
		return false;
	pthread_mutex_lock(&e->dir->lock);
	bool yes = tick_of(e, index) != 0;
	pthread_mutex_unlock(&e->dir->lock);
	struct dc_record rec;
	return yes || disk_record(e, index, &rec);
}

/* An entry directory that no mount holds, and its map's modification time. */
struct unused_entry {
	char name[33];
	struct timespec mtime;
};

/* Oldest first. */
static int by_mtime(const void *pa, const void *pb)
{
	const struct timespec *a = &((const struct unused_entry *)pa)->mtime;
	const struct timespec *b = &((const struct unused_entry *)pb)->mtime;
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	return (a->tv_nsec > b->tv_nsec) - (a->tv_nsec < b->tv_nsec);
}

/* Removes entry directories that no mount holds, least recently used first (by their
 * maps' modification time, which every store and load moves on; what is left of an
 * entry without a map first), until need more bytes fit under dc's bound: true when one
 * or more went. One listing of the directory for them all: the flock keeps every other
 * process (and store_lock this one) from opening one meanwhile. Called in a change. */
static bool evict_entries(struct diskcache *dc, uint64_t need)
{
	struct dc_dir *d = dc->dir;
	DIR *list = list_cache(d);
	if (!list)
		return false;
	struct unused_entry *unused = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *de; (de = readdir(list));) {
		if (!is_entry_name(de->d_name))
			continue;
		int mfd = open_in_entry(d->dirfd, de->d_name, "map", O_RDONLY);
		struct stat st;
		bool free_now = mfd >= 0 && flock_retry(mfd, LOCK_EX | LOCK_NB) == 0;
		if (mfd < 0 || (free_now && fstat(mfd, &st) != 0)) {
			/* no map: what is left of an entry is removed first */
			memset(&st, 0, sizeof st);
			free_now = true;
		}
		if (mfd >= 0)
			close(mfd);
		if (!free_now)
			continue;
		if (n == cap) {
			size_t more = cap ? 2 * cap : 64;
			struct unused_entry *grown = realloc(unused, more * sizeof *grown);
			if (!grown)
				break;   /* out of memory: those found so far */
			unused = grown;
			cap = more;
		}
		memcpy(unused[n].name, de->d_name, sizeof unused[n].name);
		unused[n++].mtime = st.st_mtim;
	}
	closedir(list);
	if (n)
		qsort(unused, n, sizeof *unused, by_mtime);
	bool went = false;
	for (size_t i = 0; i < n && !(went && fits(dc, need)); i++)
		went |= remove_entry(d, unused[i].name) == 0;
	free(unused);
	return went;
}

/* A block of an entry that another mount uses. */
struct foreign_block {
	char name[33];       /* the entry's directory */
	uint64_t index, tick;
	uint32_t len, block_size;
};

/* Whether the entry directory name is one this process holds. */
static bool ours(struct dc_dir *d, const char *name)
{
	pthread_mutex_lock(&d->lock);
	bool yes = find_held(d, name) != NULL;
	pthread_mutex_unlock(&d->lock);
	return yes;
}

/* The least recently used block, by its map on disk, of the entries that other mounts
 * use (what is left once the unused ones went) into *v, or with ours_too of every entry
 * (but block keep_index of keep): those this process holds may hold blocks another
 * stored that this one does not know of; false if they hold none. Called with the
 * flock held, so that no record is being stored meanwhile. */
static bool oldest_foreign(struct dc_dir *d, struct foreign_block *v, bool ours_too,
                           const struct dc_held *keep, uint64_t keep_index)
{
	enum { CHUNK = 2048 };
	DIR *list = list_cache(d);
	struct dc_record *recs = malloc(CHUNK * sizeof *recs);
	bool found = false;
	v->tick = UINT64_MAX;
	for (struct dirent *de; list && recs && (de = readdir(list));) {
		if (!is_entry_name(de->d_name) || (!ours_too && ours(d, de->d_name)))
			continue;
		const bool kept = keep && !strcmp(de->d_name, keep->name);
		int mfd = open_in_entry(d->dirfd, de->d_name, "map", O_RDONLY);
		if (mfd < 0)
			continue;
		/* its block size, as its header says (another mount's may differ) */
		uint8_t head[16];
		uint32_t version = 0, bs = 0;
		if (pread_full(mfd, head, sizeof head, 0) == 0 && !memcmp(head, MAP_MAGIC, 8)) {
			memcpy(&version, head + 8, 4);
			memcpy(&bs, head + 12, 4);
		}
		for (uint64_t at = 0; version == MAP_VERSION && bs; at += CHUNK) {
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
				if (rec->tick && rec->tick < v->tick && rec->len && !(kept && at + j == keep_index) &&
				    rec->len <= bs && rec->check == record_check(rec, at + j)) {
					memcpy(v->name, de->d_name, sizeof v->name);
					v->index = at + j;
					v->tick = rec->tick;
					v->len = rec->len;
					v->block_size = bs;
					found = true;
				}
			}
		}
		close(mfd);
	}
	free(recs);
	if (list)
		closedir(list);
	return found;
}

/* Punches out block v of another mount's entry, its record first. Its mount finds the
 * record gone (or, if it wrote the record back meanwhile, the bytes not matching it)
 * at its next load of the block, and fetches it again. True when it went. Called in a
 * change. */
static bool evict_foreign(struct dc_dir *d, const struct foreign_block *v)
{
	int mfd = open_in_entry(d->dirfd, v->name, "map", O_RDWR);
	int dfd = open_in_entry(d->dirfd, v->name, "data", O_RDWR);
	static const struct dc_record zero;
	struct dc_record rec;
	uint64_t before = 0, after = 0;
	bool ok = mfd >= 0 && dfd >= 0 && files_usage(mfd, dfd, &before) &&
	          pread_full(mfd, &rec, sizeof rec, record_offset(v->index)) == 0 &&
	          rec.tick == v->tick &&
	          pwrite_full(mfd, &zero, sizeof zero, record_offset(v->index)) == 0 &&
	          fallocate(dfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                    (off_t)(v->index * v->block_size), (off_t)v->len) == 0;
	if (before && files_usage(mfd, dfd, &after))
		usage_change(d, before, after);
	if (mfd >= 0)
		close(mfd);
	if (dfd >= 0)
		close(dfd);
	return ok;
}

/* Punches out block v of entry e, which this process holds but does not know the block
 * of (another process stored it), its record first, accounted as e's files are. True
 * when it went. Called in a change. */
static bool evict_held_unknown(struct dc_held *e, const struct foreign_block *v)
{
	static const struct dc_record zero;
	struct dc_record rec;
	account_held(e);
	bool ok = v->block_size == e->block_size && v->index < e->nblocks &&
	          pread_full(e->mapfd, &rec, sizeof rec, record_offset(v->index)) == 0 &&
	          rec.tick == v->tick &&
	          pwrite_full(e->mapfd, &zero, sizeof zero, record_offset(v->index)) == 0 &&
	          fallocate(e->datafd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                    (off_t)(v->index * e->block_size), (off_t)block_len(e, v->index)) == 0;
	pthread_mutex_lock(&e->dir->lock);
	set_tick(e, v->index, 0);
	pthread_mutex_unlock(&e->dir->lock);
	account_held(e);
	return ok;
}

/* Punches out the least recently used block of the entries in use, this process's
 * (other than block index of keep) and other mounts'; when neither holds one that this
 * process knows of, the least recently used of all by the maps on disk (blocks other
 * processes stored in entries this one holds too). True when one went. Called in a
 * change. */
static bool evict_block(struct dc_dir *d, const struct dc_held *keep, uint64_t keep_index)
{
	struct foreign_block other;
	bool have_other = oldest_foreign(d, &other, false, NULL, 0);
	pthread_mutex_lock(&d->lock);
	struct dc_held *victim = NULL;
	uint64_t vi = 0, vt = UINT64_MAX;
	for (struct dc_held *e = d->held; e; e = e->next) {
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
	if (!victim && !have_other) {
		pthread_mutex_unlock(&d->lock);
		if (!oldest_foreign(d, &other, true, keep, keep_index))
			return false;
		pthread_mutex_lock(&d->lock);
		struct dc_held *mine = find_held(d, other.name);
		pthread_mutex_unlock(&d->lock);
		/* (held entries stay while store_lock is: a close waits for it) */
		return mine ? evict_held_unknown(mine, &other) : evict_foreign(d, &other);
	}
	if (!victim || (have_other && other.tick < vt)) {
		pthread_mutex_unlock(&d->lock);
		return have_other && evict_foreign(d, &other);
	}
	account_held(victim);
	/* the record goes first: a crash between the two leaves a hole nobody trusts */
	forget_locked(victim, vi, vt);
	pthread_mutex_unlock(&d->lock);
	/* (victim's files stay open: a close waits for store_lock) */
	bool ok = fallocate(victim->datafd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	                    (off_t)(vi * victim->block_size), (off_t)block_len(victim, vi)) == 0;
	account_held(victim);
	return ok;
}

/* Frees disk space until need more bytes fit under dc's bound, by the running total:
 * whole unused entries first, then the least recently used blocks of those in use
 * (other than block keep_index of keep). When nothing more can go while the total says
 * it does not fit, the directory is counted afresh once (the total may be what is
 * wrong: a change nobody accounted). Called in a change. */
static bool make_room(struct diskcache *dc, const struct dc_held *keep, uint64_t keep_index,
                      uint64_t need)
{
	struct dc_dir *d = dc->dir;
	if (need > dc->max)
		return false;
	for (bool recounted = false;;) {
		if (fits(dc, need))
			return true;
		if (evict_entries(dc, need) || evict_block(d, keep, keep_index)) {
			evlog(EVLOG_WARNING, "dc trimmed", "the disk cache is at its bound "
			      "(cache_max): the least recently used blocks make room for new ones");
		} else if (!recounted) {
			recount(d);
			recounted = true;
		} else {
			return false;
		}
	}
}

/* A write to the directory failed with errno err: said once, the file system full (with
 * the directory, so that it is not taken for the bound) or another cause. */
static void write_failed(const struct dc_dir *d, int err)
{
	if (err == ENOSPC || err == EDQUOT)
		evlog(EVLOG_WARNING, "dc full fs", "cache_dir %s: the file system is full (%s): "
		      "blocks are not kept on disk until it has room; reads go on without them",
		      d->path, err == ENOSPC ? "ENOSPC" : "EDQUOT");
	else
		evlog(EVLOG_WARNING, "dc write", "cache_dir %s: a write failed (%s): the block "
		      "is not kept on disk", d->path, strerror(err));
}

/* Whether e holds block index as buf (len bytes) already, stored by another process:
 * its record checks out with buf's checksum and its bytes are buf's. Called in a
 * change (no eviction nor store meanwhile); the block is then noted here. */
static bool stored_elsewhere(struct dc_held *e, uint64_t index, const uint8_t *buf,
                             size_t len, uint64_t sum)
{
	struct dc_record rec;
	if (!disk_record(e, index, &rec) || rec.sum != sum)
		return false;
	uint8_t *have = malloc(len);
	bool same = have && pread_full(e->datafd, have, len, index * e->block_size) == 0 &&
	            memcmp(have, buf, len) == 0;
	free(have);
	if (same) {
		pthread_mutex_lock(&e->dir->lock);
		set_tick(e, index, rec.tick);
		pthread_mutex_unlock(&e->dir->lock);
	}
	return same;
}

bool dc_store(struct dc_entry *ref, uint64_t index, const uint8_t *buf, size_t len)
{
	struct diskcache *dc = ref->dc;
	struct dc_held *e = ref->held;
	struct dc_dir *d = e->dir;
	if (index >= e->nblocks || len != block_len(e, index))
		return false;
	struct stat st;
	if (fstat(e->datafd, &st) != 0)
		return false;
	/* what the write may allocate: the block in whole file system blocks, the page of
	 * the map its record lands in, and a block of the data file's extent tree */
	uint64_t fsblock = st.st_blksize > 0 ? (uint64_t)st.st_blksize : 4096;
	uint64_t need = (len + fsblock - 1) / fsblock * fsblock + 2 * fsblock;
	const uint64_t sum = dc_checksum(buf, len);
	bool ok = false;
	pthread_mutex_lock(&d->store_lock);
	pthread_mutex_lock(&d->lock);
	bool present = tick_of(e, index) != 0;
	pthread_mutex_unlock(&d->lock);
	if (present || dc->leaving) {
		ok = true;
	} else if (change_begin(d)) {
		account_held(e);   /* (what changed since that nobody accounted) */
		int err = 0;
		if (stored_elsewhere(e, index, buf, len, sum)) {
			ok = true;
		} else if (!make_room(dc, e, index, need)) {
			evlog(EVLOG_WARNING, "dc no room", "cache_dir %s: nothing more may be freed "
			      "under cache_max: blocks are not kept on disk", d->path);
		} else if (pwrite_full(e->datafd, buf, len, index * e->block_size) != 0) {
			err = errno;
		} else {
			/* no fdatasync between the bytes and the record: whatever a crash keeps of
			 * either, a block is served only when its bytes match its record's checksum,
			 * and a sync per block would halve the speed of a cold read */
			struct dc_record rec = { .sum = sum, .len = (uint32_t)len };
			pthread_mutex_lock(&d->lock);
			rec.tick = next_tick(d);
			rec.check = record_check(&rec, index);
			if (!set_tick(e, index, rec.tick))
				err = ENOMEM;
			else if (pwrite_full(e->mapfd, &rec, sizeof rec, record_offset(index)) == 0)
				ok = true;
			else
				err = errno;
			if (!ok)
				set_tick(e, index, 0);
			pthread_mutex_unlock(&d->lock);
		}
		if (err && err != ENOMEM)
			write_failed(d, err);
		account_held(e);   /* what the store took */
		/* a file system that allocated more than foreseen: back under at once */
		while (!fits(dc, 0) && (evict_entries(dc, 0) || evict_block(d, e, index)))
			;
		change_end(d);
	}
	pthread_mutex_unlock(&d->store_lock);
	return ok;
}
