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
		free(names[i].own);
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
	uint32_t files;      /* after grouping: the model's number of files */
	uint64_t version;    /* after grouping: its files' versions together */
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

/* Names every entry of e that is not a model file into names (its own name: already
 * unique in a folder, but models.tsv and models.json at the root are taken; a model
 * folder is a model of its own name, claimed before any model file's NAME) and lists
 * the model files in files; 0, or -ENOMEM. */
static int name_others(const struct lib_entry *e, size_t n, struct nameset *set,
                       struct gguf_str *strs, struct lib_name *names, size_t *n_names,
                       struct model_file *files, size_t *n_files)
{
	for (size_t i = 0; i < n; i++) {
		if (is_model_file(&e[i])) {
			struct model_file *f = &files[(*n_files)++];
			f->entry = i;
			f->name = e[i].name;
			if (!model_split_name(e[i].name, &f->prefix, &f->no, &f->count) || f->count < 2) {
				f->prefix = strlen(e[i].name) - 5;
				f->no = f->count = 0;
			}
			continue;
		}
		if (!claim(set, &strs[i], e[i].name))
			continue;   /* models.tsv or models.json at the root */
		struct lib_name *ln = &names[*n_names];
		ln->name = e[i].name;
		ln->type = e[i].model_folder ? LIB_NODE_MODEL :
		           e[i].type == LIB_ENTRY_DIR ? LIB_NODE_DIR : LIB_NODE_FILE;
		ln->entry = i;
		ln->files = e[i].model_folder ? 1 : 0;
		ln->version = e[i].version;
		(*n_names)++;
	}
	return 0;
}

uint64_t lib_names_version_add(uint64_t versions, uint64_t next)
{
	uint64_t pair[2] = { versions, next };
	return XXH3_64bits(pair, sizeof pair);
}

/* Sorts files and keeps one per model, its first file, with the number of its files and
 * their versions hashed together; returns the number of models. */
static size_t group_sets(const struct lib_entry *e, struct model_file *files, size_t n_files)
{
	qsort(files, n_files, sizeof *files, file_cmp);
	size_t n_models = 0;
	for (size_t i = 0; i < n_files; i++) {
		struct model_file *m = n_models ? &files[n_models - 1] : NULL;
		if (m && same_set(m, &files[i])) {
			m->files++;
			m->version = lib_names_version_add(m->version, e[files[i].entry].version);
			continue;
		}
		files[n_models] = files[i];
		files[n_models].files = 1;
		files[n_models].version = e[files[i].entry].version;
		n_models++;
	}
	return n_models;
}

/* Claims the model f's name into ln: NAME, else its first file's name, else that name
 * with ~2, ~3, ... as the rules say; 0, or -ENOMEM. */
static int name_model(struct nameset *set, struct gguf_str *strs, const struct model_file *f,
                      struct lib_name *ln)
{
	ln->own = f->prefix ? strndup(f->name, f->prefix) : NULL;
	if (f->prefix && !ln->own)
		return -ENOMEM;
	ln->name = ln->own;
	if (!ln->name || !claim(set, &strs[f->entry], ln->name)) {
		free(ln->own);
		ln->own = NULL;
		ln->name = f->name;   /* its first file's: the entry's own */
		for (unsigned k = 2; !claim(set, &strs[f->entry], ln->name); k++) {
			size_t len = strlen(f->name) + 16;
			char *alt = malloc(len);
			if (!alt)
				return -ENOMEM;
			snprintf(alt, len, "%s~%u", f->name, k);
			free(ln->own);
			ln->name = ln->own = alt;
		}
	}
	ln->type = LIB_NODE_MODEL;
	ln->entry = f->entry;
	ln->files = f->files;
	ln->version = f->version;
	return 0;
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
	/* folders and other files first: their names are their own */
	if (name_others(e, n, &set, strs, names, &n_names, files, &n_files) < 0)
		goto out;
	/* then one name per model, claimed in the order of their first files' names */
	size_t n_models = group_sets(e, files, n_files);
	qsort(files, n_models, sizeof *files, first_cmp);
	for (size_t i = 0; i < n_models; i++) {
		int m = name_model(&set, strs, &files[i], &names[n_names]);
		if (m < 0) {
			free(names[n_names].own);
			goto out;
		}
		n_names++;
	}
	qsort(names, n_names, sizeof *names, name_cmp);
	*out = names;
	*n_out = n_names;
	names = NULL;
	r = 0;
out:
	lib_names_free(names, n_names);
	free(files);
	free(strs);
	nameset_free(&set);
	return r;
}
