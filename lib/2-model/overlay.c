#include "overlay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "gguf_write.h"
#include "sorted_find.h"

/* Bytes shared by the states that hold them. */
struct blob {
	atomic_uint_fast64_t refs;
	uint64_t len;
	uint8_t bytes[];
};

static struct blob *blob_new(const void *p, uint64_t len)
{
	if (len > SIZE_MAX - sizeof(struct blob))
		return NULL;
	struct blob *b = malloc(sizeof *b + (size_t)len);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (len)
		memcpy(b->bytes, p, (size_t)len);
	return b;
}

static struct blob *blob_get(struct blob *b)
{
	if (b)
		atomic_fetch_add(&b->refs, 1);
	return b;
}

static void blob_put(struct blob *b)
{
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

/* A state of n keys, not yet filled (keys zeroed), with its model view. */
static struct ov_state *state_alloc(const struct ggufs_model *m, uint64_t n)
{
	struct ov_state *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->keys = calloc(n + 1, sizeof *s->keys);
	s->kv = calloc(n + 1, sizeof *s->kv);
	s->view = model_view_new(m, &s->file);
	if (!s->keys || !s->kv || !s->view) {
		free(s->keys);
		free(s->kv);
		model_view_free(s->view);
		free(s);
		return NULL;
	}
	atomic_init(&s->refs, 1);
	s->n = n;
	s->file = *model_meta(m);
	return s;
}

/* Makes s's kv array and file from its keys: done once, before anyone else sees s. */
static void state_seal(struct ov_state *s)
{
	for (uint64_t i = 0; i < s->n; i++)
		s->kv[i] = s->keys[i].kv;
	s->file.kv = s->kv;
	s->file.n_kv = s->n;
}

struct ov_state *ov_initial(const struct ggufs_model *m)
{
	struct ov_state *s = state_alloc(m, model_meta(m)->n_kv);
	if (!s)
		return NULL;
	for (uint64_t k = 0; k < s->n; k++)
		s->keys[k] = (struct ov_key){ .kv = model_meta(m)->kv[k], .id = k };
	s->n_orig = s->next_id = model_meta(m)->n_kv;
	state_seal(s);
	return s;
}

uint64_t ov_state_bytes(const struct ov_state *s)
{
	return sizeof *s + (s->n + 1) * (sizeof *s->keys + sizeof *s->kv);
}

struct ov_state *ov_get(struct ov_state *s)
{
	atomic_fetch_add(&s->refs, 1);
	return s;
}

void ov_put(struct ov_state *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	for (uint64_t i = 0; i < s->n; i++) {
		blob_put(s->keys[i].name_blob);
		blob_put(s->keys[i].value_blob);
	}
	free(s->keys);
	free(s->kv);
	model_view_free(s->view);
	free(s);
}

uint64_t ov_find_id(const struct ov_state *s, uint64_t id)
{
	/* keys keep their order, and ids grow along it */
	uint64_t i = sorted_find_u64(s->keys, s->n, sizeof *s->keys, offsetof(struct ov_key, id), id);
	return i < s->n ? i : UINT64_MAX;
}

uint64_t ov_find_name(const struct ov_state *s, const char *name, uint64_t len)
{
	for (uint64_t i = 0; i < s->n; i++)
		if (s->keys[i].kv.key.len == len && memcmp(s->keys[i].kv.key.ptr, name, len) == 0)
			return i;
	return UINT64_MAX;
}

bool ov_unchanged(const struct ov_state *s, const struct ggufs_model *m)
{
	if (s->n != model_meta(m)->n_kv)
		return false;
	for (uint64_t i = 0; i < s->n; i++) {
		const struct gguf_kv *a = &s->keys[i].kv, *b = &model_meta(m)->kv[i];
		if (s->keys[i].id != i || a->key.len != b->key.len ||
		    (a->key.ptr != b->key.ptr && memcmp(a->key.ptr, b->key.ptr, a->key.len) != 0) ||
		    !ov_value_equal(&a->value, &b->value))
			return false;
	}
	return true;
}

int ov_refusal(const char *name, uint64_t len, const char **why)
{
	*why = NULL;
	if (len == 17 && memcmp(name, "general.alignment", 17) == 0)
		*why = "general.alignment would move every tensor";
	else if (len >= 6 && memcmp(name, "split.", 6) == 0)
		*why = "the split.* keys describe the shards";
	if (*why)
		return -EPERM;
	if (len == 0)
		*why = "an empty key name";
	else if (len > 65535)
		*why = "a key name longer than 65535 bytes";
	else if (memchr(name, 0, len))
		*why = "a key name with a NUL byte";
	return *why ? -EINVAL : 0;
}

bool ov_value_equal(const struct gguf_value *a, const struct gguf_value *b)
{
	if (a->type != b->type || a->size != b->size)
		return false;
	if (a->type == GGUF_TYPE_ARRAY && (a->elem_type != b->elem_type || a->count != b->count))
		return false;
	/* an edit copies the values it leaves alone: the same bytes need no compare (a
	 * vocabulary is megabytes, and every edit asks this of every key) */
	return a->size == 0 || a->data == b->data || memcmp(a->data, b->data, a->size) == 0;
}

/* A copy of s with room for extra more keys at the end (not filled), every blob
 * shared. */
static struct ov_state *state_copy(const struct ov_state *s, uint64_t extra)
{
	struct ov_state *c = state_alloc(s->view, s->n + extra);
	if (!c)
		return NULL;
	c->file = s->file;
	c->n = s->n;
	for (uint64_t i = 0; i < s->n; i++) {
		c->keys[i] = s->keys[i];
		blob_get(c->keys[i].name_blob);
		blob_get(c->keys[i].value_blob);
	}
	c->n_orig = s->n_orig;
	c->next_id = s->next_id;
	c->gen = s->gen + 1;
	return c;
}

/* Points key k's value at a new blob holding a copy of v. False out of memory. */
static bool put_value(struct ov_key *k, const struct gguf_value *v)
{
	struct blob *b = blob_new(v->data, v->size);
	if (!b)
		return false;
	blob_put(k->value_blob);
	k->value_blob = b;
	k->kv.value = *v;
	k->kv.value.data = b->bytes;
	return true;
}

/* The same for its name. */
static bool put_name(struct ov_key *k, const char *name, uint64_t len)
{
	struct blob *b = blob_new(name, len);
	if (!b)
		return false;
	blob_put(k->name_blob);
	k->name_blob = b;
	k->kv.key = (struct gguf_str){ .ptr = (const char *)b->bytes, .len = len };
	return true;
}

/* Removes position i from c (a state being made), dropping its blobs. */
static void drop_key(struct ov_state *c, uint64_t i)
{
	blob_put(c->keys[i].name_blob);
	blob_put(c->keys[i].value_blob);
	memmove(&c->keys[i], &c->keys[i + 1], (c->n - i - 1) * sizeof *c->keys);
	c->n--;
}

/* A state being made that could not be (out of memory): let go of, NULL. */
static struct ov_state *fail(struct ov_state *c)
{
	ov_put(c);
	return NULL;
}

struct ov_state *ov_set(const struct ov_state *s, uint64_t i, const struct gguf_value *v)
{
	struct ov_state *c = state_copy(s, 0);
	if (!c || !put_value(&c->keys[i], v))
		return fail(c);
	state_seal(c);
	return c;
}

int ov_create(const struct ov_state *s, const char *name, uint64_t len,
              const struct gguf_value *v, struct ov_state **next)
{
	*next = NULL;
	if (ov_find_name(s, name, len) != UINT64_MAX)
		return -EEXIST;
	struct ov_state *c = state_copy(s, 1);
	if (!c)
		return -ENOMEM;
	struct ov_key *k = &c->keys[c->n++];
	*k = (struct ov_key){ .id = c->next_id++ };
	if (!put_name(k, name, len) || !put_value(k, v)) {
		fail(c);
		return -ENOMEM;
	}
	state_seal(c);
	*next = c;
	return 0;
}

struct ov_state *ov_delete(const struct ov_state *s, uint64_t i)
{
	struct ov_state *c = state_copy(s, 0);
	if (!c)
		return fail(c);
	drop_key(c, i);
	state_seal(c);
	return c;
}

int ov_restore(const struct ov_state *s, const struct ov_key *k, struct ov_state **next)
{
	*next = NULL;
	if (ov_find_name(s, k->kv.key.ptr, k->kv.key.len) != UINT64_MAX ||
	    ov_find_id(s, k->id) != UINT64_MAX)
		return -EEXIST;
	struct ov_state *c = state_copy(s, 1);
	if (!c)
		return -ENOMEM;
	uint64_t at = 0;   /* keys are in id order: the file's, then new ones as made */
	while (at < c->n && c->keys[at].id < k->id)
		at++;
	memmove(&c->keys[at + 1], &c->keys[at], (c->n - at) * sizeof *c->keys);
	ov_key_hold(k, &c->keys[at]);
	c->n++;
	state_seal(c);
	*next = c;
	return 0;
}

void ov_key_hold(const struct ov_key *k, struct ov_key *out)
{
	*out = *k;
	blob_get(out->name_blob);
	blob_get(out->value_blob);
}

void ov_key_drop(struct ov_key *k)
{
	blob_put(k->name_blob);
	blob_put(k->value_blob);
	memset(k, 0, sizeof *k);
}

struct ov_state *ov_rename(const struct ov_state *s, uint64_t i, const char *name, uint64_t len)
{
	struct ov_state *c = state_copy(s, 0);
	if (!c || !put_name(&c->keys[i], name, len))
		return fail(c);
	for (uint64_t j = 0; j < c->n; j++)
		if (j != i && c->keys[j].kv.key.len == len &&
		    memcmp(c->keys[j].kv.key.ptr, name, len) == 0) {
			drop_key(c, j);
			break;
		}
	state_seal(c);
	return c;
}

struct ov_state *ov_patched(const struct ggufs_model *m, const struct ov_change *change,
                            const struct gguf_kv *new_kv, uint64_t n_new, uint64_t gen)
{
	uint64_t n_orig = model_meta(m)->n_kv;
	struct ov_state *c = state_alloc(m, n_orig + n_new);
	if (!c)
		return NULL;
	c->n = 0;
	for (uint64_t k = 0; k < n_orig; k++) {
		if (change[k].deleted)
			continue;
		struct ov_key *key = &c->keys[c->n++];
		*key = (struct ov_key){ .kv = model_meta(m)->kv[k], .id = k };
		if ((change[k].name && !put_name(key, change[k].name->ptr, change[k].name->len)) ||
		    (change[k].value && !put_value(key, change[k].value)))
			return fail(c);
	}
	for (uint64_t j = 0; j < n_new; j++) {
		struct ov_key *key = &c->keys[c->n++];
		*key = (struct ov_key){ .id = n_orig + j };
		if (!put_name(key, new_kv[j].key.ptr, new_kv[j].key.len) ||
		    !put_value(key, &new_kv[j].value))
			return fail(c);
	}
	c->n_orig = n_orig;
	c->next_id = n_orig + n_new;
	c->gen = gen;
	state_seal(c);
	return c;
}

int ov_identity(const struct ggufs_model *m, uint64_t *header_hash)
{
	const struct gguf_file *g0 = model_own_meta(m);
	const uint64_t align = g0->alignment, n_t = model_n_tensors(m);
	const bool one = model_n_files(m) == 1;
	const struct gguf_kv **kv = calloc(g0->n_kv + 1, sizeof *kv);
	const struct gguf_tensor **ts = calloc(n_t + 1, sizeof *ts);
	uint64_t *offsets = calloc(n_t + 1, sizeof *offsets);
	uint8_t *buf = NULL;
	int rc = -1;
	char err[GGUF_ERR_MAX];
	uint64_t len, n_kv = 0, data = 0;
	if (!kv || !ts || !offsets)
		goto out;
	/* the header of model.gguf unedited (modelfile.h): a split model's merged one,
	 * which is a single file's own when the shards were cut from it */
	for (uint64_t k = 0; k < g0->n_kv; k++)
		if (one || !model_split_key(&g0->kv[k].key))
			kv[n_kv++] = &g0->kv[k];
	for (uint64_t i = 0; i < n_t; i++) {
		ts[i] = model_tensor(m, i);
		if (one) {
			offsets[i] = ts[i]->offset - g0->data_offset;
			continue;
		}
		offsets[i] = data;
		if (__builtin_add_overflow(data, ts[i]->size + align - 1, &data) ||
		    ts[i]->size > UINT64_MAX - align)
			goto out;
		data &= ~(align - 1);
	}
	if (gguf_header_write(g0->version, kv, n_kv, ts, offsets, n_t, align, NULL, 0,
	                      &len, err) < 0 || len > SIZE_MAX || !(buf = malloc((size_t)len + 1)))
		goto out;
	if (gguf_header_write(g0->version, kv, n_kv, ts, offsets, n_t, align, buf, len,
	                      &len, err) < 0)
		goto out;
	*header_hash = XXH3_64bits(buf, (size_t)len);
	rc = 0;
out:
	free(kv);
	free(ts);
	free(offsets);
	free(buf);
	return rc;
}
