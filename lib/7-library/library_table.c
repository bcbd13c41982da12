/* models.tsv and models.json: one row per model of the library, from its header alone,
 * each model opened once per version for it while its slot lives (its row is kept in its
 * slot: a folder's listing let go while idle, library.h, takes its rows with it). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_string.h"
#include "library_impl.h"
#include "mem_give_back.h"
#include "render_summary.h"
#include "sink.h"

/* A string value of key in f, copied (it may hold any bytes), or NULL. */
static char *str_kv(const struct gguf_file *f, const char *key, size_t *len)
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);
	if (!kv || kv->value.type != GGUF_TYPE_STRING)
		return NULL;
	*len = gguf_le64(kv->value.data);
	char *s = malloc(*len + 1);
	if (s) {
		memcpy(s, kv->value.data + 8, *len);
		s[*len] = 0;
	}
	return s;
}

const char *lib_slot_sha256(const struct library *lib, const struct lib_slot *s)
{
	const struct lib_source *src = lib->src;
	return src->ops->sha256 ? src->ops->sha256(src->ctx, s->src) : NULL;
}

struct lib_row *lib_row_of(const struct ggufs_model *m, const char *sha256)
{
	struct lib_row *row = calloc(1, sizeof *row);
	if (!row)
		return NULL;
	if (sha256)
		snprintf(row->sha256, sizeof row->sha256, "%s", sha256);
	const struct gguf_file *f = model_meta(m);
	row->arch = str_kv(f, "general.architecture", &row->arch_len);
	row->name = str_kv(f, "general.name", &row->name_len);
	const struct gguf_kv *ft = gguf_find_kv(f, "general.file_type");
	if (ft && gguf_vtype_size(ft->value.type) && ft->value.type != GGUF_TYPE_FLOAT32 &&
	    ft->value.type != GGUF_TYPE_FLOAT64 && ft->value.type != GGUF_TYPE_BOOL) {
		uint64_t v = 0;
		memcpy(&v, ft->value.data, gguf_vtype_size(ft->value.type));
		row->ftype = v;   /* little-endian host: x86-64 and arm64 */
		row->has_ftype = true;
	}
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		row->params += model_tensor(m, i)->n_elements;
		row->tensor_bytes += model_tensor(m, i)->size;
	}
	row->files = model_n_files(m);
	for (uint32_t i = 0; i < row->files; i++) {
		struct model_file_info fi;
		model_file(m, i, &fi);
		row->bytes += fi.size;
	}
	row->has_ctx = summary_arch_uint(f, "context_length", &row->ctx);
	row->has_layers = summary_arch_uint(f, "block_count", &row->layers);
	row->has_kv = summary_kv_bytes(f, &row->kv);
	return row;
}

struct lib_row *lib_row_broken(void)
{
	struct lib_row *row = calloc(1, sizeof *row);
	if (row)
		row->broken = true;
	return row;
}

void lib_row_free(struct lib_row *row)
{
	if (!row)
		return;
	free(row->arch);
	free(row->name);
	free(row);
}

const struct lib_row *lib_slot_row(struct library *lib, struct lib_slot *s)
{
	pthread_mutex_lock(&lib->lock);
	struct lib_row *row = s->row;
	lib_unlock(lib);
	if (row)
		return row;
	/* the header alone: no tree, and the model closed again at once */
	char err[GGUF_ERR_MAX];
	bool stale;
	struct ggufs_model *m = lib_slot_open(lib, s, &stale, err);
	atomic_fetch_add(&lib->opened, 1);
	/* a file swapped since its listing is not described under the listed name: its
	 * header may be another user's that the kernel would not let the reader open */
	row = m ? lib_row_of(m, lib_slot_sha256(lib, s)) : lib_row_broken();
	model_close(m);
	pthread_mutex_lock(&lib->lock);
	if (!s->row)
		s->row = row;
	else
		lib_row_free(row);
	row = s->row;
	lib_unlock(lib);
	return row;
}

/* The folders one walk has entered, by device and inode: an open-addressed set (ino 0,
 * a source without inode numbers, is never put in it). */
struct walk {
	struct walk_seen {
		dev_t dev;
		ino_t ino;
	} *seen;
	size_t n, cap;   /* cap a power of two, or 0 */
	struct lib_slot **models;
	size_t n_models, cap_models;
};

static size_t walk_hash(dev_t dev, ino_t ino, size_t cap)
{
	uint64_t h = ((uint64_t)ino ^ (uint64_t)dev * 0x9e3779b97f4a7c15u) * 0xbf58476d1ce4e5b9u;
	return (size_t)(h ^ h >> 31) & (cap - 1);
}

/* Puts folder (dev, ino) in w's set: 1 when it was not there, 0 when it was, -ENOMEM. */
static int walk_enter(struct walk *w, dev_t dev, ino_t ino)
{
	if (2 * (w->n + 1) > w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct walk_seen *t = calloc(cap, sizeof *t);
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < w->cap; i++) {
			if (!w->seen[i].ino)
				continue;
			size_t k = walk_hash(w->seen[i].dev, w->seen[i].ino, cap);
			while (t[k].ino)
				k = (k + 1) & (cap - 1);
			t[k] = w->seen[i];
		}
		free(w->seen);
		w->seen = t;
		w->cap = cap;
	}
	size_t k = walk_hash(dev, ino, w->cap);
	for (; w->seen[k].ino; k = (k + 1) & (w->cap - 1))
		if (w->seen[k].ino == ino && w->seen[k].dev == dev)
			return 0;
	w->seen[k] = (struct walk_seen){ dev, ino };
	w->n++;
	return 1;
}

/* Every model under folder f into w->models (growing), each held (models_drop lets go),
 * listing folders as it goes (under the lock, which listing drops: f's children are
 * read from a copy, each held meanwhile, since another thread may list f again).
 * A folder is walked once, at its first path in name order: another path to it (two
 * symlinks to one folder, d/a -> e and d/b -> e, each level doubling the paths of the
 * next) is passed over, so a walk takes one path per folder, not one per way to it.
 * -ENOMEM, or 0: a folder that cannot be listed is logged and left out. */
static int collect(struct library *lib, struct lib_slot *f, struct walk *w, unsigned depth)
{
	if (depth > 64)
		return 0;
	if (f->ino) {
		int seen = walk_enter(w, f->dev, f->ino);
		if (seen <= 0)
			return seen;
	}
	if (lib_folder_refresh(lib, f, false) < 0)
		return 0;
	size_t count = f->n_children;
	struct lib_slot **children = malloc((count ? count : 1) * sizeof *children);
	if (!children)
		return -ENOMEM;
	if (count)
		memcpy(children, f->children, count * sizeof *children);
	for (size_t i = 0; i < count; i++)
		lib_slot_hold(lib, children[i]);
	int r = 0;
	for (size_t i = 0; r == 0 && i < count; i++) {
		struct lib_slot *c = children[i];
		if (c->type == LIB_NODE_DIR) {
			r = collect(lib, c, w, depth + 1);
		} else if (c->type == LIB_NODE_MODEL) {
			if (w->n_models == w->cap_models) {
				size_t nc = w->cap_models ? 2 * w->cap_models : 64;
				struct lib_slot **m = realloc(w->models, nc * sizeof *m);
				if (!m) {
					r = -ENOMEM;
					break;
				}
				w->models = m;
				w->cap_models = nc;
			}
			w->models[w->n_models++] = c;
			lib_slot_hold(lib, c);
		}
	}
	for (size_t i = 0; i < count; i++)
		lib_slot_drop(lib, children[i]);
	free(children);
	return r;
}

/* Every model of the library, held, into *models and *n (models_drop lets go, on
 * failure too): 0 or -ENOMEM. */
static int collect_all(struct library *lib, struct lib_slot ***models, size_t *n)
{
	struct walk w = { 0 };
	pthread_mutex_lock(&lib->lock);
	int r = collect(lib, lib->root, &w, 0);
	lib_unlock(lib);
	free(w.seen);
	*models = w.models;
	*n = w.n_models;
	return r;
}

/* Lets go of the n models collect held, and frees the array. */
static void models_drop(struct library *lib, struct lib_slot **models, size_t n)
{
	pthread_mutex_lock(&lib->lock);
	for (size_t i = 0; i < n; i++)
		lib_slot_drop(lib, models[i]);
	lib_listings_trim(lib);
	const bool shrunk = lib_shrunk(lib);
	lib_unlock(lib);
	free(models);
	if (shrunk)
		mem_give_back();
}

/* Models whose rows are opened for at once: a remote library's headers, fetched at most
 * this many at a time. */
#define ROW_THREADS 8

struct row_jobs {
	struct library *lib;
	struct lib_slot **models;
	size_t n;
	atomic_size_t next;
};

/* A worker: the rows of the models it takes, one after another. */
static void *row_worker(void *arg)
{
	struct row_jobs *j = arg;
	for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n; )
		lib_slot_row(j->lib, j->models[i]);
	return NULL;
}

/* Every model's row known, ROW_THREADS opened at a time (fewer threads if they cannot
 * start: the caller's thread works too). */
static void rows_fill(struct library *lib, struct lib_slot **models, size_t n)
{
	struct row_jobs j = { .lib = lib, .models = models, .n = n };
	atomic_init(&j.next, 0);
	pthread_t th[ROW_THREADS - 1];
	size_t started = 0;
	while (started + 1 < ROW_THREADS && started + 1 < n &&
	       pthread_create(&th[started], NULL, row_worker, &j) == 0)
		started++;
	row_worker(&j);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp((*(struct lib_slot *const *)a)->path, (*(struct lib_slot *const *)b)->path);
}

/* A TSV field: tab, newline, carriage return and backslash escaped as \t \n \r \\,
 * other control bytes as \xHH, so that every row stays one line of its columns. */
static void tsv_field(struct sink *s, const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		char esc[8];
		if (c == '\t' || c == '\n' || c == '\r' || c == '\\') {
			esc[0] = '\\';
			esc[1] = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
			sink_put(s, esc, 2);
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof esc, "\\x%02x", c);
			sink_put(s, esc, 4);
		} else {
			sink_put(s, &p[i], 1);
		}
	}
}

static void put_text(struct sink *s, const char *t)
{
	sink_put(s, t, strlen(t));
}

static void put_u64(struct sink *s, uint64_t v)
{
	char b[24];
	sink_put(s, b, (size_t)snprintf(b, sizeof b, "%" PRIu64, v));
}

/* The file type's name (llama.cpp's), or its number. */
static void put_ftype(struct sink *s, const struct lib_row *row, bool json)
{
	const char *name = summary_ftype_name(row->ftype);
	if (json && name)
		render_json_string(s, name, strlen(name));
	else if (name)
		put_text(s, name);
	else
		put_u64(s, row->ftype);
}

static const char *const columns[] = {
	"path", "architecture", "name", "file_type", "parameters", "bytes", "bits_per_weight",
	"context_length", "layers", "kv_bytes_per_token", "shards", "sha256",
};
#define N_COLUMNS (sizeof columns / sizeof columns[0])

/* Column k of a row (k > 0), as TSV text or a JSON value; false when it has none. */
static bool put_column(struct sink *s, const struct lib_row *row, size_t k, bool json)
{
	if (row->broken)
		k = k == 1 ? 1 : 0;
	char b[32];
	switch (k) {
	case 1:
		if (row->broken) {
			put_text(s, json ? "\"error\"" : "error");
			return true;
		}
		if (!row->arch)
			return false;
		json ? render_json_string(s, row->arch, row->arch_len) : tsv_field(s, row->arch, row->arch_len);
		return true;
	case 2:
		if (!row->name)
			return false;
		json ? render_json_string(s, row->name, row->name_len) : tsv_field(s, row->name, row->name_len);
		return true;
	case 3:
		if (!row->has_ftype)
			return false;
		put_ftype(s, row, json);
		return true;
	case 4: put_u64(s, row->params); return true;
	case 5: put_u64(s, row->bytes); return true;
	case 6:
		if (!row->params)
			return false;
		sink_put(s, b, (size_t)snprintf(b, sizeof b, "%.2f",
		                                (double)row->tensor_bytes * 8.0 / (double)row->params));
		return true;
	case 7: if (row->has_ctx) put_u64(s, row->ctx); return row->has_ctx;
	case 8: if (row->has_layers) put_u64(s, row->layers); return row->has_layers;
	case 9: if (row->has_kv) put_u64(s, row->kv); return row->has_kv;
	case 10: put_u64(s, row->files); return true;
	case 11:   /* the source's (the hub's); a local file's is never computed */
		if (!row->sha256[0])
			return false;
		json ? render_json_string(s, row->sha256, strlen(row->sha256)) : put_text(s, row->sha256);
		return true;
	default: return false;
	}
}

static void render(struct sink *s, struct lib_slot **models, const struct lib_row **rows,
                   size_t n, bool json)
{
	if (json) {
		put_text(s, "[");
	} else {
		for (size_t k = 0; k < N_COLUMNS; k++) {
			put_text(s, k ? "\t" : "");
			put_text(s, columns[k]);
		}
		put_text(s, "\n");
	}
	for (size_t i = 0; i < n; i++) {
		const char *path = models[i]->path;
		if (json) {
			put_text(s, i ? ",\n  {" : "\n  {");
			put_text(s, "\"path\": ");
			render_json_string(s, path, strlen(path));
		} else {
			tsv_field(s, path, strlen(path));
		}
		for (size_t k = 1; k < N_COLUMNS; k++) {
			if (json) {
				put_text(s, ", \"");
				put_text(s, columns[k]);
				put_text(s, "\": ");
			} else {
				put_text(s, "\t");
			}
			if (!put_column(s, rows[i], k, json) && json)
				put_text(s, "null");
		}
		put_text(s, json ? "}" : "\n");
	}
	put_text(s, json ? (n ? "\n]\n" : "]\n") : "");
}

int library_table(struct library *lib, bool json, char **text, size_t *len)
{
	*text = NULL;
	*len = 0;
	struct lib_slot **models;
	size_t n;
	int r = collect_all(lib, &models, &n);
	const struct lib_row **rows = r == 0 ? calloc(n ? n : 1, sizeof *rows) : NULL;
	if (!rows)
		r = -ENOMEM;
	/* the slots are held: the pointers stay good */
	if (r == 0)
		rows_fill(lib, models, n);
	if (r == 0) {
		if (n)   /* models is NULL in a library without a model */
			qsort(models, n, sizeof *models, path_cmp);
		for (size_t i = 0; r == 0 && i < n; i++)
			if (!(rows[i] = lib_slot_row(lib, models[i])))
				r = -ENOMEM;
		struct sink count = sink_counter();
		render(&count, models, rows, n, json);
		*text = malloc(count.pos ? count.pos : 1);
		if (*text) {
			struct sink out = sink_window(*text, 0, count.pos);
			render(&out, models, rows, n, json);
			*len = count.pos;
			atomic_store(json ? &lib->json_size : &lib->tsv_size, count.pos);
		} else {
			r = -ENOMEM;
		}
	}
	free(rows);
	models_drop(lib, models, n);
	return r;
}

int library_model_paths(struct library *lib, char ***paths, size_t *n)
{
	*paths = NULL;
	*n = 0;
	struct lib_slot **models;
	size_t count;
	int r = collect_all(lib, &models, &count);
	if (r == 0 && count)
		qsort(models, count, sizeof *models, path_cmp);
	char **out = r == 0 ? calloc(count ? count : 1, sizeof *out) : NULL;
	for (size_t i = 0; out && i < count; i++) {
		out[i] = strdup(models[i]->src);
		if (!out[i]) {
			for (size_t j = 0; j < i; j++)
				free(out[j]);
			free(out);
			out = NULL;
		}
	}
	models_drop(lib, models, count);
	if (!out)
		return -ENOMEM;
	*paths = out;
	*n = count;
	return 0;
}

struct ggufs_model *library_model_open(struct library *lib, const char *path,
                                       char err[GGUF_ERR_MAX])
{
	return lib->src->ops->open_model(lib->src->ctx, path, err);
}
