/* The models a list of names names, in order (--check's operands): a name of one model
 * as itself, a library's models each in the library's order (models.tsv's), opened as
 * the mount of the library opens them (the same files or URLs, named as a single mount
 * of each is named), so that checking a library checks what its mount serves. */
#ifndef GGUFS_NAME_LIST_H
#define GGUFS_NAME_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "errline.h"
#include "open_name.h"

/* One entry: a model to open, or a library that could not be opened or listed. */
struct name_list_item {
	const char *name;       /* the name of one model (the caller's string), or NULL */
	struct library *lib;    /* else a model of this library (the list's) */
	char *path;             /* at this path of its source (owned) */
	char *error;            /* or, for neither, why a library is left out: one line */
};

struct name_list {
	struct name_list_item *items;
	size_t n;
	struct library **libs;  /* the libraries opened, freed with the list */
	size_t n_libs;
};

/* The list of the n names (the caller's, kept while the list is used), each library
 * opened (open_name_library) and listed, with o's options. True; or false with one line
 * in err (out of memory), the list empty. */
bool name_list_make(struct name_list *l, const char *const *names, size_t n,
                    const struct open_name_opts *o, char err[GGUF_ERR_MAX]);
/* Opens the model of item i (not an error's): open_name_model for a name (*shown as
 * it says), library_model_open for a library's (*shown NULL). NULL with one line in err. */
struct ggufs_model *name_list_open(const struct name_list *l, size_t i,
                                   const struct open_name_opts *o, char **shown,
                                   char err[GGUF_ERR_MAX]);
void name_list_free(struct name_list *l);

#endif
