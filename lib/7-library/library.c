/* The library's namespace (library.h): slots and their numbers, folders listed from the
 * source, models built at first use and released when idle past the bound. One lock
 * guards the slots; a model is opened and its tree built outside it, once, while other
 * requests for it wait. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evlog.h"
#include "library_impl.h"

static uint64_t ino_of(uint64_t slot, uint64_t low)
{
	return slot << LIB_LOW_BITS | low;
}

/* "a/b" of folder path a and name b ("b" at the root), malloc'ed, or NULL. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s%s", dir, *dir ? "/" : "", name);
	return p;
}

static void slot_free(struct lib_slot *s)
{
	if (!s)
		return;
	tree_release(s->t);
	model_close(s->m);
	lib_row_free(s->row);
	free(s->children);
	free(s->error);
	free(s->name);
	free(s->path);
	free(s->src);
	free(s);
}

/* A new slot with the next number (under the lock), or NULL. */
static struct lib_slot *slot_new(struct library *lib, enum lib_node_type type, const char *name,
                                 const char *path, const char *src)
{
	if (lib->n_slots >= LIB_SLOTS_MAX)
		return NULL;
	if (lib->n_slots == lib->cap) {
		size_t cap = lib->cap ? 2 * lib->cap : 256;
		struct lib_slot **s = realloc(lib->slots, cap * sizeof *s);
		if (!s)
			return NULL;
		lib->slots = s;
		lib->cap = cap;
	}
	struct lib_slot *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->type = type;
	s->name = strdup(name);
	s->path = strdup(path);
	s->src = strdup(src);
	if (!s->name || !s->path || !s->src) {
		slot_free(s);
		return NULL;
	}
	s->no = lib->n_slots;
	lib->slots[lib->n_slots++] = s;
	return s;
}

struct library *library_open(struct lib_source *src, char err[GGUF_ERR_MAX])
{
	struct library *lib = calloc(1, sizeof *lib);
	if (!lib) {
		snprintf(err, GGUF_ERR_MAX, "out of memory");
		src->ops->free(src->ctx);
		free(src);
		return NULL;
	}
	lib->src = src;
	pthread_mutex_init(&lib->lock, NULL);
	pthread_mutex_init(&lib->compare_lock, NULL);
	pthread_cond_init(&lib->built, NULL);
	struct lib_slot *root = slot_new(lib, LIB_NODE_DIR, "", "", "");
	struct lib_entry e;
	int r = root ? src->ops->stat(src->ctx, "", &e) : -ENOMEM;
	if (r == 0 && e.type != LIB_ENTRY_DIR)
		r = -ENOTDIR;
	if (r == 0) {
		root->st = e.st;
		root->parent = LIB_ROOT_INO;
		r = lib_folder_list(lib, root, true, err);
	} else {
		snprintf(err, GGUF_ERR_MAX, "%s", strerror(-r));
	}
	if (r < 0) {
		library_free(lib);
		return NULL;
	}
	return lib;
}

void library_free(struct library *lib)
{
	if (!lib)
		return;
	for (size_t i = 0; i < lib->n_slots; i++)
		slot_free(lib->slots[i]);
	free(lib->slots);
	lib_compares_free(lib);
	lib->src->ops->free(lib->src->ctx);
	free(lib->src);
	pthread_mutex_destroy(&lib->lock);
	pthread_mutex_destroy(&lib->compare_lock);
	pthread_cond_destroy(&lib->built);
	free(lib);
}

/* The child of folder f called name (its listing is sorted), or NULL. */
static struct lib_slot *child_named(const struct lib_slot *f, const char *name)
{
	size_t lo = 0, hi = f->n_children;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, f->children[mid]->name);
		if (c == 0)
			return f->children[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

int lib_folder_list(struct library *lib, struct lib_slot *f, bool force, char err[GGUF_ERR_MAX])
{
	const struct lib_source *src = lib->src;
	if (f->listed && !force && src->ops->unchanged(src->ctx, f->src, f->dir_version))
		return 0;
	struct lib_entry *e;
	size_t n;
	uint64_t version;
	int r = src->ops->list(src->ctx, f->src, &e, &n, &version, err);
	if (r < 0)
		return r;
	struct lib_name *names;
	size_t n_names;
	r = lib_names(e, n, f->no == 0, &names, &n_names);
	struct lib_slot **children = r == 0 ? calloc(n_names ? n_names : 1, sizeof *children) : NULL;
	if (!children)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < n_names; i++) {
		const struct lib_name *ln = &names[i];
		const struct lib_entry *le = &e[ln->entry];
		/* the same name for the same version keeps its slot: its numbers stay */
		struct lib_slot *old = child_named(f, ln->name);
		if (old && old->type == ln->type &&
		    (ln->type == LIB_NODE_DIR || old->version == ln->version)) {
			children[i] = old;
			continue;
		}
		char *path = join(f->path, ln->name), *srcpath = join(f->src, le->name);
		struct lib_slot *s = path && srcpath ? slot_new(lib, ln->type, ln->name, path, srcpath)
		                                     : NULL;
		free(path);
		free(srcpath);
		if (!s) {
			r = -ENOMEM;
			break;
		}
		s->parent = ino_of(f->no, 1);
		s->version = ln->version;
		s->first_version = le->version;
		s->st = le->st;
		s->files = ln->files;
		children[i] = s;
	}
	if (r == 0) {
		free(f->children);
		f->children = children;
		f->n_children = n_names;
		f->listed = true;
		f->dir_version = version;
	} else {
		free(children);
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory listing the folder",
		         *f->path ? f->path : "/");
	}
	lib_names_free(names, n_names);
	lib_entries_free(e, n);
	return r;
}

int lib_folder_refresh(struct library *lib, struct lib_slot *f, bool force)
{
	char err[GGUF_ERR_MAX];
	int r = lib_folder_list(lib, f, force, err);
	if (r < 0)
		evlog(EVLOG_ERR, err, "%s", err);
	return r;
}

/* The least recently used built models without users are released while more than
 * LIB_KEEP_IDLE are built (under the lock): their numbers stay theirs. */
static void trim(struct library *lib)
{
	while (lib->idle_built > LIB_KEEP_IDLE) {
		struct lib_slot *lru = NULL;
		for (size_t i = 1; i < lib->n_slots; i++) {
			struct lib_slot *s = lib->slots[i];
			if (s->state == MODEL_BUILT && s->users == 0 && (!lru || s->last_used < lru->last_used))
				lru = s;
		}
		if (!lru)
			return;
		tree_release(lru->t);
		model_close(lru->m);
		lru->t = NULL;
		lru->m = NULL;
		lru->state = MODEL_UNBUILT;
		lib->idle_built--;
	}
}

/* True when m is the version of the file that slot s was given for. */
static bool same_file(const struct lib_slot *s, const struct ggufs_model *m)
{
	const struct stat *a = &s->st, *b = &m->st;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Builds model slot s unless it is (under the lock, which it drops while opening):
 * then BUILT, BROKEN or STALE. Every request for it meanwhile waits for this one. */
static void build(struct library *lib, struct lib_slot *s)
{
	while (s->state == MODEL_BUILDING)
		pthread_cond_wait(&lib->built, &lib->lock);
	if (s->state != MODEL_UNBUILT)
		return;
	s->state = MODEL_BUILDING;
	pthread_mutex_unlock(&lib->lock);

	char err[GGUF_ERR_MAX] = "";
	struct ggufs_model *m = lib->src->ops->open_model(lib->src->ctx, s->src, err);
	atomic_fetch_add(&lib->opened, 1);
	struct tree *t = NULL;
	bool stale = m && !lib->src->pinned && !same_file(s, m);
	if (m && !stale) {
		/* the numbers of the tree must fit under the slot's compare/ (tree.h: four a
		 * tensor) */
		uint64_t inos = TREE_FIRST_META + m->meta->n_kv + 4 * m->n_tensors;
		if (inos >= LIB_COMPARE_LOW)
			snprintf(err, sizeof err, "%s: too many keys and tensors for a library", m->path);
		else
			t = tree_build(m, err);
	}
	struct lib_row *row = t && !s->row ? lib_row_of(m, lib_slot_sha256(lib, s)) : NULL;
	char *line = NULL;
	if (!t && !stale) {
		size_t n = strlen(err) + 16;
		line = malloc(n);
		if (line)
			snprintf(line, n, "ggufs: %s\n", err);
		evlog(EVLOG_WARNING, line ? line : err, "%s: %s", s->path, err);
	}
	if (!t) {
		model_close(m);
		m = NULL;
	}

	pthread_mutex_lock(&lib->lock);
	if (stale) {
		s->state = MODEL_STALE;
	} else if (t) {
		s->m = m;
		s->t = t;
		s->state = MODEL_BUILT;
		if (!s->row)
			s->row = row;
		else
			lib_row_free(row);
		lib->idle_built++;
		s->last_used = ++lib->clock;
	} else if (line) {
		s->error = line;
		s->state = MODEL_BROKEN;
		if (!s->row)
			s->row = lib_row_broken();
	} else {
		s->state = MODEL_UNBUILT;   /* out of memory: the next use tries again */
	}
	pthread_cond_broadcast(&lib->built);
}

/* Holds built model s for r (under the lock). */
static void hold(struct library *lib, struct lib_slot *s, struct lib_ref *r)
{
	if (s->users++ == 0)
		lib->idle_built--;
	s->last_used = ++lib->clock;
	r->held = true;
}

/* The folder holding slot s. */
static struct lib_slot *folder_of(const struct library *lib, const struct lib_slot *s)
{
	return lib->slots[s->parent >> LIB_LOW_BITS];
}

/* r for compare/ (low LIB_COMPARE_LOW) or compare/OTHER (above) of model slot s (under
 * the lock), neither model built: there while s parses (it did, to be looked in) and
 * OTHER is a model of s's folder as last listed (-ESTALE once it is not). */
static int compare_ref(struct library *lib, struct lib_slot *s, uint64_t low, struct lib_ref *r)
{
	if (s->state == MODEL_STALE)
		return -ESTALE;
	if (s->state == MODEL_BROKEN)
		return -ENOENT;
	if (low == LIB_COMPARE_LOW) {
		r->kind = LIB_COMPARE_DIR;
		return 0;
	}
	const uint64_t no = low - LIB_COMPARE_LOW - 1;
	struct lib_slot *o = no < lib->n_slots ? lib->slots[no] : NULL;
	if (!o || o == s || o->type != LIB_NODE_MODEL || o->parent != s->parent)
		return -ENOENT;
	if (child_named(folder_of(lib, s), o->name) != o)
		return -ESTALE;
	r->kind = LIB_COMPARE;
	r->other = o;
	return 0;
}

/* r for low number low of model slot s (under the lock), building it when asked to. */
static int model_ref(struct library *lib, struct lib_slot *s, uint64_t low, bool want_build,
                     struct lib_ref *r)
{
	if (low >= LIB_COMPARE_LOW)
		return compare_ref(lib, s, low, r);
	if (low == 1 && !want_build && (s->state == MODEL_UNBUILT || s->state == MODEL_BUILDING)) {
		r->kind = LIB_MODEL_DIR;
		return 0;
	}
	build(lib, s);
	switch (s->state) {
	case MODEL_BUILT: {
		const struct tree_node *n = tree_node(s->t, low);
		if (!n)
			return -ENOENT;
		r->kind = LIB_TREE;
		r->tree = s->t;
		r->node = n;
		hold(lib, s, r);
		return 0;
	}
	case MODEL_BROKEN:
		if (low != 1 && low != LIB_ERROR_LOW)
			return -ENOENT;
		r->kind = low == 1 ? LIB_BROKEN : LIB_ERROR;
		return 0;
	case MODEL_STALE:
		return -ESTALE;
	default:
		return -ENOMEM;
	}
}

/* library_get under the lock. */
static int get_locked(struct library *lib, uint64_t ino, bool want_build, struct lib_ref *r)
{
	memset(r, 0, sizeof *r);
	r->ino = ino;
	uint64_t no = ino >> LIB_LOW_BITS, low = ino & LIB_LOW_MASK;
	if (no >= lib->n_slots)
		return -ENOENT;
	struct lib_slot *s = lib->slots[no];
	if (no == 0 && (low == LIB_TSV_INO || low == LIB_JSON_INO)) {
		r->kind = low == LIB_TSV_INO ? LIB_TSV : LIB_JSON;
		return 0;
	}
	r->slot = s;
	if (s->type == LIB_NODE_MODEL)
		return model_ref(lib, s, low, want_build, r);
	if (low != 1)
		return -ENOENT;
	r->kind = s->type == LIB_NODE_DIR ? LIB_FOLDER : LIB_PLAIN;
	return 0;
}

int library_get(struct library *lib, uint64_t ino, bool want_build, struct lib_ref *r)
{
	pthread_mutex_lock(&lib->lock);
	int ret = get_locked(lib, ino, want_build, r);
	trim(lib);
	pthread_mutex_unlock(&lib->lock);
	return ret;
}

/* The child called name of folder f (under the lock): its listing read again when the
 * folder changed, or when the file the name had is another version now. */
static struct lib_slot *folder_child(struct library *lib, struct lib_slot *f, const char *name)
{
	if (lib_folder_refresh(lib, f, false) < 0)
		return NULL;
	struct lib_slot *c = child_named(f, name);
	if (!c || c->type == LIB_NODE_DIR)
		return c;
	struct lib_entry e;
	const struct lib_source *src = lib->src;
	if (src->ops->stat(src->ctx, c->src, &e) == 0 && e.version == c->first_version)
		return c;
	/* replaced, or gone: what the folder holds now */
	if (lib_folder_refresh(lib, f, true) < 0)
		return NULL;
	return child_named(f, name);
}

int library_lookup(struct library *lib, uint64_t parent, const char *name, struct lib_ref *r)
{
	pthread_mutex_lock(&lib->lock);
	struct lib_ref p;
	int ret = get_locked(lib, parent, true, &p);
	if (ret < 0)
		goto out;
	switch (p.kind) {
	case LIB_FOLDER: {
		if (p.slot->no == 0 && (!strcmp(name, LIB_TSV_NAME) || !strcmp(name, LIB_JSON_NAME))) {
			ret = get_locked(lib, !strcmp(name, LIB_TSV_NAME) ? LIB_TSV_INO : LIB_JSON_INO,
			                 false, r);
			break;
		}
		struct lib_slot *c = folder_child(lib, p.slot, name);
		ret = c ? get_locked(lib, ino_of(c->no, 1), false, r) : -ENOENT;
		break;
	}
	case LIB_TREE: {
		if (p.node->ino == TREE_ROOT_INO && !strcmp(name, LIB_COMPARE_NAME)) {
			ret = get_locked(lib, ino_of(p.slot->no, LIB_COMPARE_LOW), false, r);
			break;
		}
		const struct tree_node *n = tree_is_dir(p.node) ? tree_lookup(p.tree, p.node->ino, name)
		                                                : NULL;
		ret = !tree_is_dir(p.node) ? -ENOTDIR : n ? 0 : -ENOENT;
		if (n)
			ret = get_locked(lib, ino_of(p.slot->no, n->ino), true, r);
		break;
	}
	case LIB_COMPARE_DIR: {
		/* another model of the folder as it is now */
		struct lib_slot *c = folder_child(lib, folder_of(lib, p.slot), name);
		ret = c && c->type == LIB_NODE_MODEL && c != p.slot
		              ? get_locked(lib, ino_of(p.slot->no, LIB_COMPARE_LOW + 1 + c->no), false, r)
		              : -ENOENT;
		break;
	}
	case LIB_BROKEN:
		ret = strcmp(name, "error") ? -ENOENT
		                            : get_locked(lib, ino_of(p.slot->no, LIB_ERROR_LOW), true, r);
		break;
	default:
		ret = -ENOTDIR;
	}
	if (p.held && --p.slot->users == 0)
		lib->idle_built++;
out:
	trim(lib);
	pthread_mutex_unlock(&lib->lock);
	return ret;
}

void library_hold(struct library *lib, struct lib_ref *r)
{
	if (!r->held)
		return;
	pthread_mutex_lock(&lib->lock);
	r->slot->users++;
	pthread_mutex_unlock(&lib->lock);
}

void library_put(struct library *lib, struct lib_ref *r)
{
	if (!r->held)
		return;
	pthread_mutex_lock(&lib->lock);
	if (--r->slot->users == 0) {
		lib->idle_built++;
		trim(lib);
	}
	pthread_mutex_unlock(&lib->lock);
	r->held = false;
}

/* Read bits of mode only, as the tree limits its own (tree_mode). */
static mode_t read_bits(mode_t mode)
{
	return mode & (S_IRUSR | S_IRGRP | S_IROTH);
}

void library_stat(struct library *lib, const struct lib_ref *r, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = r->ino;
	st->st_blksize = 4096;
	const struct stat *from = r->slot ? &r->slot->st : &lib->slots[0]->st;
	struct tree_node dir = { .kind = TREE_ROOT };
	switch (r->kind) {
	case LIB_FOLDER:
		st->st_mode = S_IFDIR | read_bits(from->st_mode) | ((read_bits(from->st_mode) >> 2) & 0111);
		break;
	case LIB_PLAIN:
		st->st_mode = S_IFREG | read_bits(from->st_mode);
		st->st_size = from->st_size;
		break;
	case LIB_TSV:
	case LIB_JSON:
		/* the size of the last rendering: the table is made whole by its open */
		st->st_mode = S_IFREG | 0444;
		st->st_size = (off_t)atomic_load(r->kind == LIB_TSV ? &lib->tsv_size : &lib->json_size);
		break;
	case LIB_MODEL_DIR:
	case LIB_BROKEN:
	case LIB_COMPARE_DIR:
		st->st_mode = tree_mode(&dir, from->st_mode);
		break;
	case LIB_COMPARE:
		/* the length of its text, known once a lookup made it (library_compare_size) */
		st->st_mode = S_IFREG | read_bits(from->st_mode);
		st->st_size = (off_t)library_compare_known(lib, r);
		break;
	case LIB_ERROR:
		st->st_mode = S_IFREG | (0444 & read_bits(from->st_mode));
		st->st_size = r->slot->error ? (off_t)strlen(r->slot->error) : 0;
		break;
	case LIB_TREE:
		/* a model's files as its single mount shows them (du counts it once) */
		tree_stat(r->tree, r->node, false, st);
		st->st_ino = r->ino;
		return;
	}
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = from->st_uid;
	st->st_gid = from->st_gid;
	st->st_blocks = (blkcnt_t)((st->st_size + 511) / 512);
	st->st_atim = from->st_atim;
	st->st_mtim = from->st_mtim;
	st->st_ctim = from->st_ctim;
}

uint64_t library_tree_ino(const struct lib_ref *r, uint64_t tree_ino)
{
	return ino_of(r->slot->no, tree_ino);
}

uint64_t library_parent(const struct lib_ref *r)
{
	if (!r->slot)
		return LIB_ROOT_INO;
	if (r->kind == LIB_TREE && r->node->ino != TREE_ROOT_INO)
		return ino_of(r->slot->no, r->node->parent);
	if (r->kind == LIB_ERROR || r->kind == LIB_COMPARE_DIR)
		return ino_of(r->slot->no, 1);
	if (r->kind == LIB_COMPARE)
		return ino_of(r->slot->no, LIB_COMPARE_LOW);
	return r->slot->parent;
}

void library_list_free(struct lib_list_entry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		free(e[i].name);
	free(e);
}

/* The listing of model slot s's compare/: every other model of its folder, as it is
 * now (the folder's listing read again if it changed). */
static int list_compare(struct library *lib, struct lib_slot *s, struct lib_list_entry **out,
                        size_t *n)
{
	pthread_mutex_lock(&lib->lock);
	struct lib_slot *f = folder_of(lib, s);
	int ret = lib_folder_refresh(lib, f, false);
	struct lib_list_entry *e = ret == 0 ? calloc(f->n_children + 1, sizeof *e) : NULL;
	if (ret == 0 && !e)
		ret = -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; e && i < f->n_children; i++) {
		const struct lib_slot *c = f->children[i];
		if (c->type != LIB_NODE_MODEL || c == s)
			continue;
		e[k++] = (struct lib_list_entry){ strdup(c->name),
		                                  ino_of(s->no, LIB_COMPARE_LOW + 1 + c->no), false };
		if (!e[k - 1].name)
			ret = -ENOMEM;
	}
	pthread_mutex_unlock(&lib->lock);
	if (ret < 0) {
		library_list_free(e, k);
		return ret;
	}
	*out = e;
	*n = k;
	return 0;
}

int library_list(struct library *lib, const struct lib_ref *r, struct lib_list_entry **out,
                 size_t *n)
{
	*out = NULL;
	*n = 0;
	if (r->kind == LIB_BROKEN) {
		struct lib_list_entry *e = calloc(1, sizeof *e);
		if (!e || !(e->name = strdup("error"))) {
			free(e);
			return -ENOMEM;
		}
		e->ino = ino_of(r->slot->no, LIB_ERROR_LOW);
		*out = e;
		*n = 1;
		return 0;
	}
	if (r->kind == LIB_COMPARE_DIR)
		return list_compare(lib, r->slot, out, n);
	if (r->kind != LIB_FOLDER)
		return -ENOTDIR;
	pthread_mutex_lock(&lib->lock);
	struct lib_slot *f = r->slot;
	int ret = lib_folder_refresh(lib, f, false);
	bool root = f->no == 0;
	size_t count = f->n_children + (root ? 2 : 0);
	struct lib_list_entry *e = ret == 0 ? calloc(count ? count : 1, sizeof *e) : NULL;
	if (ret == 0 && !e)
		ret = -ENOMEM;
	size_t k = 0;
	if (e && root) {
		e[k++] = (struct lib_list_entry){ strdup(LIB_TSV_NAME), LIB_TSV_INO, false };
		e[k++] = (struct lib_list_entry){ strdup(LIB_JSON_NAME), LIB_JSON_INO, false };
	}
	for (size_t i = 0; e && i < f->n_children; i++) {
		const struct lib_slot *c = f->children[i];
		e[k++] = (struct lib_list_entry){ strdup(c->name), ino_of(c->no, 1),
		                                  c->type != LIB_NODE_FILE };
	}
	pthread_mutex_unlock(&lib->lock);
	for (size_t i = 0; i < k; i++)
		if (!e[i].name)
			ret = -ENOMEM;
	if (ret < 0) {
		library_list_free(e, k);
		return ret;
	}
	*out = e;
	*n = k;
	return 0;
}

uint64_t library_tree_dir_count(const struct lib_ref *r)
{
	return tree_dir_count(r->tree, r->node->ino) + (r->node->ino == TREE_ROOT_INO);
}

void library_tree_dir_entry(const struct lib_ref *r, uint64_t pos, const char **name,
                            uint64_t *ino, bool *dir)
{
	if (pos == tree_dir_count(r->tree, r->node->ino)) {   /* the model directory's last */
		*name = LIB_COMPARE_NAME;
		*ino = ino_of(r->slot->no, LIB_COMPARE_LOW);
		*dir = true;
		return;
	}
	const struct tree_node *c = tree_dir_child(r->tree, r->node->ino, pos);
	*name = c->name;
	*ino = ino_of(r->slot->no, c->ino);
	*dir = tree_is_dir(c);
}

int lib_slot_acquire(struct library *lib, struct lib_slot *s, const struct ggufs_model **m,
                     const char **error)
{
	pthread_mutex_lock(&lib->lock);
	build(lib, s);
	int ret = 0;
	switch (s->state) {
	case MODEL_BUILT: {
		struct lib_ref r;
		hold(lib, s, &r);
		*m = s->m;
		break;
	}
	case MODEL_BROKEN:
		*error = s->error;
		ret = -EIO;
		break;
	case MODEL_STALE:
		ret = -ESTALE;
		break;
	default:
		ret = -ENOMEM;
	}
	pthread_mutex_unlock(&lib->lock);
	return ret;
}

void lib_slot_release(struct library *lib, struct lib_slot *s)
{
	struct lib_ref r = { .slot = s, .held = true };
	library_put(lib, &r);
}

int library_file_open(struct library *lib, const struct lib_ref *r, void **file)
{
	*file = NULL;
	return lib->src->ops->open_file(lib->src->ctx, r->slot->src, file);
}

int64_t library_file_read(struct library *lib, void *file, char *buf, uint64_t len, uint64_t off)
{
	return lib->src->ops->read_file(lib->src->ctx, file, buf, len, off);
}

void library_file_close(struct library *lib, void *file)
{
	lib->src->ops->close_file(lib->src->ctx, file);
}

const char *library_error_text(const struct lib_ref *r)
{
	return r->kind == LIB_ERROR ? r->slot->error : NULL;
}

void library_counts(struct library *lib, uint64_t *opened, uint64_t *built)
{
	pthread_mutex_lock(&lib->lock);
	uint64_t b = 0;
	for (size_t i = 1; i < lib->n_slots; i++)
		b += lib->slots[i]->state == MODEL_BUILT;
	pthread_mutex_unlock(&lib->lock);
	*opened = atomic_load(&lib->opened);
	*built = b;
}
