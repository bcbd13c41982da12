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
#include <sys/stat.h>

#include "libsource.h"
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

enum lib_kind {
	LIB_FOLDER,     /* the root or a folder of the source */
	LIB_PLAIN,      /* a file that is not a model, shown as itself */
	LIB_TSV,        /* models.tsv */
	LIB_JSON,       /* models.json */
	LIB_MODEL_DIR,  /* a model directory whose model is not built now */
	LIB_TREE,       /* a node of a built model's tree (its root: the model directory) */
	LIB_BROKEN,     /* the directory of a model that does not parse */
	LIB_ERROR,      /* its `error` file */
	LIB_COMPARE_DIR, /* a model directory's compare/ */
	LIB_COMPARE,    /* compare/OTHER in it */
};

struct lib_slot;

/* What an inode is, for one request or an open file: a LIB_TREE ref holds its model
 * built (library_put lets go). */
struct lib_ref {
	enum lib_kind kind;
	uint64_t ino;
	struct lib_slot *slot;          /* NULL for the root's own files */
	struct tree *tree;              /* LIB_TREE */
	const struct tree_node *node;   /* LIB_TREE */
	struct lib_slot *other;         /* LIB_COMPARE: the model compared with slot's */
	bool held;                      /* slot's model held built */
	bool pinned;                    /* slot (and other) held: not freed meanwhile */
};

struct library;

/* The library over src (taken: freed with the library). NULL with one line in err:
 * the root cannot be listed. Mounting reads nothing but the root's listing. */
struct library *library_open(struct lib_source *src, char err[GGUF_ERR_MAX]);
void library_free(struct library *lib);
/* -o requantize for every model of lib (tree_set_requantize), before it is mounted. */
void library_set_requantize(struct library *lib, bool on);
/* How the quants/ of every model of lib are made and kept (tree_set_quant_cache),
 * copied; before anything is read. false out of memory. */
bool library_set_quant_cache(struct library *lib, const struct tree_quant_cache *c);

/* The node of ino into *r, held (library_put lets go): 0, -ENOENT for a number never
 * given, -ESTALE for a slot freed since or a model whose file changed since its slot
 * was given, or -errno (then r holds nothing). build: for a model directory,
 * build the model (LIB_TREE or LIB_BROKEN) rather than answer LIB_MODEL_DIR. */
int library_get(struct library *lib, uint64_t ino, bool build, struct lib_ref *r);
/* The child called name of directory parent into *r, held as library_get holds it: 0,
 * -ENOENT, -ENOTDIR or -errno. A
 * lookup inside a model directory builds the model; one in a folder reads its listing
 * again if the folder changed, and looks again at the file it names. */
int library_lookup(struct library *lib, uint64_t parent, const char *name, struct lib_ref *r);
/* Another hold on r (its slot, and its model built), for a copy that outlives the
 * request: each is let go by its own library_put. */
void library_hold(struct library *lib, struct lib_ref *r);
/* Lets go of r (any kind; a ref that holds nothing, or was let go, is fine). */
void library_put(struct library *lib, struct lib_ref *r);

/* The attributes of r (st_ino in the library's numbers): a folder's and plain file's
 * from the source (modes limited to reading), a model's as `ggufs FILE` shows them. */
void library_stat(struct library *lib, const struct lib_ref *r, struct stat *st);
/* The library's number of tree inode tree_ino of r's model (LIB_TREE). */
uint64_t library_tree_ino(const struct lib_ref *r, uint64_t tree_ino);
/* The number of r's parent directory. */
uint64_t library_parent(const struct lib_ref *r);

/* A listing of a folder or a broken model's directory: names, numbers, and which are
 * directories, as they were when listed; library_list_free lets it go. A name is not
 * copied: the listing holds the slot it names (a folder of 200,000 files listed while
 * open costs no second copy of their names). */
struct lib_list_entry {
	const char *name;
	uint64_t ino;
	bool dir;
	struct lib_slot *held;    /* the slot whose name it is, or NULL (a constant) */
};
int library_list(struct library *lib, const struct lib_ref *r, struct lib_list_entry **out,
                 size_t *n);
void library_list_free(struct library *lib, struct lib_list_entry *e, size_t n);

/* The entries of directory r of a model's tree (LIB_TREE): the tree's own, then, in a
 * model directory, compare/. Entry pos (below the count) into *name (the tree's or a
 * constant), *ino (the library's number) and *dir. */
uint64_t library_tree_dir_count(const struct lib_ref *r);
void library_tree_dir_entry(const struct lib_ref *r, uint64_t pos, const char **name,
                            uint64_t *ino, bool *dir);

/* Up to len bytes at off of compare/OTHER (LIB_COMPARE): the count, or -EIO when a
 * model does not parse or cannot be read (said in the log and in err), -ESTALE, -ENOMEM.
 * The text
 * is computed by the first lookup or read (others of the same pair wait for it) and
 * kept. */
int64_t library_compare_read(struct library *lib, const struct lib_ref *r, char *buf,
                             uint64_t len, uint64_t off, char err[GGUF_ERR_MAX]);
/* The length of compare/OTHER's text (LIB_COMPARE) into *size, computing the comparison
 * when no length is kept (its first lookup): 0, or -errno as library_compare_read. The
 * length stays known for the mount even when the text is let go. */
int library_compare_size(struct library *lib, const struct lib_ref *r, uint64_t *size,
                         char err[GGUF_ERR_MAX]);
/* That length if known (under the library's lock), else 0. */
uint64_t library_compare_known(struct library *lib, const struct lib_ref *r);
/* For tests: comparisons computed so far. */
uint64_t library_compares_made(struct library *lib);

/* A plain file: opened (-ESTALE when its name leads to another file than the version
 * looked up; an EIO's cause said in the log and given in why), read (the count, or
 * -errno), closed. */
int library_file_open(struct library *lib, const struct lib_ref *r, void **file,
                      char why[GGUF_ERR_MAX]);
int64_t library_file_read(struct library *lib, void *file, char *buf, uint64_t len, uint64_t off);
void library_file_close(struct library *lib, void *file);

/* The `error` file's text ("ggufs: LINE\n") of r (LIB_ERROR), or NULL. */
const char *library_error_text(const struct lib_ref *r);

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
void library_kernel_hold(struct library *lib, const struct lib_ref *r);
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
