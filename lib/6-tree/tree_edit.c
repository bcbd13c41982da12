#include "tree_edit.h"
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "edits_file.h"
#include "edit_text.h"
#include "edits_store.h"
#include "names.h"
#include "parse_value.h"
#include "render_value.h"
#include "scratch.h"

/* How many deleted keys a create can bring back (tree_edit.h). */
#define TOMBSTONES 8

struct tree_edits {
	pthread_mutex_t lock;       /* one edit at a time, held while its state is built and
	                             * saved; only edits change cur, so they read it here */
	pthread_mutex_t cur_lock;   /* cur, held only to take or swap it: the one lock a
	                             * reader takes, never held across a commit */
	struct tree *base;          /* the model's own metadata (borrowed) */
	struct tree *cur;           /* the current tree (one reference is ours) */
	void (*commit_hook)(void *);   /* for tests: called inside each commit */
	void *commit_hook_ctx;
	struct edits_store *store;  /* FILE */
	struct scratch_set *scratch;   /* metadata/'s scratch files (scratch.h) */
	struct edits_identity id;
	/* the types user.gguf.type set on keys, by key id: an empty array of arrays has no
	 * inner type in the file, so the next write takes it from here */
	struct declared { uint64_t id; struct value_type t; } *declared;
	uint64_t n_declared;
	/* the last keys deleted, newest last: a file made again under one's name (install
	 * unlinks its target, then creates it) is that key again, in its place */
	struct ov_key gone[TOMBSTONES];
	uint64_t n_gone;
};

/* Remembers type t set on the key of id (the last one set wins). */
static void declare(struct tree_edits *e, uint64_t id, const struct value_type *t)
{
	for (uint64_t i = 0; i < e->n_declared; i++)
		if (e->declared[i].id == id) {
			e->declared[i].t = *t;
			return;
		}
	struct declared *d = realloc(e->declared, (e->n_declared + 1) * sizeof *d);
	if (!d)
		return;   /* only a convenience is lost */
	e->declared = d;
	e->declared[e->n_declared++] = (struct declared){ .id = id, .t = *t };
}

/* The type to parse key k's text as: its value's, or when that does not say the inner
 * type (an empty array of arrays) the one user.gguf.type last set. 0 or -1. */
static int type_of(const struct tree_edits *e, uint64_t k, struct value_type *t)
{
	if (parse_value_type_of(&e->cur->m->meta->kv[k].value, t) < 0)
		return -1;
	if (t->leaf == GGUF_TYPE_ARRAY)
		for (uint64_t i = 0; i < e->n_declared; i++)
			if (e->declared[i].id == e->cur->state->keys[k].id)
				*t = e->declared[i].t;
	return 0;
}

/* True when key a (of a new state) is key b (of the state before it) unchanged: the
 * same id, name and value, which an edit that leaves a key alone copies as they are. */
static bool same_key(const struct ov_key *a, const struct ov_key *b)
{
	return a->id == b->id && a->kv.key.ptr == b->kv.key.ptr && a->kv.key.len == b->kv.key.len &&
	       a->kv.value.data == b->kv.value.data && a->kv.value.size == b->kv.value.size &&
	       a->kv.value.type == b->kv.value.type;
}

/* Gives tree t its times (tree_edit_time): made at now, each key's time old's when it is
 * unchanged from old, the tree before the edit (keys are in id order in both, so one
 * walk pairs them), else now. base is the tree of the model's own metadata. With old NULL (the state FILE held at mount), a key that
 * the state changes has FILE's time (now), any other the model file's. False out of
 * memory. */
static bool stamp(struct tree *t, const struct tree *base, const struct tree *old,
                  struct timespec now)
{
	const struct ov_state *s = t->state;
	t->key_time = malloc((s->n ? s->n : 1) * sizeof *t->key_time);
	if (!t->key_time)
		return false;
	const struct timespec model_time = base->m->st.st_mtim;
	t->made = old || !ov_unchanged(s, base->m) ? now : model_time;
	uint64_t j = 0;
	for (uint64_t k = 0; k < s->n; k++) {
		const struct ov_key *key = &s->keys[k];
		if (!old) {
			t->key_time[k] = key->name_blob || key->value_blob || key->id >= s->n_orig ?
			                 now : model_time;
			continue;
		}
		while (j < old->state->n && old->state->keys[j].id < key->id)
			j++;
		bool kept = j < old->state->n && same_key(key, &old->state->keys[j]);
		t->key_time[k] = kept ? old->key_time[j] : now;
	}
	return true;
}

/* The time now, as file times are (CLOCK_REALTIME). */
static struct timespec time_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}

struct tree_edits *tree_edits_open(struct tree *base, const char *path, char err[GGUF_ERR_MAX])
{
	struct tree_edits *e = calloc(1, sizeof *e);
	char why[GGUF_ERR_MAX];
	char *text = NULL;
	uint64_t len;
	struct ov_state *s = NULL;
	if (!e)
		goto oom;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->cur_lock, NULL);
	e->base = base;
	if (!(e->scratch = scratch_new()))
		goto oom;
	e->id.size = base->mf.size;
	if (ov_identity(base->m, &e->id.header_hash) < 0)
		goto oom;
	int r = edits_store_open(path, &e->store, &text, &len, err);
	if (r < 0)
		goto fail;
	if (r == 1) {   /* missing: created, holding no edits */
		s = ov_initial(base->m);
		if (!s || edits_render(s, &e->id, &text, &len) < 0)
			goto oom;
		if (edits_store_save(e->store, text, len, why) < 0) {
			snprintf(err, GGUF_ERR_MAX, "%s", why);
			goto fail;
		}
	} else if (!(s = edits_parse(base->m, &e->id, text, len, why))) {
		snprintf(err, GGUF_ERR_MAX, "%.100s: %.400s", path, why);
		goto fail;
	}
	e->cur = tree_build_state(base, s, NULL, err);
	if (!e->cur)
		goto fail;
	struct stat fst;
	if (!stamp(e->cur, base, NULL, stat(path, &fst) == 0 ? fst.st_mtim : time_now()))
		goto oom;
	ov_put(s);
	free(text);
	return e;
oom:
	snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
fail:
	ov_put(s);
	free(text);
	tree_edits_close(e);
	return NULL;
}

void tree_edits_close(struct tree_edits *e)
{
	if (!e)
		return;
	tree_release(e->cur);
	free(e->declared);
	for (uint64_t i = 0; i < e->n_gone; i++)
		ov_key_drop(&e->gone[i]);
	scratch_free(e->scratch);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->cur_lock);
	edits_store_close(e->store);
	free(e);
}

void tree_edits_set_file_max(struct tree_edits *e, uint64_t max)
{
	pthread_mutex_lock(&e->lock);
	edits_store_set_max(e->store, max);
	pthread_mutex_unlock(&e->lock);
}

void tree_edits_set_commit_hook(struct tree_edits *e, void (*hook)(void *), void *ctx)
{
	pthread_mutex_lock(&e->lock);
	e->commit_hook = hook;
	e->commit_hook_ctx = ctx;
	pthread_mutex_unlock(&e->lock);
}

struct tree *tree_edits_current(struct tree_edits *e)
{
	pthread_mutex_lock(&e->cur_lock);
	struct tree *t = tree_hold(e->cur);
	pthread_mutex_unlock(&e->cur_lock);
	return t;
}

/* Makes s (the next state, ours) current: its tree built, FILE written, then the swap.
 * Called with the lock held (not cur_lock: readers go on with the current tree all the
 * while, and only the swap is theirs to wait for); takes s. 0 or -errno with err. */
static int commit(struct tree_edits *e, struct ov_state *s, char err[GGUF_ERR_MAX])
{
	char *text = NULL;
	uint64_t len;
	struct tree *t = tree_build_state(e->base, s, e->cur, err);
	ov_put(s);
	if (!t)
		return -ENOMEM;
	if (!stamp(t, e->base, e->cur, time_now())) {
		tree_release(t);
		snprintf(err, GGUF_ERR_MAX, "out of memory for the edit");
		return -ENOMEM;
	}
	if (edits_render(tree_state(t), &e->id, &text, &len) < 0) {
		tree_release(t);
		snprintf(err, GGUF_ERR_MAX, "out of memory for the edits file");
		return -ENOMEM;
	}
	if (e->commit_hook)
		e->commit_hook(e->commit_hook_ctx);
	int r = edits_store_save(e->store, text, len, err);
	free(text);
	if (r < 0) {
		tree_release(t);
		return r;
	}
	pthread_mutex_lock(&e->cur_lock);
	struct tree *old = e->cur;
	e->cur = t;
	pthread_mutex_unlock(&e->cur_lock);
	tree_release(old);
	return 0;
}

/* The position in cur's metadata of the key of file ino, or UINT64_MAX. */
static uint64_t key_at(const struct tree *t, uint64_t ino)
{
	const struct tree_node *n = tree_node(t, ino);
	return n && n->kind == TREE_META ? n->index : UINT64_MAX;
}

/* One line naming key k of t and why: "general.name: line 2: ...". */
static void key_err(const struct tree *t, uint64_t k, const char *why, char err[GGUF_ERR_MAX])
{
	char q[80];
	snprintf(err, GGUF_ERR_MAX, "metadata/%s: %.400s", gguf_quote(&t->m->meta->kv[k].key, q), why);
}

/* The refusal of editing key k of t at all (general.alignment, split.*): -errno, or 0. */
static int refused(const struct tree *t, uint64_t k, char err[GGUF_ERR_MAX])
{
	const char *why;
	const struct gguf_str *key = &t->m->meta->kv[k].key;
	int r = ov_refusal(key->ptr, key->len, &why);
	if (r < 0)
		key_err(t, k, why, err);
	return r;
}

/* True when text is exactly what metadata/KEY shows for v. */
static bool is_rendering(const struct gguf_value *v, const char *text, uint64_t len)
{
	struct sink c = sink_counter();
	render_value(&c, v);
	if (c.pos != len)
		return false;
	char *buf = malloc(len + 1);
	if (!buf)
		return false;
	struct sink s = sink_window(buf, 0, len);
	render_value(&s, v);
	bool same = memcmp(buf, text, len) == 0;
	free(buf);
	return same;
}

/* The most bytes a value parsed from a key's text may take in the file: an array's text
 * is one line per element, and an element can take more than its line (a string 8 bytes
 * of length for an empty line), so 64 MiB of newlines would make 512 MB of empty
 * strings. The largest values real models hold are a few MB. */
#define EDIT_VALUE_MAX (UINT64_C(128) << 20)

/* parse_value, refusing first (EFBIG, with why) a text whose value would take more than
 * EDIT_VALUE_MAX, counted before anything is allocated. 0, -EFBIG or -EINVAL. */
static int parse_bounded(const char *text, uint64_t len, const struct value_type *t,
                         struct value_buf *b, char why[GGUF_ERR_MAX])
{
	if (t->depth > 0) {
		uint64_t lines = 1;
		for (const char *p = text; (p = memchr(p, '\n', (size_t)(text + len - p))); p++)
			lines++;
		uint64_t each = t->depth > 1 ? 12 :   /* an inner array: its type and count */
		                t->leaf == GGUF_TYPE_STRING ? 8 : gguf_vtype_size(t->leaf);
		uint64_t cost = lines * (each ? each : 1) + (t->leaf == GGUF_TYPE_STRING ? len : 0);
		if (cost > EDIT_VALUE_MAX) {
			snprintf(why, GGUF_ERR_MAX, "%" PRIu64 " elements: the value would take %" PRIu64
			         " MB, more than a key holds (128 MiB)", lines, cost >> 20);
			return -EFBIG;
		}
	}
	return parse_value(text, len, t, b, why) < 0 ? -EINVAL : 0;
}

/* Sets key k of cur to text parsed as type t. Lock held. */
static int set_text(struct tree_edits *e, uint64_t k, const struct value_type *t,
                    const char *text, uint64_t len, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	char why[GGUF_ERR_MAX];
	struct value_buf b;
	int r = parse_bounded(text, len, t, &b, why);
	if (r < 0) {
		key_err(cur, k, why, err);
		return r;
	}
	if (!ov_value_equal(&b.v, &cur->m->meta->kv[k].value)) {
		struct ov_state *s = ov_set(cur->state, k, &b.v);
		r = s ? commit(e, s, err) : -ENOMEM;
		if (!s)
			key_err(cur, k, "out of memory", err);
	}
	value_buf_free(&b);
	return r;
}

int tree_edits_write(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX])
{
	pthread_mutex_lock(&e->lock);
	const struct tree *cur = e->cur;
	uint64_t k = key_at(cur, ino);
	int r;
	struct value_type t;
	if (k == UINT64_MAX) {
		snprintf(err, GGUF_ERR_MAX, "a key that is gone was written");
		r = -ENOENT;
	} else if (len > EDIT_TEXT_MAX) {
		key_err(cur, k, "the text is longer than a key takes (64 MiB)", err);
		r = -EFBIG;
	} else if ((r = refused(cur, k, err)) < 0) {
	} else if (is_rendering(&cur->m->meta->kv[k].value, text, len)) {
		r = 0;   /* what it shows: the same value, bytes and all */
	} else if (type_of(e, k, &t) < 0) {
		key_err(cur, k, "a value of an unknown type cannot be written", err);
		r = -EINVAL;
	} else {
		r = set_text(e, k, &t, text, len, err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* The range of integer type t: its largest value, and the magnitude of its smallest
 * (0 for the unsigned). False for a type that is not an integer. */
static bool int_range(enum gguf_vtype t, uint64_t *max, uint64_t *neg)
{
	static const struct { enum gguf_vtype t; uint64_t max, neg; } r[] = {
		{ GGUF_TYPE_UINT8, UINT8_MAX, 0 }, { GGUF_TYPE_INT8, INT8_MAX, 128 },
		{ GGUF_TYPE_UINT16, UINT16_MAX, 0 }, { GGUF_TYPE_INT16, INT16_MAX, 32768 },
		{ GGUF_TYPE_UINT32, UINT32_MAX, 0 }, { GGUF_TYPE_INT32, INT32_MAX, UINT64_C(1) << 31 },
		{ GGUF_TYPE_UINT64, UINT64_MAX, 0 }, { GGUF_TYPE_INT64, INT64_MAX, UINT64_C(1) << 63 },
	};
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
		if (r[i].t == t) {
			*max = r[i].max;
			*neg = r[i].neg;
			return true;
		}
	return false;
}

/* Why text, the start of what is being written to a number or bool of type t, can no
 * longer become one whatever follows, or NULL: a byte no such text has, a '-' for an
 * unsigned type, digits already past the type's range, a second value after the first
 * (a second line, or an append to the shown value), or more than any such text. */
static const char *hopeless(enum gguf_vtype t, const char *text, uint64_t len, char why[96])
{
	bool is_bool = t == GGUF_TYPE_BOOL;
	bool is_float = t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64;
	uint64_t max = 0, neg = 0;
	bool is_int = int_range(t, &max, &neg);
	if (len > 4096)
		return "longer than any such text";
	uint64_t i = 0;
	while (i < len && text[i] && strchr(" \t\r\n\v\f", text[i]))
		i++;
	uint64_t start = i;
	while (i < len && !(text[i] && strchr(" \t\r\n\v\f", text[i]))) {
		char c = text[i++];
		bool ok = is_bool ? c && strchr("truefals", c) != NULL :
		          (c >= '0' && c <= '9') || c == '+' || c == '-' ||
		          (is_float && c && strchr(".eEnNaAiIfFtTyY", c));
		if (!ok)
			return "a byte that no such value's text has";
	}
	for (uint64_t k = i; k < len; k++)
		if (!(text[k] && strchr(" \t\r\n\v\f", text[k])))
			return "a second value after the first (one value, one line)";
	if (!is_int || i == start)
		return NULL;
	/* the number so far: more digits only take it further from zero */
	uint64_t k = start, v = 0;
	bool minus = text[k] == '-';
	if (text[k] == '-' || text[k] == '+')
		k++;
	if (minus && neg == 0)
		return "a negative number for an unsigned type";
	for (; k < i && text[k] >= '0' && text[k] <= '9'; k++) {
		uint64_t d = (uint64_t)(text[k] - '0');
		if (v > (UINT64_MAX - d) / 10)
			v = UINT64_MAX;
		else
			v = v * 10 + d;
		if (v > (minus ? neg : max)) {
			snprintf(why, 96, "past the range of %s (%s%" PRIu64 " .. %" PRIu64 ")",
			         gguf_vtype_name(t), neg ? "-" : "", neg, max);
			return why;
		}
	}
	return NULL;
}

int tree_edits_precheck(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                        char err[GGUF_ERR_MAX])
{
	struct tree *cur = tree_edits_current(e);   /* a write need not wait for an edit */
	uint64_t k = key_at(cur, ino);
	int r = 0;
	if (k != UINT64_MAX) {
		const struct gguf_value *v = &cur->m->meta->kv[k].value;
		char buf[96], why[160];
		const char *no = v->type != GGUF_TYPE_STRING && v->type != GGUF_TYPE_ARRAY ?
		                 hopeless(v->type, text, len, buf) : NULL;
		if (no) {
			snprintf(why, sizeof why, "the text can no longer be a %s: %s",
			         gguf_vtype_name(v->type), no);
			key_err(cur, k, why, err);
			r = -EINVAL;
		}
	}
	tree_release(cur);
	return r;
}

int tree_edits_set_type(struct tree_edits *e, uint64_t ino, const char *type, uint64_t len,
                        char err[GGUF_ERR_MAX])
{
	pthread_mutex_lock(&e->lock);
	const struct tree *cur = e->cur;
	uint64_t k = key_at(cur, ino);
	struct value_type t, now;
	uint64_t id = k != UINT64_MAX ? cur->state->keys[k].id : 0;
	int r;
	if (k == UINT64_MAX) {
		snprintf(err, GGUF_ERR_MAX, "a key that is gone was given a type");
		r = -ENOENT;
	} else if ((r = refused(cur, k, err)) < 0) {
	} else if (value_type_parse(type, len, &t) < 0 || (t.depth == 0 && t.leaf == GGUF_TYPE_ARRAY)) {
		key_err(cur, k, "user.gguf.type is not a GGUF type (uint8 ... float64, bool, string, "
		        "array[T])", err);
		r = -EINVAL;
	} else if (type_of(e, k, &now) == 0 && now.depth == t.depth && now.leaf == t.leaf) {
		r = 0;   /* the type it has */
	} else if (cur->m->meta->kv[k].value.type == GGUF_TYPE_STRING &&
	           cur->m->meta->kv[k].value.size == 8) {
		/* an empty string (a key just made with touch) takes the type's empty value:
		 * 0, false, an empty array; what is written next is parsed as that type */
		const char *zero = t.depth ? "" : t.leaf == GGUF_TYPE_BOOL ? "false" :
		                   t.leaf == GGUF_TYPE_STRING ? "" : "0";
		r = set_text(e, k, &t, zero, strlen(zero), err);
	} else {
		/* the text it shows, parsed as the new type */
		const struct gguf_value *v = &cur->m->meta->kv[k].value;
		struct sink c = sink_counter();
		render_value(&c, v);
		char *buf = malloc(c.pos + 1);
		if (!buf) {
			key_err(cur, k, "out of memory", err);
			r = -ENOMEM;
		} else {
			struct sink s = sink_window(buf, 0, c.pos);
			render_value(&s, v);
			r = set_text(e, k, &t, buf, c.pos, err);
			free(buf);
		}
	}
	if (r == 0 && k != UINT64_MAX)
		declare(e, id, &t);
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* File name name for an error line (gguf_quote: printable, cut at 64 bytes). */
static const char *quoted(const char *name, char q[80])
{
	struct gguf_str s = { .ptr = name, .len = strlen(name) };
	return gguf_quote(&s, q);
}

/* The key whose file name is name: the escaping undone (%2F %25 %00 %2E), and only
 * when the key's file name is name again. key holds NAMES_BUF bytes: a name longer than
 * any key's file name (NAMES_BUF - 1) is refused before it is decoded, since decoding
 * never shortens a name below its key. 0, or -ENAMETOOLONG / -EINVAL with err. */
static int key_of_name(const char *name, char key[NAMES_BUF], uint64_t *len,
                       char err[GGUF_ERR_MAX])
{
	char q[80];
	if (strnlen(name, NAMES_BUF) >= NAMES_BUF) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: longer than any key's file name "
		         "(%d bytes at most)", quoted(name, q), NAMES_BUF - 1);
		return -ENAMETOOLONG;
	}
	uint64_t n = 0;
	for (const char *p = name; *p; p++) {
		if (p[0] == '%' && p[1] && p[2]) {
			/* names.c's escapes: %2F %25 %00, a '.' (%2E), and the first or last
			 * byte of a key that would look like a scratch name (%7E %23 %30-%39) */
			static const char *const esc[] = { "2F", "25", "00", "2E", "7E", "23",
			                                   "30", "31", "32", "33", "34", "35",
			                                   "36", "37", "38", "39" };
			size_t i, n_esc = sizeof esc / sizeof esc[0];
			for (i = 0; i < n_esc && strncmp(p + 1, esc[i], 2) != 0; i++)
				;
			if (i < n_esc) {
				key[n++] = (char)strtol(esc[i], NULL, 16);
				p += 2;
				continue;
			}
		}
		key[n++] = *p;
	}
	char again[NAMES_BUF];
	if (strcmp(name, "%") == 0)
		n = 0;   /* the empty name's file */
	names_encode(key, n, false, again);
	if (strcmp(again, name) != 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: not the file name of any key GGUF can "
		         "hold (a cut name with a hash, or an escape the names do not use)",
		         quoted(name, q));
		return -EINVAL;
	}
	*len = n;
	return 0;
}

/* The id of the key at position k of t (an edit state's tree). */
static uint64_t id_at(const struct tree *t, uint64_t k)
{
	return t->state->keys[k].id;
}

/* The position in cur of the key whose file is name, listed or moved aside into a
 * scratch file (*aside says which), or UINT64_MAX. Lock held. */
static uint64_t key_named(struct tree_edits *e, const char *name, bool *aside)
{
	const struct tree_node *n = tree_lookup(e->cur, TREE_METADATA_DIR_INO, name);
	*aside = n && scratch_holds(e->scratch, id_at(e->cur, n->index));
	return n ? n->index : UINT64_MAX;
}

/* What metadata/ shows of key k of t, into a new buffer (NUL after it). 0 or -ENOMEM. */
static int key_text(const struct tree *t, uint64_t k, char **text, uint64_t *len)
{
	const struct gguf_value *v = &t->m->meta->kv[k].value;
	struct sink c = sink_counter();
	render_value(&c, v);
	*text = malloc(c.pos + 1);
	if (!*text)
		return -ENOMEM;
	struct sink w = sink_window(*text, 0, c.pos);
	render_value(&w, v);
	(*text)[c.pos] = '\0';
	*len = c.pos;
	return 0;
}

/* Key target of cur takes text parsed by its type, in place (text that is exactly its
 * rendering keeps it as it is), and the key at position gone (UINT64_MAX: none) is
 * removed, in one commit. EINVAL when the text does not parse (nothing changes). Lock
 * held. */
static int set_key_text(struct tree_edits *e, uint64_t target, const char *text, uint64_t len,
                        uint64_t gone, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	struct value_type t;
	struct value_buf b;
	char why[GGUF_ERR_MAX];
	int r = refused(cur, target, err);
	if (r < 0)
		return r;
	if (len > EDIT_TEXT_MAX) {
		key_err(cur, target, "the text is longer than a key takes (64 MiB)", err);
		return -EFBIG;
	}
	if (type_of(e, target, &t) < 0) {
		key_err(cur, target, "a value of an unknown type cannot be written", err);
		return -EINVAL;
	}
	bool same = is_rendering(&cur->m->meta->kv[target].value, text, len);
	if (!same && (r = parse_bounded(text, len, &t, &b, why)) < 0) {
		key_err(cur, target, why, err);
		return r;
	}
	if (same && gone == UINT64_MAX)
		return 0;
	struct ov_state *set = same ? ov_get(cur->state) : ov_set(cur->state, target, &b.v);
	struct ov_state *s = set && gone != UINT64_MAX ? ov_delete(set, gone) : set ? ov_get(set) : NULL;
	ov_put(set);
	if (!same)
		value_buf_free(&b);
	r = s ? commit(e, s, err) : -ENOMEM;
	if (!s)
		key_err(cur, target, "out of memory", err);
	return r;
}

/* Remembers key (of cur, being deleted) among the last TOMBSTONES gone. Lock held. */
static void remember_gone(struct tree_edits *e, const struct ov_key *key)
{
	if (e->n_gone == TOMBSTONES) {
		ov_key_drop(&e->gone[0]);
		memmove(&e->gone[0], &e->gone[1], (TOMBSTONES - 1) * sizeof e->gone[0]);
		e->n_gone--;
	}
	ov_key_hold(key, &e->gone[e->n_gone++]);
}

/* The position in gone of the key whose file name is name, newest first, or UINT64_MAX. */
static uint64_t find_gone(const struct tree_edits *e, const char *name)
{
	char file[NAMES_BUF];
	for (uint64_t i = e->n_gone; i-- > 0;) {
		const struct gguf_str *k = &e->gone[i].kv.key;
		names_encode(k->ptr, k->len, false, file);
		if (strcmp(file, name) == 0)
			return i;
	}
	return UINT64_MAX;
}

/* Forgets gone[i]. Lock held. */
static void forget_gone(struct tree_edits *e, uint64_t i)
{
	ov_key_drop(&e->gone[i]);
	memmove(&e->gone[i], &e->gone[i + 1], (e->n_gone - i - 1) * sizeof e->gone[0]);
	e->n_gone--;
}

/* Key k of cur deleted, and remembered for a create of its name. Lock held. */
static int delete_key(struct tree_edits *e, uint64_t k, char err[GGUF_ERR_MAX])
{
	struct ov_key key;
	ov_key_hold(&e->cur->state->keys[k], &key);
	struct ov_state *s = ov_delete(e->cur->state, k);
	int r = s ? commit(e, s, err) : -ENOMEM;
	if (!s)
		key_err(e->cur, k, "out of memory", err);
	if (r == 0)
		remember_gone(e, &key);
	ov_key_drop(&key);
	return r;
}

/* When no scratch file holds key id any more (it was moved aside into one that went),
 * the key is deleted: its file went with the scratch file. Lock held. */
static int drop_if_orphan(struct tree_edits *e, uint64_t id, char err[GGUF_ERR_MAX])
{
	if (id == SCRATCH_NO_KEY || scratch_holds(e->scratch, id))
		return 0;
	uint64_t k = ov_find_id(e->cur->state, id);
	return k == UINT64_MAX ? 0 : delete_key(e, k, err);
}

struct scratch_set *tree_edits_scratch(struct tree_edits *e)
{
	return e->scratch;
}

bool tree_edits_aside(struct tree_edits *e, const struct tree *t, const struct tree_node *n)
{
	return n->kind == TREE_META && t->state &&
	       scratch_holds(e->scratch, id_at(t, n->index));
}

bool tree_edits_taken(struct tree_edits *e, const char *name)
{
	if (scratch_is_name(name)) {
		struct scratch_file *f = scratch_by_name(e->scratch, name);
		scratch_drop(f);
		return f != NULL;
	}
	pthread_mutex_lock(&e->lock);
	bool aside;
	bool taken = key_named(e, name, &aside) != UINT64_MAX && !aside;
	pthread_mutex_unlock(&e->lock);
	return taken;
}

/* An error line for a call on file name that failed with r; returns r. */
static int name_err(const char *name, int r, char err[GGUF_ERR_MAX])
{
	char q[80];
	snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
	return r;
}

int tree_edits_create(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len;
	if (scratch_is_name(name)) {
		int r = scratch_create(e->scratch, name, ino);
		return r < 0 ? name_err(name, r, err) : 0;
	}
	int r = key_of_name(name, key, &len, err);
	if (r < 0)
		return r;
	const char *why;
	if ((r = ov_refusal(key, len, &why)) < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), why);
		return r;
	}
	pthread_mutex_lock(&e->lock);
	bool aside;
	uint64_t k = key_named(e, name, &aside);
	if (k != UINT64_MAX && aside) {
		/* a key moved aside, made again (vim: KEY renamed to KEY~, then KEY
		 * created): the key itself, listed again, its text written anew */
		scratch_release_key(e->scratch, id_at(e->cur, k));
		*ino = tree_key_ino(e->cur, k);
		pthread_mutex_unlock(&e->lock);
		return 1;
	}
	uint64_t g = find_gone(e, name);
	struct ov_state *back;
	if (g != UINT64_MAX && ov_restore(e->cur->state, &e->gone[g], &back) == 0) {
		/* a key deleted a moment ago, made again (install removes its target first):
		 * the key itself, in its place and type, its text written anew */
		uint64_t id = e->gone[g].id;
		forget_gone(e, g);
		r = commit(e, back, err);
		if (r == 0)
			*ino = tree_key_ino(e->cur, ov_find_id(e->cur->state, id));
		pthread_mutex_unlock(&e->lock);
		return r < 0 ? r : 1;
	}
	struct gguf_value empty = { .type = GGUF_TYPE_STRING, .data = (const uint8_t *)"\0\0\0\0\0\0\0\0",
	                            .size = 8 };
	struct ov_state *s;
	r = ov_create(e->cur->state, key, len, &empty, &s);
	if (r < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
	} else {
		r = commit(e, s, err);
		if (r == 0)   /* new keys come last */
			*ino = tree_key_ino(e->cur, e->cur->m->meta->n_kv - 1);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

int tree_edits_unlink(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX])
{
	char q[80];
	int r;
	pthread_mutex_lock(&e->lock);
	if (scratch_is_name(name)) {
		uint64_t held;
		struct scratch_file *f = scratch_by_name(e->scratch, name);
		*ino = f ? scratch_ino(f) : 0;
		scratch_drop(f);
		r = scratch_unlink(e->scratch, name, &held);
		if (r < 0)
			name_err(name, r, err);
		else   /* a key moved aside into it goes with it */
			r = drop_if_orphan(e, held, err);
		pthread_mutex_unlock(&e->lock);
		return r;
	}
	bool aside;
	uint64_t k = key_named(e, name, &aside);
	if (k == UINT64_MAX || aside) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(name, q));
		r = -ENOENT;
	} else if ((r = refused(e->cur, k, err)) < 0) {
	} else {
		*ino = tree_key_ino(e->cur, k);
		r = delete_key(e, k, err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* Key j of cur renamed [key, len), keeping its id and place, and given text parsed by its
 * type, in one commit (a key moved aside into a scratch file that is then renamed to a
 * new name: as if it had been renamed there). Lock held. */
static int rename_with_text(struct tree_edits *e, uint64_t j, const char *key, uint64_t len,
                            const char *text, uint64_t text_len, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	struct value_type t;
	struct value_buf b;
	char why[GGUF_ERR_MAX];
	if (text_len > EDIT_TEXT_MAX) {
		key_err(cur, j, "the text is longer than a key takes (64 MiB)", err);
		return -EFBIG;
	}
	bool same = is_rendering(&cur->m->meta->kv[j].value, text, text_len);
	if (!same && type_of(e, j, &t) < 0) {
		key_err(cur, j, "a value of an unknown type cannot be written", err);
		return -EINVAL;
	}
	int r = same ? 0 : parse_bounded(text, text_len, &t, &b, why);
	if (r < 0) {
		key_err(cur, j, why, err);
		return r;
	}
	struct ov_state *named = ov_rename(cur->state, j, key, len);
	struct ov_state *s = named && !same ? ov_set(named, j, &b.v) : named ? ov_get(named) : NULL;
	ov_put(named);
	if (!same)
		value_buf_free(&b);
	r = s ? commit(e, s, err) : -ENOMEM;
	if (!s)
		key_err(cur, j, "out of memory", err);
	return r;
}

/* A new key [key, len) holding text as a string (a scratch file renamed to a new name,
 * as rsync and editors save a new file): one commit. Lock held. */
static int create_with_text(struct tree_edits *e, const char *name, const char *key,
                            uint64_t len, const char *text, uint64_t text_len,
                            char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX], q[80];
	struct value_type t = { .depth = 0, .leaf = GGUF_TYPE_STRING };
	struct value_buf b;
	if (text_len > EDIT_TEXT_MAX) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: the text is longer than a key takes "
		         "(64 MiB)", quoted(name, q));
		return -EFBIG;
	}
	if (parse_value(text, text_len, &t, &b, why) < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %.400s", quoted(name, q), why);
		return -EINVAL;
	}
	struct ov_state *s;
	int r = ov_create(e->cur->state, key, len, &b.v, &s);
	value_buf_free(&b);
	if (r < 0) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(-r));
		return r;
	}
	return commit(e, s, err);
}

/* A rename of scratch file from to file name to: over a key's (listed or moved aside),
 * its value; to a new name, the new key [key, len); to another scratch name, only the
 * name. Lock held. */
static int rename_scratch(struct tree_edits *e, const char *from, const char *to,
                          const char *key, uint64_t len, char err[GGUF_ERR_MAX])
{
	struct scratch_file *f = scratch_by_name(e->scratch, from);
	if (!f)
		return name_err(from, -ENOENT, err);
	uint64_t held = scratch_key(e->scratch, from);
	int r;
	if (scratch_is_name(to)) {
		uint64_t replaced = strcmp(from, to) ? scratch_key(e->scratch, to) : SCRATCH_NO_KEY;
		scratch_drop(f);
		r = scratch_rename(e->scratch, from, to);
		return r < 0 ? name_err(from, r, err) : drop_if_orphan(e, replaced, err);
	}
	char *text;
	uint64_t text_len;
	r = scratch_text(f, &text, &text_len);
	scratch_drop(f);
	if (r < 0)
		return name_err(from, r, err);
	bool aside;
	uint64_t k = key_named(e, to, &aside);
	uint64_t j = held == SCRATCH_NO_KEY ? UINT64_MAX : ov_find_id(e->cur->state, held);
	uint64_t target_id = k != UINT64_MAX ? id_at(e->cur, k) : SCRATCH_NO_KEY;
	if (k != UINT64_MAX)        /* over a key: its value, in place */
		r = set_key_text(e, k, text, text_len, j == k ? UINT64_MAX : j, err);
	else if (j != UINT64_MAX)   /* a key moved aside, now under a new name */
		r = rename_with_text(e, j, key, len, text, text_len, err);
	else
		r = create_with_text(e, to, key, len, text, text_len, err);
	free(text);
	if (r == 0) {
		uint64_t none;
		scratch_unlink(e->scratch, from, &none);
		if (target_id != SCRATCH_NO_KEY)
			scratch_release_key(e->scratch, target_id);
	}
	return r;
}

/* A rename of key k of cur to scratch name to: the key moved aside (unlisted, still in
 * the metadata) into a scratch file holding its text; a scratch file of that name is
 * replaced (a key moved aside into it goes). Lock held. */
static int move_aside(struct tree_edits *e, uint64_t k, const char *to, char err[GGUF_ERR_MAX])
{
	char *text;
	uint64_t len, ino;
	uint64_t replaced = scratch_key(e->scratch, to);
	int r = key_text(e->cur, k, &text, &len);
	if (r == 0) {
		r = scratch_put_file(e->scratch, to, text, len, id_at(e->cur, k), &ino);
		free(text);
	}
	if (r < 0)
		return name_err(to, r, err);
	return drop_if_orphan(e, replaced, err);
}

/* A rename of key k over key target, as an editor or a tool saves (sed -i writes a new
 * file and renames it over the old): target's value becomes k's text (what metadata/
 * shows of it) parsed by target's type, at target's place and with its ino, and k is
 * gone, leaving no trace of its own name. One commit. Lock held. EINVAL when the text
 * does not parse as target's type (nothing changes). */
static int replace_value(struct tree_edits *e, uint64_t k, uint64_t target,
                         char err[GGUF_ERR_MAX])
{
	char *text;
	uint64_t len;
	if (key_text(e->cur, k, &text, &len) < 0) {
		key_err(e->cur, target, "out of memory", err);
		return -ENOMEM;
	}
	int r = set_key_text(e, target, text, len, k, err);
	free(text);
	return r;
}

int tree_edits_rename(struct tree_edits *e, const char *from, const char *to,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len = 0;
	int r;
	bool to_scratch = scratch_is_name(to);
	if (!to_scratch) {
		if ((r = key_of_name(to, key, &len, err)) < 0)
			return r;
		const char *why;
		if ((r = ov_refusal(key, len, &why)) < 0) {
			snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(to, q), why);
			return r;
		}
	}
	pthread_mutex_lock(&e->lock);
	if (scratch_is_name(from)) {
		r = rename_scratch(e, from, to, key, len, err);
		pthread_mutex_unlock(&e->lock);
		return r;
	}
	bool aside, target_aside = false;
	uint64_t k = key_named(e, from, &aside);
	uint64_t target = to_scratch ? UINT64_MAX : key_named(e, to, &target_aside);
	if (k == UINT64_MAX || aside) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(from, q));
		r = -ENOENT;
	} else if ((r = refused(e->cur, k, err)) < 0) {
	} else if (to_scratch) {
		r = move_aside(e, k, to, err);
	} else if (target != UINT64_MAX && (r = refused(e->cur, target, err)) < 0) {
	} else if (k == target) {
		r = 0;
	} else if (target != UINT64_MAX) {
		uint64_t target_id = id_at(e->cur, target);
		r = replace_value(e, k, target, err);
		if (r == 0 && target_aside)   /* a key moved aside is made again */
			scratch_release_key(e->scratch, target_id);
	} else {
		struct ov_state *s = ov_rename(e->cur->state, k, key, len);
		r = s ? commit(e, s, err) : -ENOMEM;
		if (!s)
			key_err(e->cur, k, "out of memory", err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}
