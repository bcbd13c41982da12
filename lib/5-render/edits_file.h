/* The edits file of -o edits=FILE: a metadata patch as JSON that people can read and
 * share, and the durable write of it.
 *
 *   {"ggufs_edits": 1,
 *    "model": {"size": 668788096, "header_xxh3": "9d0c3c5f4e2a7b61"},
 *    "deleted": ["some.stale.key"],
 *    "renamed": {"old.name": "new.name"},
 *    "set": {"general.name": {"type": "string", "value": "Llama (fixed)"},
 *            "my.new.key": {"type": "uint32", "value": 7}}}
 *
 * "model" names the model it was made for: the size of its unedited model.gguf and the
 * XXH3-64 of its unedited header (ov_identity). "deleted" and "renamed" name the
 * model's own keys by their original names; "set" holds, by their names after renames,
 * every key whose value differs from the model's and every new key, new keys in the
 * order they were made, each with gguf.json's type and value. A value that JSON cannot
 * hold exactly (a string that is not UTF-8, a NaN's payload, a bool byte other than 0
 * or 1) is written as {"type": T, "payload_hex": "..."}: its bytes as a GGUF file holds
 * them after the type (for an array: element type, count, elements). Members other than
 * these are ignored, so a file may carry a "comment". The file on disk, its lock and its
 * durable save are the tree layer's (lib/6-tree/edits_store.h). */
#ifndef GGUFS_EDITS_FILE_H
#define GGUFS_EDITS_FILE_H

#include <stdint.h>

#include "gguf.h"
#include "overlay.h"

/* The identity an edits file is checked against. */
struct edits_identity {
	uint64_t size;
	uint64_t header_hash;
};

/* The patch that makes state s from its model's metadata, as JSON text ending in a
 * newline: 0 with a malloc'd *out of *len bytes, or -1 out of memory. */
int edits_render(const struct ov_state *s, const struct edits_identity *id, char **out,
                 uint64_t *len);

/* The state that the patch [p, p + len) makes from m's metadata (gen 1; NULL when the
 * text is not such a patch, changes a key ov_refusal refuses, names a key m does not
 * have, or was made for another model: err says which, in one line). Hostile input:
 * every length checked, nesting bounded. */
struct ov_state *edits_parse(const struct ggufs_model *m, const struct edits_identity *id,
                             const char *p, uint64_t len, char err[GGUF_ERR_MAX]);

/* The largest edits file a mount loads (edits_store.h keeps it on disk). */
#define EDITS_FILE_MAX (UINT64_C(1) << 30)

#endif
