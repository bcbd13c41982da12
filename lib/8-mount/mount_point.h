/* The mount point: is a path fit to mount on (a directory, empty, not already a mount,
 * not a dead FUSE mount), and what is mounted at a path, by the mount table
 * (/proc/self/mountinfo). Nothing is mounted or opened here but directories and the
 * table: the front end asks before it mounts, and while it serves. */
#ifndef GGUFS_MOUNT_POINT_H
#define GGUFS_MOUNT_POINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "log_escape.h"

/* The size of mount_point_check's error line: as long as a line log_errf says, since
 * it names the mount point, a model and a folder, each a path up to PATH_MAX (the
 * error line's GGUF_ERR_MAX would cut a long one short). */
#define MOUNT_POINT_ERR_MAX LOG_ERR_LINE_MAX

/* The size of mount_point_mounted_at's dev: a "MAJ:MIN" and its NUL, with room. */
#define MOUNT_POINT_DEV_MAX 64

/* The absolute path of mount point given (malloc'ed, symlinks resolved), after checking
 * that it exists, is a directory, is not a dead FUSE mount, and is empty unless
 * nonempty (an empty directory that is itself a mount point is fine; a non-empty one
 * that has a mount on it is said to be mounted). NULL with one line in err saying why
 * not, without a "ggufs: " prefix: a missing one with the mkdir -p that makes it
 * (unless its nearest existing folder cannot be written), and, when given is a file
 * and model (the model operand, or NULL) an empty folder, that the operands look
 * swapped. */
char *mount_point_check(const char *given, const char *model, bool nonempty,
                        char err[MOUNT_POINT_ERR_MAX]);

/* True when a file system is mounted at path (absolute, symlinks resolved) by the
 * mount table of this process, /proc/self/mountinfo (read without touching any mounted
 * file system); false when none is, or the table cannot be read. what (size bytes) gets
 * the topmost one as "TYPE SOURCE", dev (MOUNT_POINT_DEV_MAX bytes, or NULL) its
 * "MAJ:MIN". */
bool mount_point_mounted_at(const char *path, char *what, size_t size, char *dev);

/* The same from a mount table in mountinfo's form, read from f to its end: lines
 * "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS",
 * with mountinfo's octal escapes (\040 for a space) undone in MOUNTPOINT and SOURCE.
 * A line without a SOURCE is passed over; the last line for path is the topmost. */
bool mount_point_find(FILE *f, const char *path, char *what, size_t size, char *dev);

#endif
