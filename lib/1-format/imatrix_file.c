/* An importance matrix file as llama-quantize reads it (imatrix_file.h). */
#include "imatrix_file.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUFFIX_SUMS ".in_sum2"
#define SUFFIX_COUNTS ".counts"
#define LEGACY_ENTRY_MIN 16u   /* len, ncall, nval and one value: an entry's least bytes */

/* A float32 of the image, little-endian, from an unaligned pointer. */
static float le_float(const uint8_t *p)
{
	uint32_t u = gguf_le32(p);
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* s cut at its first NUL, as a C string of it reads it. */
static struct gguf_str cut_at_nul(struct gguf_str s)
{
	const char *nul = memchr(s.ptr, 0, s.len);
	if (nul)
		s.len = (uint64_t)(nul - s.ptr);
	return s;
}

static int name_cmp(const struct gguf_str *a, const struct gguf_str *b)
{
	uint64_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->ptr, b->ptr, n) : 0;
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

/* An entry (or, for GGUF, one of its two tensors) while they are collected, ordered by
 * name, then by its place in the file, so that the last of equal names may be kept. */
struct ranked {
	struct imatrix_entry e;
	uint64_t at;          /* its place in the file (entry or tensor index) */
	bool is_sums;         /* GGUF: W.in_sum2 rather than W.counts */
};

static int ranked_cmp(const void *pa, const void *pb)
{
	const struct ranked *a = pa, *b = pb;
	int c = name_cmp(&a->e.name, &b->e.name);
	if (c)
		return c;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* Sorts r[0..n) by name and keeps each name's last entry, into im->entries; frees r.
 * False when out of memory. */
static bool keep_last_of_each(struct imatrix *im, struct ranked *r, uint64_t n)
{
	qsort(r, n, sizeof *r, ranked_cmp);
	im->entries = calloc(n ? (size_t)n : 1, sizeof *im->entries);
	if (im->entries)
		for (uint64_t i = 0; i < n; i++)
			if (i + 1 == n || name_cmp(&r[i].e.name, &r[i + 1].e.name) != 0)
				im->entries[im->n_entries++] = r[i].e;
	free(r);
	return im->entries != NULL;
}

/* A bounded cursor over the legacy image: every take checks what remains. */
struct legacy_cursor {
	const uint8_t *p;
	uint64_t left;
};

static bool take_i32(struct legacy_cursor *c, int32_t *v)
{
	if (c->left < 4)
		return false;
	*v = (int32_t)gguf_le32(c->p);
	c->p += 4;
	c->left -= 4;
	return true;
}

static bool take_bytes(struct legacy_cursor *c, uint64_t n, const uint8_t **at)
{
	if (c->left < n)
		return false;
	*at = c->p;
	c->p += n;
	c->left -= n;
	return true;
}

/* The optional tail after the entries: the chunk count (llama.cpp keeps the bytes it
 * could read of it when fewer than 4 remain) and the dataset's name. */
static void legacy_tail(struct imatrix *im, struct legacy_cursor *c)
{
	if (c->left == 0)
		return;
	if (c->left < 4) {
		uint32_t v = 0;
		for (uint64_t i = 0; i < c->left; i++)
			v |= (uint32_t)c->p[i] << (8 * i);
		im->chunk_count = (int32_t)v;
		return;
	}
	take_i32(c, &im->chunk_count);
	int32_t len;
	const uint8_t *at;
	if (!take_i32(c, &len) || len <= 0 || !take_bytes(c, (uint64_t)len, &at))
		return;
	im->has_dataset = true;
	im->dataset = cut_at_nul((struct gguf_str){ (const char *)at, (uint64_t)len });
}

static int parse_legacy(const uint8_t *data, uint64_t size, struct imatrix *im,
                        char err[GGUF_ERR_MAX])
{
	struct legacy_cursor c = { data, size };
	int32_t n;
	if (!take_i32(&c, &n) || n < 1) {
		gguf_errf(err, "not an importance matrix: no entries (neither GGUF nor llama.cpp's "
		          "legacy .dat)");
		return -1;
	}
	if ((uint64_t)n > c.left / LEGACY_ENTRY_MIN) {
		gguf_errf(err, "the importance matrix claims %d entries, more than its %llu bytes "
		          "can hold", n, (unsigned long long)size);
		return -1;
	}
	struct ranked *r = calloc((size_t)n, sizeof *r);
	if (!r) {
		gguf_errf(err, "out of memory for %d importance matrix entries", n);
		return -1;
	}
	for (int32_t i = 0; i < n; i++) {
		int32_t len, ncall, nval;
		const uint8_t *name, *sums;
		if (!take_i32(&c, &len) || len < 0 || !take_bytes(&c, (uint64_t)len, &name)) {
			gguf_errf(err, "importance matrix entry %d: its name is cut short or has a "
			          "negative length", i + 1);
			goto fail;
		}
		if (!take_i32(&c, &ncall) || !take_i32(&c, &nval) || nval < 1) {
			gguf_errf(err, "importance matrix entry %d: no number of values", i + 1);
			goto fail;
		}
		if (!take_bytes(&c, (uint64_t)nval * 4, &sums)) {
			gguf_errf(err, "importance matrix entry %d: %d values, the file ends before "
			          "them", i + 1, nval);
			goto fail;
		}
		r[i].at = (uint64_t)i;
		r[i].e = (struct imatrix_entry){
			.name = cut_at_nul((struct gguf_str){ (const char *)name, (uint64_t)len }),
			.sums = sums, .n_values = (uint64_t)nval, .ncall = ncall,
		};
	}
	legacy_tail(im, &c);
	im->legacy = true;
	if (!keep_last_of_each(im, r, (uint64_t)n)) {
		gguf_errf(err, "out of memory for %d importance matrix entries", n);
		return -1;
	}
	return 0;
fail:
	free(r);
	return -1;
}

/* A u32 key as llama.cpp reads it (gguf_get_val_u32 asserts the type): its value in
 * *v, 0 when absent; false (refused) when of another type. */
static bool u32_key(const struct gguf_file *f, const char *key, uint32_t *v,
                    char err[GGUF_ERR_MAX])
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);
	*v = 0;
	if (!kv)
		return true;
	if (kv->value.type != GGUF_TYPE_UINT32) {
		const char *t = gguf_vtype_name(kv->value.type);
		gguf_errf(err, "the importance matrix's %s is %s, not uint32", key, t ? t : "?");
		return false;
	}
	*v = gguf_le32(kv->value.data);
	return true;
}

/* The first string of the datasets array, when the key is an array of strings. */
static void first_dataset(struct imatrix *im)
{
	const struct gguf_kv *kv = gguf_find_kv(&im->gf, "imatrix.datasets");
	if (!kv || kv->value.type != GGUF_TYPE_ARRAY ||
	    kv->value.elem_type != GGUF_TYPE_STRING || kv->value.count == 0)
		return;
	/* a validated array of strings: the first is a u64 length and its bytes */
	im->has_dataset = true;
	im->dataset = cut_at_nul((struct gguf_str){ (const char *)kv->value.data + 8,
	                                            gguf_le64(kv->value.data) });
}

/* Whether name ends with suffix: its length without it in *base. */
static bool ends_with(struct gguf_str name, const char *suffix, uint64_t *base)
{
	uint64_t n = strlen(suffix);
	if (name.len < n || memcmp(name.ptr + name.len - n, suffix, n) != 0)
		return false;
	*base = name.len - n;
	return true;
}

/* The GGUF form: each W.in_sum2 paired with its W.counts, both F32, by name. */
static int gguf_entries(struct imatrix *im, const uint8_t *data, char err[GGUF_ERR_MAX])
{
	const struct gguf_file *f = &im->gf;
	struct ranked *r = calloc((size_t)f->n_tensors, sizeof *r);
	if (!r) {
		gguf_errf(err, "out of memory for %llu importance matrix tensors",
		          (unsigned long long)f->n_tensors);
		return -1;
	}
	/* each tensor of either suffix, as (base name, which): sorted by name, then position,
	 * so each base's sums and counts sit together, the last of each kind wins */
	uint64_t n = 0;
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		struct gguf_str name = cut_at_nul(f->tensors[i].name);
		uint64_t base;
		bool sums = ends_with(name, SUFFIX_SUMS, &base);
		if (!sums && !ends_with(name, SUFFIX_COUNTS, &base))
			continue;
		r[n].e.name = (struct gguf_str){ name.ptr, base };
		r[n].is_sums = sums;
		r[n].at = i;
		n++;
	}
	qsort(r, n, sizeof *r, ranked_cmp);
	im->entries = calloc(n ? (size_t)n : 1, sizeof *im->entries);
	if (!im->entries) {
		gguf_errf(err, "out of memory for %llu importance matrix tensors",
		          (unsigned long long)n);
		goto fail;
	}
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i;
		const struct gguf_tensor *s = NULL, *c = NULL;
		for (; j < n && name_cmp(&r[j].e.name, &r[i].e.name) == 0; j++) {
			if (r[j].is_sums)
				s = &f->tensors[r[j].at];
			else
				c = &f->tensors[r[j].at];
		}
		char q[80];
		if (!s || !c) {
			gguf_errf(err, "the importance matrix has %s but not %s for %s",
			          s ? "sums" : "counts", s ? "counts" : "sums", gguf_quote(&r[i].e.name, q));
			goto fail;
		}
		if (s->type != GGML_TYPE_F32 || c->type != GGML_TYPE_F32) {
			gguf_errf(err, "the importance matrix's sums and counts for %s must be F32",
			          gguf_quote(&r[i].e.name, q));
			goto fail;
		}
		if (c->n_elements == 0) {
			gguf_errf(err, "the importance matrix's counts for %s hold no values",
			          gguf_quote(&r[i].e.name, q));
			goto fail;
		}
		/* F32: the parser checked n_elements * 4 bytes at the offset within the image */
		im->entries[im->n_entries++] = (struct imatrix_entry){
			.name = r[i].e.name, .sums = data + s->offset, .n_values = s->n_elements,
			.counts = data + c->offset, .n_counts = c->n_elements,
		};
		i = j;
	}
	free(r);
	return 0;
fail:
	free(r);
	return -1;   /* im->entries: imatrix_free's */
}

static int parse_gguf(const uint8_t *data, uint64_t size, struct imatrix *im,
                      char err[GGUF_ERR_MAX])
{
	if (gguf_parse(data, size, &im->gf, err) != 0)
		return -1;
	if (im->gf.n_tensors < 1) {
		gguf_errf(err, "the importance matrix holds no tensors");
		return -1;
	}
	uint32_t chunks, chunk_size;
	if (!u32_key(&im->gf, "imatrix.chunk_count", &chunks, err) ||
	    !u32_key(&im->gf, "imatrix.chunk_size", &chunk_size, err))
		return -1;
	if (!gguf_find_kv(&im->gf, "imatrix.datasets") ||
	    !gguf_find_kv(&im->gf, "imatrix.chunk_count") ||
	    !gguf_find_kv(&im->gf, "imatrix.chunk_size")) {
		gguf_errf(err, "the importance matrix lacks its metadata (imatrix.datasets, "
		          "imatrix.chunk_count and imatrix.chunk_size)");
		return -1;
	}
	im->chunk_count = (int32_t)chunks;
	first_dataset(im);
	return gguf_entries(im, data, err);
}

int imatrix_parse(const uint8_t *data, uint64_t size, struct imatrix *out,
                  char err[GGUF_ERR_MAX])
{
	memset(out, 0, sizeof *out);
	int r = size >= 4 && memcmp(data, GGUF_MAGIC, 4) == 0 ? parse_gguf(data, size, out, err)
	                                                       : parse_legacy(data, size, out, err);
	if (r != 0) {
		imatrix_free(out);
		return r;
	}
	out->all_finite = true;
	for (uint64_t i = 0; i < out->n_entries && out->all_finite; i++)
		out->all_finite = imatrix_entry_finite(out, &out->entries[i], &out->first_non_finite);
	return 0;
}

void imatrix_free(struct imatrix *im)
{
	free(im->entries);
	if (!im->legacy)
		gguf_file_free(&im->gf);
	memset(im, 0, sizeof *im);
}

const struct imatrix_entry *imatrix_find(const struct imatrix *im, const char *name,
                                         uint64_t len)
{
	struct gguf_str key = { name, len };
	uint64_t lo = 0, hi = im->n_entries;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		int c = name_cmp(&im->entries[mid].name, &key);
		if (c == 0)
			return &im->entries[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* A GGUF count as llama.cpp turns it into a divisor: rounded to the nearest integer,
 * halves away from zero (std::lround), then a float; a NaN or a count past the range
 * of a long becomes LONG_MIN there (x86-64), so not positive. */
static float divisor_of(float count)
{
	if (!(count > -0x1p63f && count < 0x1p63f))
		return (float)LONG_MIN;
	return (float)lroundf(count);
}

/* Weight i of e (i < n_values). */
static float weight(const struct imatrix *im, const struct imatrix_entry *e, uint64_t i)
{
	float s = le_float(e->sums + 4 * i);
	if (im->legacy)
		return e->ncall > 0 ? s / (float)(int64_t)e->ncall : s;
	uint64_t ne0 = e->n_values / e->n_counts;
	if (ne0 == 0 || i >= ne0 * e->n_counts)
		return 0.0f;
	float c = divisor_of(le_float(e->counts + 4 * (i / ne0)));
	return c > 0.0f ? s / c : 1.0f;
}

void imatrix_values(const struct imatrix *im, const struct imatrix_entry *e, float *out)
{
	imatrix_values_range(im, e, 0, e->n_values, out);
}

void imatrix_values_range(const struct imatrix *im, const struct imatrix_entry *e,
                          uint64_t first, uint64_t n, float *out)
{
	for (uint64_t i = 0; i < n; i++)
		out[i] = weight(im, e, first + i);
}

bool imatrix_entry_finite(const struct imatrix *im, const struct imatrix_entry *e,
                          float *bad)
{
	for (uint64_t i = 0; i < e->n_values; i++) {
		float w = weight(im, e, i);
		if (!isfinite(w)) {
			*bad = w;
			return false;
		}
	}
	return true;
}
