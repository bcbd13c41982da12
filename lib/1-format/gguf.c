#include "gguf.h"
#include "nameset.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest possible encodings, used to bound a claimed count by the bytes left before
 * anything is allocated or looped over: a key is at least a u64 length, a u32 type and a
 * one-byte value; a tensor info a u64 name length, a u32 n_dims, a u32 type, a u64 offset. */
#define KV_MIN_BYTES 13
#define TENSOR_INFO_MIN_BYTES 24

static const size_t vtype_sizes[GGUF_TYPE_COUNT] = {
	[GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1, [GGUF_TYPE_UINT16] = 2,
	[GGUF_TYPE_INT16] = 2, [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4,
	[GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1, [GGUF_TYPE_UINT64] = 8,
	[GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

static const char *const vtype_names[GGUF_TYPE_COUNT] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64",
};

size_t gguf_vtype_size(uint32_t t)
{
	return t < GGUF_TYPE_COUNT ? vtype_sizes[t] : 0;
}

const char *gguf_vtype_name(uint32_t t)
{
	return t < GGUF_TYPE_COUNT ? vtype_names[t] : NULL;
}

/* A bounded reader over the image: every take checks what remains first, and the first
 * failure records one message; later failures keep the first. */
struct cursor {
	const uint8_t *base;
	uint64_t size;     /* of the file: every check against the file uses this */
	uint64_t avail;    /* bytes of it at base (== size for a whole image) */
	uint64_t pos;
	char *err;
	bool failed;
	uint64_t need;     /* nonzero: failed only for want of the bytes below this offset */
};

static bool fail(struct cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(struct cursor *c, const char *fmt, ...)
{
	if (!c->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err, GGUF_ERR_MAX, fmt, ap);
		va_end(ap);
		c->failed = true;
	}
	return false;
}

const char *gguf_quote(const struct gguf_str *s, char buf[80])
{
	size_t n = 0;
	for (uint64_t i = 0; i < s->len && n < 64; i++) {
		unsigned char ch = (unsigned char)s->ptr[i];
		buf[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	if (s->len > 64) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = 0;
	return buf;
}

/* Called once the file is known to hold n bytes at the cursor: false, as a failure
 * that asks for the file's first pos + n bytes, when the prefix at hand holds fewer. */
static bool have(struct cursor *c, uint64_t n)
{
	if (n <= c->avail - c->pos)
		return true;
	if (!c->failed) {
		c->failed = true;
		c->need = c->pos + n;
		snprintf(c->err, GGUF_ERR_MAX, "the header continues past byte %" PRIu64, c->avail);
	}
	return false;
}

static bool take(struct cursor *c, uint64_t n, const char *what, const uint8_t **out)
{
	if (c->failed)
		return false;
	if (n > c->size - c->pos)
		return fail(c, "truncated: %s needs %" PRIu64 " bytes at byte %" PRIu64
		            ", but the file is %" PRIu64 " bytes", what, n, c->pos, c->size);
	if (!have(c, n))
		return false;
	*out = c->base + c->pos;
	c->pos += n;
	return true;
}

static bool take_u32(struct cursor *c, const char *what, uint32_t *v)
{
	const uint8_t *p = NULL;
	if (!take(c, 4, what, &p))
		return false;
	*v = gguf_le32(p);
	return true;
}

static bool take_u64(struct cursor *c, const char *what, uint64_t *v)
{
	const uint8_t *p = NULL;
	if (!take(c, 8, what, &p))
		return false;
	*v = gguf_le64(p);
	return true;
}

static bool take_str(struct cursor *c, const char *what, struct gguf_str *s)
{
	const uint8_t *p = NULL;
	if (!take_u64(c, what, &s->len))
		return false;
	if (s->len > c->size - c->pos)
		return fail(c, "%s claims %" PRIu64 " bytes at byte %" PRIu64
		            ", past the end of the file (%" PRIu64 " bytes)", what, s->len,
		            c->pos, c->size);
	if (!take(c, s->len, what, &p))   /* only for want of bytes in a prefix */
		return false;
	s->ptr = (const char *)p;
	return true;
}

/* Validates an array payload of count elements of elem_type at the cursor, nested
 * arrays down to depth, and moves past it. */
static bool skip_array(struct cursor *c, uint32_t elem_type, uint64_t count, int depth,
                       const char *what)
{
	if (elem_type >= GGUF_TYPE_COUNT)
		return fail(c, "%s is an array of unknown value type %" PRIu32, what, elem_type);
	size_t esize = vtype_sizes[elem_type];
	if (esize) {
		if (count > (c->size - c->pos) / esize)
			return fail(c, "%s claims %" PRIu64 " elements of %zu bytes at byte %" PRIu64
			            ", past the end of the file (%" PRIu64 " bytes)", what, count,
			            esize, c->pos, c->size);
		if (!have(c, count * esize))
			return false;
		c->pos += count * esize;
		return true;
	}
	/* strings and arrays take at least 8 bytes each: bound the loop by that */
	uint64_t min = elem_type == GGUF_TYPE_STRING ? 8 : 12;
	if (count > (c->size - c->pos) / min)
		return fail(c, "%s claims %" PRIu64 " elements at byte %" PRIu64
		            ", more than the file (%" PRIu64 " bytes) can hold", what, count,
		            c->pos, c->size);
	if (!have(c, count * min))   /* asks for them all at once, not string by string */
		return false;
	if (elem_type == GGUF_TYPE_ARRAY && depth >= GGUF_MAX_ARRAY_DEPTH)
		return fail(c, "%s nests arrays deeper than %d levels", what, GGUF_MAX_ARRAY_DEPTH);
	for (uint64_t i = 0; i < count && !c->failed; i++) {
		if (elem_type == GGUF_TYPE_STRING) {
			struct gguf_str s;
			take_str(c, what, &s);
		} else {
			uint32_t inner;
			uint64_t n;
			if (take_u32(c, what, &inner) && take_u64(c, what, &n))
				skip_array(c, inner, n, depth + 1, what);
		}
	}
	return !c->failed;
}

/* Reads one value of type at the cursor into v, bounded by the image (what names it in
 * an error): true, or false with the cursor failed and why in its error line. */
static bool read_value(struct cursor *c, uint32_t type, struct gguf_value *v, const char *what)
{
	v->type = type;
	if (type >= GGUF_TYPE_COUNT)
		return fail(c, "%s has unknown value type %" PRIu32, what, type);
	uint64_t start = c->pos;
	if (type == GGUF_TYPE_ARRAY) {
		if (!take_u32(c, what, &v->elem_type) || !take_u64(c, what, &v->count))
			return false;
		start = c->pos;
		if (!skip_array(c, v->elem_type, v->count, 1, what))
			return false;
	} else if (type == GGUF_TYPE_STRING) {
		struct gguf_str s;
		if (!take_str(c, what, &s))
			return false;
	} else {
		const uint8_t *p;
		if (!take(c, vtype_sizes[type], what, &p))
			return false;
	}
	v->data = c->base + start;
	v->size = c->pos - start;
	return true;
}

static bool parse_kvs(struct cursor *c, struct gguf_file *f)
{
	struct nameset seen;
	char q[80], what[128];
	if (!nameset_init(&seen, f->n_kv))
		return fail(c, "out of memory for %" PRIu64 " metadata keys", f->n_kv);
	for (uint64_t i = 0; i < f->n_kv && !c->failed; i++) {
		struct gguf_kv *kv = &f->kv[i];
		uint32_t type;
		snprintf(what, sizeof what, "the key of metadata entry %" PRIu64, i);
		if (!take_str(c, what, &kv->key))
			break;
		snprintf(what, sizeof what, "metadata key '%s'", gguf_quote(&kv->key, q));
		if (!nameset_add(&seen, &kv->key)) {
			fail(c, "duplicate %s", what);
			break;
		}
		if (take_u32(c, what, &type))
			read_value(c, type, &kv->value, what);
	}
	nameset_free(&seen);
	return !c->failed;
}

static bool parse_alignment(struct cursor *c, struct gguf_file *f)
{
	f->alignment = GGUF_DEFAULT_ALIGNMENT;
	const struct gguf_kv *kv = gguf_find_kv(f, "general.alignment");
	if (!kv)
		return true;
	if (kv->value.type != GGUF_TYPE_UINT32)
		return fail(c, "general.alignment has type %s, not uint32",
		            gguf_vtype_name(kv->value.type));
	uint32_t a = gguf_le32(kv->value.data);
	if (a == 0 || (a & (a - 1)))
		return fail(c, "general.alignment is %" PRIu32 ", not a power of two", a);
	f->alignment = a;
	return true;
}

static bool parse_tensor_info(struct cursor *c, struct gguf_tensor *t, uint64_t i)
{
	char q[80], what[128];
	snprintf(what, sizeof what, "the name of tensor %" PRIu64, i);
	if (!take_str(c, what, &t->name))
		return false;
	snprintf(what, sizeof what, "tensor '%s'", gguf_quote(&t->name, q));
	if (!take_u32(c, what, &t->n_dims))
		return false;
	if (t->n_dims > GGUF_MAX_DIMS)
		return fail(c, "%s has %" PRIu32 " dimensions (at most %d)", what, t->n_dims,
		            GGUF_MAX_DIMS);
	t->n_elements = 1;
	bool overflow = false;
	for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		if (!take_u64(c, what, &t->ne[d]))
			return false;
		if (t->ne[d] > INT64_MAX)
			return fail(c, "%s has dimension %" PRIu32 " of %" PRIu64 " (at most 2^63-1)",
			            what, d, t->ne[d]);
		overflow |= __builtin_mul_overflow(t->n_elements, t->ne[d], &t->n_elements);
	}
	if (overflow || t->n_elements > INT64_MAX)
		return fail(c, "%s has dimensions %" PRIu64 "x%" PRIu64 "x%" PRIu64 "x%" PRIu64
		            " whose product overflows 64 bits", what, t->ne[0], t->ne[1], t->ne[2],
		            t->ne[3]);
	if (!take_u32(c, what, &t->type) || !take_u64(c, what, &t->offset))
		return false;
	return true;
}

/* Sizes a tensor of a known layout; unknown ones are sized later from their neighbours. */
static bool size_tensor(struct cursor *c, const struct gguf_file *f, struct gguf_tensor *t)
{
	char q[80];
	const struct ggml_type *ti = ggml_type_get(t->type);
	t->ti = ti;
	t->has_f32 = ti && ti->block_elems;   /* the dequantizer decodes every known layout */
	if (t->offset % f->alignment)
		return fail(c, "tensor '%s' has offset %" PRIu64 ", not a multiple of the alignment %"
		            PRIu64, gguf_quote(&t->name, q), t->offset, f->alignment);
	/* into a temporary: on overflow the message must show the offset as stored */
	uint64_t abs;
	if (__builtin_add_overflow(t->offset, f->data_offset, &abs))
		return fail(c, "tensor '%s' has offset %" PRIu64 ", past the end of the file (%"
		            PRIu64 " bytes)", gguf_quote(&t->name, q), t->offset, c->size);
	t->offset = abs;
	if (!ti || !ti->block_elems)
		return true;
	if (t->ne[0] % ti->block_elems)
		return fail(c, "tensor '%s' has %" PRIu64 " columns, not a multiple of the %s block"
		            " size %" PRIu32, gguf_quote(&t->name, q), t->ne[0], ti->name, ti->block_elems);
	/* n_elements <= 2^63 and block_bytes is small, but a lying file can still overflow */
	if (__builtin_mul_overflow(t->n_elements / ti->block_elems, (uint64_t)ti->block_bytes,
	                           &t->size))
		return fail(c, "tensor '%s' of %" PRIu64 " elements of type %s would take more than"
		            " 2^64 bytes", gguf_quote(&t->name, q), t->n_elements, ti->name);
	if (t->offset > c->size || t->size > c->size - t->offset)
		return fail(c, "tensor '%s' ends at byte %" PRIu64 "%s, past the end of the file (%"
		            PRIu64 " bytes)", gguf_quote(&t->name, q),
		            t->offset + (t->size > UINT64_MAX - t->offset ? 0 : t->size),
		            t->size > UINT64_MAX - t->offset ? " (overflowing)" : "", c->size);
	return true;
}

static int by_offset(const void *a, const void *b, void *tensors)
{
	const struct gguf_tensor *x = (const struct gguf_tensor *)tensors + *(const uint64_t *)a;
	const struct gguf_tensor *y = (const struct gguf_tensor *)tensors + *(const uint64_t *)b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	/* at one offset, the sized ones first, so an unknown one gets what follows them */
	bool xs = x->ti && x->ti->block_elems, ys = y->ti && y->ti->block_elems;
	if (xs != ys)
		return xs ? -1 : 1;
	/* and the empty ones before the others, so that file order cannot make an empty
	 * tensor sharing another's offset look like an overlap */
	if (xs && x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return *(const uint64_t *)a < *(const uint64_t *)b ? -1 : 1;
}

/* In offset order: sizes the tensors of unknown layout up to their successor and
 * rejects any two that overlap. */
static bool place_tensors(struct cursor *c, struct gguf_file *f)
{
	char q1[80], q2[80];
	uint64_t *order = malloc(f->n_tensors * sizeof *order);
	if (!order)
		return fail(c, "out of memory for %" PRIu64 " tensors", f->n_tensors);
	for (uint64_t i = 0; i < f->n_tensors; i++)
		order[i] = i;
	qsort_r(order, f->n_tensors, sizeof *order, by_offset, f->tensors);
	for (uint64_t k = 0; k < f->n_tensors && !c->failed; k++) {
		struct gguf_tensor *t = &f->tensors[order[k]];
		uint64_t next = k + 1 < f->n_tensors ? f->tensors[order[k + 1]].offset : c->size;
		if (t->offset > c->size) {
			fail(c, "tensor '%s' starts at byte %" PRIu64 ", past the end of the file (%"
			     PRIu64 " bytes)", gguf_quote(&t->name, q1), t->offset, c->size);
			break;
		}
		if (!t->ti || !t->ti->block_elems) {
			t->size = (next < c->size ? next : c->size) - t->offset;
			f->n_unknown++;
		} else if (k + 1 < f->n_tensors && t->size > next - t->offset) {
			const struct gguf_tensor *u = &f->tensors[order[k + 1]];
			fail(c, "tensors '%s' (bytes %" PRIu64 "..%" PRIu64 ") and '%s' (from byte %"
			     PRIu64 ") overlap", gguf_quote(&t->name, q1), t->offset, t->offset + t->size,
			     gguf_quote(&u->name, q2), u->offset);
		}
	}
	free(order);
	return !c->failed;
}

int gguf_parse(const uint8_t *data, uint64_t size, struct gguf_file *f, char err[GGUF_ERR_MAX])
{
	uint64_t need;
	/* a whole image never needs more: 1 cannot happen */
	return gguf_parse_prefix(data, size, size, f, err, &need) == 0 ? 0 : -1;
}

/* The fixed start of the header: magic, version and the two counts, each count bounded
 * by what the file's size can hold. False with the cursor failed. */
static bool parse_preamble(struct cursor *c, struct gguf_file *f)
{
	const uint8_t *data = c->base, *magic;
	uint64_t size = c->size;
	if (size < 4 || memcmp(data, GGUF_MAGIC, 4) != 0) {
		if (size < 4)
			return fail(c, "not a GGUF file: only %" PRIu64 " bytes", size);
		return fail(c, "not a GGUF file: it starts with bytes %02x %02x %02x %02x, not 'GGUF'",
		            data[0], data[1], data[2], data[3]);
	}
	take(c, 4, "the magic", &magic);
	if (!take_u32(c, "the version", &f->version))
		return false;
	if (f->version == 1)
		return fail(c, "GGUF version 1 is not supported (only versions 2 and 3)");
	if (f->version != 2 && f->version != 3) {
		if ((f->version & 0xffff) == 0 && f->version >> 16)
			return fail(c, "big-endian GGUF files are not supported");
		return fail(c, "unsupported GGUF version %" PRIu32 " (only 2 and 3)", f->version);
	}
	if (!take_u64(c, "the tensor count", &f->n_tensors) ||
	    !take_u64(c, "the metadata key count", &f->n_kv))
		return false;
	if (f->n_kv > (size - c->pos) / KV_MIN_BYTES)
		return fail(c, "the header claims %" PRIu64 " metadata keys, more than the file (%"
		            PRIu64 " bytes) can hold", f->n_kv, size);
	if (f->n_tensors > (size - c->pos) / TENSOR_INFO_MIN_BYTES)
		return fail(c, "the header claims %" PRIu64 " tensors, more than the file (%" PRIu64
		            " bytes) can hold", f->n_tensors, size);
	return true;
}

/* The tensor infos, in file order, each name once. False with the cursor failed. */
static bool parse_tensor_infos(struct cursor *c, struct gguf_file *f)
{
	char q[80];
	struct nameset seen;
	if (!nameset_init(&seen, f->n_tensors))
		return fail(c, "out of memory for %" PRIu64 " tensors", f->n_tensors);
	for (uint64_t i = 0; i < f->n_tensors && !c->failed; i++) {
		if (parse_tensor_info(c, &f->tensors[i], i) &&
		    !nameset_add(&seen, &f->tensors[i].name))
			fail(c, "duplicate tensor name '%s'", gguf_quote(&f->tensors[i].name, q));
	}
	nameset_free(&seen);
	return !c->failed;
}

/* Where the data section starts: the header's end, rounded up to the alignment. A file
 * without tensors may end before it (the section is then empty, at the end). False with
 * the cursor failed. */
static bool place_data(struct cursor *c, struct gguf_file *f)
{
	uint64_t header_end = c->pos, size = c->size;
	f->data_offset = header_end;
	if (header_end % f->alignment)
		f->data_offset = header_end - header_end % f->alignment + f->alignment;
	if (f->data_offset > size || f->data_offset < header_end) {
		if (f->n_tensors)
			return fail(c, "the data section starts at byte %" PRIu64 " (alignment %" PRIu64
			            "), past the end of the file (%" PRIu64 " bytes)",
			            f->data_offset < header_end ? UINT64_MAX : f->data_offset,
			            f->alignment, size);
		f->data_offset = size;
	}
	return true;
}

int gguf_parse_prefix(const uint8_t *data, uint64_t avail, uint64_t size, struct gguf_file *f,
                      char err[GGUF_ERR_MAX], uint64_t *need)
{
	struct cursor c = { .base = data, .size = size, .avail = avail < size ? avail : size,
	                    .err = err };

	memset(f, 0, sizeof *f);
	err[0] = 0;
	*need = 0;
	if (c.avail < 4 && size >= 4) {
		*need = 4;
		return 1;
	}
	if (!parse_preamble(&c, f))
		goto fail;
	/* what the claimed counts take at the least, in hand before anything is allocated
	 * for them: memory follows the bytes fetched, not a claim (no product overflows:
	 * both counts were bounded by the size above; a sum past the file is left to the
	 * parse below, which reports it exactly as for a whole image) */
	uint64_t least = f->n_kv * KV_MIN_BYTES + f->n_tensors * TENSOR_INFO_MIN_BYTES;
	if (least <= size - c.pos && !have(&c, least))
		goto fail;
	f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
	f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
	if (!f->kv || !f->tensors) {
		fail(&c, "out of memory for the header");
		goto fail;
	}
	if (!parse_kvs(&c, f) || !parse_alignment(&c, f) || !parse_tensor_infos(&c, f) ||
	    !place_data(&c, f))
		goto fail;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (!size_tensor(&c, f, &f->tensors[i]))
			goto fail;
	if (!place_tensors(&c, f))
		goto fail;
	return 0;
fail:
	gguf_file_free(f);
	if (c.need) {
		*need = c.need;
		return 1;
	}
	return -1;
}

void gguf_file_free(struct gguf_file *f)
{
	free(f->kv);
	free(f->tensors);
	f->kv = NULL;
	f->tensors = NULL;
	f->n_kv = f->n_tensors = 0;
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
	size_t n = strlen(key);
	for (uint64_t i = 0; i < f->n_kv; i++)
		if (f->kv[i].key.len == n && memcmp(f->kv[i].key.ptr, key, n) == 0)
			return &f->kv[i];
	return NULL;
}

bool gguf_kv_uint(const struct gguf_kv *kv, uint64_t *out)
{
	if (!kv)
		return false;
	const uint8_t *p = kv->value.data;
	switch (kv->value.type) {
	case GGUF_TYPE_UINT8: *out = p[0]; return true;
	case GGUF_TYPE_UINT16: *out = gguf_le16(p); return true;
	case GGUF_TYPE_UINT32: *out = gguf_le32(p); return true;
	case GGUF_TYPE_UINT64: *out = gguf_le64(p); return true;
	case GGUF_TYPE_INT8: *out = (uint64_t)(int8_t)p[0]; return (int8_t)p[0] >= 0;
	case GGUF_TYPE_INT16: *out = (uint64_t)(int16_t)gguf_le16(p); return (int16_t)gguf_le16(p) >= 0;
	case GGUF_TYPE_INT32: *out = (uint64_t)(int32_t)gguf_le32(p); return (int32_t)gguf_le32(p) >= 0;
	case GGUF_TYPE_INT64: *out = gguf_le64(p); return (int64_t)*out >= 0;
	default: return false;
	}
}

/* Walks elements first .. count - 1 of elem_type at *p (*p at element first); the
 * value was validated, so the only bound needed is the recursion depth that validation
 * already capped. top: these are the elements of the value itself, announced to
 * w->element. */
static bool walk_elems(const uint8_t **p, uint32_t elem_type, uint64_t first, uint64_t count,
                       bool top, const struct gguf_walk *w)
{
	size_t esize = vtype_sizes[elem_type];
	for (uint64_t i = first; i < count; i++) {
		if (top && w->element && !w->element(w->ctx, i, *p))
			return false;
		if (esize) {
			if (w->scalar && !w->scalar(w->ctx, elem_type, *p))
				return false;
			*p += esize;
		} else if (elem_type == GGUF_TYPE_STRING) {
			uint64_t len = gguf_le64(*p);
			if (w->string && !w->string(w->ctx, (const char *)*p + 8, len))
				return false;
			*p += 8 + len;
		} else {
			uint32_t inner = gguf_le32(*p);
			uint64_t n = gguf_le64(*p + 4);
			*p += 12;
			if (w->array_begin && !w->array_begin(w->ctx, inner, n))
				return false;
			if (!walk_elems(p, inner, 0, n, false, w))
				return false;
			if (w->array_end && !w->array_end(w->ctx))
				return false;
		}
	}
	return true;
}

bool gguf_value_walk(const struct gguf_value *v, const struct gguf_walk *w)
{
	const uint8_t *p = v->data;
	if (v->type == GGUF_TYPE_ARRAY)
		return walk_elems(&p, v->elem_type, 0, v->count, true, w);
	return walk_elems(&p, v->type, 0, 1, false, w);
}

bool gguf_value_walk_from(const struct gguf_value *v, const struct gguf_walk *w,
                          uint64_t elem, uint64_t byte)
{
	if (v->type != GGUF_TYPE_ARRAY || elem > v->count || byte > v->size)
		return false;
	const uint8_t *p = v->data + byte;
	return walk_elems(&p, v->elem_type, elem, v->count, true, w);
}
