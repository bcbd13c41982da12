/* A model folder as a model (st_model.h). */
#include "st_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "local.h"
#include "model_source.h"
#include "st_parts.h"

/* The small files a folder may hold, their names, and where each goes in st_folder. */
enum { F_CONFIG, F_TOKENIZER, F_TOKENIZER_CONFIG, F_ADDED, F_JINJA, F_TEMPLATE_JSON,
       F_GENERATION, F_INDEX, F_N };
static const char *const small_names[F_N] = {
	"config.json", "tokenizer.model", "tokenizer_config.json", "added_tokens.json",
	"chat_template.jinja", "chat_template.json", "generation_config.json",
	"model.safetensors.index.json",
};

/* generation_config.json's keys gguf-py writes as general.sampling.* (not yet here). */
static const char *const sampling_keys[] = {
	"sequence", "top_k", "top_p", "min_p", "xtc_probability", "xtc_threshold",
	"temperature", "penalty_last_n", "penalty_repeat", "repetition_penalty", "mirostat",
	"mirostat_tau", "mirostat_eta",
};

/* Files whose presence changes the converter's output in ways not converted yet. */
static const char *const refused_names[] = {
	"tokenizer.json", "README.md", "additional_chat_templates",
};

/* The folder's part files without an index: every "model*.safetensors", sorted, into
 * *names (*n): 0, or -1 with err (the folder cannot be listed, too many parts). */
static int list_parts(const char *dir, char ***names, size_t *n, char err[GGUF_ERR_MAX])
{
	*names = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d) {
		gguf_errf(err, "%s: %s", dir, strerror(errno));
		return -1;
	}
	char **v = calloc(ST_MAX_PARTS, sizeof *v);
	int rc = v ? 0 : -1;
	if (!v)
		gguf_errf(err, "%s: out of memory", dir);
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (!st_parts_is_part(e->d_name))
			continue;
		if (*n == ST_MAX_PARTS) {
			gguf_errf(err, "%s: more than %u model*.safetensors files", dir, ST_MAX_PARTS);
			rc = -1;
		} else if (!(v[*n] = strdup(e->d_name))) {
			gguf_errf(err, "%s: out of memory", dir);
			rc = -1;
		} else {
			(*n)++;
		}
	}
	closedir(d);
	if (rc < 0) {
		st_parts_free(v, *n);
		*n = 0;
		return -1;
	}
	st_parts_sort(v, *n);
	*names = v;
	return 0;
}

/* The most bytes a small file may hold. */
#define SMALL_MAX (64u << 20)

/* The model being opened, then the model's source context. */
struct st_source {
	struct source base;          /* the converted file: reads convert (st_gguf_read) */
	char *dir;
	char *file_path;             /* the converted file's shown path: DIR/NAME.gguf */
	char **part_names;           /* the .safetensors files, in the converter's order */
	size_t n_parts;
	struct source **parts;       /* their bytes */
	struct st_header *headers;   /* their headers */
	struct stat *part_st;        /* their fstat at open, which version was read */
	char **part_paths;           /* DIR/NAME of each */
	struct model_file *part_files;  /* the model's made_from: the parts as local files */
	const struct ggufs_model *model;  /* the model made, its reads checked against */
	char made_by[64];            /* the model's made_by: the converter and outtype */
	struct st_gguf g;
	struct gguf_file gf;         /* the converted header, parsed */
	bool gf_parsed;
	struct model_tensor *tensors;
	struct model_file file;
	struct stat st;
};

/* st_read_fn over the parts. */
static int shard_read(void *ctx, uint32_t shard, uint64_t off, uint64_t len, void *buf,
                      char why[GGUF_ERR_MAX])
{
	struct st_source *s = ctx;
	return source_read(s->parts[shard], off, len, buf, why);
}

/* Converts [off, off + len), then checks the parts are still the versions whose headers
 * were read (model_changed: a write moves a file's ctime before it changes a byte, so
 * bytes converted before an unchanged check are of the recorded version): -EIO with why
 * naming the part once one was written to, shrank or went, never bytes of another
 * version under the header made at open. */
static int vfile_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                      char why[GGUF_ERR_MAX])
{
	struct st_source *s = (struct st_source *)src;
	int r = st_gguf_read(&s->g, off, len, buf, shard_read, s, why);
	return r == 0 && s->model && model_changed(s->model, why) ? -EIO : r;
}

/* The converted file's close: nothing of its own (the model's close frees all). */
static void vfile_close(struct source *src)
{
	(void)src;
}

static const struct source_ops vfile_ops = { .read = vfile_read, .close = vfile_close };

static void st_source_free(struct st_source *s)
{
	if (!s)
		return;
	free(s->tensors);
	if (s->gf_parsed)
		gguf_file_free(&s->gf);
	st_gguf_free(&s->g);
	for (size_t i = 0; i < s->n_parts; i++) {
		if (s->headers)
			st_header_free(&s->headers[i]);
		if (s->parts)
			source_close(s->parts[i]);
	}
	free(s->headers);
	free(s->parts);
	for (size_t i = 0; s->part_paths && i < s->n_parts; i++)
		free(s->part_paths[i]);
	free(s->part_paths);
	free(s->part_st);
	free(s->part_files);
	st_parts_free(s->part_names, s->n_parts);
	free(s->file_path);
	free(s->dir);
	free(s);
}

static void st_close(void *ctx)
{
	st_source_free(ctx);
}

static const struct model_source_ops st_ops = { .close = st_close };

/* Opens DIR/name by o, mapped: its source (the caller's), or NULL with err; *absent set
 * (and no error) when the folder has no such file. named: config.json's stat for every
 * file after it (the model shows config.json's owner and mode: a mount that others read
 * refuses a file that lets fewer of them read it, as a split model's shard), NULL for
 * config.json itself. */
static struct source *open_in(const char *dir, const char *name,
                              const struct model_opener *o, const struct stat *named,
                              struct stat *st,
                              const uint8_t **map, uint64_t *size, bool *absent,
                              char err[GGUF_ERR_MAX])
{
	char path[4096];
	*absent = false;
	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
		gguf_errf(err, "%s: the path is too long", dir);
		return NULL;
	}
	char why[GGUF_ERR_MAX];
	int fd = o->open(o->ctx, path, named, why);
	if (fd == -ENOENT) {
		*absent = true;
		return NULL;
	}
	if (fd < 0) {
		gguf_errf(err, "%s", why);
		return NULL;
	}
	return local_open_fd(fd, path, st, map, size, err);
}

/* err, a line of st_gguf_make's naming a file of the folder by its name alone ("FILE:
 * ...") or the folder by its base name ("NAME: ..."), rewritten to name it by its path
 * in dir (a line that names neither is put after "DIR: "). */
static void say_in_folder(const char *dir, const char *name, char err[GGUF_ERR_MAX])
{
	char line[GGUF_ERR_MAX];
	snprintf(line, sizeof line, "%s", err);
	const size_t n = strlen(name);
	if (strncmp(line, name, n) == 0 && line[n] == ':') {
		gguf_errf(err, "%s%s", dir, line + n);
		return;
	}
	for (int i = 0; i < F_N; i++) {
		const size_t k = strlen(small_names[i]);
		if (strncmp(line, small_names[i], k) == 0 && line[k] == ':') {
			gguf_errf(err, "%s/%s", dir, line);
			return;
		}
	}
	gguf_errf(err, "%s: %s", dir, line);
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* No tensor name in two parts; with an index, the parts' names are its names (both
 * sorted lists compared): 0, or -1 with err naming one that differs. */
static int check_names(const struct st_source *s, bool indexed, char **index_names,
                       size_t n_index, char err[GGUF_ERR_MAX])
{
	size_t total = 0;
	for (size_t i = 0; i < s->n_parts; i++)
		total += s->headers[i].n;
	const char **all = calloc(total ? total : 1, sizeof *all);
	if (!all) {
		gguf_errf(err, "%s: out of memory", s->dir);
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < s->n_parts; i++)
		for (size_t j = 0; j < s->headers[i].n; j++)
			all[k++] = s->headers[i].t[j].name;
	qsort(all, k, sizeof *all, by_str);
	int rc = 0;
	for (size_t i = 1; i < k && rc == 0; i++)
		if (strcmp(all[i - 1], all[i]) == 0) {
			gguf_errf(err, "%s: tensor '%.96s' is in two of its .safetensors files",
			          s->dir, all[i]);
			rc = -1;
		}
	if (rc == 0 && indexed) {
		for (size_t i = 0; i < k || i < n_index; i++) {
			const char *a = i < k ? all[i] : NULL, *b = i < n_index ? index_names[i] : NULL;
			if (!a || !b || strcmp(a, b) != 0) {
				const char *odd = !a ? b : !b ? a : strcmp(a, b) < 0 ? a : b;
				gguf_errf(err, "%s: tensor '%.96s' is %s the index's weight_map",
				          s->dir, odd, odd == a ? "in a part but not in" : "named by");
				rc = -1;
				break;
			}
		}
	}
	free(all);
	return rc;
}

bool st_model_is_folder_at(int dirfd, const char *name)
{
	char path[4096];
	struct stat st;
	return snprintf(path, sizeof path, "%s/%s", name, small_names[F_CONFIG]) <
	       (int)sizeof path && fstatat(dirfd, path, &st, 0) == 0 && S_ISREG(st.st_mode);
}

bool st_model_is_folder(const char *dir)
{
	return st_model_is_folder_at(AT_FDCWD, dir);
}

struct ggufs_model *st_model_open(const char *dir, enum st_outtype out,
                                  const struct model_opener *opener, char err[GGUF_ERR_MAX])
{
	struct st_source *s = calloc(1, sizeof *s);
	struct source *small[F_N] = { NULL };
	const uint8_t *small_map[F_N] = { NULL };
	uint64_t small_size[F_N] = { 0 };
	struct ggufs_model *model = NULL;
	if (!s || !(s->dir = strdup(dir))) {
		gguf_errf(err, "%s: out of memory", dir);
		goto out;
	}
	size_t len = strlen(s->dir);
	while (len > 1 && s->dir[len - 1] == '/')
		s->dir[--len] = '\0';
	const char *slash = strrchr(s->dir, '/');
	const char *name = slash ? slash + 1 : s->dir;
	for (size_t i = 0; i < sizeof refused_names / sizeof refused_names[0]; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", s->dir, refused_names[i]);
		if (lstat(path, &st) == 0) {
			gguf_errf(err, "%s: the folder holds %s, which ggufs does not convert yet",
			          s->dir, refused_names[i]);
			goto out;
		}
	}
	struct st_folder f = { .name = name };
	struct st_text generation = { NULL, 0 }, index = { NULL, 0 };
	struct st_text *texts[F_N] = { &f.config, &f.tokenizer_model, &f.tokenizer_config,
	                               &f.added_tokens, &f.jinja, &f.template_json,
	                               &generation, &index };
	char **index_tensors = NULL;
	size_t n_index_tensors = 0;
	for (int i = 0; i < F_N; i++) {
		struct stat st;
		bool absent;
		small[i] = open_in(s->dir, small_names[i], opener, small[F_CONFIG] ? &s->st : NULL,
		                   &st, &small_map[i],
		                   &small_size[i], &absent, err);
		if (!small[i] && !absent)
			goto out;
		if (small[i] && small_size[i] > SMALL_MAX) {
			gguf_errf(err, "%s/%s: more than the %u MiB ggufs reads", s->dir,
			          small_names[i], SMALL_MAX >> 20);
			goto out;
		}
		if (i == F_CONFIG && small[i])
			s->st = st;
		/* a copy: the mapping is read under no guard here */
		if (small[i]) {
			char *copy = malloc(small_size[i] + 1);
			if (!copy) {
				gguf_errf(err, "%s: out of memory", s->dir);
				goto out;
			}
			char why[GGUF_ERR_MAX];
			if (source_read(small[i], 0, small_size[i], copy, why) < 0) {
				gguf_errf(err, "%s", why);
				free(copy);
				goto out;
			}
			texts[i]->p = copy;
			texts[i]->n = small_size[i];
		}
	}
	/* a config.json with keys the metadata does not follow yet */
	if (f.config.p) {
		json_t *j = json_loadb(f.config.p, f.config.n, 0, NULL);
		const bool named = json_object_get(j, "_name_or_path") != NULL;
		json_decref(j);
		if (named) {
			gguf_errf(err, "%s/config.json: _name_or_path, which ggufs does not name "
			          "models from yet", s->dir);
			goto out_texts;
		}
	}
	if (generation.p) {
		json_t *j = json_loadb(generation.p, generation.n, JSON_DECODE_INT_AS_REAL, NULL);
		if (!json_is_object(j)) {
			gguf_errf(err, "%s/generation_config.json: not a JSON object", s->dir);
			json_decref(j);
			goto out_texts;
		}
		const char *found = NULL;
		for (size_t i = 0; i < sizeof sampling_keys / sizeof sampling_keys[0]; i++)
			if (json_object_get(j, sampling_keys[i]))
				found = found ? found : sampling_keys[i];
		json_decref(j);
		if (found) {
			gguf_errf(err, "%s/generation_config.json: '%s', a sampling value ggufs "
			          "does not convert yet", s->dir, found);
			goto out_texts;
		}
	}
	/* the parts: the index's files, else every model*.safetensors */
	if (index.p ? st_parts_from_index(index.p, index.n, &s->part_names, &s->n_parts,
	                                  &index_tensors, &n_index_tensors, err) < 0
	            : list_parts(s->dir, &s->part_names, &s->n_parts, err) < 0)
		goto out_texts;
	if (s->n_parts == 0) {
		gguf_errf(err, "%s: no model.safetensors", s->dir);
		goto out_texts;
	}
	s->parts = calloc(s->n_parts, sizeof *s->parts);
	s->headers = calloc(s->n_parts, sizeof *s->headers);
	s->part_st = calloc(s->n_parts, sizeof *s->part_st);
	s->part_paths = calloc(s->n_parts, sizeof *s->part_paths);
	s->part_files = calloc(s->n_parts, sizeof *s->part_files);
	const struct st_header **shards = calloc(s->n_parts, sizeof *shards);
	if (!s->parts || !s->headers || !s->part_st || !s->part_paths || !s->part_files ||
	    !shards) {
		free(shards);
		gguf_errf(err, "%s: out of memory", s->dir);
		goto out_texts;
	}
	char why[GGUF_ERR_MAX];
	for (size_t i = 0; i < s->n_parts; i++) {
		bool absent;
		const uint8_t *map;
		uint64_t size;
		s->parts[i] = open_in(s->dir, s->part_names[i], opener,
		                      small[F_CONFIG] ? &s->st : NULL, &s->part_st[i], &map, &size,
		                      &absent, err);
		if (!s->parts[i]) {
			if (absent)
				gguf_errf(err, "%s: no %.200s, a part of the model", s->dir,
				          s->part_names[i]);
			break;
		}
		/* the header, copied out of the mapping by a guarded read */
		uint8_t first[8];
		uint64_t need;
		char shown[4400];
		snprintf(shown, sizeof shown, "%s/%s", s->dir, s->part_names[i]);
		if (!(s->part_paths[i] = strdup(shown))) {
			gguf_errf(err, "%s: out of memory", s->dir);
			break;
		}
		s->part_files[i] = (struct model_file){ .path = s->part_paths[i], .size = size,
		                                        .st = &s->part_st[i], .src = s->parts[i] };
		if (size >= 8 && source_read(s->parts[i], 0, 8, first, why) < 0) {
			gguf_errf(err, "%s", why);
			break;
		}
		if (!st_header_size(first, size, shown, &need, err))
			break;
		uint8_t *head = malloc(need);
		if (!head || source_read(s->parts[i], 0, need, head, why) < 0) {
			gguf_errf(err, "%s", head ? why : "out of memory");
			free(head);
			break;
		}
		const int parsed = st_header_parse(head, need, size, shown, &s->headers[i], err);
		free(head);
		if (parsed < 0)
			break;
		shards[i] = &s->headers[i];
	}
	if (s->n_parts && !shards[s->n_parts - 1]) {
		free(shards);
		goto out_texts;
	}
	/* a tensor in two parts (the converter keeps the last silently), and the index's
	 * names against the parts' (the converter refuses a difference) */
	if (check_names(s, index.p != NULL, index_tensors, n_index_tensors, err) < 0) {
		free(shards);
		goto out_texts;
	}
	if (st_gguf_make(&f, shards, (uint32_t)s->n_parts, out, &s->g, err) < 0) {
		say_in_folder(s->dir, name, err);
		free(shards);
		goto out_texts;
	}
	free(shards);
	uint64_t more;
	if (gguf_parse_prefix(s->g.header.p, s->g.header.len, s->g.size, &s->gf, why,
	                      &more) != 0) {
		gguf_errf(err, "%s: the converted header does not parse: %s", s->dir, why);
		goto out_texts;
	}
	s->gf_parsed = true;
	s->tensors = calloc(s->gf.n_tensors ? s->gf.n_tensors : 1, sizeof *s->tensors);
	if (asprintf(&s->file_path, "%s/%s.gguf", s->dir, name) < 0)
		s->file_path = NULL;
	if (!s->tensors || !s->file_path) {
		gguf_errf(err, "%s: out of memory", s->dir);
		goto out_texts;
	}
	for (uint64_t i = 0; i < s->gf.n_tensors; i++)
		s->tensors[i] = (struct model_tensor){ .t = &s->gf.tensors[i], .file = 0 };
	s->base.ops = &vfile_ops;
	s->file = (struct model_file){ .path = s->file_path, .size = s->g.size, .st = NULL,
	                               .remote = NULL, .src = &s->base,
	                               .head = s->g.header.p, .gguf = &s->gf };
	s->st.st_size = (off_t)s->g.size;
	snprintf(s->made_by, sizeof s->made_by, "ggufs convert %d outtype %s",
	         ST_CONVERT_VERSION, st_outtype_name(out));
	const struct model_desc d = {
		.path = s->dir, .url = NULL, .st = s->st, .meta = &s->gf, .tensors = s->tensors,
		.n_tensors = s->gf.n_tensors, .files = &s->file, .n_files = 1,
		.made_from = s->part_files, .n_made_from = (uint32_t)s->n_parts,
		.made_by = s->made_by, .remote = NULL, .ops = &st_ops, .ctx = s,
	};
	model = model_new(&d);
	if (!model)
		gguf_errf(err, "%s: out of memory", s->dir);
	s->model = model;
out_texts:
	st_parts_free(index_tensors, n_index_tensors);
	for (int i = 0; i < F_N; i++)
		free((char *)texts[i]->p);
out:
	for (int i = 0; i < F_N; i++)
		source_close(small[i]);
	if (!model)
		st_source_free(s);
	return model;
}
