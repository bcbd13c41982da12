/* A library: a folder of models (or, later, a hub repository or a bucket) shown as one
 * tree: every model a directory holding the whole tree of that model (tree.h), folders
 * as folders, other files as themselves, and models.tsv / models.json at the root.
 * Nothing here knows FUSE; the source of listings and bytes is libsource.h's.
 *
 * Inode numbers: every folder, file and model version the library holds gets a slot
 * number, never given twice in a mount; a node's number is slot << LIB_LOW_BITS | low,
 * where low is 1 for the folder, file or model directory itself and, inside a model, the
 * model's own tree inode number (tree.h: the model directory is the tree's root, 1), or
 * 2 for the `error` file of a model that does not parse. Slot 0 is the root: 1 itself, 2
 * models.tsv, 3 models.json. A model directory's compare/ is LIB_COMPARE_LOW and its
 * compare/OTHER LIB_COMPARE_LOW + 1 + OTHER's slot number, above every number of the
 * model's tree. A model's tree numbers derive from its file, so a model released and
 * built again has the same numbers; a file replaced under the same name is a new slot (a
 * new version), as a file replaced by rename is a new inode.
 *
 * A slot number is a place in the slot table (LIB_INDEX_BITS) and that place's
 * generation above it: a slot that no listing, open file or request holds any more (a
 * version gone from its folder) is freed, and its place is taken again, long after,
 * under the next generation; a place whose generations are used up is not taken again.
 * So memory follows the versions the folders hold now, and a number the kernel may
 * still hold (a cwd in a folder removed) names nothing, ESTALE, rather than another
 * file. A number the kernel was given by a lookup holds its slot until the kernel
 * forgets it (library_kernel_hold, library_forget): the same name leads to it meanwhile.
 *
 * Lazy and bounded: listing a folder reads its source listing only; a model is opened
 * and its tree built at the first lookup inside its directory (or a read of models.tsv,
 * which opens every model once and keeps only its row). At most LIB_KEEP_IDLE built
 * models without a user (a request in progress or an open file) stay built: past that
 * the least recently used is released (tree, mapping), to be built again when used.
 * A slot is in use while held (a lookup the kernel keeps, a request, an open file) and
 * a folder while a slot of its listing is; a folder in use keeps its listing. Of a local
 * source's folders not in use (lib_source.links: symbolic links may give a folder
 * 2^n paths, each a folder here), the listings of the most recently used are kept up to
 * LIB_KEEP_IDLE_ENTRIES slots in all, the least recently used let go past that (its
 * slots freed: listed again, under new numbers, when next used), and a large release's
 * memory given back (mem_give_back.h); other sources' folders have one path each, and
 * keep their listings.
 *
 * What each kind of entry does is one provider (provider.h), a namespace's own (no tree
 * instance): lib_folder.c (the root and folders), lib_plain.c (other files),
 * lib_tables.c (models.tsv, models.json), lib_model_dir.c (a model directory),
 * lib_broken.c (a model that does not parse, and its `error`), library_compare.c
 * (compare/ and its files); a built model's own files are its tree's. library_ns.c
 * makes the library a mount's namespace (ns.h) over library_get, library_lookup and
 * library_put.
 *
 * compare/ (library_compare.c): in every model directory, a file for each other model
 * of the same folder holding `ggufs --diff THIS OTHER`. Listing it reads the folder's
 * listing only; the first lookup or read of a file computes the comparison (one at a time, on
 * every core, in bounded memory) and keeps its text, up to LIB_COMPARE_KEEP bytes of
 * texts, the least recently read let go past that (made again, the same, if read
 * again); its length (st_size) is computed at its first lookup and kept. */
#ifndef GGUFS_LIBRARY_H
#define GGUFS_LIBRARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libsource.h"
#include "ns.h"
#include "tree.h"

#define LIB_LOW_BITS 32
#define LIB_LOW_MASK ((UINT64_C(1) << LIB_LOW_BITS) - 1)
#define LIB_ROOT_INO 1
#define LIB_TSV_INO 2
#define LIB_JSON_INO 3
#define LIB_ERROR_LOW 2
#define LIB_KEEP_IDLE 8
/* slots in the listings of idle folders kept (a local source's: see the top) */
#define LIB_KEEP_IDLE_ENTRIES 2048
/* A slot number: its place in the table (at most LIB_SLOTS_MAX live slots), and the
 * place's generation in the bits above; every number fits 31 bits, and so every inode
 * number 63. */
#define LIB_INDEX_BITS 23
#define LIB_SLOTS_MAX (UINT64_C(1) << LIB_INDEX_BITS)
#define LIB_NO_BITS 31
#define LIB_GENERATIONS (UINT64_C(1) << (LIB_NO_BITS - LIB_INDEX_BITS))
/* compare/ and, above it, compare/OTHER for every slot number OTHER */
#define LIB_COMPARE_LOW ((UINT64_C(1) << LIB_LOW_BITS) - (UINT64_C(1) << LIB_NO_BITS) - 1)
#define LIB_COMPARE_NAME "compare"
#define LIB_COMPARE_KEEP (UINT64_C(64) << 20)

/* A library's ref (provider.h's node_ref) holds in hold[]: its slot (struct lib_slot *;
 * 0 for the root's own files), compare/OTHER's other model's slot, and what of them it
 * holds (LIB_HELD: the slot's model built; LIB_PINNED: the slots). ino_base is the
 * slot's number << LIB_LOW_BITS inside a model directory (its tree's numbers, compare/,
 * error), else 0. */
#define LIB_HOLD_SLOT 0
#define LIB_HOLD_OTHER 1
#define LIB_HOLD_FLAGS 2
#define LIB_HELD 1u
#define LIB_PINNED 2u

/* The library's providers (ctx: the library). */
extern const struct tree_provider lib_folder_provider;      /* the root, a folder */
extern const struct tree_provider lib_plain_provider;       /* a file shown as itself */
extern const struct tree_provider lib_tables_provider;      /* models.tsv, models.json */
extern const struct tree_provider lib_model_dir_provider;   /* a model directory */
extern const struct tree_provider lib_broken_provider;      /* a model that does not parse */
extern const struct tree_provider lib_error_provider;       /* its `error` */
extern const struct tree_provider lib_compare_dir_provider; /* compare/ */
extern const struct tree_provider lib_compare_provider;     /* compare/OTHER */

struct library;

/* The library over src (taken: freed with the library), every model's tree built with
 * the providers of kit (the mount's, with its options: it must outlive the library), or
 * with NULL the core's alone (a library only listed). NULL with one line in err: the
 * root cannot be listed. Mounting reads nothing but the root's listing. */
struct library *library_open(struct lib_source *src, const struct tree_kit *kit,
                             char err[GGUF_ERR_MAX]);
void library_free(struct library *lib);

/* The namespace of lib (ns.h) for a mount: NULL out of memory. Its get and lookup are
 * library_get's and library_lookup's, and size compare/OTHER (its comparison made at
 * its first: EIO with why when a model of the pair cannot be read); it keeps no
 * negative entry (NS_NO_NEGATIVE); the root's user.ggufs.* add models_opened,
 * models_built and slots. Freed by its free, before lib. */
struct ns *library_ns_new(struct library *lib);

/* The node of ino into *r, held (library_put lets go): 0, -ENOENT for a number never
 * given, -ESTALE for a slot freed since or a model whose file changed since its slot
 * was given, or -errno (then r holds nothing). build: for a model directory, build the
 * model (its tree's root, or a broken model) rather than answer the slot alone. */
int library_get(struct library *lib, uint64_t ino, bool build, struct node_ref *r);
/* The child called name of directory parent into *r, held as library_get holds it: 0,
 * -ENOENT, -ENOTDIR or -errno; on 0 and -ENOENT, *dir_flags gets parent's provider's
 * flags (TREE_P_NAMES_CHANGE). Parent and child are found under one hold of the lock.
 * A lookup inside a model directory builds the model; one in a folder reads its listing
 * again if the folder changed, and looks again at the file it names. */
int library_lookup(struct library *lib, uint64_t parent, const char *name, struct node_ref *r,
                   unsigned *dir_flags);
/* Lets go of r (any; a ref that holds nothing, or was let go, is fine). */
void library_put(struct library *lib, struct node_ref *r);

/* For tests: comparisons computed so far. */
uint64_t library_compares_made(struct library *lib);

/* models.tsv (json false) or models.json of the whole library now, malloc'ed into *text:
 * every folder listed, every model opened once per version (its row kept). 0 or
 * -ENOMEM. */
int library_table(struct library *lib, bool json, char **text, size_t *len);

/* Every model of the library by the path of its first file in the source, sorted by
 * the models' paths in the library, every folder listed: into *paths (n of them, each
 * and the array malloc'ed). 0 or -ENOMEM. For --check, with library_model_open. */
int library_model_paths(struct library *lib, char ***paths, size_t *n);
/* The model whose first file is at path in the source (library_model_paths), opened
 * as the library opens it: the same file or URL, named as a single mount of it is
 * (libsource.h's open_model), a new model the caller closes. NULL with one line in err. */
struct ggufs_model *library_model_open(struct library *lib, const char *path,
                                       char err[GGUF_ERR_MAX]);

/* The kernel keeps the number it was given for r (a lookup's reply): r's slot is held
 * until the kernel forgets it (library_forget), so that the number stays the slot's and
 * its name leads to it. Nothing for the root's own files. */
void library_kernel_hold(struct library *lib, const struct node_ref *r);
/* The kernel forgot n of its lookups of ino (FUSE's FORGET): that many of the kernel's
 * holds on its slot let go (no more than it has; nothing for a number that names no
 * slot), and the slot freed, or its folder's listing left idle, when nothing else uses
 * it. */
void library_forget(struct library *lib, uint64_t ino, uint64_t n);
/* For tests and the root's attributes: models opened so far, and built now; slots now
 * (every folder, file and model version held, the root's among them). */
void library_counts(struct library *lib, uint64_t *opened, uint64_t *built);
uint64_t library_slots(struct library *lib);

#endif
