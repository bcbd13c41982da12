/* Mount-point checks (mount_point.h): refuse a path that is not a directory, is not
 * empty, already has a mount on it, or is a dead FUSE mount, before anything is opened;
 * and what the mount table says is mounted at a path. */
#include "mount_point.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The hint after "Transport endpoint is not connected". */
#define MOUNT_POINT_DEAD " (a FUSE mount whose daemon is gone: unmount it)"

/* Writes the error line into err from a printf format, cut short (never overflowing)
 * at MOUNT_POINT_ERR_MAX bytes as log_errf would cut it. */
__attribute__((format(printf, 2, 3)))
static void mount_point_errf(char err[MOUNT_POINT_ERR_MAX], const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, MOUNT_POINT_ERR_MAX, fmt, ap);
	va_end(ap);
}

/* 1 when directory path has no entries but . and .., 0 when it has, -errno when it
 * cannot be read. */
static int mount_point_dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int empty = 1;
	struct dirent *e;
	while (empty && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(d);
	return empty;
}

/* Undoes mountinfo's octal escapes (\040 for a space, ...) in s, in place; a backslash
 * not followed by three octal digits of a byte stays as it is. */
static void mount_point_unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

bool mount_point_find(FILE *f, const char *path, char *what, size_t size, char *dev)
{
	bool found = false;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *save, *field[5], *type = NULL, *source = NULL, *tok;
		int i = 0;
		for (tok = strtok_r(line, " \n", &save); tok && i < 5;
		     tok = strtok_r(NULL, " \n", &save))
			field[i++] = tok;
		if (i < 5)
			continue;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " \n", &save);
		if (tok && (type = strtok_r(NULL, " \n", &save)))
			source = strtok_r(NULL, " \n", &save);
		mount_point_unescape(field[4]);
		if (strcmp(field[4], path) != 0 || !source)
			continue;
		mount_point_unescape(source);
		snprintf(what, size, "%s %s", type, source);
		if (dev)
			snprintf(dev, MOUNT_POINT_DEV_MAX, "%s", field[2]);
		found = true;
	}
	free(line);
	return found;
}

bool mount_point_mounted_at(const char *path, char *what, size_t size, char *dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	bool found = mount_point_find(f, path, what, size, dev);
	fclose(f);
	return found;
}

/* Says in err that mount point given does not exist: with the mkdir -p that makes it,
 * unless its nearest existing folder cannot be written (a read-only file system,
 * another ggufs mount among them), where that would fail too. */
static void mount_point_say_missing(const char *given, char err[MOUNT_POINT_ERR_MAX])
{
	char *dir = strdup(given);
	int e = 0;
	while (dir) {
		char *slash = strrchr(dir, '/');
		if (!slash) {
			snprintf(dir, strlen(dir) + 1, ".");
		} else if (slash == dir) {
			dir[1] = 0;
		} else {
			*slash = 0;
		}
		struct stat st;
		if (stat(dir, &st) == 0) {
			e = access(dir, W_OK) == 0 ? 0 : errno;
			break;
		}
		if (strcmp(dir, ".") == 0 || strcmp(dir, "/") == 0)
			break;
	}
	if (dir && e)
		mount_point_errf(err, "%s: the mount point does not exist, and %s cannot be "
		                 "written (%s): mount on a folder elsewhere", given, dir,
		                 strerror(e));
	else
		mount_point_errf(err, "%s: the mount point does not exist (mkdir -p %s makes it)",
		                 given, given);
	free(dir);
}

char *mount_point_check(const char *given, const char *model, bool nonempty,
                        char err[MOUNT_POINT_ERR_MAX])
{
	struct stat st;
	if (stat(given, &st) != 0) {
		if (errno == ENOENT)
			mount_point_say_missing(given, err);
		else
			mount_point_errf(err, "%s: %s%s", given, strerror(errno),
			                 errno == ENOTCONN ? MOUNT_POINT_DEAD : "");
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		struct stat ms;
		if (model && stat(model, &ms) == 0 && S_ISDIR(ms.st_mode) &&
		    mount_point_dir_is_empty(model) == 1)
			mount_point_errf(err, "%s: not a directory, and %s is an empty one: the "
			                 "operands look swapped (ggufs MODEL MOUNTPOINT)", given, model);
		else
			mount_point_errf(err, "%s: not a directory", given);
		return NULL;
	}
	/* absolute, as fuse_parse_cmdline would make it: the daemon runs in "/" and
	 * unmounts by this name on SIGTERM */
	char *mountpoint = realpath(given, NULL);
	if (!mountpoint) {
		mount_point_errf(err, "%s: %s", given, strerror(errno));
		return NULL;
	}
	/* Mounting over files hides them, and a second mount on a live one stacks a
	 * tree nobody can reach: both are refused unless asked for. An empty directory
	 * that is itself a mount point (a volume, a bind mount) is fine. A directory we
	 * cannot list is left to the mount to judge, but a dead FUSE mount (its
	 * attributes still cached, so stat passed) is named. */
	int empty = mount_point_dir_is_empty(mountpoint);
	if (empty == -ENOTCONN) {
		mount_point_errf(err, "%s: %s%s", given, strerror(ENOTCONN), MOUNT_POINT_DEAD);
		free(mountpoint);
		return NULL;
	}
	if (!nonempty && empty == 0) {
		char what[PATH_MAX + 64];
		if (mount_point_mounted_at(mountpoint, what, sizeof what, NULL))
			mount_point_errf(err, "%s: already mounted (%s): unmount it first", given,
			                 what);
		else
			mount_point_errf(err, "%s: not empty (-o nonempty mounts over it)", given);
		free(mountpoint);
		return NULL;
	}
	return mountpoint;
}
