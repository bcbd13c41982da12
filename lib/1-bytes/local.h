/* A local file as a byte source (source.h): a descriptor open read-only (as
 * local_check.h opens one, checked first) mapped whole, so that reads are copies out of
 * the mapping and visits are zero-copy; both first check that
 * the file still holds the bytes, and touch the mapping under the SIGBUS guard
 * (guard.h), so that a file that shrinks under the mount gives -EIO with the shrink as
 * its why, never zeros from the tail of a page nor a dead process. */
#ifndef GGUFS_LOCAL_H
#define GGUFS_LOCAL_H

#include <stdint.h>
#include <sys/stat.h>

#include "errline.h"
#include "source.h"

/* Maps the file open for reading on fd (taken: the source's, closed on failure too),
 * which must be a regular, non-empty file (fstat on fd itself: what was opened is what
 * is checked and mapped; local_check.h opens a file so): its source, with its stat in
 * *st, its mapping (the whole file, PROT_READ, MAP_SHARED; the source's) in *map and
 * its size in *size; shown names the file in a failed read's why ("SHOWN: the file
 * shrank from A to B bytes ..."). On failure NULL with "SHOWN: problem" in err. */
struct source *local_open_fd(int fd, const char *shown, struct stat *st, const uint8_t **map,
                             uint64_t *size, char err[GGUF_ERR_MAX]);

#endif
