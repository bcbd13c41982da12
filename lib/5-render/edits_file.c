#include "edits_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "json_read.h"
#include "json_string.h"
#include "nameset.h"
#include "render_value.h"
#include "sink.h"
#include "value_text.h"

/* True when key i of s is one of the model's own, with its own value. */
static bool unchanged_value(const struct ov_state *s, uint64_t i)
{
	const struct ov_key *k = &s->keys[i];
	return k->id < s->n_orig &&
	       ov_value_equal(&k->kv.value, &model_own_meta(s->view)->kv[k->id].value);
}

/* Renders v as gguf.json does into a malloc'd buffer. NULL out of memory. */
static char *value_json(const struct gguf_value *v, uint64_t *len)
{
	struct sink c = sink_counter();
	render_value_json(&c, v);
	if (c.pos >= SIZE_MAX)
		return NULL;
	char *buf = malloc((size_t)c.pos + 1);
	if (!buf)
		return NULL;
	struct sink s = sink_window(buf, 0, c.pos);
	render_value_json(&s, v);
	*len = c.pos;
	return buf;
}

/* True when v's JSON reads back as v exactly (else the patch carries its bytes). */
static bool json_exact(const struct gguf_value *v)
{
	char tname[RENDER_TYPE_MAX];
	struct value_type t;
	uint64_t len;
	if (value_type_parse(tname, render_value_type(v, tname), &t) < 0)
		return false;
	char *text = value_json(v, &len);
	if (!text)
		return false;
	struct json_cur c = { .p = text, .end = text + len };
	struct vbytes b = { 0 };
	bool same = false;
	if (json_value(&c, &t, &b) && !b.failed) {
		struct value_buf vb;
		value_buf_take(&vb, &t, &b);
		same = ov_value_equal(&vb.v, v);
		value_buf_free(&vb);
	}
	free(b.p);
	free(text);
	return same;
}

/* The payload of v as the file holds it after the type, in hex. */
static void put_hex(struct sink *s, const struct gguf_value *v)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t hdr[12];
	uint64_t nh = 0;
	if (v->type == GGUF_TYPE_ARRAY) {
		for (int i = 0; i < 4; i++)
			hdr[i] = (uint8_t)(v->elem_type >> (8 * i));
		for (int i = 0; i < 8; i++)
			hdr[4 + i] = (uint8_t)(v->count >> (8 * i));
		nh = 12;
	}
	sink_putc(s, '"');
	for (uint64_t i = 0; i < nh + v->size && !sink_done(s); i++) {
		uint8_t b = i < nh ? hdr[i] : v->data[i - nh];
		char x[2] = { digits[b >> 4], digits[b & 15] };
		sink_put(s, x, 2);
	}
	sink_putc(s, '"');
}

static void put_key(struct sink *s, const struct gguf_str *k)
{
	render_json_string(s, k->ptr, k->len);
}

/* The whole patch into s; exact[i] says whether key i's value goes as JSON. */
static void patch(struct sink *s, const struct ov_state *st, const struct edits_identity *id,
                  const bool *exact)
{
	const struct gguf_file *g0 = model_own_meta(st->view);
	char num[64];
	snprintf(num, sizeof num, "%" PRIu64 ", \"header_xxh3\": \"%016" PRIx64 "\"},\n",
	         id->size, id->header_hash);
	sink_puts(s, "{\"ggufs_edits\": 1,\n \"model\": {\"size\": ");
	sink_puts(s, num);
	/* the model's keys that are gone: walk both lists in id order */
	sink_puts(s, " \"deleted\": [");
	bool first = true;
	uint64_t i = 0;
	for (uint64_t k = 0; k < st->n_orig; k++) {
		while (i < st->n && st->keys[i].id < k)
			i++;
		if (i < st->n && st->keys[i].id == k)
			continue;
		sink_puts(s, first ? "" : ", ");
		first = false;
		put_key(s, &g0->kv[k].key);
	}
	sink_puts(s, "],\n \"renamed\": {");
	first = true;
	for (i = 0; i < st->n && st->keys[i].id < st->n_orig; i++) {
		const struct gguf_str *was = &g0->kv[st->keys[i].id].key, *is = &st->keys[i].kv.key;
		/* a name an edit left alone is the file's own bytes: no compare */
		if (was->len == is->len &&
		    (was->ptr == is->ptr || memcmp(was->ptr, is->ptr, is->len) == 0))
			continue;
		sink_puts(s, first ? "" : ", ");
		first = false;
		put_key(s, was);
		sink_puts(s, ": ");
		put_key(s, is);
	}
	sink_puts(s, "},\n \"set\": {");
	first = true;
	for (i = 0; i < st->n; i++) {
		if (unchanged_value(st, i))
			continue;
		const struct gguf_value *v = &st->keys[i].kv.value;
		char tname[RENDER_TYPE_MAX];
		render_value_type(v, tname);
		sink_puts(s, first ? "\n  " : ",\n  ");
		first = false;
		put_key(s, &st->keys[i].kv.key);
		sink_puts(s, ": {\"type\": \"");
		sink_puts(s, tname);
		if (exact[i]) {
			sink_puts(s, "\", \"value\": ");
			render_value_json(s, v);
		} else {
			sink_puts(s, "\", \"payload_hex\": ");
			put_hex(s, v);
		}
		sink_putc(s, '}');
	}
	sink_puts(s, "}}\n");
}

int edits_render(const struct ov_state *s, const struct edits_identity *id, char **out,
                 uint64_t *len)
{
	bool *exact = calloc(s->n + 1, sizeof *exact);
	if (!exact)
		return -1;
	for (uint64_t i = 0; i < s->n; i++)
		exact[i] = !unchanged_value(s, i) && json_exact(&s->keys[i].kv.value);
	struct sink c = sink_counter();
	patch(&c, s, id, exact);
	char *buf = c.pos < SIZE_MAX ? malloc((size_t)c.pos + 1) : NULL;
	if (!buf) {
		free(exact);
		return -1;
	}
	struct sink w = sink_window(buf, 0, c.pos);
	patch(&w, s, id, exact);
	buf[c.pos] = '\0';
	free(exact);
	*out = buf;
	*len = c.pos;
	return 0;
}

/* ---- reading ---- */

/* The parse of a patch: names and values it holds, kept until the state is made. */
struct reading {
	const struct ggufs_model *m;
	struct json_cur c;
	struct ov_change *change;      /* one per key of the model */
	struct gguf_str *new_names;    /* names renamed to (owned) */
	struct value_buf **values;     /* every value read (owned; each apart, since
	                                * change[] points at them) */
	struct gguf_kv *new_kv;        /* new keys, by name and value */
	uint64_t n_values, n_new, cap;
	char *err;
	bool model_seen;
	struct key_index *orig, *now;   /* the model's keys by name: their own, and after
	                                 * the renames (made at the first "set" entry) */
};

/* The model's keys by name, hashed: a patch entry finds its key in O(1), not by a walk
 * of every key (100,000 keys and 10,000 entries took 6.9 s to mount). */
struct key_index {
	uint64_t *slots;   /* key + 1; 0 = empty */
	uint64_t mask;
};

/* The name of key k: its own, or (now) after the renames; NULL for one deleted (now). */
static const struct gguf_str *key_name(const struct reading *r, uint64_t k, bool now)
{
	if (now && r->change[k].deleted)
		return NULL;
	return now && r->change[k].name ? r->change[k].name : &model_own_meta(r->m)->kv[k].key;
}

static void index_free(struct key_index *ix)
{
	if (ix)
		free(ix->slots);
	free(ix);
}

/* The index of the model's keys by their names (now: after the renames), or NULL out
 * of memory. Equal names (never in a parsed model) find the first. */
static struct key_index *index_build(const struct reading *r, bool now)
{
	const struct gguf_file *g = model_own_meta(r->m);
	struct key_index *ix = calloc(1, sizeof *ix);
	uint64_t cap = hash_slots(g->n_kv);
	if (ix && !(ix->slots = calloc(cap, sizeof *ix->slots))) {
		free(ix);
		return NULL;
	}
	if (!ix)
		return NULL;
	ix->mask = cap - 1;
	for (uint64_t k = 0; k < g->n_kv; k++) {
		const struct gguf_str *n = key_name(r, k, now);
		if (!n)
			continue;
		uint64_t i = hash_fnv1a(n->ptr, n->len, HASH_FNV1A_BASIS) & ix->mask;
		while (ix->slots[i])
			i = (i + 1) & ix->mask;
		ix->slots[i] = k + 1;
	}
	return ix;
}

/* The key called name in ix, or UINT64_MAX. */
static uint64_t index_find(const struct reading *r, const struct key_index *ix, bool now,
                           const struct vbytes *name)
{
	for (uint64_t i = hash_fnv1a(name->p, name->len, HASH_FNV1A_BASIS) & ix->mask;
	     ix->slots[i]; i = (i + 1) & ix->mask) {
		const struct gguf_str *n = key_name(r, ix->slots[i] - 1, now);
		if (n && n->len == name->len && memcmp(n->ptr, name->p, name->len) == 0)
			return ix->slots[i] - 1;
	}
	return UINT64_MAX;
}

static bool rfail(struct reading *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sets the error line unless one is set already (the innermost cause wins). False. */
static bool rfail(struct reading *r, const char *fmt, ...)
{
	if (!r->err[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, GGUF_ERR_MAX, fmt, ap);
		va_end(ap);
	}
	return false;
}

/* The model's key called name, or UINT64_MAX. */
static uint64_t orig_key(const struct reading *r, const struct vbytes *name)
{
	return index_find(r, r->orig, false, name);
}

/* Refuses a name that may not be edited: false with err. */
static bool allowed(struct reading *r, const struct vbytes *name)
{
	const char *why;
	return ov_refusal((const char *)name->p, name->len, &why) < 0 ?
	       rfail(r, "a key that cannot be edited: %s", why) : true;
}

/* Quoted name for a message (printable ASCII, cut). */
static const char *shown(const struct vbytes *name, char buf[80])
{
	struct gguf_str s = { .ptr = (const char *)name->p, .len = name->len };
	return gguf_quote(&s, buf);
}

/* A value of "payload_hex": bytes checked by parsing them as the one key of a GGUF
 * image made around them. */
static bool hex_value(struct reading *r, const struct value_type *t, struct value_buf *out)
{
	struct vbytes hex = { 0 }, img = { 0 };
	bool ok = false;
	if (!json_string(&r->c, &hex))
		goto out;
	if (hex.len % 2)
		goto bad;
	vbytes_put(&img, "GGUF", 4);
	vbytes_le(&img, 3, 4);
	vbytes_le(&img, 0, 8);
	vbytes_le(&img, 1, 8);
	vbytes_le(&img, 1, 8);
	vbytes_put(&img, "x", 1);
	vbytes_le(&img, t->depth ? GGUF_TYPE_ARRAY : t->leaf, 4);
	uint64_t start = img.len;
	for (uint64_t i = 0; i < hex.len; i += 2) {
		static const char d[] = "0123456789abcdef";
		const char *hi = memchr(d, hex.p[i], 16), *lo = memchr(d, hex.p[i + 1], 16);
		if (!hi || !lo || !hex.p[i] || !hex.p[i + 1])
			goto bad;
		uint8_t b = (uint8_t)((hi - d) << 4 | (lo - d));
		vbytes_put(&img, &b, 1);
	}
	uint64_t payload = img.len - start;
	while (img.len % GGUF_DEFAULT_ALIGNMENT)
		vbytes_put(&img, "", 1);
	if (img.failed)
		goto bad;
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	if (gguf_parse(img.p, img.len, &f, err) < 0)
		goto bad;
	const struct gguf_value *v = &f.kv[0].value;
	bool fits = v->size + (v->type == GGUF_TYPE_ARRAY ? 12 : 0) == payload &&
	            (!t->depth || v->elem_type == (t->depth > 1 ? GGUF_TYPE_ARRAY : t->leaf));
	ok = fits && value_buf_copy(out, v) == 0;
	gguf_file_free(&f);
	if (ok)
		goto out;
bad:
	ok = rfail(r, "%s", "a payload_hex is not the bytes of a value of its type");
out:
	free(hex.p);
	free(img.p);
	return ok;
}

/* {"type": T, "value": V} or {"type": T, "payload_hex": H} into a new owned value. */
static bool typed_value(struct reading *r, struct gguf_value **out)
{
	if (r->n_values == r->cap) {
		uint64_t cap = r->cap ? 2 * r->cap : 16;
		struct value_buf **vb = realloc(r->values, (size_t)cap * sizeof *vb);
		struct gguf_kv *nk = realloc(r->new_kv, (size_t)cap * sizeof *nk);
		if (vb)
			r->values = vb;
		if (nk)
			r->new_kv = nk;
		if (!vb || !nk)
			return rfail(r, "%s", "out of memory");
		r->cap = cap;
	}
	struct value_buf *vb = calloc(1, sizeof *vb);
	if (!vb)
		return rfail(r, "%s", "out of memory");
	struct value_type t;
	bool have_type = false, have_value = false;
	struct vbytes name = { 0 };
	if (!json_eat(&r->c, '{')) {
		free(vb);
		return rfail(r, "%s", "a value is not an object");
	}
	if (!json_eat(&r->c, '}')) {
		do {
			if (!json_string(&r->c, &name) || !json_eat(&r->c, ':'))
				goto fail;
			if (strcmp((char *)name.p, "type") == 0 && !have_value) {
				struct vbytes tn = { 0 };
				bool ok = json_string(&r->c, &tn) &&
				          value_type_parse((char *)tn.p, tn.len, &t) == 0;
				free(tn.p);
				if (!ok) {
					rfail(r, "%s", "a value's type is not a GGUF type");
					goto fail;
				}
				have_type = true;
			} else if (strcmp((char *)name.p, "value") == 0 && have_type && !have_value) {
				struct vbytes b = { 0 };
				r->c.depth = 0;
				if (!json_value(&r->c, &t, &b)) {
					free(b.p);
					goto fail;
				}
				value_buf_take(vb, &t, &b);
				have_value = true;
			} else if (strcmp((char *)name.p, "payload_hex") == 0 && have_type && !have_value) {
				if (!hex_value(r, &t, vb))
					goto fail;
				have_value = true;
			} else if (!json_skip(&r->c)) {
				goto fail;
			}
		} while (json_eat(&r->c, ','));
		if (!json_eat(&r->c, '}'))
			goto fail;
	}
	free(name.p);
	if (!have_value) {
		free(vb);
		return rfail(r, "%s", "a value has no \"type\" followed by a \"value\" or \"payload_hex\"");
	}
	r->values[r->n_values++] = vb;
	*out = &vb->v;
	return true;
fail:
	free(name.p);
	value_buf_free(vb);
	free(vb);
	return rfail(r, "%s", "a value is malformed");
}

/* A copy of name as a gguf_str the reading owns (in new_names' storage: values). */
static bool keep_name(struct reading *r, const struct vbytes *name, struct gguf_str *out)
{
	char *p = malloc((size_t)name->len + 1);
	if (!p)
		return rfail(r, "%s", "out of memory");
	memcpy(p, name->p, (size_t)name->len + 1);
	*out = (struct gguf_str){ .ptr = p, .len = name->len };
	return true;
}

static bool read_model(struct reading *r, const struct edits_identity *id)
{
	struct vbytes name = { 0 };
	bool size_ok = false, hash_ok = false, ok = false;
	uint64_t size = 0, hash = 0;
	if (!json_eat(&r->c, '{'))
		goto out;
	if (!json_eat(&r->c, '}')) {
		do {
			if (!json_string(&r->c, &name) || !json_eat(&r->c, ':'))
				goto out;
			if (strcmp((char *)name.p, "size") == 0) {
				const char *s;
				size_t n;
				uint8_t b[8];
				char e[GGUF_ERR_MAX];
				if (!json_number(&r->c, &s, &n) || value_scalar_parse(GGUF_TYPE_UINT64, s, n, b, e))
					goto out;
				size = gguf_le64(b);
				size_ok = true;
			} else if (strcmp((char *)name.p, "header_xxh3") == 0) {
				struct vbytes h = { 0 };
				char *end = NULL;
				bool good = json_string(&r->c, &h) && h.len == 16;
				if (good) {
					errno = 0;
					hash = strtoull((char *)h.p, &end, 16);
					good = errno == 0 && end == (char *)h.p + 16 && h.p[0] != '-' && h.p[0] != '+' && h.p[0] != ' ';
				}
				free(h.p);
				if (!good)
					goto out;
				hash_ok = true;
			} else if (!json_skip(&r->c)) {
				goto out;
			}
		} while (json_eat(&r->c, ','));
		if (!json_eat(&r->c, '}'))
			goto out;
	}
	if (!size_ok || !hash_ok)
		goto out;
	if (size != id->size || hash != id->header_hash) {
		char msg[200];
		snprintf(msg, sizeof msg, "it was made for another model (model.gguf of %" PRIu64
		         " bytes, header xxh3 %016" PRIx64 "; this one: %" PRIu64 " bytes, %016" PRIx64 ")",
		         size, hash, id->size, id->header_hash);
		rfail(r, "%s", msg);
		goto out;
	}
	ok = true;
out:
	free(name.p);
	r->model_seen = true;
	return ok || rfail(r, "%s", "its \"model\" is not {\"size\": N, \"header_xxh3\": \"16 hex digits\"}");
}

static bool read_deleted(struct reading *r)
{
	struct vbytes name = { 0 };
	char q[80];
	bool ok = false;
	if (!json_eat(&r->c, '['))
		return rfail(r, "%s", "\"deleted\" is not an array");
	if (!json_eat(&r->c, ']')) {
		do {
			if (!json_string(&r->c, &name) || !allowed(r, &name))
				goto out;
			uint64_t k = orig_key(r, &name);
			if (k == UINT64_MAX || r->change[k].deleted) {
				rfail(r, "it deletes '%s', which the model does not have (or twice)", shown(&name, q));
				goto out;
			}
			r->change[k].deleted = true;
		} while (json_eat(&r->c, ','));
		if (!json_eat(&r->c, ']'))
			goto out;
	}
	ok = true;
out:
	free(name.p);
	return ok || rfail(r, "%s", "\"deleted\" is malformed");
}

static bool read_renamed(struct reading *r)
{
	struct vbytes from = { 0 }, to = { 0 };
	char q[80];
	bool ok = false;
	if (!json_eat(&r->c, '{'))
		return rfail(r, "%s", "\"renamed\" is not an object");
	if (!json_eat(&r->c, '}')) {
		do {
			if (!json_string(&r->c, &from) || !json_eat(&r->c, ':') || !json_string(&r->c, &to) ||
			    !allowed(r, &from) || !allowed(r, &to))
				goto out;
			uint64_t k = orig_key(r, &from);
			if (k == UINT64_MAX || r->change[k].deleted || r->change[k].name) {
				rfail(r, "it renames '%s', which the model does not have (or twice)", shown(&from, q));
				goto out;
			}
			struct gguf_str *ns = malloc(sizeof *ns);
			if (!ns || !keep_name(r, &to, ns)) {
				free(ns);
				goto out;
			}
			r->change[k].name = ns;
		} while (json_eat(&r->c, ','));
		if (!json_eat(&r->c, '}'))
			goto out;
	}
	ok = true;
out:
	free(from.p);
	free(to.p);
	return ok || rfail(r, "%s", "\"renamed\" is malformed");
}

/* The model's key that is called name after the renames (all read before "set"), or
 * UINT64_MAX; also UINT64_MAX, with err, out of memory. */
static uint64_t current_key(struct reading *r, const struct vbytes *name)
{
	if (!r->now && !(r->now = index_build(r, true))) {
		rfail(r, "%s", "out of memory");
		return UINT64_MAX;
	}
	return index_find(r, r->now, true, name);
}

static bool read_set(struct reading *r)
{
	struct vbytes name = { 0 };
	char q[80];
	bool ok = false;
	if (!json_eat(&r->c, '{'))
		return rfail(r, "%s", "\"set\" is not an object");
	if (!json_eat(&r->c, '}')) {
		do {
			struct gguf_value *v = NULL;
			if (!json_string(&r->c, &name) || !json_eat(&r->c, ':') || !allowed(r, &name) ||
			    !typed_value(r, &v))
				goto out;
			uint64_t k = current_key(r, &name);
			if (r->err[0])
				goto out;
			if (k != UINT64_MAX) {
				if (r->change[k].value) {
					rfail(r, "it sets '%s' twice", shown(&name, q));
					goto out;
				}
				r->change[k].value = v;
			} else {
				struct gguf_kv *nk = &r->new_kv[r->n_new];
				if (!keep_name(r, &name, &nk->key))
					goto out;
				nk->value = *v;
				r->n_new++;
			}
		} while (json_eat(&r->c, ','));
		if (!json_eat(&r->c, '}'))
			goto out;
	}
	ok = true;
out:
	free(name.p);
	return ok || rfail(r, "%s", "\"set\" is malformed");
}

/* Every name of the patched metadata is different: false with err otherwise. */
static bool names_unique(struct reading *r)
{
	const struct gguf_file *g = model_own_meta(r->m);
	struct nameset ns;
	if (!nameset_init(&ns, g->n_kv + r->n_new))
		return rfail(r, "%s", "out of memory");
	bool ok = true;
	for (uint64_t k = 0; k < g->n_kv && ok; k++)
		if (!r->change[k].deleted)
			ok = nameset_add(&ns, r->change[k].name ? r->change[k].name : &g->kv[k].key);
	for (uint64_t j = 0; j < r->n_new && ok; j++)
		ok = nameset_add(&ns, &r->new_kv[j].key);
	nameset_free(&ns);
	return ok || rfail(r, "%s", "two keys would have the same name");
}

/* Reads the value of the top-level member called n: 1 when read, 0 when the text is
 * malformed there, -1 when it fails with a reason of its own in err. *stage keeps the
 * order the writer puts them in (deleted and renamed before set); *version is set by a
 * good "ggufs_edits". */
static int read_member(struct reading *r, const struct edits_identity *id, const char *n,
                       int *stage, bool *version)
{
	static const char *const staged[] = { "deleted", "renamed", "set" };
	static bool (*const read_staged[])(struct reading *) = { read_deleted, read_renamed, read_set };
	if (strcmp(n, "ggufs_edits") == 0) {
		const char *s1;
		size_t n1;
		if (!json_number(&r->c, &s1, &n1) || n1 != 1 || s1[0] != '1') {
			rfail(r, "%s", "it is of a later version of ggufs (\"ggufs_edits\" is not 1)");
			return -1;
		}
		*version = true;
		return 1;
	}
	if (strcmp(n, "model") == 0)
		return read_model(r, id) ? 1 : -1;
	for (int i = 0; i < 3; i++) {
		if (strcmp(n, staged[i]) != 0)
			continue;
		if (*stage > i) {
			rfail(r, "\"%s\" comes twice, or after what it must precede (deleted, renamed, set)", n);
			return -1;
		}
		*stage = i + 1;
		return read_staged[i](r) ? 1 : -1;
	}
	return json_skip(&r->c) ? 1 : 0;
}

/* Reads the top-level object of FILE into r: true, or false with err (empty when the
 * text is malformed, said by the caller). */
static bool read_edits(struct reading *r, const struct edits_identity *id)
{
	struct vbytes name = { 0 };
	int stage = 0, got = 1;
	bool version = false;
	if (!json_eat(&r->c, '{'))
		return false;
	if (!json_eat(&r->c, '}')) {
		do {
			if (!json_string(&r->c, &name) || !json_eat(&r->c, ':'))
				got = 0;
			else
				got = read_member(r, id, (const char *)name.p, &stage, &version);
		} while (got == 1 && json_eat(&r->c, ','));
		if (got == 1 && !json_eat(&r->c, '}'))
			got = 0;
	}
	free(name.p);
	if (got != 1)
		return false;
	json_ws(&r->c);
	if (r->c.p != r->c.end)
		return false;
	if (!version || !r->model_seen)
		return rfail(r, "%s", "it has no \"ggufs_edits\": 1 or no \"model\"");
	return names_unique(r);
}

/* Completes a refusal's line: the JSON reader's own reason, and the byte offset where
 * reading stopped, for a hand-edited file. */
static void say_where(const struct reading *r, const char *p, char err[GGUF_ERR_MAX])
{
	if (r->c.err[0] && !strstr(err, r->c.err) && strlen(err) + strlen(r->c.err) + 3 < GGUF_ERR_MAX) {
		strcat(err, ": ");
		strcat(err, r->c.err);
	}
	char at[40];
	snprintf(at, sizeof at, " (at byte %" PRIu64 ")", (uint64_t)(r->c.p - p));
	if (strlen(err) + strlen(at) < GGUF_ERR_MAX)
		strcat(err, at);
}

/* Frees what r holds (the state made from it owns copies of its own). */
static void reading_free(struct reading *r, uint64_t n_kv)
{
	if (r->change)
		for (uint64_t k = 0; k < n_kv; k++)
			if (r->change[k].name) {
				free((void *)r->change[k].name->ptr);
				free((void *)r->change[k].name);
			}
	free(r->change);
	index_free(r->orig);
	index_free(r->now);
	for (uint64_t j = 0; j < r->n_new; j++)
		free((void *)r->new_kv[j].key.ptr);
	free(r->new_kv);
	for (uint64_t j = 0; j < r->n_values; j++) {
		value_buf_free(r->values[j]);
		free(r->values[j]);
	}
	free(r->values);
}

struct ov_state *edits_parse(const struct ggufs_model *m, const struct edits_identity *id,
                             const char *p, uint64_t len, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g = model_own_meta(m);
	struct reading r = { .m = m, .c = { .p = p, .end = p + len }, .err = err };
	struct ov_state *s = NULL;
	err[0] = '\0';
	r.change = calloc(g->n_kv + 1, sizeof *r.change);
	r.orig = r.change ? index_build(&r, false) : NULL;
	if (!r.change || !r.orig) {
		rfail(&r, "%s", "out of memory");
	} else if (!read_edits(&r, id)) {
		if (!err[0]) {
			if (r.c.err[0])
				snprintf(err, GGUF_ERR_MAX, "%s", r.c.err);
			rfail(&r, "%s", "it is not a JSON object of ggufs edits");
		}
	} else if (!(s = ov_patched(m, r.change, r.new_kv, r.n_new, 1))) {
		rfail(&r, "%s", "out of memory");
	}
	if (!s && err[0])
		say_where(&r, p, err);
	reading_free(&r, g->n_kv);
	return s;
}
