#include "tree_edit.h"
#include "tree_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edits_file.h"
#include "edits_store.h"
#include "names.h"
#include "parse_value.h"
#include "render_value.h"

struct tree_edits {
	pthread_mutex_t lock;       /* one edit at a time; guards cur */
	struct tree *base;          /* the model's own metadata (borrowed) */
	struct tree *cur;           /* the current tree (one reference is ours) */
	struct edits_store *store;  /* FILE */
	struct edits_identity id;
	/* the types user.gguf.type set on keys, by key id: an empty array of arrays has no
	 * inner type in the file, so the next write takes it from here */
	struct declared { uint64_t id; struct value_type t; } *declared;
	uint64_t n_declared;
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
	e->base = base;
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
	e->cur = tree_build_state(base, s, err);
	if (!e->cur)
		goto fail;
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
	pthread_mutex_destroy(&e->lock);
	edits_store_close(e->store);
	free(e);
}

void tree_edits_set_file_max(struct tree_edits *e, uint64_t max)
{
	pthread_mutex_lock(&e->lock);
	edits_store_set_max(e->store, max);
	pthread_mutex_unlock(&e->lock);
}

struct tree *tree_edits_current(struct tree_edits *e)
{
	pthread_mutex_lock(&e->lock);
	struct tree *t = tree_hold(e->cur);
	pthread_mutex_unlock(&e->lock);
	return t;
}

/* Makes s (the next state, ours) current: its tree built, FILE written, then the swap.
 * Called with the lock held; takes s. 0 or -errno with err. */
static int commit(struct tree_edits *e, struct ov_state *s, char err[GGUF_ERR_MAX])
{
	char *text = NULL;
	uint64_t len;
	struct tree *t = tree_build_state(e->base, s, err);
	ov_put(s);
	if (!t)
		return -ENOMEM;
	if (edits_render(tree_state(t), &e->id, &text, &len) < 0) {
		tree_release(t);
		snprintf(err, GGUF_ERR_MAX, "out of memory for the edits file");
		return -ENOMEM;
	}
	int r = edits_store_save(e->store, text, len, err);
	free(text);
	if (r < 0) {
		tree_release(t);
		return r;
	}
	struct tree *old = e->cur;
	e->cur = t;
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
	int e;
	const struct gguf_str *key = &t->m->meta->kv[k].key;
	const char *why = ov_refusal(key->ptr, key->len, &e);
	if (!why)
		return 0;
	key_err(t, k, why, err);
	return -e;
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

/* Sets key k of cur to text parsed as type t. Lock held. */
static int set_text(struct tree_edits *e, uint64_t k, const struct value_type *t,
                    const char *text, uint64_t len, char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	char why[GGUF_ERR_MAX];
	struct value_buf b;
	if (parse_value(text, len, t, &b, why) < 0) {
		key_err(cur, k, why, err);
		return -EINVAL;
	}
	int r = 0;
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
	pthread_mutex_lock(&e->lock);
	const struct tree *cur = e->cur;
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
	pthread_mutex_unlock(&e->lock);
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
			static const char *const esc[] = { "2F", "25", "00", "2E" };
			static const char lit[] = { '/', '%', '\0', '.' };
			int i;
			for (i = 0; i < 4 && strncmp(p + 1, esc[i], 2) != 0; i++)
				;
			if (i < 4) {
				key[n++] = lit[i];
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

int tree_edits_create(struct tree_edits *e, const char *name, uint64_t *ino,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len;
	int r = key_of_name(name, key, &len, err), en;
	if (r < 0)
		return r;
	const char *why = ov_refusal(key, len, &en);
	if (why) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), why);
		return -en;
	}
	pthread_mutex_lock(&e->lock);
	struct gguf_value empty = { .type = GGUF_TYPE_STRING, .data = (const uint8_t *)"\0\0\0\0\0\0\0\0",
	                            .size = 8 };
	struct ov_state *s = ov_create(e->cur->state, key, len, &empty);
	if (!s) {
		r = -errno;
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(name, q), strerror(errno));
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
	pthread_mutex_lock(&e->lock);
	const struct tree_node *n = tree_lookup(e->cur, TREE_METADATA_DIR_INO, name);
	int r;
	if (!n) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(name, q));
		r = -ENOENT;
	} else if ((r = refused(e->cur, n->index, err)) < 0) {
	} else {
		*ino = n->ino;
		struct ov_state *s = ov_delete(e->cur->state, n->index);
		r = s ? commit(e, s, err) : -ENOMEM;
		if (!s)
			key_err(e->cur, n->index, "out of memory", err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

/* A rename of key k over key target, as an editor or a tool saves (sed -i writes a new
 * file and renames it over the old): target's value becomes k's text (what metadata/
 * shows of it) parsed by target's type, at target's place and with its ino, and k is
 * gone, leaving no trace of its own name. One commit. Lock held. EINVAL when the text
 * does not parse as target's type (nothing changes). */
static int replace_value(struct tree_edits *e, uint64_t k, uint64_t target,
                         char err[GGUF_ERR_MAX])
{
	const struct tree *cur = e->cur;
	const struct gguf_value *v = &cur->m->meta->kv[k].value;
	struct value_type t;
	struct value_buf b;
	char why[GGUF_ERR_MAX];
	if (type_of(e, target, &t) < 0) {
		key_err(cur, target, "a value of an unknown type cannot be written", err);
		return -EINVAL;
	}
	struct sink c = sink_counter();
	render_value(&c, v);
	char *text = malloc(c.pos + 1);
	if (!text) {
		key_err(cur, target, "out of memory", err);
		return -ENOMEM;
	}
	struct sink w = sink_window(text, 0, c.pos);
	render_value(&w, v);
	const struct gguf_value *tv = &cur->m->meta->kv[target].value;
	int r = 0;
	bool same = is_rendering(tv, text, c.pos);
	if (!same && parse_value(text, c.pos, &t, &b, why) < 0) {
		key_err(cur, target, why, err);
		free(text);
		return -EINVAL;
	}
	free(text);
	struct ov_state *set = same ? ov_get(cur->state) : ov_set(cur->state, target, &b.v);
	struct ov_state *s = set ? ov_delete(set, k) : NULL;
	ov_put(set);
	if (!same)
		value_buf_free(&b);
	r = s ? commit(e, s, err) : -ENOMEM;
	if (!s)
		key_err(cur, target, "out of memory", err);
	return r;
}

int tree_edits_rename(struct tree_edits *e, const char *from, const char *to,
                      char err[GGUF_ERR_MAX])
{
	char key[NAMES_BUF], q[80];
	uint64_t len;
	int r = key_of_name(to, key, &len, err), en;
	if (r < 0)
		return r;
	const char *why = ov_refusal(key, len, &en);
	if (why) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: %s", quoted(to, q), why);
		return -en;
	}
	pthread_mutex_lock(&e->lock);
	const struct tree_node *n = tree_lookup(e->cur, TREE_METADATA_DIR_INO, from);
	const struct tree_node *target = tree_lookup(e->cur, TREE_METADATA_DIR_INO, to);
	if (!n) {
		snprintf(err, GGUF_ERR_MAX, "metadata/%s: no such key", quoted(from, q));
		r = -ENOENT;
	} else if ((r = refused(e->cur, n->index, err)) < 0) {
	} else if (target && (r = refused(e->cur, target->index, err)) < 0) {
	} else if (n == target) {
		r = 0;
	} else if (target) {
		r = replace_value(e, n->index, target->index, err);
	} else {
		struct ov_state *s = ov_rename(e->cur->state, n->index, key, len);
		r = s ? commit(e, s, err) : -ENOMEM;
		if (!s)
			key_err(e->cur, n->index, "out of memory", err);
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}
