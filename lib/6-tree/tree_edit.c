/* The edits of a mount (tree_edit.h): their state, FILE, the commit of each new state,
 * and the writes of values (text, types); the names of metadata/ (create, unlink,
 * rename) are tree_edit_names.c's. */
#include "tree_edit_int.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "edits_file.h"
#include "edit_text.h"
#include "edits_store.h"
#include "names.h"
#include "parse_value.h"
#include "render_value.h"
#include "scratch.h"

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
int edit_type_of(const struct tree_edits *e, uint64_t k, struct value_type *t)
{
	return edit_type_of_key(e, &e->cur->state->keys[k], t);
}

int edit_type_of_key(const struct tree_edits *e, const struct ov_key *key, struct value_type *t)
{
	if (parse_value_type_of(&key->kv.value, t) < 0)
		return -1;
	if (t->leaf == GGUF_TYPE_ARRAY)
		for (uint64_t i = 0; i < e->n_declared; i++)
			if (e->declared[i].id == key->id)
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
	const struct timespec model_time = model_stat(base->m)->st_mtim;
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

struct tree_edits *tree_edits_open(struct tree *base, const char *path, struct leaving *leaving,
                                   char err[GGUF_ERR_MAX])
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
	int r = edits_store_open(path, leaving, &e->store, &text, &len, err);
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
	for (uint64_t i = 0; i < e->n_past; i++)
		tree_release(e->past[i].t);
	free(e->past);
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

void tree_edits_set_next_gen(struct tree_edits *e, uint64_t gen)
{
	pthread_mutex_lock(&e->lock);
	e->next_gen = gen;
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

/* The states before the current one that are kept whether an open file holds them or
 * not (tree_edits_holding): the kernel opens a name it looked up a moment before, and
 * edits may come in between. The last PAST_KEPT always; up to PAST_YOUNG of them for
 * PAST_YOUNG_MS after they stopped being current (a reader stalled between its lookup
 * and its open on a loaded machine, while edits go on; this bounds what they hold:
 * PAST_YOUNG states, each 0.1 to 9 MB for 100 to 100,000 keys). The kernel retries an
 * open that fails with ESTALE once, looking the name up again. */
#define PAST_KEPT 2
#define PAST_YOUNG 8
#define PAST_YOUNG_MS 1000

/* True when state i of e's past (of n) is to be kept at now (cur_lock held). A tree that
 * past alone holds (its count 1) cannot be taken again but from past, under cur_lock,
 * so dropping it races with nothing. */
static bool keep_past(const struct tree_edits *e, uint64_t i, struct timespec now)
{
	uint64_t from_end = e->n_past - i;
	if (from_end <= PAST_KEPT || atomic_load(&e->past[i].t->refs) > 1)
		return true;
	const struct timespec *u = &e->past[i].until;
	return from_end <= PAST_YOUNG &&
	       (now.tv_sec < u->tv_sec || (now.tv_sec == u->tv_sec && now.tv_nsec < u->tv_nsec));
}

/* Makes t current, the tree current until now (our reference) one of the states
 * before, and lets go of those keep_past does not keep; they are released after
 * cur_lock (freeing one may take a while). Lock held: commits alone change past. Out of
 * memory, the old tree is released at once (looked up no more) or nothing is dropped
 * this time. */
static void swap_current(struct tree_edits *e, struct tree *t)
{
	/* allocated before cur_lock, and past's array replaced under it: readers walk it */
	uint64_t n = e->n_past, cap = n < e->cap_past ? e->cap_past : (n ? 2 * n : 8);
	struct tree **drop = malloc((n + 1) * sizeof *drop);
	struct past *grown = cap != e->cap_past ? malloc(cap * sizeof *grown) : NULL;
	struct past *was = NULL;
	uint64_t n_drop = 0;
	struct timespec now, until;
	clock_gettime(CLOCK_MONOTONIC, &now);
	until = now;
	until.tv_sec += PAST_YOUNG_MS / 1000;
	until.tv_nsec += (long)(PAST_YOUNG_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&e->cur_lock);
	struct tree *old = e->cur;
	e->cur = t;
	if (grown) {
		if (n)
			memcpy(grown, e->past, n * sizeof *grown);
		was = e->past;
		e->past = grown;
		e->cap_past = cap;
	}
	if (e->n_past < e->cap_past)
		e->past[e->n_past++] = (struct past){ .t = old, .until = until };
	else if (drop)
		drop[n_drop++] = old;
	if (drop) {
		uint64_t w = 0;
		for (uint64_t i = 0; i < e->n_past; i++) {
			if (keep_past(e, i, now))
				e->past[w++] = e->past[i];
			else
				drop[n_drop++] = e->past[i].t;
		}
		e->n_past = w;
	}
	bool kept = e->n_past && e->past[e->n_past - 1].t == old;
	pthread_mutex_unlock(&e->cur_lock);
	if (!kept && !drop)
		tree_release(old);
	for (uint64_t i = 0; i < n_drop; i++)
		tree_release(drop[i]);
	free(drop);
	free(was);
}

struct tree *tree_edits_holding(struct tree_edits *e, uint64_t ino)
{
	/* the current tree's node outside cur_lock: gguf.json's is sized when first asked
	 * for, which renders it */
	struct tree *t = tree_edits_current(e);
	if (tree_node(t, ino))
		return t;
	tree_release(t);
	t = NULL;
	pthread_mutex_lock(&e->cur_lock);
	for (uint64_t i = e->n_past; !t && i-- > 0;)
		if (tree_node(e->past[i].t, ino))
			t = tree_hold(e->past[i].t);
	pthread_mutex_unlock(&e->cur_lock);
	return t;
}

/* Makes s (the next state, ours) current: its tree built, FILE written, then the swap.
 * Called with the lock held (not cur_lock: readers go on with the current tree all the
 * while, and only the swap is theirs to wait for); takes s. 0 or -errno with err: EFBIG
 * for a state past the last whose numbers fit in zone P (tree_ino.h: about 2^62 / W
 * edits of a mount, W the numbers of one state), which a remount starts again. */
int edit_commit(struct tree_edits *e, struct ov_state *s, char err[GGUF_ERR_MAX])
{
	char *text = NULL;
	uint64_t len, first;
	if (e->next_gen) {
		s->gen = e->next_gen;
		e->next_gen = 0;
	}
	if (!tree_zone_state_first(s->gen, e->base->lay->w, &first)) {
		snprintf(err, GGUF_ERR_MAX, "no numbers are left for another edit state (%" PRIu64
		         " edits since the mount): remount to edit again", s->gen);
		ov_put(s);
		return -EFBIG;
	}
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
	swap_current(e, t);
	return 0;
}

/* The position in cur's metadata of the key of file ino, or UINT64_MAX. */
static uint64_t key_at(const struct tree *t, uint64_t ino)
{
	const struct tree_node *n = tree_node(t, ino);
	return n && tree_is_key(n) ? n->index : UINT64_MAX;
}

int edit_commit_key(struct tree_edits *e, struct ov_state *s, uint64_t k, char err[GGUF_ERR_MAX])
{
	if (s)
		return edit_commit(e, s, err);
	edit_key_err(e->cur, k, "out of memory", err);
	return -ENOMEM;
}

/* One line naming key k of t and why: "general.name: line 2: ...". */
void edit_key_err(const struct tree *t, uint64_t k, const char *why, char err[GGUF_ERR_MAX])
{
	char q[80];
	snprintf(err, GGUF_ERR_MAX, "metadata/%s: %.400s",
	         gguf_quote(&model_meta(t->m)->kv[k].key, q), why);
}

/* The refusal of editing key k of t at all (general.alignment, split.*): -errno, or 0. */
int edit_refused(const struct tree *t, uint64_t k, char err[GGUF_ERR_MAX])
{
	const char *why;
	const struct gguf_str *key = &model_meta(t->m)->kv[k].key;
	int r = ov_refusal(key->ptr, key->len, &why);
	if (r < 0)
		edit_key_err(t, k, why, err);
	return r;
}

/* True when text is exactly what metadata/KEY shows for v. */
bool edit_is_rendering(const struct gguf_value *v, const char *text, uint64_t len)
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
int edit_parse_bounded(const char *text, uint64_t len, const struct value_type *t,
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

/* Sets key k of cur to text parsed as type t (with dry, only parses it). Lock held. */
static int set_text(struct tree_edits *e, uint64_t k, const struct value_type *t,
                    const char *text, uint64_t len, bool dry, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	char why[GGUF_ERR_MAX];
	struct value_buf b;
	int r = edit_parse_bounded(text, len, t, &b, why);
	if (r < 0) {
		edit_key_err(cur, k, why, err);
		return r;
	}
	if (!dry && !ov_value_equal(&b.v, &model_meta(cur->m)->kv[k].value)) {
		struct ov_state *s = ov_set(cur->state, k, &b.v);
		r = edit_commit_key(e, s, k, err);
	}
	value_buf_free(&b);
	return r;
}

/* tree_edits_write, or with dry tree_edits_check. */
static int write_text(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                      bool dry, char err[GGUF_ERR_MAX])
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
		edit_key_err(cur, k, "the text is longer than a key takes (64 MiB)", err);
		r = -EFBIG;
	} else if ((r = edit_refused(cur, k, err)) < 0) {
	} else if (edit_is_rendering(&model_meta(cur->m)->kv[k].value, text, len)) {
		r = 0;   /* what it shows: the same value, bytes and all */
	} else if (edit_type_of(e, k, &t) < 0) {
		edit_key_err(cur, k, "a value of an unknown type cannot be written", err);
		r = -EINVAL;
	} else {
		r = set_text(e, k, &t, text, len, dry, err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

int tree_edits_write(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX])
{
	return write_text(e, ino, text, len, false, err);
}

int tree_edits_check(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                     char err[GGUF_ERR_MAX])
{
	return write_text(e, ino, text, len, true, err);
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

/* True when text[0..len) is the start of what metadata/KEY shows for v (a copy of the
 * file on its way back, which parses or is a no-op: tree_edits_write). */
static bool is_rendering_start(const struct gguf_value *v, const char *text, uint64_t len)
{
	struct sink c = sink_counter();
	render_value(&c, v);
	if (c.pos < len)
		return false;
	char *buf = malloc(len + 1);
	if (!buf)
		return true;   /* not known to be refused: refused at close if it is */
	struct sink s = sink_window(buf, 0, len);
	render_value(&s, v);
	bool same = memcmp(buf, text, len) == 0;
	free(buf);
	return same;
}

/* Why the lines of an array of type t in lines's part of text can no longer make one,
 * into why (0), or -1; lines advanced over those that parse. */
static int hopeless_lines(const struct value_type *t, const char *text, uint64_t len,
                          struct edit_lines *lines, char why[GGUF_ERR_MAX])
{
	uint64_t end = lines->end < len ? lines->end : len;
	if (lines->from >= end)
		return -1;
	const char *p = text + lines->from;
	const char *nl = memrchr(p, '\n', (size_t)(end - lines->from));
	if (nl) {
		uint64_t whole = (uint64_t)(nl + 1 - p), count;
		if (parse_value_lines(p, whole, t, lines->line, &count, why) < 0)
			return 0;
		lines->from += whole;
		lines->line += count;
		p = nl + 1;
	}
	char buf[96];
	const char *no = t->depth == 1 && t->leaf != GGUF_TYPE_STRING ?
	                 hopeless(t->leaf, p, end - lines->from, buf) : NULL;
	if (!no)
		return -1;
	snprintf(why, GGUF_ERR_MAX, "line %" PRIu64 " can no longer be a %s: %s", lines->line,
	         gguf_vtype_name(t->leaf), no);
	return 0;
}

int tree_edits_precheck(struct tree_edits *e, uint64_t ino, const char *text, uint64_t len,
                        struct edit_lines *lines, char err[GGUF_ERR_MAX])
{
	struct tree *cur = tree_edits_current(e);   /* a write need not wait for an edit */
	uint64_t k = key_at(cur, ino);
	int r = 0;
	if (k != UINT64_MAX) {
		const struct gguf_value *v = &model_meta(cur->m)->kv[k].value;
		char buf[96], why[GGUF_ERR_MAX];
		struct value_type t;
		const char *no = NULL;
		if (v->type != GGUF_TYPE_STRING && v->type != GGUF_TYPE_ARRAY) {
			no = hopeless(v->type, text, len, buf);
			if (no) {
				snprintf(why, sizeof why, "the text can no longer be a %s: %s",
				         gguf_vtype_name(v->type), no);
				no = why;
			}
		} else if (v->type == GGUF_TYPE_ARRAY && lines && parse_value_type_of(v, &t) == 0 &&
		           t.leaf != GGUF_TYPE_ARRAY &&   /* an empty array of arrays: type unknown */
		           hopeless_lines(&t, text, len, lines, why) == 0 &&
		           !is_rendering_start(v, text, lines->end < len ? lines->end : len)) {
			no = why;
		}
		if (no) {
			edit_key_err(cur, k, no, err);
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
	} else if ((r = edit_refused(cur, k, err)) < 0) {
	} else if (value_type_parse(type, len, &t) < 0 || (t.depth == 0 && t.leaf == GGUF_TYPE_ARRAY)) {
		edit_key_err(cur, k, "user.gguf.type is not a GGUF type (uint8 ... float64, bool, "
		             "string, array[T])", err);
		r = -EINVAL;
	} else if (edit_type_of(e, k, &now) == 0 && now.depth == t.depth && now.leaf == t.leaf) {
		r = 0;   /* the type it has */
	} else if (model_meta(cur->m)->kv[k].value.type == GGUF_TYPE_STRING &&
	           model_meta(cur->m)->kv[k].value.size == 8) {
		/* an empty string (a key just made with touch) takes the type's empty value:
		 * 0, false, an empty array; what is written next is parsed as that type */
		const char *zero = t.depth ? "" : t.leaf == GGUF_TYPE_BOOL ? "false" :
		                   t.leaf == GGUF_TYPE_STRING ? "" : "0";
		r = set_text(e, k, &t, zero, strlen(zero), false, err);
	} else {
		/* the text it shows, parsed as the new type */
		const struct gguf_value *v = &model_meta(cur->m)->kv[k].value;
		struct sink c = sink_counter();
		render_value(&c, v);
		char *buf = malloc(c.pos + 1);
		if (!buf) {
			edit_key_err(cur, k, "out of memory", err);
			r = -ENOMEM;
		} else {
			struct sink s = sink_window(buf, 0, c.pos);
			render_value(&s, v);
			r = set_text(e, k, &t, buf, c.pos, false, err);
			free(buf);
		}
	}
	if (r == 0 && k != UINT64_MAX)
		declare(e, id, &t);
	pthread_mutex_unlock(&e->lock);
	return r;
}

