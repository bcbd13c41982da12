#include "quant_plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"

/* Keys llama.cpp sets anew (last) or drops. */
static bool key_is(const struct gguf_kv *kv, const char *key)
{
	return kv->key.len == strlen(key) && memcmp(kv->key.ptr, key, kv->key.len) == 0;
}

static bool key_dropped(const struct gguf_kv *kv)
{
	return key_is(kv, "general.quantization_version") || key_is(kv, "general.file_type") ||
	       key_is(kv, "split.no") || key_is(kv, "split.count") ||
	       key_is(kv, "split.tensors.count");
}

/* Bytes of kv as a header holds it: key, type, an array's element type and count, the
 * payload. */
static bool kv_len(const struct gguf_kv *kv, uint64_t *len)
{
	uint64_t n = 8 + 4 + (kv->value.type == GGUF_TYPE_ARRAY ? 12 : 0);
	return !__builtin_add_overflow(n, kv->key.len, &n) &&
	       !__builtin_add_overflow(n, kv->value.size, len);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Bytes [from, from + n) of src, normalized as booleans (0 or 1) when bools. */
static void copy_part(uint8_t *out, const uint8_t *src, uint64_t from, uint64_t n, bool bools)
{
	if (!bools) {
		memcpy(out, src + from, n);
		return;
	}
	for (uint64_t i = 0; i < n; i++)
		out[i] = src[from + i] != 0;
}

/* Bytes [from, from + n) of kv's encoding into out. llama.cpp writes booleans as 0 or 1,
 * whatever byte the model held. */
static void kv_read(const struct gguf_kv *kv, uint64_t from, uint64_t n, uint8_t *out)
{
	uint8_t pre[8 + 4 + 12];
	const struct gguf_value *v = &kv->value;
	const bool arr = v->type == GGUF_TYPE_ARRAY;
	const bool bools = arr ? v->elem_type == GGUF_TYPE_BOOL : v->type == GGUF_TYPE_BOOL;
	/* the parts in order: key length, key bytes, type (and array head), payload */
	struct { const uint8_t *p; uint64_t len; bool b; } parts[4];
	put_le(pre, kv->key.len, 8);
	put_le(pre + 8, v->type, 4);
	if (arr) {
		put_le(pre + 12, v->elem_type, 4);
		put_le(pre + 16, v->count, 8);
	}
	parts[0].p = pre, parts[0].len = 8, parts[0].b = false;
	parts[1].p = (const uint8_t *)kv->key.ptr, parts[1].len = kv->key.len, parts[1].b = false;
	parts[2].p = pre + 8, parts[2].len = arr ? 16 : 4, parts[2].b = false;
	parts[3].p = v->data, parts[3].len = v->size, parts[3].b = bools;
	uint64_t at = 0;
	for (int i = 0; i < 4 && n; i++) {
		uint64_t end = at + parts[i].len;
		if (from < end) {
			uint64_t k = end - from < n ? end - from : n;
			copy_part(out, parts[i].p, from - at, k, parts[i].b);
			out += k, from += k, n -= k;
		}
		at = end;
	}
}

void quant_plan_free(struct quant_plan *qp)
{
	free(qp->keys);
	free(qp->infos);
	free(qp->tensors);
	*qp = (struct quant_plan){ 0 };
}

/* The bytes a plan holds, for the accounting of a tree's memory. */
static uint64_t quant_plan_bytes(const struct quant_plan *qp)
{
	return sizeof *qp + qp->n_keys * sizeof *qp->keys + qp->infos_len +
	       qp->n_tensors * sizeof *qp->tensors;
}

/* Appends own key name to the plan: a uint32 (str NULL) or a string of at most
 * QUANT_KV_STR_MAX bytes (cut where strncpy would: at its first NUL or the bound), its
 * value in own_bytes from *at on. */
static void own_key(struct quant_plan *qp, uint64_t *at, const char *name, uint32_t u32,
                    const char *str, uint64_t str_len)
{
	uint8_t *p = qp->own_bytes + *at;
	struct gguf_kv *kv = &qp->own[qp->n_own++];
	kv->key = (struct gguf_str){ name, strlen(name) };
	if (!str) {
		put_le(p, u32, 4);
		kv->value = (struct gguf_value){ .type = GGUF_TYPE_UINT32, .data = p, .size = 4 };
		*at += 4;
		return;
	}
	const char *nul = memchr(str, 0, str_len);
	uint64_t n = nul ? (uint64_t)(nul - str) : str_len;
	if (n > QUANT_KV_STR_MAX)
		n = QUANT_KV_STR_MAX;
	put_le(p, n, 8);
	memcpy(p + 8, str, n);
	kv->value = (struct gguf_value){ .type = GGUF_TYPE_STRING, .data = p, .size = 8 + n };
	*at += 8 + n;
}

/* The keys llama.cpp sets, in the order it sets them (each set moves its key last). */
static void plan_own_keys(const struct quant_params *p, struct quant_plan *qp)
{
	uint64_t at = 0;
	own_key(qp, &at, "general.quantization_version", QUANT_VERSION, NULL, 0);
	own_key(qp, &at, "general.file_type", qp->ftype, NULL, 0);
	const struct imatrix *im = p->imatrix;
	if (!im)
		return;
	const char *file = p->imatrix_file ? p->imatrix_file : "";
	own_key(qp, &at, "quantize.imatrix.file", 0, file, strlen(file));
	if (im->has_dataset)
		own_key(qp, &at, "quantize.imatrix.dataset", 0, im->dataset.ptr, im->dataset.len);
	/* an int override is written as the uint32 of its absolute value */
	own_key(qp, &at, "quantize.imatrix.entries_count", (uint32_t)im->n_entries, NULL, 0);
	if (im->chunk_count > 0)
		own_key(qp, &at, "quantize.imatrix.chunks_count", (uint32_t)im->chunk_count, NULL, 0);
}

/* Whether kv is one of the keys the plan sets (so the model's goes). */
static bool key_set_again(const struct quant_plan *qp, const struct gguf_kv *kv)
{
	for (uint32_t i = 0; i < qp->n_own; i++)
		if (kv->key.len == qp->own[i].key.len &&
		    memcmp(kv->key.ptr, qp->own[i].key.ptr, kv->key.len) == 0)
			return true;
	return false;
}

/* The keys of the quant file: m's in order less the dropped ones, then those set. */
static int plan_keys(const struct ggufs_model *m, const struct quant_params *p,
                     struct quant_plan *qp, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *g = model_meta(m);
	plan_own_keys(p, qp);
	qp->keys = calloc(g->n_kv + qp->n_own, sizeof *qp->keys);
	if (!qp->keys) {
		gguf_errf(err, "out of memory for %" PRIu64 " keys", g->n_kv);
		return -1;
	}
	uint64_t off = 24;   /* "GGUF", version, tensor count, key count */
	for (uint64_t i = 0; i < g->n_kv + qp->n_own; i++) {
		const struct gguf_kv *kv = i < g->n_kv ? &g->kv[i] : &qp->own[i - g->n_kv];
		if (i < g->n_kv && (key_dropped(kv) || key_set_again(qp, kv)))
			continue;
		/* llama.cpp's GGUF reader takes no array of arrays */
		if (kv->value.type == GGUF_TYPE_ARRAY && kv->value.elem_type == GGUF_TYPE_ARRAY) {
			char q[80];
			gguf_errf(err, "metadata key '%s' is an array of arrays, which llama.cpp "
			          "does not read", gguf_quote(&kv->key, q));
			return -1;
		}
		uint64_t len;
		if (!kv_len(kv, &len) || __builtin_add_overflow(off, len, &len)) {
			gguf_errf(err, "the header would be larger than 2^64 bytes");
			return -1;
		}
		qp->keys[qp->n_keys++] = (struct quant_plan_key){ kv, off };
		off = len;
	}
	qp->head_len = off;
	return 0;
}

/* The tensors in llama.cpp's order with their types, sizes and offsets, and their
 * infos as written. */
static int plan_tensors(const struct ggufs_model *m, const struct quant_params *p,
                        struct quant_plan *qp, char err[GGUF_ERR_MAX])
{
	struct quant_hparams hp;
	if (quant_hparams_read(model_meta(m), &hp, err) < 0)
		return -1;
	const uint64_t n = model_n_tensors(m);
	const struct gguf_tensor **src = calloc(n ? n : 1, sizeof *src);
	const struct gguf_tensor **sorted = calloc(n ? n : 1, sizeof *sorted);
	struct gguf_tensor *written = calloc(n ? n : 1, sizeof *written);
	const struct gguf_tensor **wp = calloc(n ? n : 1, sizeof *wp);
	uint64_t *order = calloc(n ? n : 1, sizeof *order);
	uint64_t *offsets = calloc(n ? n : 1, sizeof *offsets);
	uint32_t *types = calloc(n ? n : 1, sizeof *types);
	const struct imatrix_entry **weights = calloc(n ? n : 1, sizeof *weights);
	qp->tensors = calloc(n ? n : 1, sizeof *qp->tensors);
	int r = -1;
	if (!src || !sorted || !written || !wp || !order || !offsets || !types || !weights || !qp->tensors) {
		gguf_errf(err, "out of memory for %" PRIu64 " tensors", n);
		goto out;
	}
	for (uint64_t i = 0; i < n; i++)
		src[i] = model_tensor(m, i);
	if (quant_rules_order(src, n, order, err) < 0)
		goto out;
	for (uint64_t i = 0; i < n; i++)
		sorted[i] = src[order[i]];
	if (quant_rules_types(&hp, p, sorted, n, types, weights, err) < 0)
		goto out;
	uint64_t off = 0;
	for (uint64_t i = 0; i < n; i++) {
		const struct gguf_tensor *t = sorted[i];
		uint64_t size;
		if (types[i] == t->type) {
			size = t->size;   /* copied as it is */
			if (!t->ti || !t->ti->block_bytes) {
				char q[80];
				gguf_errf(err, "tensor '%s' has a type llama.cpp does not know",
				          gguf_quote(&t->name, q));
				goto out;
			}
		} else if (!quant_tensor_bytes(t, types[i], &size)) {
			gguf_errf(err, "the tensors would be larger than 2^64 bytes");
			goto out;
		}
		qp->tensors[i] = (struct quant_tensor){ order[i], types[i], off, size, weights[i] };
		written[i] = *t;
		written[i].n_dims = quant_n_dims(t);
		written[i].type = types[i];
		wp[i] = &written[i];
		offsets[i] = off;
		uint64_t padded = size + (QUANT_ALIGNMENT - size % QUANT_ALIGNMENT) % QUANT_ALIGNMENT;
		if (padded < size || __builtin_add_overflow(off, padded, &off) ||
		    __builtin_add_overflow(qp->data_bytes, size, &qp->data_bytes) ||
		    __builtin_add_overflow(qp->n_elements, t->n_elements, &qp->n_elements)) {
			gguf_errf(err, "the tensors would be larger than 2^64 bytes");
			goto out;
		}
	}
	qp->n_tensors = n;
	if (gguf_tensor_infos_write(wp, offsets, n, NULL, 0, &qp->infos_len, err) < 0)
		goto out;
	qp->infos = malloc(qp->infos_len ? qp->infos_len : 1);
	if (!qp->infos) {
		gguf_errf(err, "out of memory for the tensor infos");
		goto out;
	}
	if (gguf_tensor_infos_write(wp, offsets, n, qp->infos, qp->infos_len, &qp->infos_len,
	                            err) < 0)
		goto out;
	uint64_t hdr, data_len = off;
	if (__builtin_add_overflow(qp->head_len, qp->infos_len, &hdr) ||
	    hdr > INT64_MAX - QUANT_ALIGNMENT) {
		gguf_errf(err, "the header would be larger than 2^63 bytes");
		goto out;
	}
	qp->data_offset = hdr + (QUANT_ALIGNMENT - hdr % QUANT_ALIGNMENT) % QUANT_ALIGNMENT;
	if (__builtin_add_overflow(qp->data_offset, data_len, &qp->size) || qp->size > INT64_MAX) {
		gguf_errf(err, "the file would be larger than 2^63 bytes");
		goto out;
	}
	r = 0;
out:
	free(src);
	free(sorted);
	free(written);
	free(wp);
	free(order);
	free(offsets);
	free(types);
	free(weights);
	return r;
}

int quant_plan_build(const struct ggufs_model *m, const struct quant_params *p,
                     struct quant_plan *qp, char err[GGUF_ERR_MAX])
{
	*qp = (struct quant_plan){ .ftype = p->ftype, .name = quant_name_of_ftype(p->ftype) };
	if (!qp->name) {
		gguf_errf(err, "invalid output file type %" PRIu32, p->ftype);
		return -1;
	}
	if (p->imatrix && !p->imatrix->all_finite) {
		gguf_errf(err, "imatrix contains non-finite value %f",
		          (double)p->imatrix->first_non_finite);
		return -1;
	}
	if (plan_keys(m, p, qp, err) < 0 || plan_tensors(m, p, qp, err) < 0) {
		quant_plan_free(qp);
		return -1;
	}
	return 0;
}

void quant_plan_header_read(const struct quant_plan *qp, uint64_t off, uint64_t len,
                            uint8_t *buf)
{
	uint8_t pre[24];
	memcpy(pre, GGUF_MAGIC, 4);
	put_le(pre + 4, 3, 4);
	put_le(pre + 8, qp->n_tensors, 8);
	put_le(pre + 16, qp->n_keys, 8);
	while (len) {
		uint64_t k;
		if (off < 24) {
			k = 24 - off < len ? 24 - off : len;
			memcpy(buf, pre + off, k);
		} else if (off < qp->head_len) {
			/* the last key starting at or before off */
			uint64_t lo = 0, hi = qp->n_keys;
			while (hi - lo > 1) {
				uint64_t mid = lo + (hi - lo) / 2;
				if (qp->keys[mid].off <= off)
					lo = mid;
				else
					hi = mid;
			}
			uint64_t end = lo + 1 < qp->n_keys ? qp->keys[lo + 1].off : qp->head_len;
			k = end - off < len ? end - off : len;
			kv_read(qp->keys[lo].kv, off - qp->keys[lo].off, k, buf);
		} else if (off < qp->head_len + qp->infos_len) {
			uint64_t at = off - qp->head_len;
			k = qp->infos_len - at < len ? qp->infos_len - at : len;
			memcpy(buf, qp->infos + at, k);
		} else {
			k = len;
			memset(buf, 0, k);
		}
		buf += k, off += k, len -= k;
	}
}

uint64_t quant_plan_tensor_at(const struct quant_plan *qp, uint64_t off)
{
	uint64_t rel = off - qp->data_offset, lo = 0, hi = qp->n_tensors;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (qp->tensors[mid].offset <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint32_t quant_plan_type_counts(const struct quant_plan *qp, uint32_t *types, uint64_t *counts,
                                uint32_t cap)
{
	uint64_t per[GGML_TYPE_COUNT + 1] = { 0 };
	for (uint64_t i = 0; i < qp->n_tensors; i++)
		per[qp->tensors[i].type < GGML_TYPE_COUNT ? qp->tensors[i].type : GGML_TYPE_COUNT]++;
	uint32_t n = 0;
	for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
		if (per[t]) {
			if (n < cap)
				types[n] = t, counts[n] = per[t];
			n++;
		}
	return n;
}

int quant_set_build(const struct ggufs_model *m, const struct quant_set_opts *o,
                    struct quant_set *qs)
{
	size_t n26, n9;
	const struct quant_name *plain = quant_names(&n26), *weighted = quant_imatrix_names(&n9);
	struct quant_params base;
	quant_params_default(&base, 0);
	quant_params_imatrix(&base, o->imatrix, o->imatrix_file);
	*qs = (struct quant_set){ .requantize = o->requantize, .imatrix = base.imatrix != NULL,
	                          .n = n26 + n9 };
	struct quant_name *names = calloc(qs->n, sizeof *names);
	qs->names = names;
	qs->plans = calloc(qs->n, sizeof *qs->plans);
	qs->why = calloc(qs->n, sizeof *qs->why);
	if (!names || !qs->plans || !qs->why) {
		quant_set_free(qs);
		return -1;
	}
	memcpy(names, plain, n26 * sizeof *names);
	memcpy(names + n26, weighted, n9 * sizeof *names);
	for (size_t i = 0; i < qs->n; i++) {
		struct quant_params p = base;
		p.ftype = qs->names[i].ftype;
		p.allow_requantize = o->requantize;
		if (quant_plan_build(m, &p, &qs->plans[i], qs->why[i]) < 0) {
			if (!qs->why[i][0])
				snprintf(qs->why[i], GGUF_ERR_MAX, "not planned");
			continue;
		}
		for (uint64_t k = 0; o->can_make && k < qs->plans[i].n_tensors; k++) {
			const struct quant_tensor *qt = &qs->plans[i].tensors[k];
			char b[16];
			if (qt->type != model_tensor(m, qt->src)->type &&
			    !o->can_make(qt->type, qt->weights != NULL)) {
				snprintf(qs->why[i], GGUF_ERR_MAX, "this ggufs does not quantize to %s%s "
				         "yet", ggml_type_name(qt->type, b),
				         qt->weights ? " under an importance matrix" : "");
				quant_plan_free(&qs->plans[i]);
				break;
			}
		}
	}
	return 0;
}

void quant_set_free(struct quant_set *qs)
{
	for (size_t i = 0; qs->plans && i < qs->n; i++)
		quant_plan_free(&qs->plans[i]);
	free(qs->plans);
	free(qs->why);
	free((void *)qs->names);
	*qs = (struct quant_set){ 0 };
}

uint64_t quant_set_bytes(const struct quant_set *qs)
{
	uint64_t n = sizeof *qs + qs->n * sizeof *qs->why;
	for (size_t i = 0; i < qs->n; i++)
		n += quant_plan_bytes(&qs->plans[i]);
	return n;
}
