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
#include "mem_give_back.h"
#include "model.h"

/* A model's tree nests below its directory's compare/ numbers (library.h): every tree
 * number, of every state a tree may have, stays below LIB_COMPARE_LOW (tree_ino.h). */
_Static_assert(TREE_ZONE_P + TREE_STATE_WIDTH_MAX <= LIB_COMPARE_LOW,
               "a model's tree numbers stay below its compare/");

/* Lists folder (when it changed, or always with force) under lib->lock, which it drops
 * while the source lists (holding the folder meanwhile: a caller must not keep pointers
 * into a folder's children across it); a listing another thread is making is waited
 * for (the folder held meanwhile: a caller need not hold it). 0, or -errno with one line
 * in err (lib_folder_refresh: in the log); -ENOENT when the folder is gone (then freed,
 * unless the caller holds it). */
static int folder_list(struct library *lib, struct lib_slot *folder, bool force,
                       char err[GGUF_ERR_MAX]);

/* A place freed waits behind at least this many others before it is taken again, so
 * that its next number comes long after its last. */
#define REUSE_AFTER 1024

/* "a/b" of folder path a and name b ("b" at the root), malloc'ed, or NULL. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s%s", dir, *dir ? "/" : "", name);
	return p;
}

/* The attributes the library keeps of st. */
static struct lib_attr attr_of(const struct stat *st)
{
	return (struct lib_attr){ .mode = st->st_mode, .uid = st->st_uid, .gid = st->st_gid,
	                          .size = st->st_size, .atim = st->st_atim,
	                          .mtim = st->st_mtim, .ctim = st->st_ctim };
}

/* Frees slot s and what it holds, its built model too (tree and files). */
static void slot_free_now(struct lib_slot *s)
{
	if (!s)
		return;
	tree_release(s->t);
	model_close(s->m);
	lib_row_free(s->row);
	free(s->children);
	free(s->error);
	if (s->owns_src)
		free((char *)s->src);
	if (s->owns_path)
		free((char *)s->path);
	free(s);
}

/* Frees slot s (under the lock): at once when it holds no built model, else at the
 * next lib_unlock, since releasing a model waits for its quants/ blocks in flight and
 * unmaps its files, which the lock would make every request wait for. */
static void slot_free(struct library *lib, struct lib_slot *s)
{
	if (s->t || s->m) {
		s->next_free = lib->gone;
		lib->gone = s;
	} else {
		slot_free_now(s);
	}
}

void lib_unlock(struct library *lib)
{
	struct lib_slot *gone = lib->gone;
	struct lib_trimmed trimmed = lib->trimmed;
	lib->gone = NULL;
	lib->trimmed.n = 0;
	pthread_mutex_unlock(&lib->lock);
	while (gone) {
		struct lib_slot *s = gone;
		gone = s->next_free;
		slot_free_now(s);
	}
	for (unsigned i = 0; i < trimmed.n; i++) {
		tree_release(trimmed.t[i]);
		model_close(trimmed.m[i]);
	}
}

/* The live slot numbered no (under the lock) into *out: 0, or -ENOENT for a number
 * never given, -ESTALE for one whose slot was freed. */
static int slot_numbered(const struct library *lib, uint64_t no, struct lib_slot **out)
{
	const uint64_t place = no & (LIB_SLOTS_MAX - 1);
	struct lib_slot *s = !(no >> LIB_NO_BITS) && place < lib->n_slots ? lib->slots[place] : NULL;
	*out = s && s->no == no ? s : NULL;
	if (*out)
		return 0;
	return no >> LIB_NO_BITS || place >= lib->n_slots ? -ENOENT : -ESTALE;
}

/* A new slot in folder (NULL for the root) with the next number, holding nothing yet
 * (under the lock), or NULL: out of memory, or every number given. src is its path in
 * the source (own_src: src itself, taken, else lent by the source), path its path in
 * the library when that differs (taken; NULL: src), name the end of it; what was to be
 * taken is freed on failure too. */
static struct lib_slot *slot_new(struct library *lib, enum lib_node_type type, const char *name,
                                 const char *src, char *own_src, char *own_path,
                                 struct lib_slot *folder)
{
	const bool reuse = lib->n_free > REUSE_AFTER || (lib->n_free && lib->n_slots == LIB_SLOTS_MAX);
	const char *path = own_path ? own_path : src;
	if (!src || !path || strlen(path) < strlen(name))
		goto fail;
	if (!reuse && lib->n_slots == LIB_SLOTS_MAX)
		goto fail;
	if (!reuse && lib->n_slots == lib->cap) {
		size_t cap = lib->cap ? 2 * lib->cap : 256;
		struct lib_slot **s = realloc(lib->slots, cap * sizeof *s);
		if (!s)
			goto fail;
		lib->slots = s;
		lib->cap = cap;
	}
	struct lib_slot *s = calloc(1, sizeof *s);
	if (!s)
		goto fail;
	s->type = type;
	s->src = src;
	s->path = path;
	s->owns_src = own_src != NULL;
	s->owns_path = own_path != NULL;
	s->name = path + strlen(path) - strlen(name);
	if (reuse) {
		s->no = lib->free_nos[lib->first_free];
		lib->first_free = (lib->first_free + 1) % lib->cap_free;
		lib->n_free--;
	} else {
		s->no = lib->n_slots++;
	}
	lib->slots[s->no & (LIB_SLOTS_MAX - 1)] = s;
	s->folder = folder;
	const uint64_t live = atomic_fetch_add(&lib->live_slots, 1) + 1;
	if (live > lib->slots_peak)
		lib->slots_peak = live;
	return s;
fail:
	free(own_src);
	free(own_path);
	return NULL;
}

/* Frees the place of slot number no (under the lock): its next generation queued, to
 * be taken after the others queued; a place whose generations are used up (or that
 * cannot be queued, out of memory) is not taken again. */
static void place_free(struct library *lib, uint64_t no)
{
	lib->slots[no & (LIB_SLOTS_MAX - 1)] = NULL;
	const uint64_t next = no + LIB_SLOTS_MAX;
	if (next >> LIB_NO_BITS)
		return;
	if (lib->n_free == lib->cap_free) {
		size_t cap = lib->cap_free ? 2 * lib->cap_free : 1024;
		uint32_t *q = malloc(cap * sizeof *q);
		if (!q)
			return;
		for (size_t i = 0; i < lib->n_free; i++)
			q[i] = lib->free_nos[(lib->first_free + i) % lib->cap_free];
		free(lib->free_nos);
		lib->free_nos = q;
		lib->cap_free = cap;
		lib->first_free = 0;
	}
	lib->free_nos[(lib->first_free + lib->n_free++) % lib->cap_free] = (uint32_t)next;
}

/* Takes folder f out of lib's list of idle listings, if there (under the lock). */
static void idle_remove(struct library *lib, struct lib_slot *f)
{
	if (!f->in_idle)
		return;
	*(f->idle_prev ? &f->idle_prev->idle_next : &lib->idle_first) = f->idle_next;
	*(f->idle_next ? &f->idle_next->idle_prev : &lib->idle_last) = f->idle_prev;
	f->idle_prev = f->idle_next = NULL;
	f->in_idle = false;
	lib->idle_entries -= f->n_children;
}

/* Puts folder f, idle now, last in lib's list of idle listings when it has a listing
 * that may be let go: one in a listing itself (the root's stays), of a source whose
 * folders may show under many paths. */
static void idle_append(struct library *lib, struct lib_slot *f)
{
	if (f->in_idle || !f->listed || !f->folder || !lib->src->links)
		return;
	f->idle_prev = lib->idle_last;
	f->idle_next = NULL;
	*(lib->idle_last ? &lib->idle_last->idle_next : &lib->idle_first) = f;
	lib->idle_last = f;
	f->in_idle = true;
	lib->idle_entries += f->n_children;
}

/* Slot s was not in use and is now (under the lock): its listing is not idle, and its
 * folders above are in use through it, as far up as they were not already. */
static void became_busy(struct library *lib, struct lib_slot *s)
{
	for (;;) {
		idle_remove(lib, s);
		struct lib_slot *f = s->folder;
		if (!f || f->busy_children++ || f->holds)
			return;
		s = f;
	}
}

/* Slot s was in use and is not now (under the lock): its listing idle, and so its
 * folders above, as far up as nothing else uses them. */
static void became_idle(struct library *lib, struct lib_slot *s)
{
	for (;;) {
		idle_append(lib, s);
		struct lib_slot *f = s->folder;
		if (!f || --f->busy_children || f->holds)
			return;
		s = f;
	}
}

/* True while slot s is held, or a slot of its listing is in use (under the lock). */
static bool in_use(const struct lib_slot *s)
{
	return s->holds || s->busy_children;
}

/* Frees slot s, held by nothing and in no listing, and in turn the slots of its
 * listing not in use, by a list rather than by recursion: a deep folder does not make a
 * deep stack. Slots of its listing still in use stay, out of any listing. */
static void free_slots(struct library *lib, struct lib_slot *s)
{
	s->next_free = NULL;
	for (struct lib_slot *todo = s; todo; ) {
		s = todo;
		todo = s->next_free;
		idle_remove(lib, s);
		for (size_t i = 0; i < s->n_children; i++) {
			struct lib_slot *c = s->children[i];
			c->folder = NULL;
			if (!c->holds) {
				c->next_free = todo;
				todo = c;
			}
		}
		if (s->state == MODEL_BUILT && s->users == 0)
			lib->idle_built--;
		lib_compares_forget(lib, s->no);
		place_free(lib, s->no);
		slot_free(lib, s);
		atomic_fetch_sub(&lib->live_slots, 1);
	}
}

/* Takes slot s out of its folder's listing (under the lock; the caller takes it out of
 * the array): freed unless held, its folder in use through it no more. */
static void leave_folder(struct library *lib, struct lib_slot *s)
{
	struct lib_slot *f = s->folder;
	s->folder = NULL;
	if (in_use(s) && f && --f->busy_children == 0 && !f->holds)
		became_idle(lib, f);
	if (!s->holds)
		free_slots(lib, s);
}

void lib_slot_hold(struct library *lib, struct lib_slot *s)
{
	if (s->holds++ == 0 && !s->busy_children)
		became_busy(lib, s);
}

void lib_slot_drop(struct library *lib, struct lib_slot *s)
{
	if (--s->holds)
		return;
	if (!s->busy_children)
		became_idle(lib, s);
	if (!s->folder && s != lib->root)
		free_slots(lib, s);
}

/* Lets go of idle folder f's listing (under the lock): every slot in it is freed (none
 * is in use, f being idle), and f is listed again when next used. */
static void unlist(struct library *lib, struct lib_slot *f)
{
	idle_remove(lib, f);
	struct lib_slot **children = f->children;
	size_t n = f->n_children;
	f->children = NULL;
	f->n_children = 0;
	f->listed = false;
	for (size_t i = 0; i < n; i++)
		leave_folder(lib, children[i]);
	free(children);
}

void lib_listings_trim(struct library *lib)
{
	while (lib->idle_entries > LIB_KEEP_IDLE_ENTRIES && lib->idle_first)
		unlist(lib, lib->idle_first);
}

bool lib_shrunk(struct library *lib)
{
	const uint64_t live = atomic_load(&lib->live_slots);
	if (lib->slots_peak < live + LIB_KEEP_IDLE_ENTRIES / 2)
		return false;
	lib->slots_peak = live;
	return true;
}

struct library *library_open(struct lib_source *src, const struct tree_kit *kit,
                             char err[GGUF_ERR_MAX])
{
	struct library *lib = calloc(1, sizeof *lib);
	struct tree_kit *own = lib && !kit ? tree_kit_new(err) : NULL;
	if (!lib || (!kit && !own)) {
		snprintf(err, GGUF_ERR_MAX, "out of memory");
		free(lib);
		src->ops->free(src->ctx);
		free(src);
		return NULL;
	}
	lib->src = src;
	lib->kit = kit ? kit : own;
	lib->own_kit = own;
	pthread_mutex_init(&lib->lock, NULL);
	pthread_mutex_init(&lib->compare_lock, NULL);
	pthread_cond_init(&lib->built, NULL);
	pthread_cond_init(&lib->listed, NULL);
	struct lib_slot *root = slot_new(lib, LIB_NODE_DIR, "", "", NULL, NULL, NULL);
	if (root)
		root->holds = 1;   /* the library's own */
	lib->root = root;
	struct lib_entry e;
	int r = root ? src->ops->stat(src->ctx, "", &e) : -ENOMEM;
	if (r == 0 && e.type != LIB_ENTRY_DIR)
		r = -ENOTDIR;
	if (r == 0) {
		root->st = attr_of(&e.st);
		root->dev = e.st.st_dev;
		root->ino = e.st.st_ino;
		root->parent = LIB_ROOT_INO;
		pthread_mutex_lock(&lib->lock);
		r = folder_list(lib, root, true, err);
		lib_unlock(lib);
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
		slot_free_now(lib->slots[i]);
	free(lib->slots);
	free(lib->free_nos);
	lib_compares_free(lib);
	lib->src->ops->free(lib->src->ctx);
	free(lib->src);
	tree_kit_free(lib->own_kit);   /* after every tree built with it */
	pthread_mutex_destroy(&lib->lock);
	pthread_mutex_destroy(&lib->compare_lock);
	pthread_cond_destroy(&lib->built);
	pthread_cond_destroy(&lib->listed);
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

/* Leaves out of e (n entries) the folders that are folder f itself or a folder above
 * it, by device and inode (a symbolic link back up: x -> ., up -> ..): a walk that
 * followed them would never end, as models.tsv's did. A source without inode numbers
 * has no such links. The names left out are freed. */
static void drop_loops(const struct lib_slot *f, struct lib_entry *e, size_t *n)
{
	size_t k = 0;
	for (size_t i = 0; i < *n; i++) {
		bool loop = false;
		for (const struct lib_slot *a = f; e[i].type == LIB_ENTRY_DIR && e[i].st.st_ino &&
		                                   a && !loop; a = a->folder)
			loop = a->dev == e[i].st.st_dev && a->ino == e[i].st.st_ino;
		if (loop)
			lib_entry_clear(&e[i]);
		else
			e[k++] = e[i];
	}
	*n = k;
}

/* Folder f's new listing from e (*n entries, the loops left out of them; f held): 0
 * with f's listing replaced, the slots of names gone or of versions gone taken out of it
 * (freed unless held); or -ENOMEM with f's listing as it was. The caller frees e. */
static int relist(struct library *lib, struct lib_slot *f, struct lib_entry *e, size_t *n,
                  uint64_t version, char err[GGUF_ERR_MAX])
{
	drop_loops(f, e, n);
	struct lib_name *names;
	size_t n_names;
	int r = lib_names(e, *n, f->no == 0, &names, &n_names);
	struct lib_slot **children = r == 0 ? calloc(n_names ? n_names : 1, sizeof *children) : NULL;
	if (r == 0 && !children)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < n_names; i++) {
		const struct lib_name *ln = &names[i];
		struct lib_entry *le = &e[ln->entry];
		/* the same name for the same version keeps its slot: its numbers stay */
		struct lib_slot *old = child_named(f, ln->name);
		if (old && old->type == ln->type &&
		    (ln->type == LIB_NODE_DIR || old->version == ln->version)) {
			children[i] = old;
			old->dev = le->st.st_dev;
			old->ino = le->st.st_ino;
			continue;
		}
		/* shown by its own name in a folder shown by its own path: its library path is
		 * its source path, one string */
		const bool same = !ln->own && f->path == f->src;
		char *own_path = same ? NULL : join(f->path, ln->name);
		const char *at = le->path;   /* lent, or taken */
		char *own_src = NULL;
		if (!le->path) {
			at = own_src = join(f->src, le->name);
		} else if (!le->lent) {
			at = own_src = le->path;
			le->path = le->name = NULL;   /* the slot's now (ln->name points into it) */
		}
		if (!same && !own_path) {
			free(own_src);
			r = -ENOMEM;
			break;
		}
		struct lib_slot *s = slot_new(lib, ln->type, ln->name, at, own_src, own_path, f);
		if (!s) {
			r = -ENOMEM;
			break;
		}
		s->parent = lib_ino(f->no, 1);
		s->version = ln->version;
		s->first_version = le->version;
		s->st = attr_of(&le->st);
		s->dev = le->st.st_dev;
		s->ino = le->st.st_ino;
		s->files = ln->files;
		children[i] = s;
	}
	/* the new listing takes the place of the old: the slots of the old one not in the
	 * new leave (versions gone, freed unless in use); on failure, the slots made for
	 * the new one, in no listing, are freed */
	struct lib_slot **drop = r == 0 ? f->children : children;
	size_t n_drop = r == 0 ? f->n_children : n_names;
	if (r == 0) {
		f->children = children;
		f->n_children = n_names;
		f->listed = true;
		f->lists_done++;
		f->dir_version = version;
	} else {
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory listing the folder",
		         *f->path ? f->path : "/");
	}
	for (size_t i = 0; drop && i < n_drop && drop[i]; i++)
		if (child_named(f, drop[i]->name) != drop[i])
			leave_folder(lib, drop[i]);
	free(drop);
	lib_names_free(names, n_names);
	return r;
}

static int folder_list(struct library *lib, struct lib_slot *f, bool force,
                       char err[GGUF_ERR_MAX])
{
	const struct lib_source *src = lib->src;
	if (f->listed && !force && src->ops->unchanged(src->ctx, f->src, f->dir_version))
		return 0;
	/* one listing of a folder at a time: one that ends while this waits was asked for
	 * after this was, and is as fresh as this one would be */
	const uint64_t asked = f->lists_done;
	/* held till the end: the lock is dropped while waiting or listing, and a caller
	 * may not hold it (compare/ lists the folder of its model, which no slot holds);
	 * the listing that ends while this waits may find it let go of; and an idle folder's
	 * listing may be let go at any time, a held one's not */
	lib_slot_hold(lib, f);
	while (f->listing)
		pthread_cond_wait(&lib->listed, &lib->lock);
	int r = 0;
	if (f->holds == 1 && !f->folder && f != lib->root) {
		snprintf(err, GGUF_ERR_MAX, "the folder went while it was listed");
		r = -ENOENT;
	}
	if (r == 0 && (f->lists_done == asked || !f->listed)) {
		/* the source is asked without the lock: a listing may take many requests, and
		 * every other lookup and read goes on meanwhile */
		struct lib_entry *e;
		size_t n;
		uint64_t version;
		f->listing = true;
		lib_unlock(lib);
		r = src->ops->list(src->ctx, f->src, &e, &n, &version, err);
		pthread_mutex_lock(&lib->lock);
		f->listing = false;
		pthread_cond_broadcast(&lib->listed);
		const bool got = r == 0;
		if (got && f->holds == 1 && !f->folder && f != lib->root) {
			/* let go of meanwhile: what was listed is no one's */
			snprintf(err, GGUF_ERR_MAX, "the folder went while it was listed");
			r = -ENOENT;
		} else if (got) {
			r = relist(lib, f, e, &n, version, err);
		}
		if (got)
			lib_entries_free(e, n);
	}
	lib_slot_drop(lib, f);
	return r;
}

int lib_folder_refresh(struct library *lib, struct lib_slot *f, bool force)
{
	char err[GGUF_ERR_MAX];
	int r = folder_list(lib, f, force, err);
	if (r < 0)
		evlog(EVLOG_ERR, err, "%s", err);
	return r;
}

/* The least recently used built models without users are taken out of their slots
 * into lib->trimmed, released at lib_unlock (at most LIB_TRIM_MAX a call; the next call
 * goes on), while more than LIB_KEEP_IDLE are built (under the lock): their numbers stay
 * theirs. */
static void trim(struct library *lib)
{
	struct lib_trimmed *out = &lib->trimmed;
	while (lib->idle_built > LIB_KEEP_IDLE && out->n < LIB_TRIM_MAX) {
		struct lib_slot *lru = NULL;
		for (size_t i = 1; i < lib->n_slots; i++) {
			struct lib_slot *s = lib->slots[i];
			if (s && s->state == MODEL_BUILT && s->users == 0 && (!lru || s->last_used < lru->last_used))
				lru = s;
		}
		if (!lru)
			return;
		out->t[out->n] = lru->t;
		out->m[out->n++] = lru->m;
		lru->t = NULL;
		lru->m = NULL;
		lru->state = MODEL_UNBUILT;
		lib->idle_built--;
	}
}

/* True when model m, opened for slot s, is the version the slot was given for (its
 * first file's device, inode, size, mtime and ctime, taken from the descriptor parsed;
 * always for a pinned source). ctime too: a file rewritten in place with its size kept
 * and its mtime put back (as cp -p, rsync and tar do) is another version, and a model
 * rebuilt from it under the old numbers would name its keys by the old positions. */
static bool lib_same_file(const struct library *lib, const struct lib_slot *s,
                          const struct ggufs_model *m)
{
	const struct lib_attr *a = &s->st;
	const struct stat *b = model_stat(m);
	const struct lib_source *src = lib->src;
	if (!src->pinned && src->ops->same_version)   /* the source knows its versions */
		return src->ops->same_version(src->ctx, s->src, s->first_version, m);
	return src->pinned ||
	       (s->dev == b->st_dev && s->ino == b->st_ino && a->size == b->st_size &&
	        a->mtim.tv_sec == b->st_mtim.tv_sec && a->mtim.tv_nsec == b->st_mtim.tv_nsec &&
	        a->ctim.tv_sec == b->st_ctim.tv_sec && a->ctim.tv_nsec == b->st_ctim.tv_nsec);
}

struct ggufs_model *lib_slot_open(struct library *lib, const struct lib_slot *s, bool *stale,
                                  char err[GGUF_ERR_MAX])
{
	const struct lib_source *src = lib->src;
	*stale = false;
	err[0] = 0;
	if (src->ops->open_listed)
		return src->ops->open_listed(src->ctx, s->src, s->first_version, s->version, stale,
		                             err);
	struct ggufs_model *m = src->ops->open_model(src->ctx, s->src, err);
	if (m && !lib_same_file(lib, s, m)) {
		model_close(m);
		m = NULL;
		*stale = true;
	}
	return m;
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
	/* read under the lock: models.tsv's rows (lib_slot_row) set it without waiting for
	 * builds */
	const bool want_row = !s->row;
	lib_unlock(lib);

	char err[GGUF_ERR_MAX];
	bool stale;
	struct ggufs_model *m = lib_slot_open(lib, s, &stale, err);
	atomic_fetch_add(&lib->opened, 1);
	struct tree *t = NULL;
	/* the tree's numbers fit below the slot's compare/ (tree_ino.h: state 0 ends below
	 * 2^31 - 1; a model past the zones is refused by the build) */
	if (m)
		t = tree_build(m, lib->kit, err);
	struct lib_row *row = t && want_row ? lib_row_of(m, lib_slot_sha256(lib, s)) : NULL;
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

/* Built model s used once more (under the lock): by a ref, or a computation. */
static void use_model(struct library *lib, struct lib_slot *s)
{
	if (s->users++ == 0)
		lib->idle_built--;
	s->last_used = ++lib->clock;
}

/* The folder whose listing holds slot s, or NULL: s is of a version gone from it. */
static struct lib_slot *folder_of(const struct lib_slot *s)
{
	return s->folder;
}

/* r for compare/ (low LIB_COMPARE_LOW) or compare/OTHER (above) of model slot s (under
 * the lock), neither model built: there while s parses (it did, to be looked in) and
 * OTHER is a model of s's folder as last listed (-ESTALE once it is not). */
static int compare_ref(struct library *lib, struct lib_slot *s, uint64_t low, struct node_ref *r)
{
	if (s->state == MODEL_STALE)
		return -ESTALE;
	if (s->state == MODEL_BROKEN)
		return -ENOENT;
	if (low == LIB_COMPARE_LOW) {
		r->p = &lib_compare_dir_provider;
		r->parent = lib_ino(s->no, 1);
		return 0;
	}
	struct lib_slot *o;
	const int err = slot_numbered(lib, low - LIB_COMPARE_LOW - 1, &o);
	if (err < 0)
		return err;
	if (o == s || o->type != LIB_NODE_MODEL || o->parent != s->parent)
		return -ENOENT;
	if (!folder_of(s) || folder_of(o) != folder_of(s))
		return -ESTALE;
	r->p = &lib_compare_provider;
	r->parent = lib_ino(s->no, LIB_COMPARE_LOW);
	r->hold[LIB_HOLD_OTHER] = (uintptr_t)o;
	return 0;
}

/* r for low number low of model slot s (under the lock), building it when asked to:
 * the model directory (its tree's root once built), a node of its tree, compare/, or a
 * broken model's directory and error. */
static int model_ref(struct library *lib, struct lib_slot *s, uint64_t low, bool want_build,
                     struct node_ref *r)
{
	r->ino_base = lib_ino(s->no, 0);
	if (low >= LIB_COMPARE_LOW)
		return compare_ref(lib, s, low, r);
	r->parent = low == 1 ? s->parent : lib_ino(s->no, 1);
	r->p = low == 1 ? &lib_model_dir_provider : NULL;
	if (low == 1 && !want_build && (s->state == MODEL_UNBUILT || s->state == MODEL_BUILDING))
		return 0;
	build(lib, s);
	switch (s->state) {
	case MODEL_BUILT: {
		const struct tree_node *n = tree_node(s->t, low);
		if (!n)
			return -ENOENT;
		r->tree = s->t;
		r->n = n;
		if (low != 1) {
			lib_tree_ref(s->t, n, r);
			r->parent = lib_ino(s->no, n->parent);
		}
		use_model(lib, s);
		r->hold[LIB_HOLD_FLAGS] |= LIB_HELD;
		return 0;
	}
	case MODEL_BROKEN:
		if (low != 1 && low != LIB_ERROR_LOW)
			return -ENOENT;
		r->p = low == 1 ? &lib_broken_provider : &lib_error_provider;
		return 0;
	case MODEL_STALE:
		return -ESTALE;
	default:
		return -ENOMEM;
	}
}

/* r for node low of slot s (under the lock, s held by r). */
static int slot_ref(struct library *lib, struct lib_slot *s, uint64_t low, bool want_build,
                    struct node_ref *r)
{
	if (s->type == LIB_NODE_MODEL)
		return model_ref(lib, s, low, want_build, r);
	if (low != 1)
		return -ENOENT;
	r->p = s->type == LIB_NODE_DIR ? &lib_folder_provider : &lib_plain_provider;
	r->parent = s->parent;
	return 0;
}

/* Lets go of what r holds (under the lock): nothing after. */
static void unref(struct library *lib, struct node_ref *r)
{
	struct lib_slot *s = lib_ref_slot(r), *o = lib_ref_other(r);
	const uintptr_t held = r->hold[LIB_HOLD_FLAGS];
	memset(r->hold, 0, sizeof r->hold);
	if ((held & LIB_HELD) && --s->users == 0)
		lib->idle_built++;
	if (!(held & LIB_PINNED))
		return;
	if (o)
		lib_slot_drop(lib, o);
	lib_slot_drop(lib, s);
}

/* True when slot s would have been freed but for the kernel's lookups (under the
 * lock): neither it nor a folder above it up to one in a listing is held otherwise (an
 * open file, a request), and that chain of folders ends out of any listing (a version
 * gone from its folder, or under a folder gone). Its number names nothing any more, as
 * a freed slot's: the kernel's lookups keep the number, not the version. */
static bool slot_gone(const struct library *lib, const struct lib_slot *s)
{
	for (const struct lib_slot *a = s; a != lib->root; a = a->folder) {
		if (a->holds != a->kernel)
			return false;
		if (!a->folder)
			return true;
	}
	return false;
}

/* library_get under the lock. The slot is held from the start: a build drops the lock,
 * and a listing meanwhile may let go of the slot. */
static int get_locked(struct library *lib, uint64_t ino, bool want_build, struct node_ref *r)
{
	memset(r, 0, sizeof *r);
	r->ino = ino;
	r->ctx = lib;
	r->parent = LIB_ROOT_INO;
	uint64_t no = ino >> LIB_LOW_BITS, low = ino & LIB_LOW_MASK;
	if (no == 0 && (low == LIB_TSV_INO || low == LIB_JSON_INO)) {
		r->p = &lib_tables_provider;
		return 0;
	}
	struct lib_slot *s;
	int ret = slot_numbered(lib, no, &s);
	if (ret < 0)
		return ret;
	if (slot_gone(lib, s))
		return -ESTALE;
	r->hold[LIB_HOLD_SLOT] = (uintptr_t)s;
	lib_slot_hold(lib, s);
	ret = slot_ref(lib, s, low, want_build, r);
	if (ret == 0) {
		if (lib_ref_other(r))
			lib_slot_hold(lib, lib_ref_other(r));
		r->hold[LIB_HOLD_FLAGS] |= LIB_PINNED;
		return 0;
	}
	lib_slot_drop(lib, s);
	memset(r->hold, 0, sizeof r->hold);
	return ret;
}

int library_get(struct library *lib, uint64_t ino, bool want_build, struct node_ref *r)
{
	pthread_mutex_lock(&lib->lock);
	int ret = get_locked(lib, ino, want_build, r);
	trim(lib);
	lib_listings_trim(lib);
	lib_unlock(lib);
	return ret;
}

/* The child called name of folder f (under the lock, which a listing drops): its
 * listing read again when the folder changed, or when the file the name had is another
 * version now (a source whose listings stand, listed_once: as listed). */
static struct lib_slot *folder_child(struct library *lib, struct lib_slot *f, const char *name)
{
	if (lib_folder_refresh(lib, f, false) < 0)
		return NULL;
	struct lib_slot *c = child_named(f, name);
	if (!c || c->type == LIB_NODE_DIR || lib->src->listed_once)
		return c;
	/* f is held by the caller, and c by f's listing until the next */
	struct lib_entry e;
	const struct lib_source *src = lib->src;
	/* a model found stale by its build may be so by another file than its first */
	if ((c->type != LIB_NODE_MODEL || c->state != MODEL_STALE) &&
	    src->ops->stat(src->ctx, c->src, &e) == 0 && e.version == c->first_version)
		return c;
	/* replaced, or gone: what the folder holds now */
	if (lib_folder_refresh(lib, f, true) < 0)
		return NULL;
	return child_named(f, name);
}

/* The child called name of directory p into *r (under the lock), as its provider
 * shows its entries: a folder's listing (the root's with its tables), a model
 * directory's tree and compare/, compare/'s other models of the folder as it is now, a
 * broken model's error, a tree directory's. 0, -ENOENT, -ENOTDIR. */
static int child_locked(struct library *lib, const struct node_ref *p, const char *name,
                        struct node_ref *r)
{
	struct lib_slot *s = lib_ref_slot(p);
	if (p->p == &lib_folder_provider) {
		if (s->no == 0 && (!strcmp(name, LIB_TSV_NAME) || !strcmp(name, LIB_JSON_NAME)))
			return get_locked(lib, !strcmp(name, LIB_TSV_NAME) ? LIB_TSV_INO : LIB_JSON_INO,
			                  false, r);
		struct lib_slot *c = folder_child(lib, s, name);
		return c ? get_locked(lib, lib_ino(c->no, 1), false, r) : -ENOENT;
	}
	if (p->p == &lib_compare_dir_provider) {
		/* another model of the folder as it is now */
		struct lib_slot *f = folder_of(s);
		struct lib_slot *c = f ? folder_child(lib, f, name) : NULL;
		return c && c->type == LIB_NODE_MODEL && c != s
		               ? get_locked(lib, lib_ino(s->no, LIB_COMPARE_LOW + 1 + c->no), false, r)
		               : -ENOENT;
	}
	if (p->p == &lib_broken_provider)
		return strcmp(name, "error") ? -ENOENT
		                             : get_locked(lib, lib_ino(s->no, LIB_ERROR_LOW), true, r);
	if (!p->tree)   /* a file of the library's own */
		return -ENOTDIR;
	if (p->p == &lib_model_dir_provider && !strcmp(name, LIB_COMPARE_NAME))
		return get_locked(lib, lib_ino(s->no, LIB_COMPARE_LOW), false, r);
	if (!tree_is_dir(p->n))
		return -ENOTDIR;
	const struct tree_node *n = tree_lookup(p->tree, p->n->ino, name);
	return n ? get_locked(lib, lib_ino(s->no, n->ino), true, r) : -ENOENT;
}

int library_lookup(struct library *lib, uint64_t parent, const char *name, struct node_ref *r,
                   unsigned *dir_flags)
{
	memset(r, 0, sizeof *r);
	pthread_mutex_lock(&lib->lock);
	struct node_ref p;
	int ret = get_locked(lib, parent, true, &p);
	if (ret == 0) {
		*dir_flags = p.p->flags;
		ret = child_locked(lib, &p, name, r);
		unref(lib, &p);
	}
	trim(lib);
	lib_listings_trim(lib);
	lib_unlock(lib);
	return ret;
}

void library_put(struct library *lib, struct node_ref *r)
{
	if (!r->hold[LIB_HOLD_FLAGS])
		return;
	pthread_mutex_lock(&lib->lock);
	unref(lib, r);
	trim(lib);
	lib_listings_trim(lib);
	lib_unlock(lib);
}

void lib_attr_of_slot(const struct lib_slot *s, struct node_attr *a)
{
	a->read_bits = s->st.mode & 0444;
	a->uid = s->st.uid;
	a->gid = s->st.gid;
	a->atim = s->st.atim;
	a->mtim = s->st.mtim;
	a->ctim = s->st.ctim;
}

int lib_slot_acquire(struct library *lib, struct lib_slot *s, const struct ggufs_model **m,
                     const char **error)
{
	pthread_mutex_lock(&lib->lock);
	build(lib, s);
	int ret = 0;
	switch (s->state) {
	case MODEL_BUILT:
		use_model(lib, s);
		*m = s->m;
		break;
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
	lib_unlock(lib);
	return ret;
}

void lib_slot_release(struct library *lib, struct lib_slot *s)
{
	/* the model's hold alone: the slot is its caller's */
	struct node_ref r = { .hold = { [LIB_HOLD_SLOT] = (uintptr_t)s, [LIB_HOLD_FLAGS] = LIB_HELD } };
	library_put(lib, &r);
}

void library_kernel_hold(struct library *lib, const struct node_ref *r)
{
	struct lib_slot *s = lib_ref_slot(r);
	if (!s)
		return;   /* the root's own files: the root stays */
	pthread_mutex_lock(&lib->lock);
	lib_slot_hold(lib, s);
	s->kernel++;
	lib_unlock(lib);
}

void library_forget(struct library *lib, uint64_t ino, uint64_t n)
{
	pthread_mutex_lock(&lib->lock);
	struct lib_slot *s;
	slot_numbered(lib, ino >> LIB_LOW_BITS, &s);   /* NULL: no such slot, nothing to forget */
	const uint64_t k = s && n < s->kernel ? n : s ? s->kernel : 0;
	if (k) {
		s->kernel -= k;
		s->holds -= k - 1;   /* (holds >= kernel >= k) and the last through the drop */
		lib_slot_drop(lib, s);
		lib_listings_trim(lib);
	}
	const bool shrunk = lib_shrunk(lib);
	lib_unlock(lib);
	if (shrunk)
		mem_give_back();
}

uint64_t library_slots(struct library *lib)
{
	return atomic_load(&lib->live_slots);
}

void library_counts(struct library *lib, uint64_t *opened, uint64_t *built)
{
	pthread_mutex_lock(&lib->lock);
	uint64_t b = 0;
	for (size_t i = 1; i < lib->n_slots; i++)
		b += lib->slots[i] && lib->slots[i]->state == MODEL_BUILT;
	lib_unlock(lib);
	*opened = atomic_load(&lib->opened);
	*built = b;
}
