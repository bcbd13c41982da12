/* Metadata edits of a mount (-o edits=FILE): the changes that metadata/ accepts, each
 * made as the next state of the metadata (overlay.h), written to FILE durably, then
 * given a tree of its own (tree_build_state) that becomes the current one. Nothing here
 * knows FUSE: the daemon translates calls and invalidates the kernel's caches.
 *
 * Every function is thread-safe: edits are made one at a time under a lock, and the
 * current tree is swapped under another that readers take only for that pointer, so a
 * reader never waits for an edit's build or save, and one holding a tree keeps a
 * consistent whole. Each returns 0 or -errno, with one line in err naming the key and the reason
 * on failure (the caller logs it); a failed edit changes nothing, in the tree or in
 * FILE. */
#ifndef GGUFS_TREE_EDIT_H
#define GGUFS_TREE_EDIT_H

#include <stdint.h>

#include "tree.h"

struct tree_edits;
struct leaving;

/* The edits of base's model kept in path (edits_store.h: the user's own, locked for the
 * result's life): the file read and checked against the model (a missing one is
 * created, holding no edits), and the tree of its state built. NULL with one line in
 * err: "FILE: it was made for another model (...)", "FILE: in use by another mount,
 * pid N (...)", ... base must outlive the result. When leaving (the mount's hand-over,
 * leaving.h; or NULL) runs, FILE is handed over: no edit is saved from then on (one
 * under way is waited for), and a new mount of FILE waits for this one's end instead
 * of being refused. (The quants/ files of every state's tree are the mount's pool's to
 * hand over.) */
struct tree_edits *tree_edits_open(struct tree *base, const char *path, struct leaving *leaving,
                                   char err[GGUF_ERR_MAX]);
void tree_edits_close(struct tree_edits *e);

/* For tests: the largest FILE a save makes, smaller than EDITS_FILE_MAX (a save past it
 * is EFBIG, as one past EDITS_FILE_MAX is). */
void tree_edits_set_file_max(struct tree_edits *e, uint64_t max);

/* For tests: the next edit's state is generation gen (0: the one after the current), as
 * though that many edits had been made: its numbers' place in zone P (tree_ino.h). */
void tree_edits_set_next_gen(struct tree_edits *e, uint64_t gen);
/* For tests: hook(ctx) is called inside every commit, once the new state is built and
 * before FILE is written, with the edit lock held (NULL: none). */
void tree_edits_set_commit_hook(struct tree_edits *e, void (*hook)(void *), void *ctx);

/* The current tree, held: tree_release it. Never waits for an edit in progress (its
 * build and save): only for the swap of one pointer. */
struct tree *tree_edits_current(struct tree_edits *e);

/* The tree, held (tree_release it), that holds file ino: the current one when it has
 * it, else the newest older state that has it and that an open file still holds, or one
 * of the last states, held or not (two always, eight for a second after they stopped
 * being current: a lookup answered just before edits, whose open comes after them).
 * NULL when none has it: a file of a state gone, whose name is to be looked up again
 * (model.gguf is a new inode in each state, tree_ino.h), or no file at all. */
struct tree *tree_edits_holding(struct tree_edits *e, uint64_t ino);

/* The value of the key of file ino becomes text parsed by the key's type (parse_value.h);
 * EINVAL when it does not parse. Text that is exactly the key's rendering changes
 * nothing, so a copy out and back is always a no-op (even for a NaN's payload). */
int tree_edits_write(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX]);
/* Whether text would become the key's value, as tree_edits_write would make it (or
 * leave it, being its rendering), without making it: 0, or the -errno with err that
 * tree_edits_write would return short of saving FILE. */
int tree_edits_check(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX]);
/* A writer's text read line by line as it comes (an array's, tree_edits_precheck): the
 * part [start, end) of it the writer wrote in order, of which the lines before from
 * (from line number line, the text's first being 1) are known to parse. */
struct edit_lines {
	uint64_t from, line, end;
};
/* Whether text could still become a value of the key's type once more is written: a
 * number or bool whose text already holds a byte no such text has, or is longer than
 * any such text, cannot (EINVAL); nor can an array with a line in lines's part that is
 * whole (its newline written) and is no element, or (of numbers or bools) a last line
 * begun that can no longer be one (lines NULL: arrays pass). lines->from and ->line
 * advance over the lines found to parse. 0 otherwise. Changes nothing else. */
int tree_edits_precheck(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                        struct edit_lines *lines, char err[GGUF_ERR_MAX]);
/* The key of file ino takes the type named type (user.gguf.type's names), its text
 * parsed again as that type; EINVAL when it does not parse or type is no type. An
 * empty string (a key just created) takes the type's empty value (0, false, []). The type
 * set is remembered for the mount: an empty array of arrays, which holds no inner type,
 * takes its elements' type from it at the next write. */
int tree_edits_set_type(struct tree_edits *e, uint64_t ino, const char *type, uint64_t len,
                        char err[GGUF_ERR_MAX]);
/* metadata/'s names are keys' file names and scratch files' (scratch.h: editors'
 * temporaries, never keys). A key renamed to a scratch name is moved aside: unlisted
 * but still in the metadata (model.gguf and FILE keep it), its text in the scratch
 * file, until its name is made again (created, or renamed to: its value set as a write
 * would, at its place, by its type) or the scratch file goes (the key is deleted then).
 * So vim's save (KEY renamed to KEY~, KEY created and written, KEY~ removed) is a write
 * of KEY, and one killed midway loses nothing. */

/* The scratch files (scratch.h), for their reads and writes. */
struct scratch_set *tree_edits_scratch(struct tree_edits *e);
/* True when n, a node of t, is a key moved aside (not to be listed or looked up). */
bool tree_edits_aside(struct tree_edits *e, const struct tree *t, const struct tree_node *n);
/* True when file name name of metadata/ is there now: a listed key's or a scratch file's. */
bool tree_edits_taken(struct tree_edits *e, const char *name);

/* A new file called name in metadata/: for a scratch name an empty scratch file (EEXIST
 * when there is one); for a key moved aside, that key listed again (returns 1: its text
 * is to be written anew); else a new key, an empty string (the escaping undone; EINVAL
 * for a name that is not the file name of any key, EEXIST when it is taken). Its ino
 * into *ino. */
int tree_edits_create(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX]);
/* The key of file name removed (ENOENT when none), or the scratch file of that name (a
 * key moved aside into it is deleted with it); its ino into *ino. */
int tree_edits_unlink(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX]);
/* File from renamed to name to, as rename(2) replaces a target: a key to a new name is
 * renamed; over a key (listed or moved aside), whatever file it is, sets that key's value
 * from the file's text parsed by that key's type, in place, and from is gone; a key to a
 * scratch name is moved aside; a scratch file to a new key name makes a key of its text
 * (a string; or, holding a key moved aside, that key renamed and set; or, to the name
 * of one of the last keys deleted, that key back in its place and type, set: vim's way
 * back from a save refused). */
int tree_edits_rename(struct tree_edits *e, const char *from, const char *to,
                      char err[GGUF_ERR_MAX]);

#endif
