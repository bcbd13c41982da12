/* Which .safetensors files of a folder the converter reads, in its order: with
 * model.safetensors.index.json, the files its weight_map names (each once, sorted by
 * name); else every "model*.safetensors" of the folder, sorted (get_model_part_names).
 * The index is hostile input: a weight_map that is no object of names, or a file name
 * that is not a plain name in the folder ("", ".", "..", a slash), is refused in one
 * line naming the file. */
#ifndef GGUFS_ST_PARTS_H
#define GGUFS_ST_PARTS_H

#include <stddef.h>

#include "errline.h"

/* The most parts a model may have. */
#define ST_MAX_PARTS 4096u

/* The part names of an index's len bytes at json into *names (malloc'ed, each and the
 * array; *n of them, sorted, each once), and the tensor names its weight_map lists,
 * sorted, into *tensors (*n_tensors; NULL when not wanted): 0, or -1 with err. */
int st_parts_from_index(const char *json, size_t len, char ***names, size_t *n,
                        char ***tensors, size_t *n_tensors, char err[GGUF_ERR_MAX]);

/* Whether name is a part name the converter would read without an index: "model"
 * then anything then ".safetensors". */
int st_parts_is_part(const char *name);

/* Sorts names (byte by byte: Python's order of str in UTF-8). */
void st_parts_sort(char **names, size_t n);

/* Frees n names and their array. */
void st_parts_free(char **names, size_t n);

#endif
