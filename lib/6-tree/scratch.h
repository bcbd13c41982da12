/* The scratch files of metadata/ with -o edits (ggufs(1), METADATA EDITS): the
 * temporaries editors and tools make beside the file they save (vim's .KEY.swp, its
 * 4913 probe and KEY~ backup, emacs's #KEY#, rsync's .KEY.XXXXXX). They are plain
 * files kept in memory for the mount's life, never keys: they reach neither the edits
 * file nor model.gguf. A scratch file may hold a key "moved aside" (renamed to a scratch
 * name, as vim renames KEY to KEY~ before it writes KEY anew): the key stays in the
 * metadata, unlisted, until its name is made again or the scratch file goes
 * (tree_edit.c decides what that means; this file only keeps the mark).
 *
 * Every function is thread-safe. Inode numbers are TREE_ZONE_X + n (tree_ino.h: a
 * namespace's own numbers), never reused during the mount. */
#ifndef GGUFS_SCRATCH_H
#define GGUFS_SCRATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* What all scratch files of a mount may hold together, and how many there may be:
 * past either a write or a create is ENOSPC. An editor's temporaries are a copy or two
 * of one key's text and a swap file. */
#define SCRATCH_BYTES_MAX (UINT64_C(256) << 20)
#define SCRATCH_FILES_MAX 1024

/* No key is moved aside into the scratch file. */
#define SCRATCH_NO_KEY UINT64_MAX

struct scratch_set;
struct scratch_file;

/* True when name (a file name of metadata/) marks an editor's or a tool's temporary: a
 * leading '.', a trailing '~', "#...#", or vim's probe of whether the directory can be
 * written (4913, then 5036, 5159, ...: 4913 + 123 k). No key's file name is one
 * (names.h escapes such a name's first or last byte). */
bool scratch_is_name(const char *name);

/* An empty set, or NULL out of memory. */
struct scratch_set *scratch_new(void);
/* Frees the set and every file in it (none may be held any more). */
void scratch_free(struct scratch_set *s);

/* A new scratch file called name holding text[0..len), marked as holding key id (or
 * SCRATCH_NO_KEY); one of that name is replaced. Its inode number into *ino. 0 or
 * -ENOSPC, -ENOMEM. */
int scratch_put_file(struct scratch_set *s, const char *name, const char *text, uint64_t len,
                     uint64_t key, uint64_t *ino);
/* A new empty scratch file called name (-EEXIST when there is one). */
int scratch_create(struct scratch_set *s, const char *name, uint64_t *ino);
/* Removes the file called name (-ENOENT); the key it held into *key (SCRATCH_NO_KEY when
 * none). Open files of it keep their text until closed. */
int scratch_unlink(struct scratch_set *s, const char *name, uint64_t *key);
/* Renames file from to name to (one called so is replaced). -ENOENT, or 0. */
int scratch_rename(struct scratch_set *s, const char *from, const char *to);
/* The key held by the file called name, or SCRATCH_NO_KEY (also when there is none). */
uint64_t scratch_key(struct scratch_set *s, const char *name);
/* True when some file holds key id. */
bool scratch_holds(struct scratch_set *s, uint64_t key);
/* Every file that holds key id lets go of it. */
void scratch_release_key(struct scratch_set *s, uint64_t key);

/* The file of inode ino, or of name name, held (scratch_drop it), or NULL. */
struct scratch_file *scratch_by_ino(struct scratch_set *s, uint64_t ino);
struct scratch_file *scratch_by_name(struct scratch_set *s, const char *name);
void scratch_drop(struct scratch_file *f);

/* Its inode number, size and time of last change (mtime = ctime). */
uint64_t scratch_ino(const struct scratch_file *f);
void scratch_stat(struct scratch_file *f, uint64_t *size, struct timespec *mtime);
/* Reads up to len bytes at off into buf: the count (short at the end). */
uint64_t scratch_read(struct scratch_file *f, char *buf, uint64_t len, uint64_t off);
/* Writes text[0..len) at off (a hole is zeros). 0 or -ENOSPC, -EFBIG, -ENOMEM. */
int scratch_write(struct scratch_file *f, const char *text, uint64_t len, uint64_t off);
/* Cuts or zero-extends the file to size. 0 or as scratch_write. */
int scratch_truncate(struct scratch_file *f, uint64_t size);
/* A copy of the whole text (malloc'd, NUL after it) into *text and its length into *len.
 * 0 or -ENOMEM. */
int scratch_text(struct scratch_file *f, char **text, uint64_t *len);

/* The files now, in the order they were made: how many, and the name (copied into
 * name, NAME_MAX + 1 bytes) and inode number of the i-th. False past the end. */
uint64_t scratch_count(struct scratch_set *s);
bool scratch_entry(struct scratch_set *s, uint64_t i, char name[256], uint64_t *ino);

#endif
