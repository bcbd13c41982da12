/* The edits file of -o edits=FILE on disk (its text is edits_file.h's): trusted only when
 * it is the user's own, held by one mount at a time, and replaced durably at each save.
 *
 * FILE and its directory must belong to the user running ggufs and be writable by
 * nobody else (the rule of cache_dir): another user who could write either could put
 * edits into the model that the mount serves. FILE is opened without following a
 * symlink and without blocking (a FIFO, a device or a directory is refused). It is
 * flock'ed for the store's life, and each save locks the new file before renaming it
 * over the old, so the inode at FILE's name is locked for as long as a mount holds it; a
 * second store of the same FILE is refused with the holder's pid and command line.
 *
 * A mount that is ending hands FILE over (when its leaving runs, leaving.h): it saves
 * nothing more and its lock becomes shared. A store opened meanwhile (a quick remount
 * on the same FILE, while the old daemon still exits) waits up to EDITS_LEAVING_WAIT_S
 * for that lock to end, instead of being refused; a holder that is not ending is
 * refused at once. */
#ifndef GGUFS_EDITS_STORE_H
#define GGUFS_EDITS_STORE_H

#include <stdint.h>

#include "gguf.h"

struct edits_store;
struct leaving;

#define EDITS_LEAVING_WAIT_S 10.0   /* how long an open waits for an ending holder */
#define EDITS_LEAVING_POLL_MS 20    /* how often it looks again meanwhile */

/* Opens FILE path for edits: checked as above, locked, the temporary files that a save
 * killed midway left beside it removed, and its directory found writable (a read-only
 * file system is refused now, not at the first edit). 0 with its text in a malloc'd
 * *text of *len bytes (at most EDITS_FILE_MAX), 1 when FILE does not exist (then
 * *text is NULL, and edits_store_save makes it), -1 with err (one line).
 *
 * The store is in leaving (the mount's hand-over, or NULL): when that runs, no save
 * from then on (edits_store_save fails with EROFS; one under way is waited for), and
 * FILE's lock is made shared, which tells a new store of FILE that this one is about to
 * let go (the lock ends at edits_store_close). */
int edits_store_open(const char *path, struct leaving *leaving, struct edits_store **out,
                     char **text, uint64_t *len, char err[GGUF_ERR_MAX]);
void edits_store_close(struct edits_store *s);

/* Makes FILE hold exactly [p, p + len), durably and atomically: a new file beside it
 * (mode 0600) written whole and fsync'd, locked, renamed over FILE, the directory
 * fsync'd; a crash at any moment leaves the old file or the new one, and a failure the
 * old. EFBIG when len is more than a mount loads (EDITS_FILE_MAX), EEXIST when FILE was
 * missing at open and another process has made it since, EROFS once the store's
 * leaving has run. 0, or -errno with err. */
int edits_store_save(struct edits_store *s, const char *p, uint64_t len,
                     char err[GGUF_ERR_MAX]);

/* For tests: the largest FILE a save makes, instead of EDITS_FILE_MAX. */
void edits_store_set_max(struct edits_store *s, uint64_t max);

#endif
