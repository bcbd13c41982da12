/* Mount-point checks: refuse a path that is not a directory, is not empty, already
 * has a mount on it, or is a dead FUSE mount, before anything is opened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"

/* 1 when directory path has no entries but . and .., 0 when it has, -errno when it
 * cannot be read. */
static int dir_is_empty(const char *path)
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

/* Undoes mountinfo's octal escapes (\040 for a space, ...) in place. */
static void unescape_mountinfo(char *s)
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

/* Reads /proc/self/mountinfo, which touches no mounted file system:
 * "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS". */
bool mountpoint_mounted_at(const char *path, char *what, size_t size, char *dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
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
		unescape_mountinfo(field[4]);
		if (strcmp(field[4], path) != 0 || !source)
			continue;
		unescape_mountinfo(source);
		snprintf(what, size, "%s %s", type, source);
		if (dev)
			snprintf(dev, 64, "%s", field[2]);
		found = true;
	}
	free(line);
	fclose(f);
	return found;
}

/* The hint after "Transport endpoint is not connected". */
#define DEAD_MOUNT " (a FUSE mount whose daemon is gone: unmount it)"

/* Says that mount point given does not exist: with the mkdir -p that makes it, unless
 * its nearest existing folder cannot be written (a read-only file system, another
 * ggufs mount among them), where that would fail too. */
static void say_missing(const char *given)
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
		log_errf("%s: the mount point does not exist, and %s cannot be written (%s): "
		         "mount on a folder elsewhere", given, dir, strerror(e));
	else
		log_errf("%s: the mount point does not exist (mkdir -p %s makes it)", given, given);
	free(dir);
}

char *mountpoint_check(const char *given, const char *model, bool nonempty)
{
	struct stat st;
	if (stat(given, &st) != 0 && errno == ENOENT) {
		say_missing(given);
		return NULL;
	}
	if (stat(given, &st) != 0) {
		log_errf("%s: %s%s", given, strerror(errno),
		        errno == ENOTCONN ? DEAD_MOUNT : "");
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		struct stat ms;
		if (model && stat(model, &ms) == 0 && S_ISDIR(ms.st_mode) && dir_is_empty(model) == 1)
			log_errf("%s: not a directory, and %s is an empty one: the operands look "
			         "swapped (ggufs MODEL MOUNTPOINT)", given, model);
		else
			log_errf("%s: not a directory", given);
		return NULL;
	}
	/* absolute, as fuse_parse_cmdline would make it: the daemon runs in "/" and
	 * unmounts by this name on SIGTERM */
	char *mountpoint = realpath(given, NULL);
	if (!mountpoint) {
		log_errf("%s: %s", given, strerror(errno));
		return NULL;
	}
	/* Mounting over files hides them, and a second mount on a live one stacks a
	 * tree nobody can reach: both are refused unless asked for. An empty directory
	 * that is itself a mount point (a volume, a bind mount) is fine. A directory we
	 * cannot list is left to the mount to judge, but a dead FUSE mount (its
	 * attributes still cached, so stat passed) is named. */
	int empty = dir_is_empty(mountpoint);
	if (empty == -ENOTCONN) {
		log_errf("%s: %s%s", given, strerror(ENOTCONN), DEAD_MOUNT);
		free(mountpoint);
		return NULL;
	}
	if (!nonempty && empty == 0) {
		char what[PATH_MAX + 64];
		if (mountpoint_mounted_at(mountpoint, what, sizeof what, NULL))
			log_errf("%s: already mounted (%s): unmount it first",
			        given, what);
		else
			log_errf("%s: not empty (-o nonempty mounts over it)",
			        given);
		free(mountpoint);
		return NULL;
	}
	return mountpoint;
}

bool mountpoint_device_check(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	int e = errno;
	struct stat st;
	if (e == ENOENT || e == ENODEV || e == ENXIO) {
		log_errf("/dev/fuse: %s: the kernel's FUSE is missing (modprobe fuse; "
		        "in a container: --device /dev/fuse)", strerror(e));
		return false;
	}
	if ((e != EACCES && e != EPERM) || stat("/dev/fuse", &st) != 0) {
		log_errf("/dev/fuse: %s", strerror(e));
		return false;
	}
	struct group *g = getgrgid(st.st_gid);
	struct passwd *u = getpwuid(st.st_uid);
	log_errf("/dev/fuse: %s (mode %04o, %s:%s): mounting needs read and write "
	        "access to it: run ggufs as root, or give /dev/fuse mode 0666 as most systems do, "
	        "or a group (such as fuse) that you are in", strerror(e),
	        (unsigned)(st.st_mode & 07777), u ? u->pw_name : "?", g ? g->gr_name : "?");
	return false;
}
