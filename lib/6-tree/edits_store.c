#include "edits_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "edits_file.h"
#include "flock_handover.h"
#include "leaving.h"

struct edits_store {
	char *path;       /* as given, for messages */
	char *name;       /* FILE's name in its directory */
	int dirfd;        /* FILE's directory */
	pthread_mutex_t lock;   /* held by a save and by the leave: fd, max, leaving */
	int fd;           /* FILE as it is now, flock'ed; -1 while it does not exist */
	uint64_t max;     /* the largest FILE a save makes */
	bool leaving;     /* its leaving has run: nothing more is saved */
	struct leaving_entry leave;   /* in the mount's leaving: edits_store_leave */
};

/* Why st, FILE's (file) or its directory's, may not be trusted: NULL when it may. */
static const char *distrust(const struct stat *st, bool dir, char why[160])
{
	if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
		snprintf(why, 160, "%s", dir ? "its directory is not a directory" :
		         "not a regular file (a FIFO, a device or a directory is refused)");
	else if (st->st_uid != geteuid())
		snprintf(why, 160, "%sowned by uid %u, not by the user mounting (uid %u)",
		         dir ? "its directory is " : "", (unsigned)st->st_uid, (unsigned)geteuid());
	else if (st->st_mode & 022)
		snprintf(why, 160, "%swritable by group or others (mode %04o); chmod go-w it",
		         dir ? "its directory is " : "", (unsigned)(st->st_mode & 07777));
	else
		return NULL;
	return why;
}

/* The pid other than ours that holds a flock(2) of the file of st, from /proc/locks
 * (never by looking at other processes' open files: a stat of one on a FUSE mount whose
 * daemon hangs would hang us too), or 0 when none is listed. */
static long lock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256];
	long found = 0;
	while (f && !found && fgets(line, sizeof line, f)) {
		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a blocked waiter's line
		 * starts "1: -> FLOCK") */
		char kind[16], mode[16], rw[16];
		long pid;
		unsigned maj, min;
		unsigned long long ino;
		if (sscanf(line, "%*[^:]: %15s %15s %15s %ld %x:%x:%llu", kind, mode, rw, &pid, &maj,
		           &min, &ino) == 7 &&
		    strcmp(kind, "FLOCK") == 0 && pid > 0 && pid != (long)getpid() &&
		    maj == major(st->st_dev) && min == minor(st->st_dev) && ino == st->st_ino)
			found = pid;
	}
	if (f)
		fclose(f);
	return found;
}

/* The mount id and inode number /proc/PID/fdinfo/FD shows (0 and 0 when it cannot be
 * read); reading it never reaches the file's own file system. */
static void fd_ids(long pid, const char *fd, unsigned long long *mnt, unsigned long long *ino)
{
	char path[96], line[128];
	*mnt = *ino = 0;
	snprintf(path, sizeof path, "/proc/%ld/fdinfo/%s", pid, fd);
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "mnt_id: %llu", mnt) != 1)
			sscanf(line, "ino: %llu", ino);
	if (f)
		fclose(f);
}

/* True when process pid has a descriptor of the file at inode ino of mount mnt. */
static bool has_open(long pid, unsigned long long mnt, unsigned long long ino)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%ld/fdinfo", pid);
	DIR *fds = opendir(dir);
	bool found = false;
	for (struct dirent *f; fds && !found && (f = readdir(fds));) {
		unsigned long long m, i;
		if (f->d_name[0] == '.')
			continue;
		fd_ids(pid, f->d_name, &m, &i);
		found = m == mnt && i == ino;
	}
	if (fds)
		closedir(fds);
	return found;
}

/* The pid other than ours that has open the file that our descriptor fd is of, the
 * lock's taker first (/proc/locks: only a candidate, since for a lock taken before the
 * mount became a daemon it names the parent, which has exited, and its pid may be
 * another process's by now); 0 when none is found. */
static long holder_pid(int fd, const struct stat *st)
{
	unsigned long long mnt, ino;
	char self[24];
	snprintf(self, sizeof self, "%d", fd);
	fd_ids(getpid(), self, &mnt, &ino);
	if (!ino)
		return 0;
	long pid = lock_holder(st);
	if (pid && has_open(pid, mnt, ino))
		return pid;
	DIR *proc = opendir("/proc");
	long found = 0;
	for (struct dirent *p; proc && !found && (p = readdir(proc));) {
		char *end;
		pid = strtol(p->d_name, &end, 10);
		if (!*end && pid > 0 && pid != (long)getpid() && has_open(pid, mnt, ino))
			found = pid;
	}
	if (proc)
		closedir(proc);
	return found;
}

/* The process other than us that holds the lock of the file of st (our descriptor of it:
 * fd), as "pid N (command line)"; "another process" when none is found. */
static void holder_of(int fd, const struct stat *st, char out[256])
{
	snprintf(out, 256, "another process");
	long pid = holder_pid(fd, st);
	char cmd[160] = "", path[64];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
	FILE *c = pid ? fopen(path, "re") : NULL;
	if (!c)
		return;
	size_t n = fread(cmd, 1, sizeof cmd - 1, c);
	fclose(c);
	for (size_t i = 0; i < n; i++)   /* arguments apart by spaces, printable only */
		cmd[i] = cmd[i] == 0 ? ' ' : cmd[i] < 0x20 || cmd[i] > 0x7e ? '?' : cmd[i];
	while (n && cmd[n - 1] == ' ')
		n--;
	cmd[n] = 0;
	snprintf(out, 256, "pid %ld (%s)", pid, cmd);
}

/* Removes NAME.tmp.XXXXXX beside FILE: what a save killed before its rename left. Called
 * with the lock held, so no save of another mount is under way. */
static void remove_temporaries(struct edits_store *s)
{
	int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t n = strlen(s->name);
	for (struct dirent *e; (e = readdir(d));)
		if (strncmp(e->d_name, s->name, n) == 0 && strncmp(e->d_name + n, ".tmp.", 5) == 0 &&
		    strlen(e->d_name + n + 5) == 6)
			unlinkat(s->dirfd, e->d_name, 0);
	closedir(d);
}

/* Reads the whole of s->fd (at most EDITS_FILE_MAX bytes): 0 or -1 with err. */
static int read_all(struct edits_store *s, char **text, uint64_t *len, char err[GGUF_ERR_MAX])
{
	struct stat st;
	if (fstat(s->fd, &st) < 0 || (uint64_t)st.st_size > EDITS_FILE_MAX) {
		snprintf(err, GGUF_ERR_MAX, "%s: larger than the %llu bytes a mount loads", s->path,
		         (unsigned long long)EDITS_FILE_MAX);
		return -1;
	}
	char *b = malloc((size_t)st.st_size + 1);
	uint64_t got = 0;
	while (b && got < (uint64_t)st.st_size) {
		ssize_t r = pread(s->fd, b + got, (size_t)((uint64_t)st.st_size - got), (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (uint64_t)r;
	}
	if (!b || got != (uint64_t)st.st_size) {
		snprintf(err, GGUF_ERR_MAX, "%s: could not be read whole", s->path);
		free(b);
		return -1;
	}
	b[got] = '\0';
	*text = b;
	*len = got;
	return 0;
}

/* Opens FILE (s->fd) and locks it, as the header says: 0, 1 when it does not exist, or
 * -1 with err. The inode locked is the one FILE names once the lock is held (a save of
 * another mount may have renamed a new one over it meanwhile: then again). A holder that
 * is ending (its store's leaving has run) is waited for, up to EDITS_LEAVING_WAIT_S. */
static int open_locked(struct edits_store *s, char err[GGUF_ERR_MAX])
{
	char why[160];
	const double give_up = clock_now_s() + EDITS_LEAVING_WAIT_S;
	for (int tries = 0; tries < 100;) {
		struct stat st, now;
		s->fd = openat(s->dirfd, s->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (s->fd < 0) {
			if (errno == ENOENT)
				return 1;
			snprintf(err, GGUF_ERR_MAX, "%s: %s", s->path, errno == ELOOP ?
			         "is a symlink; give the file itself" : strerror(errno));
			return -1;
		}
		if (fstat(s->fd, &st) < 0 || distrust(&st, false, why)) {
			snprintf(err, GGUF_ERR_MAX, "%s: %s", s->path, why);
			return -1;
		}
		if (flock_retry(s->fd, LOCK_EX | LOCK_NB) != 0) {
			/* held by a mount that is ending (edits_store_leave) */
			bool ending = flock_holder_leaving(s->fd);
			if (ending && clock_now_s() < give_up) {
				/* (opened again: the name may be another inode by the next look) */
				close(s->fd);
				s->fd = -1;
				struct timespec pause = { 0, EDITS_LEAVING_POLL_MS * 1000000L };
				nanosleep(&pause, NULL);
				continue;
			}
			char who[256];
			holder_of(s->fd, &st, who);
			snprintf(err, GGUF_ERR_MAX, "%s: in use by another mount, %s%s; it is the edits "
			         "file of one mount at a time", s->path, who,
			         ending ? ", which is ending but did not let go in time" : "");
			return -1;
		}
		if (fstatat(s->dirfd, s->name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino)
			return 0;
		close(s->fd);
		s->fd = -1;
		tries++;
	}
	snprintf(err, GGUF_ERR_MAX, "%s: replaced again and again while being opened", s->path);
	return -1;
}

/* The mount is ending (s->leave's fn): FILE handed over, as edits_store_open says. */
static void edits_store_leave(void *arg)
{
	struct edits_store *s = arg;
	pthread_mutex_lock(&s->lock);   /* no save under way, none from now on */
	s->leaving = true;
	/* not atomic (flock drops the lock, then takes the new one): a new store may take
	 * FILE in between, which is why nothing is saved from here on; and without blocking,
	 * or this daemon would wait for the new mount to end */
	if (s->fd >= 0)
		flock_leave(s->fd);
	pthread_mutex_unlock(&s->lock);
}

int edits_store_open(const char *path, struct leaving *leaving, struct edits_store **out,
                     char **text, uint64_t *len, char err[GGUF_ERR_MAX])
{
	struct edits_store *s = calloc(1, sizeof *s);
	const char *slash = strrchr(path, '/');
	char why[160];
	struct stat st;
	*text = NULL;
	*len = 0;
	if (s) {
		pthread_mutex_init(&s->lock, NULL);
		s->fd = s->dirfd = -1;   /* before any failure: close() closes what is >= 0 */
	}
	if (!s || !(s->path = strdup(path)) || !(s->name = strdup(slash ? slash + 1 : path))) {
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
		goto fail;
	}
	s->max = EDITS_FILE_MAX;
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir || !s->name[0]) {
		snprintf(err, GGUF_ERR_MAX, "%s: %s", path, dir ? "names a directory" : "out of memory");
		free(dir);
		goto fail;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int dir_errno = errno;
	bool writable = s->dirfd >= 0 && access(dir, W_OK) == 0;
	if (s->dirfd >= 0 && !writable)
		dir_errno = errno;
	free(dir);
	if (s->dirfd < 0 || fstat(s->dirfd, &st) < 0) {
		snprintf(err, GGUF_ERR_MAX, "%s: its directory: %s", path, strerror(dir_errno));
		goto fail;
	}
	if (distrust(&st, true, why)) {
		snprintf(err, GGUF_ERR_MAX, "%s: %s", path, why);
		goto fail;
	}
	if (!writable) {   /* every edit would fail at its close */
		snprintf(err, GGUF_ERR_MAX, "%s: its directory cannot be written (%s)", path,
		         strerror(dir_errno));
		goto fail;
	}
	int r = open_locked(s, err);
	if (r < 0 || (r == 0 && read_all(s, text, len, err) < 0))
		goto fail;
	if (r == 0)
		remove_temporaries(s);
	s->leave = (struct leaving_entry){ .fn = edits_store_leave, .ctx = s };
	leaving_add(leaving, &s->leave);
	*out = s;
	return r;
fail:
	edits_store_close(s);
	*out = NULL;
	return -1;
}

void edits_store_close(struct edits_store *s)
{
	if (!s)
		return;
	leaving_remove(&s->leave);   /* (waits for its hand-over under way) */
	if (s->fd >= 0)
		close(s->fd);   /* ends the lock */
	if (s->dirfd >= 0)
		close(s->dirfd);
	pthread_mutex_destroy(&s->lock);
	free(s->path);
	free(s->name);
	free(s);
}

void edits_store_set_max(struct edits_store *s, uint64_t max)
{
	pthread_mutex_lock(&s->lock);
	s->max = max < EDITS_FILE_MAX ? max : EDITS_FILE_MAX;
	pthread_mutex_unlock(&s->lock);
}

/* Writes [p, p + len) to fd whole: 0 or -errno. */
static int write_all(int fd, const char *p, uint64_t len)
{
	for (uint64_t done = 0; done < len;) {
		ssize_t w = write(fd, p + done, (size_t)(len - done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (uint64_t)w;
	}
	return 0;
}

/* edits_store_save with s's lock held. */
static int store_save_locked(struct edits_store *s, const char *p, uint64_t len,
                             char err[GGUF_ERR_MAX])
{
	if (s->leaving) {   /* FILE may be another mount's by now */
		snprintf(err, GGUF_ERR_MAX, "%s: the mount is ending; nothing changed", s->path);
		return -EROFS;
	}
	if (len > s->max) {
		snprintf(err, GGUF_ERR_MAX, "%s: the edits would take %llu bytes, more than the %llu "
		         "a mount loads; nothing changed", s->path, (unsigned long long)len,
		         (unsigned long long)s->max);
		return -EFBIG;
	}
	size_t n = strlen(s->name);
	char *tmp = malloc(n + 16);
	int fd = -1, e = 0;
	if (!tmp) {
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory", s->path);
		return -ENOMEM;
	}
	/* mkostemp's name in FILE's directory, made with openat (mode 0600) */
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
		unsigned long v = (unsigned long)random() ^ ((unsigned long)getpid() << 8) ^
		                  (unsigned long)tries;
		snprintf(tmp, n + 16, "%s.tmp.", s->name);
		for (int i = 0; i < 6; i++, v /= 36)
			tmp[n + 5 + i] = digits[v % 36];
		tmp[n + 11] = 0;
		fd = openat(s->dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		e = errno;
		snprintf(err, GGUF_ERR_MAX, "%s: %s", s->path, strerror(e));
		free(tmp);
		return -e;
	}
	if ((e = -write_all(fd, p, len)) == 0 && fsync(fd) < 0)
		e = errno;
	/* locked before it gets FILE's name: the name never shows an unlocked inode */
	if (e == 0 && flock_retry(fd, LOCK_EX | LOCK_NB) < 0)
		e = errno;
	if (e == 0 && s->fd < 0) {
		/* FILE was missing at open: made only if it still is (link fails on a name
		 * taken), so a mount that made it first keeps it */
		if (linkat(s->dirfd, tmp, s->dirfd, s->name, 0) < 0)
			e = errno;
		unlinkat(s->dirfd, tmp, 0);
	} else if (e == 0 && renameat(s->dirfd, tmp, s->dirfd, s->name) < 0) {
		e = errno;
	}
	if (e) {
		close(fd);
		if (e != EEXIST)
			unlinkat(s->dirfd, tmp, 0);
		snprintf(err, GGUF_ERR_MAX, "%s: %s", s->path, strerror(e));
		free(tmp);
		return -e;
	}
	fsync(s->dirfd);   /* the rename itself must survive a crash */
	if (s->fd >= 0)
		close(s->fd);  /* the old inode, no longer FILE */
	s->fd = fd;
	free(tmp);
	return 0;
}

int edits_store_save(struct edits_store *s, const char *p, uint64_t len,
                     char err[GGUF_ERR_MAX])
{
	pthread_mutex_lock(&s->lock);
	const int r = store_save_locked(s, p, len, err);
	pthread_mutex_unlock(&s->lock);
	return r;
}
