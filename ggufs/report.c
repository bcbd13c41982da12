/* What the daemon tells the user after the mount: where the event log goes (syslog in
 * the background, -o log=FILE, or stderr with -f), the EIO replies (each cause's first
 * one logged with the cause, the rest counted), and the live counters that the mount's
 * root shows as user.ggufs.* extended attributes. lib/ reports events through evlog.h
 * and counts its fetches (remote_counters); nothing here costs a read anything but a
 * relaxed atomic add, and the counters are gathered only when an attribute is read. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "evlog.h"
#include "ggufs.h"
#include "log_escape.h"
#include "remote.h"
#include "s3.h"
#include "url.h"

/* ---- the event log's sinks ---- */

/* "2026-12-01T15:30:00Z": the UTC time t in ISO 8601, into buf (24 bytes). */
static const char *iso_time(time_t t, char buf[24])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(buf, 24, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, 24, "%lld", (long long)t);
	return buf;
}

/* The mount point as a log line shows it (escaped like the rest: a user's mount point
 * may hold a newline too), into buf. */
static const char *shown_mountpoint(const struct ggufs *fs, char *buf, size_t size)
{
	log_escape(buf, size, fs->mountpoint, strlen(fs->mountpoint));
	return buf;
}

/* evlog sink to -o log=FILE: one write per line (O_APPEND keeps lines whole), with the
 * time, the daemon's pid and the mount point. */
static void to_file(void *arg, enum evlog_level level, const char *line)
{
	struct ggufs *fs = arg;
	char when[24], mnt[PATH_MAX], out[EVLOG_LINE_MAX + PATH_MAX + 96];
	int n = snprintf(out, sizeof out, "%s ggufs[%ld]: %s: %s%s\n", iso_time(time(NULL), when),
	                 (long)getpid(), shown_mountpoint(fs, mnt, sizeof mnt),
	                 level == EVLOG_ERR ? "" : "warning: ", line);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof out) {   /* cut, but still one line */
		n = (int)sizeof out - 1;
		out[n - 1] = '\n';
	}
	ssize_t w = write(fs->log_fd, out, (size_t)n);
	(void)w;   /* a full disk loses the line, never the mount */
}

/* evlog sink to syslog (ident ggufs, opened by log_start), with the mount point. */
static void to_syslog(void *arg, enum evlog_level level, const char *line)
{
	struct ggufs *fs = arg;
	char mnt[PATH_MAX];
	syslog(level == EVLOG_ERR ? LOG_ERR : LOG_WARNING, "%s: %s",
	       shown_mountpoint(fs, mnt, sizeof mnt), line);
}

/* evlog sink to stderr with -f: "ggufs: LINE", as before the mount (evlog escaped it). */
static void to_stderr(void *arg, enum evlog_level level, const char *line)
{
	(void)arg;
	fprintf(stderr, "ggufs: %s%s\n", level == EVLOG_ERR ? "" : "warning: ", line);
}

/* Whether the directory that a new log file path goes into may hold it: the user's
 * own, writable by nobody else (another user could otherwise swap the name for a link
 * between our checks and later opens, or read what it was meant to hold). False after
 * one line on stderr. */
static bool log_dir_trusted(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	struct stat st;
	if (stat(dir, &st) != 0) {
		log_errf("%s: cannot open the log file: %s", path, strerror(errno));
		return false;
	}
	if (st.st_uid != geteuid()) {
		log_errf("%s: the log file would be made in %s, which is owned by uid %u, not by "
		         "the user mounting (uid %u)", path, dir, (unsigned)st.st_uid,
		         (unsigned)geteuid());
		return false;
	}
	if (st.st_mode & 022) {
		log_errf("%s: the log file would be made in %s, which is writable by group or "
		         "others (mode %04o): make it elsewhere, or chmod go-w the directory", path,
		         dir, (unsigned)(st.st_mode & 07777));
		return false;
	}
	return true;
}

/* Whether the open log file fd (at path) may be written: a regular file with one name,
 * the user's own, writable by nobody else. False after one line on stderr. */
static bool log_file_trusted(int fd, const char *path)
{
	struct stat st;
	if (fstat(fd, &st) != 0) {
		log_errf("%s: cannot open the log file: %s", path, strerror(errno));
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		log_errf("%s: the log file is not a regular file (%s)", path,
		         S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device" :
		         S_ISSOCK(st.st_mode) ? "a socket" : S_ISDIR(st.st_mode) ? "a directory" :
		         "a device");
		return false;
	}
	if (st.st_uid != geteuid()) {
		log_errf("%s: the log file is owned by uid %u, not by the user mounting (uid %u)",
		         path, (unsigned)st.st_uid, (unsigned)geteuid());
		return false;
	}
	if (st.st_mode & 022) {
		log_errf("%s: the log file is writable by group or others (mode %04o): chmod go-w "
		         "it", path, (unsigned)(st.st_mode & 07777));
		return false;
	}
	if (st.st_nlink != 1) {
		log_errf("%s: the log file has %ju names (hard links): give a file of its own", path,
		         (uintmax_t)st.st_nlink);
		return false;
	}
	return true;
}

int log_open_file(const char *path)
{
	/* the mount's user (often root) appends text the model chose: never through a
	 * symlink (another user's link to a file of root's), never blocked by a FIFO, and
	 * only to a file no other user made, can write or has a name for */
	const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
	int fd = open(path, flags);
	if (fd < 0 && errno == ENOENT && log_dir_trusted(path)) {
		/* O_EXCL: a name that appeared since is opened as above, checked as above */
		fd = open(path, flags | O_CREAT | O_EXCL, 0600);
		if (fd < 0 && errno == EEXIST)
			fd = open(path, flags);
	} else if (fd < 0 && errno == ENOENT) {
		return -1;   /* said by log_dir_trusted */
	}
	if (fd < 0) {
		if (errno == ELOOP)
			log_errf("%s: the log file is a symlink: give the file itself", path);
		else if (errno == ENXIO)   /* a FIFO that no one reads */
			log_errf("%s: the log file is not a regular file (a FIFO)", path);
		else if (errno == EISDIR)
			log_errf("%s: the log file is not a regular file (a directory)", path);
		else
			log_errf("%s: cannot open the log file: %s", path, strerror(errno));
		return -1;
	}
	if (!log_file_trusted(fd, path)) {
		close(fd);
		return -1;
	}
	/* a regular file never blocks: the flag only kept open from waiting on a FIFO */
	fcntl(fd, F_SETFL, O_APPEND);
	return fd;
}

void log_early(struct ggufs *fs)
{
	if (fs->log_fd >= 0)
		evlog_set_sink(to_file, fs);
}

void log_start(struct ggufs *fs, bool foreground)
{
	if (fs->log_fd >= 0) {
		evlog_set_sink(to_file, fs);
	} else if (foreground) {
		evlog_set_sink(to_stderr, fs);
	} else {
		openlog("ggufs", LOG_PID, LOG_DAEMON);
		fs->syslog_open = true;
		evlog_set_sink(to_syslog, fs);
	}
}

void log_stop(struct ggufs *fs)
{
	evlog_flush();
	evlog_set_sink(NULL, NULL);
	if (fs->syslog_open)
		closelog();
	fs->syslog_open = false;
	if (fs->log_fd >= 0)
		close(fs->log_fd);
	fs->log_fd = -1;
}

/* ---- EIO replies ---- */

/* n's path in the tree ("tensors/NAME.f32", "gguf.json"), into buf. */
static const char *node_path(const struct tree *t, const struct tree_node *n, char *buf,
                             size_t size)
{
	const struct tree_node *dir = tree_node(t, n->parent);
	if (dir && n->parent != TREE_ROOT_INO)
		snprintf(buf, size, "%s/%s", dir->name, n->name);
	else
		snprintf(buf, size, "%s", n->name);
	return buf;
}

/* Keeps why as the daemon's last error (a local model's: a remote one's are the
 * fetcher's), unless it is already: true when it was not. The test and the update are
 * one step under the lock, so two readers failing at once log the cause once. */
static bool note_error(struct ggufs *fs, const char *why)
{
	pthread_mutex_lock(&fs->error_lock);
	bool new_error = strcmp(fs->last_error, why) != 0;
	if (new_error) {
		snprintf(fs->last_error, sizeof fs->last_error, "%s", why);
		fs->last_error_time = time(NULL);
	}
	pthread_mutex_unlock(&fs->error_lock);
	return new_error;
}

/* For a local model: the first shard that is shorter now than at mount, said in the
 * log (once per size it shrank to) and kept as the last error; its text in why. False
 * when none is. */
static bool local_shrink(struct ggufs *fs, const struct ggufs_model *m, char *why, size_t size)
{
	for (uint32_t s = 0; s < m->n_shards; s++) {
		int fd;
		uint64_t now;   /* of its bytes at mount, how many the file holds now */
		if (!source_span(m->shards[s].src, 0, m->shards[s].size, &fd, &now) ||
		    now >= m->shards[s].size)
			continue;
		snprintf(why, size, "%s: the file shrank from %" PRIu64 " to %" PRIu64 " bytes "
		         "while mounted: reads of the bytes that went fail with EIO",
		         m->shards[s].path, m->shards[s].size, now);
		/* said once per size it shrank to: its EIOs are what is counted */
		if (note_error(fs, why))
			evlog(EVLOG_ERR, NULL, "%s", why);
		return true;
	}
	return false;
}

void reply_eio(fuse_req_t req, struct ggufs *fs, const struct tree *t, const struct tree_node *n,
               uint64_t off, size_t len)
{
	atomic_fetch_add_explicit(&fs->eio_replies, 1, memory_order_relaxed);
	char cause[GGUF_ERR_MAX + 64] = "", path[PATH_MAX];
	const struct ggufs_model *m = tree_model(t);
	if (m->remote) {
		struct remote_counters *c = malloc(sizeof *c);
		if (c) {
			remote_counters(m->remote, c);
			snprintf(cause, sizeof cause, "%s", c->last_error);
			free(c);
		}
	} else {
		local_shrink(fs, m, cause, sizeof cause);
	}
	if (!cause[0])
		snprintf(cause, sizeof cause, "the bytes could not be read");
	/* the first EIO of each cause: said with it, the rest counted under the same key
	 * (the cause without its numbers: byte ranges and counts differ between failures
	 * of one cause) */
	char key[sizeof cause + 8] = "eio ";
	evlog_key_cause(key, sizeof key, cause);
	evlog(EVLOG_ERR, key, "EIO to a read of %s (%zu bytes at %" PRIu64 "), because %s",
	      node_path(t, n, path, sizeof path), len, off, cause);
	fuse_reply_err(req, EIO);
}

void report_refused_edit(struct ggufs *fs, int r, const char *why)
{
	char line[GGUF_ERR_MAX + 64];
	atomic_fetch_add_explicit(&fs->edits_refused, 1, memory_order_relaxed);
	snprintf(line, sizeof line, "edit refused (%s): %s", strerror(-r), why);
	note_error(fs, line);
	evlog(EVLOG_WARNING, NULL, "%s", line);
}

/* ---- user.ggufs.* on the mount's root ---- */

enum counter {
	C_READS, C_EIO, C_LAST_ERROR, C_EDITS_REFUSED, C_URL, C_REQUESTS, C_BYTES, C_MEMORY_HITS,
	C_DISK_HITS, C_RETRIES, C_COUNT
};

static const char *const counter_name[C_COUNT] = {
	"user.ggufs.reads", "user.ggufs.eio_replies", "user.ggufs.last_error",
	"user.ggufs.edits_refused", "user.ggufs.url",
	"user.ggufs.requests", "user.ggufs.bytes_fetched", "user.ggufs.memory_cache_hits",
	"user.ggufs.disk_cache_hits", "user.ggufs.retries",
};

/* Whether counter k applies to this mount: the fetcher's only to a remote model, the
 * disk cache's only with cache_dir, edits_refused only with edits. */
static bool applies(const struct ggufs *fs, const struct remote_counters *rc, enum counter k)
{
	if (k <= C_LAST_ERROR)
		return true;
	if (k == C_EDITS_REFUSED)
		return fs->edits != NULL;
	if (!fs->model || !fs->model->remote)
		return false;
	return k != C_DISK_HITS || rc->disk_cache;
}

/* The value of counter k as text (no newline) into buf. */
static void counter_value(struct ggufs *fs, const struct remote_counters *rc, enum counter k,
                          char *buf, size_t size)
{
	uint64_t v = 0;
	switch (k) {
	case C_READS: v = atomic_load_explicit(&fs->reads, memory_order_relaxed); break;
	case C_EIO: v = atomic_load_explicit(&fs->eio_replies, memory_order_relaxed); break;
	case C_EDITS_REFUSED:
		v = atomic_load_explicit(&fs->edits_refused, memory_order_relaxed);
		break;
	case C_REQUESTS: v = rc->requests; break;
	case C_BYTES: v = rc->bytes_fetched; break;
	case C_MEMORY_HITS: v = rc->memory_hits; break;
	case C_DISK_HITS: v = rc->disk_hits; break;
	case C_RETRIES: v = rc->retries; break;
	case C_URL: {
		/* as given, less what the man page keeps out of sight (user:password@, a query
		 * that may hold a signature): the root's attributes are every reader's */
		bool hf = strncasecmp(fs->model->path, "hf://", 5) == 0 ||
		          s3_is_name(fs->model->path);   /* names that hold no secret */
		char *shown = hf ? NULL : url_display(fs->model->path);
		snprintf(buf, size, "%s", hf ? fs->model->path : shown ? shown : "");
		free(shown);
		return;
	}
	case C_LAST_ERROR: {
		/* the later of the fetcher's and the daemon's own */
		char when[24];
		pthread_mutex_lock(&fs->error_lock);
		bool ours = fs->last_error[0] &&
		            (!rc->last_error[0] || fs->last_error_time >= rc->last_error_time);
		if (ours)
			snprintf(buf, size, "%s %s", iso_time(fs->last_error_time, when), fs->last_error);
		else if (rc->last_error[0])
			snprintf(buf, size, "%s %s", iso_time(rc->last_error_time, when), rc->last_error);
		else
			buf[0] = 0;
		pthread_mutex_unlock(&fs->error_lock);
		return;
	}
	case C_COUNT: break;
	}
	snprintf(buf, size, "%" PRIu64, v);
}

/* The fetcher's counters now (zero for a local model). */
static void gather(struct ggufs *fs, struct remote_counters *rc)
{
	memset(rc, 0, sizeof *rc);
	if (fs->model && fs->model->remote)
		remote_counters(fs->model->remote, rc);
}

int64_t counters_list(struct ggufs *fs, char *buf, size_t size)
{
	struct remote_counters rc;
	gather(fs, &rc);
	size_t need = 0;
	for (int k = 0; k < C_COUNT; k++) {
		if (!applies(fs, &rc, (enum counter)k))
			continue;
		size_t n = strlen(counter_name[k]) + 1;
		if (size && need + n <= size)
			memcpy(buf + need, counter_name[k], n);
		need += n;
	}
	return size && need > size ? -ERANGE : (int64_t)need;
}

int64_t counters_get(struct ggufs *fs, const char *name, char *buf, size_t size)
{
	if (strncmp(name, "user.ggufs.", 11) != 0)
		return -ENOENT;   /* not ours: the tree's */
	struct remote_counters rc;
	gather(fs, &rc);
	for (int k = 0; k < C_COUNT; k++) {
		if (strcmp(name, counter_name[k]) != 0 || !applies(fs, &rc, (enum counter)k))
			continue;
		char value[2 * GGUF_ERR_MAX + 64];
		counter_value(fs, &rc, (enum counter)k, value, sizeof value);
		return xattr_value(buf, size, value, strlen(value));
	}
	return -ENODATA;
}
