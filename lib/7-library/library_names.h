/* The names a library shows for one folder of its source:
 *   - a folder, and a file that is not a model, keep their own names;
 *   - a model folder (lib_entry.model_folder) is the model directory of its own name;
 *   - a model file NAME.gguf is the model directory NAME; the shards of a split set,
 *     NAME-00001-of-0000N.gguf ... (one N), are the one model directory NAME, whose
 *     first file is the lowest shard there;
 *   - at the root, models.tsv and models.json are the library's own: source entries of
 *     those names are not shown;
 *   - a model whose NAME is taken (by a folder or file of that name, or by a model
 *     before it in the byte order of first file names) is named after its first file,
 *     ".gguf" and all; should that be taken too, NAME~2, NAME~3, ...
 * The man page states the same rules. */
#ifndef GGUFS_LIBRARY_NAMES_H
#define GGUFS_LIBRARY_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "libsource.h"

enum lib_node_type { LIB_NODE_DIR, LIB_NODE_FILE, LIB_NODE_MODEL };

struct lib_name {
	const char *name;         /* as the library shows it: the entry's own name (borrowed
	                           * from it), or own */
	char *own;                /* a name made for a model (NAME, NAME~2), or NULL */
	enum lib_node_type type;
	size_t entry;             /* the source entry: a model's first file */
	uint32_t files;           /* a model: its files in the folder */
	uint64_t version;         /* the entry's version; a model's: all its files' hashed */
};

/* The library names of the n entries e of one folder (root: the library's root), sorted
 * by name, into *out (lib_names_free before e is freed: a name equal to its entry's is
 * the entry's); e is sorted by name in place. 0 or -ENOMEM. */
int lib_names(struct lib_entry *e, size_t n, bool root, struct lib_name **out, size_t *n_out);
void lib_names_free(struct lib_name *names, size_t n);

/* The version of a model's files so far (versions: the first file's, then this of
 * each after it, in shard order) with file version next after them: what a model's
 * lib_name.version is of the versions of its files. */
uint64_t lib_names_version_add(uint64_t versions, uint64_t next);

/* The names the library keeps for itself at its root. */
#define LIB_TSV_NAME "models.tsv"
#define LIB_JSON_NAME "models.json"

#endif
