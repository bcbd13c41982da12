/* Metadata edits of a mount (-o edits=FILE): the changes that metadata/ accepts, each
 * made as the next state of the metadata (overlay.h), written to FILE durably, then
 * given a tree of its own (tree_build_state) that becomes the current one. Nothing here
 * knows FUSE: the daemon translates calls and invalidates the kernel's caches.
 *
 * Every function is thread-safe: edits are made one at a time under a lock, and the
 * current tree is swapped under it, so a reader holding a tree keeps a consistent
 * whole. Each returns 0 or -errno, with one line in err naming the key and the reason
 * on failure (the caller logs it); a failed edit changes nothing, in the tree or in
 * FILE. */
#ifndef GGUFS_TREE_EDIT_H
#define GGUFS_TREE_EDIT_H

#include <stdint.h>

#include "tree.h"

struct tree_edits;

/* The edits of base's model kept in path (edits_store.h: the user's own, locked for the
 * result's life): the file read and checked against the model (a missing one is
 * created, holding no edits), and the tree of its state built. NULL with one line in
 * err: "FILE: it was made for another model (...)", "FILE: in use by another mount,
 * pid N (...)", ... base must outlive the result. */
struct tree_edits *tree_edits_open(struct tree *base, const char *path, char err[GGUF_ERR_MAX]);
void tree_edits_close(struct tree_edits *e);

/* For tests: the largest FILE a save makes, smaller than EDITS_FILE_MAX (a save past it
 * is EFBIG, as one past EDITS_FILE_MAX is). */
void tree_edits_set_file_max(struct tree_edits *e, uint64_t max);

/* The current tree, held: tree_release it. */
struct tree *tree_edits_current(struct tree_edits *e);

/* The value of the key of file ino becomes text parsed by the key's type (parse_value.h);
 * EINVAL when it does not parse. Text that is exactly the key's rendering changes
 * nothing, so a copy out and back is always a no-op (even for a NaN's payload). */
int tree_edits_write(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX]);
/* Whether text could still become a value of the key's type once more is written: a
 * number or bool whose text already holds a byte no such text has, or is longer than
 * any such text, cannot (EINVAL). 0 otherwise. Changes nothing. */
int tree_edits_precheck(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                        char err[GGUF_ERR_MAX]);
/* The key of file ino takes the type named type (user.gguf.type's names), its text
 * parsed again as that type; EINVAL when it does not parse or type is no type. An
 * empty string (a key just created) takes the type's empty value (0, false, []). The type
 * set is remembered for the mount: an empty array of arrays, which holds no inner type,
 * takes its elements' type from it at the next write. */
int tree_edits_set_type(struct tree_edits *e, uint64_t ino, const char *type, uint64_t len,
                        char err[GGUF_ERR_MAX]);
/* A new key from file name name of metadata/ (the escaping undone; EINVAL for a name
 * that is not the file name of any key, EEXIST when it is taken): an empty string. Its
 * ino into *ino. */
int tree_edits_create(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX]);
/* The key of file name removed (ENOENT when none); its ino into *ino. */
int tree_edits_unlink(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX]);
/* The key of file from renamed to the key of file name to (a key of that name is
 * replaced, as rename(2) does). */
int tree_edits_rename(struct tree_edits *e, const char *from, const char *to,
                      char err[GGUF_ERR_MAX]);

#endif
