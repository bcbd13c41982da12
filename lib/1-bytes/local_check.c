#include "local_check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int local_check_resolve(int dirfd, const char *name, struct stat *st)
{
	int pfd = openat(dirfd, name, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st) != 0) {
		int e = errno;
		close(pfd);
		return -e;
	}
	return pfd;
}

/* What a file of mode is, for a line that says why it is not read. */
static const char *kind_of(mode_t mode)
{
	return S_ISFIFO(mode)   ? "a FIFO"
	       : S_ISCHR(mode)  ? "a character device"
	       : S_ISBLK(mode)  ? "a block device"
	       : S_ISSOCK(mode) ? "a socket"
	                        : "not a file";
}

int local_check_regular(const struct stat *st, const char *shown, char err[GGUF_ERR_MAX])
{
	if (S_ISREG(st->st_mode))
		return 0;
	if (S_ISDIR(st->st_mode)) {
		gguf_errf(err, "%s: is a directory, not a GGUF file", shown);
		return -EISDIR;
	}
	gguf_errf(err, "%s: not a regular file (%s)", shown, kind_of(st->st_mode));
	return -EINVAL;
}

int local_check_reopen(int pfd, const struct stat *st, const char *shown,
                       char err[GGUF_ERR_MAX])
{
	int r = local_check_regular(st, shown, err);
	if (r < 0)
		return r;
	char proc[40];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	int fd = open(proc, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		/* pfd is open: only /proc itself can be missing (the file is not: that is
		 * never told the model's user as "no such file" of a shard) */
		gguf_errf(err, "%s: cannot be opened through /proc/self/fd: is /proc mounted?",
		          shown);
		return -EIO;
	}
	if (fd < 0) {
		r = -errno;
		gguf_errf(err, "%s: %s", shown, strerror(-r));
		return r;
	}
	struct stat got;
	if (fstat(fd, &got) != 0 || got.st_dev != st->st_dev || got.st_ino != st->st_ino) {
		close(fd);
		gguf_errf(err, "%s: %s", shown, strerror(ESTALE));
		return -ESTALE;
	}
	return fd;
}

/* True when mode grants read to the class whose read bit is bit. */
static bool reads(mode_t mode, mode_t bit)
{
	return (mode & bit) != 0;
}

bool local_check_reads(const struct stat *first, const struct stat *st,
                       char why[GGUF_ERR_MAX])
{
	if (st->st_uid != first->st_uid) {
		gguf_errf(why, "owned by uid %lu, not by uid %lu as the first file is",
		          (unsigned long)st->st_uid, (unsigned long)first->st_uid);
		return false;
	}
	const mode_t a = first->st_mode, b = st->st_mode;
	bool ok = !reads(a, S_IRUSR) || reads(b, S_IRUSR);
	if (st->st_gid == first->st_gid) {
		ok = ok && (!reads(a, S_IRGRP) || reads(b, S_IRGRP)) &&
		     (!reads(a, S_IROTH) || reads(b, S_IROTH));
	} else if (reads(a, S_IRGRP) || reads(a, S_IROTH)) {
		/* a reader in first's group may be outside st's, and one outside first's
		 * group in st's */
		ok = ok && reads(b, S_IRGRP) && reads(b, S_IROTH);
	}
	if (!ok)
		gguf_errf(why, "its mode %03o (group %lu) lets fewer users read it than the first "
		          "file's %03o (group %lu)", (unsigned)(b & 0777), (unsigned long)st->st_gid,
		          (unsigned)(a & 0777), (unsigned long)first->st_gid);
	return ok;
}
