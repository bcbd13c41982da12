/* The general.* keys the converter writes for a folder (gguf-py's Metadata, from the
 * folder's name): general.name as id_to_title makes it, the basename, finetune,
 * version and size label get_model_id_components finds in the name (a size label
 * that is far from the model's parameter count counted as a finetune, as a context
 * length), else the size label of the parameter count (size_label). A name that is not
 * ASCII is refused (Python's Unicode rules for letters and digits are not followed).
 * What else feeds these keys in gguf-py (a README.md model card, generation_config.json's
 * sampling values, config.json's _name_or_path) is not read here: the model source
 * must refuse a folder holding them until it is. */
#ifndef GGUFS_ST_META_H
#define GGUFS_ST_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "st_kv.h"

/* What get_model_id_components makes of a model id (a folder's name; "ORG/NAME"
 * splits): each part malloc'ed, or NULL for none. */
struct st_name_parts {
	char *full, *org, *basename, *finetune, *version, *size_label;
};

/* get_model_id_components(id, total_params) into *p: 0, or -1 with err (out of memory,
 * or an id ggufs does not read: not ASCII). */
int st_meta_id_components(const char *id, int64_t total_params, struct st_name_parts *p,
                          char err[GGUF_ERR_MAX]);

/* Frees the parts. */
void st_meta_parts_free(struct st_name_parts *p);

/* id_to_title(s) into out (size bytes): false when it does not fit. */
bool st_meta_title(const char *s, char *out, size_t size);

/* size_label(total, ...) of a model without experts: "205K", "1.1B" ... into out. */
void st_meta_size_label(uint64_t total_params, char out[32]);

/* Appends what Metadata.set_gguf_meta_model writes for a folder named folder_name whose
 * tensors hold total_params parameters: general.name, then the version, finetune,
 * basename and size label found: 0, or -1 with err. */
int st_meta_write(const char *folder_name, uint64_t total_params, struct st_kv *kv,
                  char err[GGUF_ERR_MAX]);

#endif
