/* The models a list of names names (name_list.h). */
#include "name_list.h"

#include <stdlib.h>
#include <string.h>

#include "library.h"

void name_list_free(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].path);
		free(l->items[i].error);
	}
	free(l->items);
	for (size_t i = 0; i < l->n_libs; i++)
		library_free(l->libs[i]);
	free(l->libs);
	memset(l, 0, sizeof *l);
}

/* Room in l for add more items: false out of memory. */
static bool name_list_grow(struct name_list *l, size_t add)
{
	if (add > SIZE_MAX / sizeof *l->items - l->n - 1)
		return false;
	struct name_list_item *grown = realloc(l->items, (l->n + add + 1) * sizeof *grown);
	if (!grown)
		return false;
	l->items = grown;
	return true;
}

/* Adds the models of the library name (kind: a library's), or one item saying why it
 * cannot be had: false out of memory. */
static bool name_list_library(struct name_list *l, const char *name, enum name_kind kind,
                              const struct open_name_opts *o)
{
	char why[GGUF_ERR_MAX];
	struct library *lib = open_name_library(name, kind, o, NULL, NULL, why);
	char **paths = NULL;
	size_t n = 0;
	if (lib) {
		l->libs[l->n_libs++] = lib;
		if (library_model_paths(lib, &paths, &n) < 0)
			return false;
	}
	if (!name_list_grow(l, lib ? n : 1)) {
		for (size_t i = 0; i < n; i++)
			free(paths[i]);
		free(paths);
		return false;
	}
	if (!lib) {
		char *error = strdup(why);
		l->items[l->n++] = (struct name_list_item){ .error = error };
		return error != NULL;
	}
	for (size_t i = 0; i < n; i++)
		l->items[l->n++] = (struct name_list_item){ .lib = lib, .path = paths[i] };
	free(paths);
	return true;
}

bool name_list_make(struct name_list *l, const char *const *names, size_t n,
                    const struct open_name_opts *o, char err[GGUF_ERR_MAX])
{
	memset(l, 0, sizeof *l);
	l->libs = calloc(n + 1, sizeof *l->libs);
	bool ok = l->libs != NULL;
	for (size_t k = 0; ok && k < n; k++) {
		const enum name_kind kind = name_kind_of(names[k]);
		if (name_kind_is_library(kind)) {
			ok = name_list_library(l, names[k], kind, o);
		} else if ((ok = name_list_grow(l, 1))) {
			l->items[l->n++] = (struct name_list_item){ .name = names[k] };
		}
	}
	if (!ok) {
		name_list_free(l);
		gguf_errf(err, "out of memory");
	}
	return ok;
}

struct ggufs_model *name_list_open(const struct name_list *l, size_t i,
                                   const struct open_name_opts *o, char **shown,
                                   char err[GGUF_ERR_MAX])
{
	const struct name_list_item *it = &l->items[i];
	*shown = NULL;
	if (it->name)
		return open_name_model(it->name, o, shown, err);
	return library_model_open(it->lib, it->path, err);
}
