/* A library used from several threads at once (lib/7-library/library.c and
 * library_table.c, issue 37), for ThreadSanitizer (.ci/run's TSan list) and ASan: the
 * library lists folders without its lock (one listing of a folder at a time, others
 * waiting), frees the slots no listing or ref holds, builds models and makes the rows
 * of models.tsv without it. The source here lists slowly (a sleep in every listing and
 * every open widens the time without the lock) and its listings change at every
 * listing: a file of a new version each time, a model that moves from name to name, a
 * folder that comes and goes (and its model with it); so slots are freed and their places taken again while
 * other threads look up, hold, list, build and make the table.
 *
 * What must hold: no number is given to two different entries alive at once (every ref
 * held is in a table shared by the threads); a held ref's number gives its own slot
 * again; a lookup gives a ref of the provider its name has, or -ENOENT for a name the
 * source may not hold then (never for one it always holds); listings hold each name and
 * each number once, the names always there among them; every models.tsv and .json
 * holds the three models always there; a number kept by the "kernel" (library_kernel_hold)
 * gives its own slot until forgotten, or -ESTALE once its version is gone; at the end no
 * more than LIB_KEEP_IDLE models stay built with no user, the listings of idle folders
 * are let go past LIB_KEEP_IDLE_ENTRIES slots (big0 .. big2, two of three kept), and the
 * library frees all it has (LeakSanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "library.h"
#include "node.h"
#include "library_fixture.h"
#include "model.h"
#include "scratch_dir.h"

#define THREADS 6
#define SECONDS 3          /* each thread's time, and at most ITERATIONS steps */
#define ITERATIONS 4000
#define HELD_PER_THREAD 4  /* refs a thread keeps across its steps, as open files */
#define KNOWN_PER_THREAD 6 /* numbers a thread keeps as the kernel does, till forgotten */
/* plain files in each of big0 .. big2: two such listings idle are under the bound of
 * those kept, three over it */
#define BIG_FILES (LIB_KEEP_IDLE_ENTRIES * 2 / 5)

/* The source: every listing of the root or of churn is one more listing (gen); the
 * root holds m0.gguf .. m2.gguf (always, version 1), f.txt (a new version each
 * listing), g<gen % 5>.txt, the folder churn (always) and the folder sub<gen % 3>;
 * churn holds c<gen % 4>.gguf of version gen and x.txt of version gen; sub<k> holds
 * s.gguf, version 1; the folders big0 .. big2 (always) hold BIG_FILES files each, and
 * stay unchanged: listed again only once let go. Every model opens model.gguf of the
 * scratch folder. */
static atomic_uint_fast64_t gen;
static atomic_uint_fast64_t lists, opens, big_lists;

/* A short sleep, different at each call: the window without the library's lock. */
static void nap(void)
{
	static atomic_uint seed;
	unsigned s = atomic_fetch_add(&seed, 2654435761u);
	usleep(50 + (s >> 8) % 250);
}

static void put_entry(struct lib_entry *e, const char *name, bool dir, uint64_t version,
                      ino_t ino)
{
	e->name = strdup(name);
	assert_non_null(e->name);
	e->type = dir ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
	e->version = version;
	e->st.st_mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	e->st.st_dev = 7;
	e->st.st_ino = ino;
	e->st.st_size = 10;
}

static int fake_list(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                     uint64_t *version, char err[GGUF_ERR_MAX])
{
	(void)ctx;
	atomic_fetch_add(&lists, 1);
	nap();
	struct lib_entry *e = calloc(BIG_FILES + 16, sizeof *e);
	assert_non_null(e);
	size_t k = 0;
	char name[32];
	if (!strcmp(dir, "")) {
		const uint64_t g = atomic_fetch_add(&gen, 1) + 1;
		for (int i = 0; i < 3; i++) {
			snprintf(name, sizeof name, "m%d.gguf", i);
			put_entry(&e[k++], name, false, 1, 100 + i);
		}
		put_entry(&e[k++], "f.txt", false, g, 200 + g);
		snprintf(name, sizeof name, "g%d.txt", (int)(g % 5));
		put_entry(&e[k++], name, false, g, 300 + g);
		put_entry(&e[k++], "churn", true, 1, 2);
		snprintf(name, sizeof name, "sub%d", (int)(g % 3));
		put_entry(&e[k++], name, true, 1, 10 + g % 3);
		for (int i = 0; i < 3; i++) {
			snprintf(name, sizeof name, "big%d", i);
			put_entry(&e[k++], name, true, 1, 20 + i);
		}
		*version = g;
	} else if (!strcmp(dir, "churn")) {
		const uint64_t g = atomic_fetch_add(&gen, 1) + 1;
		snprintf(name, sizeof name, "c%d.gguf", (int)(g % 4));
		put_entry(&e[k++], name, false, g, 400 + g);
		put_entry(&e[k++], "x.txt", false, g, 500 + g);
		*version = g;
	} else if (!strncmp(dir, "sub", 3) && strlen(dir) == 4) {
		put_entry(&e[k++], "s.gguf", false, 1, 600 + (dir[3] - '0'));
		*version = 1;
	} else if (!strncmp(dir, "big", 3) && strlen(dir) == 4) {
		atomic_fetch_add(&big_lists, 1);
		for (int i = 0; i < BIG_FILES; i++) {
			snprintf(name, sizeof name, "p%04d.txt", i);
			put_entry(&e[k++], name, false, 1, 1000 + (ino_t)i);
		}
		*version = 1;
	} else {
		free(e);
		snprintf(err, GGUF_ERR_MAX, "%s: no such folder", dir);
		return -ENOENT;
	}
	*out = e;
	*n = k;
	return 0;
}

static bool fake_unchanged(void *ctx, const char *dir, uint64_t version)
{
	(void)ctx;
	(void)version;
	/* every look lists again (the root and churn change each time), but big<k>'s */
	return !strncmp(dir, "big", 3);
}

/* The root, the models always there (version 1); every other file a version gone. */
static int fake_stat(void *ctx, const char *path, struct lib_entry *e)
{
	(void)ctx;
	memset(e, 0, sizeof *e);
	if (!*path) {
		e->type = LIB_ENTRY_DIR;
		e->version = 1;
		e->st.st_mode = S_IFDIR | 0755;
		return 0;
	}
	e->type = LIB_ENTRY_FILE;
	e->st.st_mode = S_IFREG | 0644;
	const bool fixed = (strlen(path) == 7 && path[0] == 'm') || strstr(path, "/s.gguf");
	e->version = fixed ? 1 : 0;
	return 0;
}

static bool fake_same_version(void *ctx, const char *path, uint64_t version,
                              const struct ggufs_model *m)
{
	(void)ctx;
	(void)path;
	(void)version;
	(void)m;
	return true;
}

static struct ggufs_model *fake_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	(void)ctx;
	(void)path;
	atomic_fetch_add(&opens, 1);
	nap();
	char file[128];
	snprintf(file, sizeof file, "%s/model.gguf", scratch_dir);
	return model_open(file, err);
}

static const struct lib_source_ops fake_ops = {
	.list = fake_list,
	.unchanged = fake_unchanged,
	.stat = fake_stat,
	.same_version = fake_same_version,
	.open_model = fake_open_model,
	.free = free,   /* (ctx is NULL) */
};

/* model.gguf: a small model of two f32 tensors and a name. */
static void write_model(void)
{
	char path[128];
	snprintf(path, sizeof path, "%s/model.gguf", scratch_dir);
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 2, 2);
	gw_kv_str(&w, "general.architecture", "llama");
	gw_kv_str(&w, "general.name", "threads");
	const uint64_t ne[1] = { 64 };
	gw_tensor(&w, "a", 1, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "b", 1, ne, GGML_TYPE_F32, 256);
	gw_align(&w, 32);
	for (int i = 0; i < 128; i++)
		gw_f32(&w, (float)i);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* The refs held now by every thread: a number held twice must name one slot. */
struct held {
	uint64_t ino;
	uintptr_t slot;   /* the library's slot of it (its ref's hold[LIB_HOLD_SLOT]), 0: none */
	char name[16];
};

/* r's slot, as the library keeps it in the ref (0: the root's own files). */
static uintptr_t slot_of(const struct node_ref *r)
{
	return r->hold[LIB_HOLD_SLOT];
}
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held held_now[THREADS * (HELD_PER_THREAD + 2)];
static atomic_uint_fast64_t conflicts, reused;   /* numbers of a place taken again */

/* Adds r (got by name) to the table: a conflict when a ref held with its slot number
 * has another slot, or the same slot another number or name. Returns its place. */
static size_t held_add(const struct node_ref *r, const char *name)
{
	pthread_mutex_lock(&held_lock);
	size_t free_at = SIZE_MAX;
	const uint64_t no = r->ino >> LIB_LOW_BITS;
	for (size_t i = 0; i < sizeof held_now / sizeof held_now[0]; i++) {
		const struct held *h = &held_now[i];
		if (!h->slot) {
			if (free_at == SIZE_MAX)
				free_at = i;
			continue;
		}
		if ((h->ino >> LIB_LOW_BITS == no) != (h->slot == slot_of(r)) ||
		    (h->slot == slot_of(r) && strcmp(h->name, name))) {
			fprintf(stderr, "number %#llx held for %s and %s\n", (unsigned long long)r->ino,
			        h->name, name);
			atomic_fetch_add(&conflicts, 1);
		}
	}
	assert_true(free_at != SIZE_MAX);
	if (no >> LIB_INDEX_BITS)
		atomic_fetch_add(&reused, 1);
	held_now[free_at] = (struct held){ .ino = r->ino, .slot = slot_of(r) };
	snprintf(held_now[free_at].name, sizeof held_now[free_at].name, "%s", name);
	pthread_mutex_unlock(&held_lock);
	return free_at;
}

static void held_remove(size_t at)
{
	pthread_mutex_lock(&held_lock);
	held_now[at].slot = 0;
	pthread_mutex_unlock(&held_lock);
}

struct worker {
	struct library *lib;
	unsigned seed;
	struct node_ref refs[HELD_PER_THREAD];
	size_t at[HELD_PER_THREAD];
	size_t n_refs;
	uint64_t gone[16];          /* numbers let go of, to look up again */
	size_t n_gone;
	uint64_t known[KNOWN_PER_THREAD];   /* numbers given to the "kernel", oldest first */
	size_t n_known;
	/* counts */
	uint64_t steps, lookups, enoent, estale, builds, tables, listings, forgets;
	const char *failed;         /* the first assertion that failed, or NULL */
};

#define CHECK(w, cond) \
	do { \
		if (!(cond) && !(w)->failed) \
			(w)->failed = #cond; \
	} while (0)

static const char *const root_names[] = {
	"m0", "m1", "m2", "f.txt", "churn", "sub0", "sub1", "sub2", "g0.txt", "nosuch",
	"models.tsv",
};
#define N_ROOT_NAMES (sizeof root_names / sizeof root_names[0])

/* True for a root name of a model. */
static bool model_name(const char *name)
{
	return name[0] == 'm' && name[1] != 'o';
}

/* The provider a root name's ref must have (a model directory's, built or not). */
static const struct tree_provider *provider_of(const char *name)
{
	if (model_name(name))
		return &lib_model_dir_provider;
	if (!strcmp(name, "models.tsv"))
		return &lib_tables_provider;
	if (!strcmp(name, "churn") || !strncmp(name, "sub", 3))
		return &lib_folder_provider;
	return &lib_plain_provider;
}

/* Lets go of the oldest ref held. */
static void drop_oldest(struct worker *w)
{
	held_remove(w->at[0]);
	if (slot_of(&w->refs[0]))
		w->gone[w->n_gone++ % 16] = w->refs[0].ino;
	library_put(w->lib, &w->refs[0]);
	memmove(&w->refs[0], &w->refs[1], (w->n_refs - 1) * sizeof w->refs[0]);
	memmove(&w->at[0], &w->at[1], (w->n_refs - 1) * sizeof w->at[0]);
	w->n_refs--;
}

/* Keeps r (got by name) among the refs held, letting go of the oldest past the bound. */
static void keep(struct worker *w, struct node_ref *r, const char *name)
{
	if (!slot_of(r)) {   /* the root's own files: no slot to hold */
		library_put(w->lib, r);
		return;
	}
	if (w->n_refs == HELD_PER_THREAD)
		drop_oldest(w);
	w->at[w->n_refs] = held_add(r, name);
	w->refs[w->n_refs++] = *r;
}

/* A listing of directory r open as open (its provider's): each name and number once,
 * and the names always there. */
static void check_listing(struct worker *w, const struct node_ref *r, void *open, bool root)
{
	const uint64_t n = r->p->count(r, open);
	struct node_dirent *e = calloc(n ? n : 1, sizeof *e);
	assert_non_null(e);
	for (uint64_t i = 0; i < n; i++)
		CHECK(w, r->p->entry(r, open, i, &e[i]));
	size_t always = 0;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n; j++) {
			CHECK(w, strcmp(e[i].name, e[j].name) != 0);
			CHECK(w, e[i].ino != e[j].ino);
		}
		if (root)
			always += !strcmp(e[i].name, "m0") || !strcmp(e[i].name, "m1") ||
			          !strcmp(e[i].name, "m2") || !strcmp(e[i].name, "churn") ||
			          !strcmp(e[i].name, "models.tsv");
		else
			always += !strcmp(e[i].name, "x.txt");
	}
	CHECK(w, always == (root ? 5u : 1u));
	free(e);
}

static void step_lookup(struct worker *w)
{
	const char *name = root_names[rand_r(&w->seed) % N_ROOT_NAMES];
	struct node_ref r;
	unsigned dir_flags;
	int ret = library_lookup(w->lib, LIB_ROOT_INO, name, &r, &dir_flags);
	w->lookups++;
	const bool always = model_name(name) || !strcmp(name, "churn") ||
	                    !strcmp(name, "models.tsv") || !strcmp(name, "f.txt");
	if (ret == -ENOENT) {
		w->enoent++;
		CHECK(w, !always);
		return;
	}
	CHECK(w, ret == 0);
	if (ret)
		return;
	CHECK(w, strcmp(name, "nosuch") != 0);
	CHECK(w, r.p == provider_of(name));
	CHECK(w, dir_flags == TREE_P_NAMES_CHANGE);   /* a folder's names come and go */
	struct stat st;
	node_stat(&r, NULL, &st);
	CHECK(w, st.st_ino == r.ino);
	if (r.p == &lib_folder_provider && !strcmp(name, "churn")) {
		/* a lookup in it: a folder listed anew whose model moves */
		struct node_ref c;
		char cname[8];
		snprintf(cname, sizeof cname, "c%d", rand_r(&w->seed) % 4);
		int cret = library_lookup(w->lib, r.ino, cname, &c, &dir_flags);
		CHECK(w, cret == 0 || cret == -ENOENT);
		if (cret == 0) {
			CHECK(w, c.p == &lib_model_dir_provider);
			keep(w, &c, cname);
		}
	}
	keep(w, &r, name);
}

/* The model s of a folder sub<k> (which comes and goes with the root's listings, its
 * slots freed and made again): held, and sometimes its compare/ listed (the folder
 * listed again meanwhile) and looked in. */
static void step_sub(struct worker *w)
{
	char name[8];
	snprintf(name, sizeof name, "sub%d", rand_r(&w->seed) % 3);
	struct node_ref f, m;
	unsigned dir_flags;
	int ret = library_lookup(w->lib, LIB_ROOT_INO, name, &f, &dir_flags);
	CHECK(w, ret == 0 || ret == -ENOENT);
	if (ret)
		return;
	ret = library_lookup(w->lib, f.ino, "s", &m, &dir_flags);
	library_put(w->lib, &f);
	CHECK(w, ret == 0 || ret == -ENOENT);   /* (the folder gone since) */
	if (ret)
		return;
	CHECK(w, m.p == &lib_model_dir_provider);
	if (rand_r(&w->seed) % 2) {
		struct node_ref c;
		const uint64_t cino = (m.ino & ~LIB_LOW_MASK) | LIB_COMPARE_LOW;
		ret = library_get(w->lib, cino, false, &c);
		CHECK(w, ret == 0);
		if (ret == 0) {
			CHECK(w, c.p == &lib_compare_dir_provider);
			void *listing = NULL;
			char why[GGUF_ERR_MAX];
			ret = c.p->open(&c, O_RDONLY, &listing, why);
			/* its folder's other models: none; or the folder gone from the root */
			CHECK(w, (ret == 0 && c.p->count(&c, listing) == 0) || ret == -ESTALE ||
			         ret == -ENOENT);
			if (ret == 0)
				c.p->close(&c, listing);
			struct node_ref o;
			ret = library_lookup(w->lib, cino, "s", &o, &dir_flags);   /* itself: not there */
			CHECK(w, ret == -ENOENT);
			library_put(w->lib, &c);
		}
	}
	keep(w, &m, "s");
}

/* The kernel forgets the oldest number it keeps. */
static void forget_oldest(struct worker *w)
{
	library_forget(w->lib, w->known[0], 1);
	memmove(&w->known[0], &w->known[1], (w->n_known - 1) * sizeof w->known[0]);
	w->n_known--;
	w->forgets++;
}

/* A lookup whose number the kernel keeps (its slot held until forgotten): a file of
 * big<k> (listed again if let go meanwhile), or a name of the root; and a number kept
 * gives its own slot, or -ESTALE once its version is gone. */
static void step_kernel(struct worker *w)
{
	if (w->n_known && rand_r(&w->seed) % 2) {
		const uint64_t ino = w->known[rand_r(&w->seed) % w->n_known];
		struct node_ref r;
		int ret = library_get(w->lib, ino, false, &r);
		CHECK(w, ret == 0 || ret == -ESTALE);
		if (ret == 0) {
			CHECK(w, r.ino == ino);
			library_put(w->lib, &r);
		}
		return;
	}
	char name[16];
	snprintf(name, sizeof name, "big%d", rand_r(&w->seed) % 3);
	struct node_ref f, r;
	unsigned dir_flags;
	int ret = library_lookup(w->lib, LIB_ROOT_INO, name, &f, &dir_flags);
	CHECK(w, ret == 0);
	if (ret)
		return;
	snprintf(name, sizeof name, "p%04d.txt", rand_r(&w->seed) % BIG_FILES);
	ret = library_lookup(w->lib, f.ino, name, &r, &dir_flags);
	CHECK(w, ret == 0);
	struct node_ref *kept = rand_r(&w->seed) % 2 ? &f : &r;
	if (ret == 0) {
		CHECK(w, r.p == &lib_plain_provider);
		if (w->n_known == KNOWN_PER_THREAD)
			forget_oldest(w);
		library_kernel_hold(w->lib, kept);
		w->known[w->n_known++] = kept->ino;
		library_put(w->lib, &r);
	}
	library_put(w->lib, &f);
}

/* A held ref's number gives its own slot; a model's built. */
static void step_get(struct worker *w)
{
	if (!w->n_refs)
		return;
	const struct node_ref *h = &w->refs[rand_r(&w->seed) % w->n_refs];
	if (!slot_of(h))
		return;
	struct node_ref r;
	const bool build = h->p == &lib_model_dir_provider;
	int ret = library_get(w->lib, h->ino, build, &r);
	CHECK(w, ret == 0);
	if (ret)
		return;
	CHECK(w, slot_of(&r) == slot_of(h));
	if (build) {
		w->builds++;
		CHECK(w, r.p == &lib_model_dir_provider && r.tree);
		if (r.tree)
			CHECK(w, r.p->count(&r, NULL) > 0);
	}
	library_put(w->lib, &r);
}

/* A number let go of: its slot, if still held by a listing, or -ESTALE. */
static void step_gone(struct worker *w)
{
	if (!w->n_gone)
		return;
	const uint64_t ino = w->gone[rand_r(&w->seed) % (w->n_gone < 16 ? w->n_gone : 16)];
	struct node_ref r;
	int ret = library_get(w->lib, ino, false, &r);
	CHECK(w, ret == 0 || ret == -ESTALE);
	if (ret == -ESTALE)
		w->estale++;
	if (ret == 0) {
		CHECK(w, r.ino == ino);
		library_put(w->lib, &r);
	}
}

static void step_list(struct worker *w)
{
	struct node_ref r;
	unsigned dir_flags;
	const bool root = rand_r(&w->seed) % 2;
	int ret = root ? library_get(w->lib, LIB_ROOT_INO, false, &r)
	               : library_lookup(w->lib, LIB_ROOT_INO, "churn", &r, &dir_flags);
	CHECK(w, ret == 0);
	if (ret)
		return;
	void *listing = NULL;
	char why[GGUF_ERR_MAX];
	ret = r.p->open(&r, O_RDONLY, &listing, why);
	CHECK(w, ret == 0);
	if (ret == 0) {
		check_listing(w, &r, listing, root);
		r.p->close(&r, listing);
	}
	w->listings++;
	library_put(w->lib, &r);
}

static void step_table(struct worker *w)
{
	char *text;
	size_t len;
	const bool json = rand_r(&w->seed) % 2;
	int ret = library_table(w->lib, json, &text, &len);
	CHECK(w, ret == 0);
	if (ret)
		return;
	w->tables++;
	CHECK(w, len > 0 && !memchr(text, 0, len));
	char *t = realloc(text, len + 1);   /* (not a string: its length given) */
	assert_non_null(t);
	text = t;
	text[len] = 0;
	for (int i = 0; i < 3; i++) {
		char row[32];
		snprintf(row, sizeof row, json ? "\"path\": \"m%d\"" : "\nm%d\t", i);
		CHECK(w, strstr(text, row) != NULL);
	}
	CHECK(w, strstr(text, "threads") != NULL);   /* a row of the model's own */
	free(text);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A table's walk now and then (a walk of every model is costly), else what the
 * kernel's forgetting does (step_kernel). */
static void step_table_or_kernel(struct worker *w)
{
	if (rand_r(&w->seed) % 4 == 0)
		step_table(w);
	else
		step_kernel(w);
}

/* Its oldest ref put back, when it holds any. */
static void step_drop(struct worker *w)
{
	if (w->n_refs)
		drop_oldest(w);
}

/* A worker's steps, one drawn at a time from the 16: each as often as it stands here. */
static void (*const worker_steps[16])(struct worker *w) = {
	step_lookup, step_lookup, step_lookup, step_lookup, step_sub, step_sub,
	step_get, step_get, step_get, step_gone, step_gone, step_list, step_list, step_list,
	step_table_or_kernel, step_drop,
};

static void *work(void *arg)
{
	struct worker *w = arg;
	const double end = now() + SECONDS;
	while (w->steps < ITERATIONS && now() < end && !w->failed) {
		w->steps++;
		worker_steps[rand_r(&w->seed) % 16](w);
	}
	while (w->n_refs)
		drop_oldest(w);
	while (w->n_known)
		forget_oldest(w);
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	write_model();
	/* the listings of idle folders let go past the bound (links) */
	struct library *lib = library_fixture_open(&fake_ops, NULL, true);
	struct worker w[THREADS];
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .lib = lib, .seed = 0x9e3779b9u * (unsigned)(i + 1) };
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	uint64_t steps = 0, lookups = 0, enoent = 0, estale = 0, builds = 0, tables = 0,
	         listings = 0, forgets = 0;
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		if (w[i].failed)
			fail_msg("thread %d: %s", i, w[i].failed);
		steps += w[i].steps;
		lookups += w[i].lookups;
		enoent += w[i].enoent;
		estale += w[i].estale;
		builds += w[i].builds;
		tables += w[i].tables;
		listings += w[i].listings;
		forgets += w[i].forgets;
	}
	printf("%d threads: %llu steps, %llu lookups (%llu ENOENT), %llu gets of numbers let go "
	       "ESTALE, %llu builds, %llu listings, %llu tables, %llu refs held of places taken "
	       "again, %llu numbers forgotten; source: %llu listings (%llu of big<k>), %llu "
	       "models opened; %llu slots left\n", THREADS, (unsigned long long)steps,
	       (unsigned long long)lookups, (unsigned long long)enoent,
	       (unsigned long long)estale, (unsigned long long)builds,
	       (unsigned long long)listings, (unsigned long long)tables,
	       (unsigned long long)atomic_load(&reused), (unsigned long long)forgets,
	       (unsigned long long)atomic_load(&lists), (unsigned long long)atomic_load(&big_lists),
	       (unsigned long long)atomic_load(&opens), (unsigned long long)library_slots(lib));
	assert_int_equal(atomic_load(&conflicts), 0);
	/* every thread did each kind of step, and slots were freed under them */
	assert_true(lookups > THREADS && builds > 0 && tables > 0 && listings > THREADS);
	assert_true(estale > 0 && atomic_load(&reused) > 0);
	/* no user left: no more than the idle bound built */
	uint64_t opened, built;
	library_counts(lib, &opened, &built);
	assert_true(built <= LIB_KEEP_IDLE);
	assert_true(opened > 0);
	/* nothing held, nothing the kernel keeps: the root and its listing, churn's, and the
	 * listings of idle folders kept (big<k>'s: two of three), the rest let go */
	assert_true(forgets > 0);
	assert_true(library_slots(lib) <= 1 + 16 + 2 + LIB_KEEP_IDLE_ENTRIES);
	assert_true(atomic_load(&big_lists) >= 3);
	/* and the library still answers */
	struct node_ref r;
	unsigned dir_flags;
	assert_int_equal(library_lookup(lib, LIB_ROOT_INO, "m1", &r, &dir_flags), 0);
	library_put(lib, &r);
	library_free(lib);
}

UNIT_TESTS_IN_SCRATCH(cmocka_unit_test(test_threads))
