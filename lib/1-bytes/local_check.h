/* A local file opened only once what it is has been checked: its name resolved to a
 * descriptor that opens nothing (O_PATH, symbolic links followed: a FIFO waits for no
 * writer, a device is not opened), the file that descriptor holds checked (a regular
 * file, and whatever the caller checks besides: where it lies, its owner, its version),
 * and then that very file opened for reading through the descriptor, never by its name
 * again. So what the daemon reads is the file it checked, whatever the name holds by
 * the time it reads; and the bytes of a file refused are never read at all. */
#ifndef GGUFS_LOCAL_CHECK_H
#define GGUFS_LOCAL_CHECK_H

#include <stdbool.h>
#include <sys/stat.h>

#include "errline.h"

/* Resolves name, relative to folder dirfd (AT_FDCWD: the working directory; unused for
 * an absolute name), symbolic links followed, to a descriptor that opens nothing
 * (O_PATH, close-on-exec): it, with the file's stat in *st, or -errno (-ENOENT: there
 * is no such file). */
int local_check_resolve(int dirfd, const char *name, struct stat *st);

/* 0 when st is a regular file's, else -errno with "SHOWN: why" in err: a folder "is a
 * directory, not a GGUF file" (-EISDIR), anything else "not a regular file (a FIFO)"
 * with its kind (-EINVAL). */
int local_check_regular(const struct stat *st, const char *shown, char err[GGUF_ERR_MAX]);

/* Opens for reading the file that O_PATH descriptor pfd holds, of stat st (as
 * resolved), if it is a regular file (anything else is not opened, local_check_regular
 * says why): through /proc/self/fd (O_RDONLY, O_NONBLOCK and O_NOCTTY all the same,
 * close-on-exec), then checked to be that file (device and inode). The descriptor, or
 * -errno with "SHOWN: why" in err (-ESTALE: another file; -EIO: no /proc). pfd stays
 * the caller's. */
int local_check_reopen(int pfd, const struct stat *st, const char *shown,
                       char err[GGUF_ERR_MAX]);

/* True when every user that the mode of file first lets read it may read file st too,
 * for a file whose bytes are shown under first's owner, group and mode (a shard of a
 * model that other users read): st has first's owner, and each read bit of first's is
 * st's too; with a group other than first's, st must let both its group and others
 * read wherever first lets its group or others read (a reader may be in either group).
 * False with why (a phrase: "owned by uid 0, not by uid 1000 as the first file is") in
 * why. Root reads everything, and an ACL is not looked at: the modes decide, as they do
 * for the tree. */
bool local_check_reads(const struct stat *first, const struct stat *st,
                       char why[GGUF_ERR_MAX]);

#endif
