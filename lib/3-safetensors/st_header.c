/* A .safetensors file's header, parsed and checked (st_header.h). */
#include "st_header.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	unsigned size;
} dtypes[] = {
	[ST_F16] = { "F16", 2 },
	[ST_BF16] = { "BF16", 2 },
	[ST_F32] = { "F32", 4 },
	[ST_F64] = { "F64", 8 },
};

unsigned st_dtype_size(enum st_dtype d)
{
	return dtypes[d].size;
}

const char *st_dtype_name(enum st_dtype d)
{
	return dtypes[d].name;
}

/* The dtypes the converter takes that ggufs does not convert (integers, bools, fp8):
 * named so, rather than as unknown. */
static bool dtype_known_elsewhere(const char *s)
{
	static const char *const names[] = { "I64", "I32", "I16", "I8", "U8", "BOOL",
	                                     "F8_E4M3", "F8_E5M2" };
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(s, names[i]) == 0)
			return true;
	return false;
}

bool st_header_size(const uint8_t *p, uint64_t file_size, const char *shown,
                    uint64_t *need, char err[GGUF_ERR_MAX])
{
	if (file_size < 8) {
		gguf_errf(err, "%s: %" PRIu64 " bytes, too short for a safetensors header", shown,
		          file_size);
		return false;
	}
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | p[i];
	if (n > ST_HEADER_MAX) {
		gguf_errf(err, "%s: the header says it is %" PRIu64 " bytes long, more than the "
		          "%u MiB ggufs reads", shown, n, ST_HEADER_MAX >> 20);
		return false;
	}
	if (n > file_size - 8) {
		gguf_errf(err, "%s: the header says it is %" PRIu64 " bytes long, but the file "
		          "holds %" PRIu64 " bytes after its length", shown, n, file_size - 8);
		return false;
	}
	*need = 8 + n;
	return true;
}

/* A JSON value as a non-negative integer: true, or false for anything else. */
static bool json_uint(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

/* Checks the description v of tensor t->name and fills t from it: 0, or -1 with err. */
static int tensor_from_json(const json_t *v, uint64_t data_offset, uint64_t file_size,
                            const char *shown, struct st_tensor *t, char err[GGUF_ERR_MAX])
{
	const char *name = t->name;
	if (!json_is_object(v)) {
		gguf_errf(err, "%s: tensor '%.64s' is described by no object", shown, name);
		return -1;
	}
	const json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape"),
	             *offs = json_object_get(v, "data_offsets");
	if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs)) {
		gguf_errf(err, "%s: tensor '%.64s' lacks a dtype, shape or data_offsets", shown,
		          name);
		return -1;
	}
	const char *ds = json_string_value(dt);
	size_t d;
	for (d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
		if (strcmp(ds, dtypes[d].name) == 0)
			break;
	if (d == sizeof dtypes / sizeof dtypes[0]) {
		gguf_errf(err, "%s: tensor '%.64s' has dtype '%.16s', %s", shown, name, ds,
		          dtype_known_elsewhere(ds) ? "which ggufs does not convert (only "
		          "F16, BF16, F32 and F64)" : "not a safetensors dtype");
		return -1;
	}
	t->dtype = (enum st_dtype)d;
	if (json_array_size(shape) > ST_MAX_DIMS) {
		gguf_errf(err, "%s: tensor '%.64s' has %zu dimensions, more than GGUF's %d", shown,
		          name, json_array_size(shape), ST_MAX_DIMS);
		return -1;
	}
	t->n_dims = (uint32_t)json_array_size(shape);
	uint64_t n = 1;
	for (uint32_t i = 0; i < t->n_dims; i++) {
		if (!json_uint(json_array_get(shape, i), &t->shape[i])) {
			gguf_errf(err, "%s: tensor '%.64s' has a dimension that is not a count", shown,
			          name);
			return -1;
		}
		if (__builtin_mul_overflow(n, t->shape[i], &n)) {
			gguf_errf(err, "%s: tensor '%.64s' has more elements than 2^64", shown, name);
			return -1;
		}
	}
	t->n_elements = n;
	uint64_t begin, end, size;
	if (json_array_size(offs) != 2 || !json_uint(json_array_get(offs, 0), &begin) ||
	    !json_uint(json_array_get(offs, 1), &end) || end < begin) {
		gguf_errf(err, "%s: tensor '%.64s' has data_offsets that are not [begin, end]",
		          shown, name);
		return -1;
	}
	if (__builtin_mul_overflow(n, (uint64_t)dtypes[d].size, &size)) {
		gguf_errf(err, "%s: tensor '%.64s' of dtype %s needs more than 2^64 bytes", shown,
		          name, dtypes[d].name);
		return -1;
	}
	if (size != end - begin) {
		gguf_errf(err, "%s: tensor '%.64s' of its shape and dtype %s needs %" PRIu64
		          " bytes, but its data_offsets span %" PRIu64, shown, name,
		          dtypes[d].name, size, end - begin);
		return -1;
	}
	if (end > file_size - data_offset) {
		gguf_errf(err, "%s: tensor '%.64s' ends at byte %" PRIu64 " of the data, past the "
		          "end of the file (%" PRIu64 " bytes of data)", shown, name, end,
		          file_size - data_offset);
		return -1;
	}
	t->offset = data_offset + begin;
	t->size = size;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
	const struct st_tensor *x = *(const struct st_tensor *const *)a,
	                       *y = *(const struct st_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 :
	       x->size < y->size ? -1 : x->size > y->size;
}

/* No two tensors' bytes overlap (empty ones lie anywhere): 0, or -1 with err naming
 * two that do. */
static int check_overlaps(const struct st_header *h, const char *shown, char err[GGUF_ERR_MAX])
{
	const struct st_tensor **by = calloc(h->n ? h->n : 1, sizeof *by);
	if (!by) {
		gguf_errf(err, "%s: out of memory", shown);
		return -1;
	}
	size_t m = 0;
	for (size_t i = 0; i < h->n; i++)
		if (h->t[i].size)
			by[m++] = &h->t[i];
	qsort(by, m, sizeof *by, by_offset);
	int rc = 0;
	for (size_t i = 1; i < m && rc == 0; i++)
		if (by[i]->offset < by[i - 1]->offset + by[i - 1]->size) {
			gguf_errf(err, "%s: the bytes of tensors '%.64s' and '%.64s' overlap", shown,
			          by[i - 1]->name, by[i]->name);
			rc = -1;
		}
	free(by);
	return rc;
}

int st_header_parse(const uint8_t *p, uint64_t need, uint64_t file_size, const char *shown,
                    struct st_header *h, char err[GGUF_ERR_MAX])
{
	memset(h, 0, sizeof *h);
	json_error_t je;
	json_t *root = json_loadb((const char *)p + 8, need - 8, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		gguf_errf(err, "%s: the header is not JSON: %.200s (at byte %d)", shown, je.text,
		          je.position);
		return -1;
	}
	int rc = -1;
	if (!json_is_object(root)) {
		gguf_errf(err, "%s: the header is no JSON object", shown);
		goto out;
	}
	h->data_offset = need;
	h->t = calloc(json_object_size(root) + 1, sizeof *h->t);
	if (!h->t) {
		gguf_errf(err, "%s: out of memory", shown);
		goto out;
	}
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (strcmp(key, "__metadata__") == 0)
			continue;   /* free text, which the converter ignores */
		struct st_tensor *t = &h->t[h->n];
		if (!(t->name = strdup(key))) {
			gguf_errf(err, "%s: out of memory", shown);
			goto out;
		}
		h->n++;
		if (tensor_from_json(v, h->data_offset, file_size, shown, t, err) < 0)
			goto out;
	}
	qsort(h->t, h->n, sizeof *h->t, by_name);
	rc = check_overlaps(h, shown, err);
out:
	json_decref(root);
	if (rc < 0)
		st_header_free(h);
	return rc;
}

void st_header_free(struct st_header *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->t[i].name);
	free(h->t);
	memset(h, 0, sizeof *h);
}

const struct st_tensor *st_header_find(const struct st_header *h, const char *name)
{
	size_t lo = 0, hi = h->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(h->t[mid].name, name);
		if (c == 0)
			return &h->t[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}
