/* What a mount serves, opened from its name (mount_source.h). */
#include "mount_source.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_dir.h"
#include "computed.h"
#include "leaving.h"
#include "library.h"
#include "model.h"
#include "mount.h"
#include "path.h"
#include "imatrix_file.h"
#include "quants_provider.h"
#include "tree.h"
#include "tree_edit.h"
#include "types.h"

/* Tells o's note one line per tensor of m that has no .f32/.npy (the name cut at a NUL
 * byte; the sink escapes the line). */
static void mount_source_warn_raw_only(const struct ggufs_model *m,
                                       const struct open_name_opts *o)
{
	for (uint64_t i = 0; o->note && i < model_n_tensors(m); i++) {
		const struct gguf_tensor *t = model_tensor(m, i);
		if (t->has_f32)
			continue;
		char line[GGUF_ERR_MAX + 256], nb[16];
		int len = t->name.len > INT_MAX ? INT_MAX : (int)t->name.len;
		if (!t->ti)
			snprintf(line, sizeof line, "%s: warning: tensor '%.*s' has unknown type %"
			         PRIu32 ": raw file only", model_path(m), len, t->name.ptr, t->type);
		else
			snprintf(line, sizeof line, "%s: warning: tensor '%.*s' has type %s, which has "
			         "no dequantizer: raw file only", model_path(m), len, t->name.ptr,
			         ggml_type_name(t->type, nb));
		o->note(o->note_arg, line);
	}
}

/* Opens the edits file o->edits_file for s's tree: absolute, and not in the mount
 * point, which would hide it (and every save would wait on the mount itself). False
 * with one line in err. */
static bool mount_source_edits(struct mount_source *s, const struct mount_source_opts *o,
                               char err[GGUF_ERR_MAX])
{
	char *path = path_absolute(o->edits_file);
	if (!path) {
		gguf_errf(err, "%s: out of memory", o->edits_file);
		return false;
	}
	const char *slash = strrchr(path, '/');
	char *dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	char *real = dir ? realpath(dir, NULL) : NULL;
	const bool inside = real && path_within(real, o->mountpoint);
	free(real);
	free(dir);
	if (inside)
		gguf_errf(err, "%s: inside the mount point %s, which the mount would hide (and "
		          "every save would wait on the mount itself): keep it elsewhere", path,
		          o->mountpoint);
	else
		s->tree_edits = tree_edits_open(s->tree, path, s->leaving, err);
	free(path);
	return s->tree_edits != NULL;
}

/* Puts into s->cache_warning the line that says the disk cache dir cannot be used,
 * and why, or "" when it can (or there is none): quants/ are then computed on every
 * read (the event log says it again at their first open). */
static void mount_source_check_cache(struct mount_source *s, const char *dir)
{
	char why[GGUF_ERR_MAX];
	s->cache_warning[0] = '\0';
	if (dir && !computed_cache_usable(dir, why))
		snprintf(s->cache_warning, sizeof s->cache_warning,
		         "warning: the disk cache is not used: %s", why);
}

/* Reads and parses -o imatrix=FILE (o->imatrix) into s: true, or false with one line in
 * err naming FILE. */
static bool mount_source_imatrix(struct mount_source *s, const struct mount_source_opts *o,
                                 const struct open_name_opts *names, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	struct open_name_bytes b;
	char *shown = open_name_shown(o->imatrix);   /* a URL without credentials or query */
	s->imatrix_name = shown ? shown : strdup(o->imatrix);
	s->imatrix = calloc(1, sizeof *s->imatrix);
	if (!s->imatrix_name || !s->imatrix) {
		gguf_errf(err, "out of memory");
		return false;
	}
	if (!open_name_bytes(o->imatrix, names, &b, why)) {
		gguf_errf(err, "-o imatrix: %s", why);
		return false;
	}
	s->imatrix_bytes = b.data;
	if (imatrix_parse(b.data, b.size, s->imatrix, why) < 0) {
		free(s->imatrix);
		s->imatrix = NULL;
		gguf_errf(err, "%s: not an importance matrix llama-quantize reads: %s",
		          s->imatrix_name, why);
		return false;
	}
	if (!s->imatrix->all_finite) {
		gguf_errf(err, "%s: the importance matrix has a weight that is not finite (%f), "
		          "which llama-quantize refuses for every file", s->imatrix_name,
		          (double)s->imatrix->first_non_finite);
		return false;
	}
	return true;
}

bool mount_source_open(struct mount_source *s, const char *name, const struct mount_source_opts *o,
                       char err[GGUF_ERR_MAX])
{
	memset(s, 0, sizeof *s);
	const enum name_kind kind = name_kind_of(name);
	s->library = name_kind_is_library(kind);
	struct open_name_opts names = o->names;
	names.leaving = s->leaving = leaving_new();
	if (!s->leaving) {
		gguf_errf(err, "out of memory");
		goto fail;
	}
	/* the providers of every tree of the mount, each with its per-mount state made
	 * once from the options */
	if (o->imatrix && !mount_source_imatrix(s, o, &names, err))
		goto fail;
	const struct quants_opts qo = { .requantize = o->requantize, .threads = o->quant_threads,
	                                .cache_dir = cache_dir_default(names.cache_dir),
	                                .cache_max = names.cache_max,
	                                .imatrix = s->imatrix, .imatrix_file = s->imatrix_name };
	if (!(s->quants = quants_mount_new(&qo, s->leaving, err)) ||
	    !(s->kit = tree_kit_new(err)) || !tree_kit_add(s->kit, &quants_provider, s->quants, err))
		goto fail;
	if (s->library) {
		s->lib = open_name_library(name, kind, &names, o->mountpoint, s->kit, err);
		s->remote = kind != NAME_KIND_FOLDER;
		if (!s->lib)
			goto fail;
		s->mount = mount_library(s->lib);
	} else {
		s->model = open_name_model(name, &names, &s->shown, err);
		if (!s->model || !(s->tree = tree_build(s->model, s->kit, err)))
			goto fail;
		s->remote = model_fetched(s->model);
		if (o->edits_file && !mount_source_edits(s, o, err))
			goto fail;
		s->edits = s->tree_edits != NULL;
		s->mount = s->edits ? mount_model_edits(s->tree, s->tree_edits, o->single_thread)
		                    : mount_model(s->tree);
	}
	if (!s->mount) {
		gguf_errf(err, "out of memory");
		goto fail;
	}
	if (s->model)
		mount_source_warn_raw_only(s->model, &o->names);
	mount_source_check_cache(s, qo.cache_dir);
	return true;
fail:
	mount_source_close(s);
	return false;
}

void mount_source_close(struct mount_source *s)
{
	mount_free(s->mount);   /* first: its open files hold states of the edits, models */
	tree_edits_close(s->tree_edits);
	tree_free(s->tree);
	library_free(s->lib);
	model_close(s->model);
	quants_mount_free(s->quants);   /* after every tree whose files it served */
	tree_kit_free(s->kit);          /* after every tree built with it */
	if (s->imatrix)                 /* after quants/, which read it */
		imatrix_free(s->imatrix);
	free(s->imatrix);
	free(s->imatrix_bytes);
	free(s->imatrix_name);
	leaving_free(s->leaving);       /* after all that was in it */
	free(s->shown);
	memset(s, 0, sizeof *s);
}
