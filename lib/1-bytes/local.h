/* A local file as a byte source (source.h): opened read-only and mapped whole, so that
 * reads are copies out of the mapping and visits are zero-copy; both first check that
 * the file still holds the bytes, and touch the mapping under the SIGBUS guard
 * (guard.h), so that a file that shrinks under the mount gives -EIO, never zeros from
 * the tail of a page nor a dead process. */
#ifndef GGUFS_LOCAL_H
#define GGUFS_LOCAL_H

#include <stdint.h>
#include <sys/stat.h>

#include "errline.h"
#include "source.h"

/* Opens and maps the regular, non-empty file at path: its source, with its stat in *st,
 * its mapping (the whole file, PROT_READ, MAP_SHARED; the source's) in *map and its
 * size in *size. On failure NULL with "PATH: problem" in err. */
struct source *local_open(const char *path, struct stat *st, const uint8_t **map,
                          uint64_t *size, char err[GGUF_ERR_MAX]);

#endif
