/* compare/OTHER of a library's model directory (library.h): `ggufs --diff THIS OTHER`
 * computed at the first lookup or read of the pair and kept. One comparison is computed
 * at a time (a comparison's scan already uses every core, and so the memory stays one
 * scan's); the texts kept are bounded by LIB_COMPARE_KEEP bytes, the least recently read
 * let go first, but every pair's length stays known (its st_size: rsync and tar copy
 * the bytes a stat promises), and a text let go is made again, the same, when read. A
 * read that finds its pair kept copies from it under the library's lock, without waiting
 * for a comparison of another pair. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_text.h"
#include "evlog.h"
#include "library_impl.h"

/* The kept comparison of this_no against other_no (under lock), or NULL. */
static struct lib_compare *find(struct library *lib, uint64_t this_no, uint64_t other_no)
{
	for (size_t i = 0; i < lib->n_compares; i++)
		if (lib->compares[i].this_no == this_no && lib->compares[i].other_no == other_no)
			return &lib->compares[i];
	return NULL;
}

/* Copies [off, off + len) of c's text (held) into buf (under lock), marking it used: the
 * count. */
static int64_t slice(struct library *lib, struct lib_compare *c, char *buf, uint64_t len,
                     uint64_t off)
{
	c->last_used = ++lib->clock;
	return lib_text_read(c->text, c->len, buf, len, off);
}

/* Lets go of the least recently read texts until room more bytes fit the bound
 * (under lock); their lengths stay. */
static void make_room(struct library *lib, uint64_t room)
{
	while (lib->compare_bytes && lib->compare_bytes + room > LIB_COMPARE_KEEP) {
		size_t lru = SIZE_MAX;
		for (size_t i = 0; i < lib->n_compares; i++)
			if (lib->compares[i].text &&
			    (lru == SIZE_MAX || lib->compares[i].last_used < lib->compares[lru].last_used))
				lru = i;
		if (lru == SIZE_MAX)
			break;
		lib->compare_bytes -= lib->compares[lru].len;
		free(lib->compares[lru].text);
		lib->compares[lru].text = NULL;
	}
}

/* Keeps text (taken) as this_no's comparison with other_no (under lock), into the
 * pair's entry c when it has one (its text let go): the entry, or NULL out of memory or
 * when it alone is past the bound (the caller frees it). */
static struct lib_compare *keep(struct library *lib, struct lib_compare *c, uint64_t this_no,
                                uint64_t other_no, char *text, size_t len)
{
	if (len > LIB_COMPARE_KEEP)
		return NULL;
	make_room(lib, len);
	if (c) {
		c->text = text;
		c->len = len;
		lib->compare_bytes += len;
		return c;
	}
	if (lib->n_compares == lib->cap_compares) {
		size_t cap = lib->cap_compares ? 2 * lib->cap_compares : 16;
		struct lib_compare *grown = realloc(lib->compares, cap * sizeof *grown);
		if (!grown)
			return NULL;
		lib->compares = grown;
		lib->cap_compares = cap;
	}
	c = &lib->compares[lib->n_compares++];
	*c = (struct lib_compare){ this_no, other_no, text, len, 0 };
	lib->compare_bytes += len;
	return c;
}

/* The text of s against o, both models built and held meanwhile, malloc'ed into *text:
 * 0, or -errno after one line in the log naming the pair (name: "THIS/compare/OTHER"),
 * the same line in err. */
static int compute(struct library *lib, struct lib_slot *s, struct lib_slot *o, const char *name,
                   char **text, size_t *len, char err[GGUF_ERR_MAX])
{
	const struct ggufs_model *m[2] = { NULL, NULL };
	const char *broken = NULL;
	int r = lib_slot_acquire(lib, s, &m[0], &broken);
	if (r == 0) {
		r = lib_slot_acquire(lib, o, &m[1], &broken);
		if (r < 0)
			lib_slot_release(lib, s);
	}
	if (r == -EIO) {
		/* the model's own line, less its "ggufs: " and newline */
		const char *line = broken && !strncmp(broken, "ggufs: ", 7) ? broken + 7 : "";
		const int n = (int)strcspn(line, "\n");
		gguf_errf(err, "%s: cannot compare: %.*s", name, n, line);
		evlog(EVLOG_ERR, name, "%s", err);
		return r;
	}
	if (r < 0)
		return r;
	struct diff_text_failure fail;
	char why[GGUF_ERR_MAX];
	uint64_t total;
	r = diff_text_make(m[0], m[1], false, NULL, NULL, &total, text, len, &fail, why);
	if (r < 0 && fail.tensor != UINT64_MAX) {
		const struct ggufs_model *fm = m[fail.which];
		char q[80];
		gguf_errf(err, "%s: cannot compare: %s: tensor '%s': cannot read: %s", name,
		          model_path(fm), gguf_quote(&model_tensor(fm, fail.tensor)->name, q),
		          r == -ENOMEM ? "out of memory" : strerror(-r));
		evlog(EVLOG_ERR, name, "%s", err);
	} else if (r < 0) {
		gguf_errf(err, "%s: cannot compare: %s", name, why);
		evlog(EVLOG_ERR, name, "%s", err);
	}
	lib_slot_release(lib, o);
	lib_slot_release(lib, s);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	atomic_fetch_add(&lib->compares_made, 1);
	return 0;
}

/* Makes the text of r's pair unless it is kept, under the library's compare lock (one
 * comparison at a time: the pair may have been made while this one waited); then, with
 * buf, copies [off, off + len) of it: the count (0 without buf), or -errno after one
 * line in the log and in err; *size gets the text's length. */
static int64_t made(struct library *lib, const struct node_ref *r, char *buf, uint64_t len,
                    uint64_t off, uint64_t *size, char err[GGUF_ERR_MAX])
{
	struct lib_slot *s = lib_ref_slot(r), *o = lib_ref_other(r);
	pthread_mutex_lock(&lib->lock);
	struct lib_compare *c = find(lib, s->no, o->no);
	if (c && (c->text || !buf)) {
		*size = c->len;
		const int64_t n = buf ? slice(lib, c, buf, len, off) : 0;
		lib_unlock(lib);
		return n;
	}
	lib_unlock(lib);

	pthread_mutex_lock(&lib->compare_lock);
	pthread_mutex_lock(&lib->lock);
	c = find(lib, s->no, o->no);
	const bool ready = c && (c->text || !buf);
	int64_t ret = 0;
	if (ready) {
		*size = c->len;
		ret = buf ? slice(lib, c, buf, len, off) : 0;
	}
	lib_unlock(lib);
	if (!ready) {
		char name[2 * 4096 + 16];
		snprintf(name, sizeof name, "%s/%s/%s", s->path, LIB_COMPARE_NAME, o->name);
		char *text;
		size_t n;
		ret = compute(lib, s, o, name, &text, &n, err);
		if (ret == 0) {
			*size = n;
			pthread_mutex_lock(&lib->lock);
			c = keep(lib, find(lib, s->no, o->no), s->no, o->no, text, n);
			if (c && buf)
				ret = slice(lib, c, buf, len, off);
			lib_unlock(lib);
			if (!c) {
				/* made again at every read, it would be made for every 128 KiB */
				free(text);
				ret = n > LIB_COMPARE_KEEP ? -EFBIG : -ENOMEM;
				gguf_errf(err, "%s: %s", name, ret == -EFBIG ? "the comparison is too long to keep"
				                                             : "out of memory");
				evlog(EVLOG_ERR, name, "%s", err);
			}
		}
	}
	pthread_mutex_unlock(&lib->compare_lock);
	return ret;
}

int lib_compare_size(struct library *lib, const struct node_ref *r, uint64_t *size,
                     char why[GGUF_ERR_MAX])
{
	const int64_t ret = made(lib, r, NULL, 0, 0, size, why);
	return ret < 0 ? (int)ret : 0;
}

/* The length of r's text if known (under the library's lock), else 0. */
static uint64_t known(struct library *lib, const struct node_ref *r)
{
	pthread_mutex_lock(&lib->lock);
	const struct lib_compare *c = find(lib, lib_ref_slot(r)->no, lib_ref_other(r)->no);
	const uint64_t size = c ? c->len : 0;
	lib_unlock(lib);
	return size;
}

uint64_t library_compares_made(struct library *lib)
{
	return atomic_load(&lib->compares_made);
}

void lib_compares_free(struct library *lib)
{
	for (size_t i = 0; i < lib->n_compares; i++)
		free(lib->compares[i].text);
	free(lib->compares);
}

void lib_compares_forget(struct library *lib, uint64_t no)
{
	for (size_t i = 0; i < lib->n_compares; ) {
		struct lib_compare *c = &lib->compares[i];
		if (c->this_no != no && c->other_no != no) {
			i++;
			continue;
		}
		if (c->text)   /* (a text let go keeps its length, not its bytes) */
			lib->compare_bytes -= c->len;
		free(c->text);
		*c = lib->compares[--lib->n_compares];
	}
}

/* ---- compare/ and compare/OTHER as providers ---- */

/* compare/: a directory of the model's read bits, owner and times, whose names follow
 * its folder (none kept, no listing cached). */
static void compare_dir_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_attr_of_slot(lib_ref_slot(r), a);
	a->dir = true;
	a->flags = NODE_LIST_CHANGES;
}

/* The listing of compare/ r into *open: every other model of its model's folder, as it
 * is now (the folder's listing read again if it changed). 0, -ESTALE (the model's
 * version gone from its folder), -ENOMEM, or the listing's -errno. */
static int compare_dir_open(const struct node_ref *r, int flags, void **open,
                            char why[GGUF_ERR_MAX])
{
	(void)flags;
	why[0] = 0;
	struct library *lib = r->ctx;
	struct lib_slot *s = lib_ref_slot(r);
	pthread_mutex_lock(&lib->lock);
	struct lib_slot *f = s->folder;
	int ret = f ? lib_folder_refresh(lib, f, false) : -ESTALE;
	struct lib_listing *l = ret == 0 ? lib_listing_new(f->n_children) : NULL;
	if (ret == 0 && !l)
		ret = -ENOMEM;
	for (size_t i = 0; l && i < f->n_children; i++) {
		struct lib_slot *c = f->children[i];
		if (c->type == LIB_NODE_MODEL && c != s)
			lib_listing_add(lib, l, c, LIB_COMPARE_LOW + 1 + c->no, false);
	}
	lib_unlock(lib);
	if (ret < 0) {
		lib_listing_free(lib, l);
		return ret;
	}
	*open = l;
	return 0;
}

const struct tree_provider lib_compare_dir_provider = {
	.name = "library compare",
	.flags = TREE_P_NAMES_CHANGE,
	.count = lib_listing_count,
	.entry = lib_listing_entry,
	.attr = compare_dir_attr,
	.open = compare_dir_open,
	.close = lib_listing_close,
};

/* compare/OTHER: the model's read bits, owner and times; its size the length of its
 * text, known once the namespace's get or lookup sized it (lib_compare_size), one
 * block as every computed file; read past the page cache (its text is made by the
 * first read, and may be let go and made again). */
static void compare_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	lib_attr_of_slot(lib_ref_slot(r), a);
	a->size = known(r->ctx, r);
	a->flags = NODE_BYTES_CHANGE;
}

static int64_t compare_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                            uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open;
	why[0] = 0;
	uint64_t size;
	return made(r->ctx, r, buf, len, off, &size, why);
}

const struct tree_provider lib_compare_provider = {
	.name = "library comparison",
	.attr = compare_attr,
	.read = compare_read,
};
