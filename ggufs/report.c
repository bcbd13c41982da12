/* Where the daemon's event log goes after the mount: syslog in the background,
 * -o log=FILE, or stderr with -f. lib/ says events through evlog.h (the mount's EIOs and
 * refused edits among them, lib/8-mount) and counts them (mount_counters.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "evlog.h"
#include "ggufs.h"
#include "iso_time.h"
#include "log_escape.h"

/* ---- the event log's sinks ---- */

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
	char when[ISO_TIME_BUF], mnt[PATH_MAX], out[EVLOG_LINE_MAX + PATH_MAX + 96];
	int n = snprintf(out, sizeof out, "%s ggufs[%ld]: %s: %s%s\n", iso_time_format(time(NULL), when),
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

/* evlog sink to syslog (ident ggufs, opened by report_start), with the mount point. */
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

int report_open_file(const char *path)
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

void report_early(struct ggufs *fs)
{
	if (fs->log_fd >= 0)
		evlog_set_sink(to_file, fs);
}

/* True when something listens for syslog's lines on /dev/log (a syslog daemon, or
 * journald's socket there): syslog(3) drops every line silently where nothing does. */
static bool syslog_listens(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
	bool ok = connect(fd, (const struct sockaddr *)&a, sizeof a) == 0;
	close(fd);
	return ok;
}

void report_warn_unheard(const struct ggufs *fs, bool foreground)
{
	if (!foreground && fs->log_fd < 0 && !syslog_listens())
		log_errf("warning: no syslog listens on /dev/log here, so the mount's events "
		         "(refused edits, failed reads) would be lost: mount with -o log=FILE to "
		         "keep them");
}

void report_start(struct ggufs *fs, bool foreground)
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

void report_stop(struct ggufs *fs)
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
