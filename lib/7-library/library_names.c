/* The names of a library folder (library_names.h): models grouped from their files,
 * then every name made unique by the stated rules. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "library_names.h"
#include "nameset.h"

void lib_names_free(struct lib_name *names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i].name);
	free(names);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lib_entry *)a)->name, ((const struct lib_entry *)b)->name);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lib_name *)a)->name, ((const struct lib_name *)b)->name);
}

/* A model file of the folder, with the set it belongs to. */
struct model_file {
	size_t entry;
	size_t prefix;     /* the length of NAME in its name */
	unsigned no, count;  /* shard number and count; 0 and 0 for a single file */
	const char *name;
};

/* Shards of one set together, in shard order: by NAME, then count, then number. */
static int file_cmp(const void *a, const void *b)
{
	const struct model_file *x = a, *y = b;
	size_t n = x->prefix < y->prefix ? x->prefix : y->prefix;
	int c = memcmp(x->name, y->name, n);
	if (c)
		return c;
	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	if (x->count != y->count)
		return x->count < y->count ? -1 : 1;
	return x->no < y->no ? -1 : x->no > y->no;
}

static bool same_set(const struct model_file *x, const struct model_file *y)
{
	return x->count && x->prefix == y->prefix && x->count == y->count &&
	       memcmp(x->name, y->name, x->prefix) == 0;
}

/* Models by the name of their first file, the order they claim names in. */
static int first_cmp(const void *a, const void *b)
{
	return strcmp(((const struct model_file *)a)->name, ((const struct model_file *)b)->name);
}

static bool is_model_file(const struct lib_entry *e)
{
	size_t n = strlen(e->name);
	return e->type == LIB_ENTRY_FILE && n > 5 && strcmp(e->name + n - 5, ".gguf") == 0;
}

/* Claims name (malloc'ed, kept in *str for the set) in set: false when taken. */
static bool claim(struct nameset *set, struct gguf_str *str, const char *name)
{
	str->ptr = name;
	str->len = strlen(name);
	return nameset_add(set, str);
}

int lib_names(struct lib_entry *e, size_t n, bool root, struct lib_name **out, size_t *n_out)
{
	*out = NULL;
	*n_out = 0;
	if (n)   /* e may be NULL for an empty folder */
		qsort(e, n, sizeof *e, entry_cmp);
	struct lib_name *names = calloc(n ? n : 1, sizeof *names);
	struct model_file *files = calloc(n ? n : 1, sizeof *files);
	struct gguf_str *strs = calloc(n + 2, sizeof *strs);
	struct nameset set = { 0 };
	size_t n_names = 0, n_files = 0;
	int r = -ENOMEM;
	if (!names || !files || !strs || !nameset_init(&set, n + 2))
		goto out;
	if (root && (!claim(&set, &strs[n], LIB_TSV_NAME) || !claim(&set, &strs[n + 1], LIB_JSON_NAME)))
		goto out;
	/* folders and other files first: their names are their own, and already unique */
	for (size_t i = 0; i < n; i++) {
		if (is_model_file(&e[i])) {
			struct model_file *f = &files[n_files++];
			f->entry = i;
			f->name = e[i].name;
			if (!model_split_name(e[i].name, &f->prefix, &f->no, &f->count) || f->count < 2) {
				f->prefix = strlen(e[i].name) - 5;
				f->no = f->count = 0;
			}
			continue;
		}
		if (!claim(&set, &strs[i], e[i].name))
			continue;   /* models.tsv or models.json at the root */
		struct lib_name *ln = &names[n_names];
		ln->name = strdup(e[i].name);
		if (!ln->name)
			goto out;
		ln->type = e[i].type == LIB_ENTRY_DIR ? LIB_NODE_DIR : LIB_NODE_FILE;
		ln->entry = i;
		ln->version = e[i].version;
		n_names++;
	}
	/* one model per set: its first file, how many, and their versions together */
	qsort(files, n_files, sizeof *files, file_cmp);
	size_t n_models = 0;
	uint64_t *versions = calloc(n_files ? n_files : 1, sizeof *versions);
	uint32_t *counts = calloc(n_files ? n_files : 1, sizeof *counts);
	if (!versions || !counts) {
		free(versions);
		free(counts);
		goto out;
	}
	for (size_t i = 0; i < n_files; i++) {
		if (i > 0 && same_set(&files[n_models - 1], &files[i])) {
			counts[n_models - 1]++;
			uint64_t pair[2] = { versions[n_models - 1], e[files[i].entry].version };
			versions[n_models - 1] = XXH3_64bits(pair, sizeof pair);
			continue;
		}
		files[n_models] = files[i];
		versions[n_models] = e[files[i].entry].version;
		counts[n_models] = 1;
		n_models++;
	}
	/* names claimed in the order of the first files' names; counts and versions follow
	 * the models through the sort by riding in their entry's slot */
	uint64_t *v_by_entry = calloc(n ? n : 1, sizeof *v_by_entry);
	uint32_t *c_by_entry = calloc(n ? n : 1, sizeof *c_by_entry);
	if (!v_by_entry || !c_by_entry) {
		free(versions);
		free(counts);
		free(v_by_entry);
		free(c_by_entry);
		goto out;
	}
	for (size_t i = 0; i < n_models; i++) {
		v_by_entry[files[i].entry] = versions[i];
		c_by_entry[files[i].entry] = counts[i];
	}
	free(versions);
	free(counts);
	qsort(files, n_models, sizeof *files, first_cmp);
	for (size_t i = 0; i < n_models; i++) {
		const struct model_file *f = &files[i];
		struct lib_name *ln = &names[n_names];
		ln->name = f->prefix ? strndup(f->name, f->prefix) : NULL;
		if (f->prefix && !ln->name)
			goto out_models;
		if (!ln->name || !claim(&set, &strs[f->entry], ln->name)) {
			free(ln->name);
			ln->name = strdup(f->name);
			if (!ln->name)
				goto out_models;
			for (unsigned k = 2; !claim(&set, &strs[f->entry], ln->name); k++) {
				size_t len = strlen(f->name) + 16;
				char *alt = malloc(len);
				if (!alt)
					goto out_models;
				snprintf(alt, len, "%s~%u", f->name, k);
				free(ln->name);
				ln->name = alt;
			}
		}
		ln->type = LIB_NODE_MODEL;
		ln->entry = f->entry;
		ln->files = c_by_entry[f->entry];
		ln->version = v_by_entry[f->entry];
		n_names++;
	}
	qsort(names, n_names, sizeof *names, name_cmp);
	*out = names;
	*n_out = n_names;
	names = NULL;
	r = 0;
out_models:
	free(v_by_entry);
	free(c_by_entry);
out:
	lib_names_free(names, n_names);
	free(files);
	free(strs);
	nameset_free(&set);
	return r;
}
