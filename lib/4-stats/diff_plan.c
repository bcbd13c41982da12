#include "diff_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "model.h"

/* A table of names (of tensors or keys of one model) to their index. */
struct name_table {
	const struct gguf_str **names;   /* names[k]: the k-th name */
	uint64_t *slots;                 /* index + 1, or 0 for an empty slot */
	uint64_t mask;
	uint64_t salt;
};

static bool same_str(const struct gguf_str *x, const struct gguf_str *y)
{
	return x->len == y->len && memcmp(x->ptr, y->ptr, x->len) == 0;
}

/* A table of the n names, names[k] named by name_of(ctx, k); false when out of memory.
 * Two equal names (a valid file has none) keep the first. */
static bool table_make(struct name_table *t, uint64_t n,
                       const struct gguf_str *(*name_of)(const void *, uint64_t),
                       const void *ctx)
{
	uint64_t size = 16;
	while (size < 2 * n + 1)
		size *= 2;
	t->mask = size - 1;
	t->salt = 0;   /* hash_bytes is seeded per process */
	t->slots = calloc(size, sizeof *t->slots);
	t->names = calloc(n + 1, sizeof *t->names);
	if (!t->slots || !t->names)
		return false;
	for (uint64_t k = 0; k < n; k++) {
		const struct gguf_str *s = name_of(ctx, k);
		t->names[k] = s;
		uint64_t h = hash_bytes(s->ptr, s->len, t->salt) & t->mask;
		while (t->slots[h] && !same_str(t->names[t->slots[h] - 1], s))
			h = (h + 1) & t->mask;
		if (!t->slots[h])
			t->slots[h] = k + 1;
	}
	return true;
}

/* The index of name s, or UINT64_MAX. */
static uint64_t table_find(const struct name_table *t, const struct gguf_str *s)
{
	uint64_t h = hash_bytes(s->ptr, s->len, t->salt) & t->mask;
	for (; t->slots[h]; h = (h + 1) & t->mask)
		if (same_str(t->names[t->slots[h] - 1], s))
			return t->slots[h] - 1;
	return UINT64_MAX;
}

static void table_free(struct name_table *t)
{
	free(t->slots);
	free(t->names);
}

static const struct gguf_str *tensor_name(const void *m, uint64_t i)
{
	return &model_tensor((const struct ggufs_model *)m, i)->name;
}

static const struct gguf_str *key_name(const void *m, uint64_t k)
{
	return &model_meta((const struct ggufs_model *)m)->kv[k].key;
}

static bool same_dims(const struct gguf_tensor *x, const struct gguf_tensor *y)
{
	if (x->n_dims != y->n_dims)
		return false;
	for (uint32_t d = 0; d < x->n_dims; d++)
		if (x->ne[d] != y->ne[d])
			return false;
	return true;
}

/* Two values are the same when their types and stored bytes are. */
static bool same_value(const struct gguf_value *x, const struct gguf_value *y)
{
	return x->type == y->type && x->elem_type == y->elem_type && x->count == y->count &&
	       x->size == y->size && memcmp(x->data, y->data, x->size) == 0;
}

/* Pairs the tensors: in a's order, then b's that a has not. */
static bool pair_tensors(const struct ggufs_model *a, const struct ggufs_model *b,
                         const struct name_table *ta, const struct name_table *tb,
                         struct diff_plan *p)
{
	p->same = calloc(model_n_tensors(a) + 1, sizeof *p->same);
	p->dims = calloc(model_n_tensors(a) + 1, sizeof *p->dims);
	p->only_a = calloc(model_n_tensors(a) + 1, sizeof *p->only_a);
	p->only_b = calloc(model_n_tensors(b) + 1, sizeof *p->only_b);
	if (!p->same || !p->dims || !p->only_a || !p->only_b)
		return false;
	for (uint64_t i = 0; i < model_n_tensors(a); i++) {
		const uint64_t j = table_find(tb, &model_tensor(a, i)->name);
		if (j == UINT64_MAX)
			p->only_a[p->n_only_a++] = i;
		else if (same_dims(model_tensor(a, i), model_tensor(b, j)))
			p->same[p->n_same++] = (struct diff_pair){ i, j };
		else
			p->dims[p->n_dims++] = (struct diff_pair){ i, j };
	}
	for (uint64_t j = 0; j < model_n_tensors(b); j++)
		if (table_find(ta, &model_tensor(b, j)->name) == UINT64_MAX)
			p->only_b[p->n_only_b++] = j;
	return true;
}

/* Pairs the keys the same way. */
static bool pair_keys(const struct ggufs_model *a, const struct ggufs_model *b,
                      const struct name_table *ka, const struct name_table *kb,
                      struct diff_plan *p)
{
	const uint64_t na = model_meta(a)->n_kv, nb = model_meta(b)->n_kv;
	p->keys_removed = calloc(na + 1, sizeof *p->keys_removed);
	p->keys_changed = calloc(na + 1, sizeof *p->keys_changed);
	p->keys_added = calloc(nb + 1, sizeof *p->keys_added);
	if (!p->keys_removed || !p->keys_changed || !p->keys_added)
		return false;
	for (uint64_t k = 0; k < na; k++) {
		const uint64_t j = table_find(kb, &model_meta(a)->kv[k].key);
		if (j == UINT64_MAX)
			p->keys_removed[p->n_keys_removed++] = k;
		else if (!same_value(&model_meta(a)->kv[k].value, &model_meta(b)->kv[j].value))
			p->keys_changed[p->n_keys_changed++] = (struct diff_pair){ k, j };
	}
	for (uint64_t j = 0; j < nb; j++)
		if (table_find(ka, &model_meta(b)->kv[j].key) == UINT64_MAX)
			p->keys_added[p->n_keys_added++] = j;
	return true;
}

int diff_plan_make(const struct ggufs_model *a, const struct ggufs_model *b,
                   struct diff_plan *p)
{
	memset(p, 0, sizeof *p);
	struct name_table ta = { 0 }, tb = { 0 }, ka = { 0 }, kb = { 0 };
	bool ok = table_make(&ta, model_n_tensors(a), tensor_name, a) &&
	          table_make(&tb, model_n_tensors(b), tensor_name, b) &&
	          table_make(&ka, model_meta(a)->n_kv, key_name, a) &&
	          table_make(&kb, model_meta(b)->n_kv, key_name, b) &&
	          pair_tensors(a, b, &ta, &tb, p) && pair_keys(a, b, &ka, &kb, p);
	table_free(&ta);
	table_free(&tb);
	table_free(&ka);
	table_free(&kb);
	if (!ok) {
		diff_plan_free(p);
		return -ENOMEM;
	}
	return 0;
}

void diff_plan_free(struct diff_plan *p)
{
	free(p->same);
	free(p->dims);
	free(p->only_a);
	free(p->only_b);
	free(p->keys_removed);
	free(p->keys_added);
	free(p->keys_changed);
	memset(p, 0, sizeof *p);
}
