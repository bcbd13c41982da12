/* The converted tensors and their bytes on demand (st_plan.h). */
#include "st_plan.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "quant.h"
#include "st_permute.h"
#include "types.h"

/* Whether s ends with suffix. */
static bool ends_with(const char *s, const char *suffix)
{
	const size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The converter's block id of a checkpoint name: its first dot-separated part that is
 * all decimal digits, or UINT64_MAX (also for one too large). */
static uint64_t block_id(const char *name)
{
	for (const char *p = name; *p;) {
		const char *end = strchr(p, '.');
		const size_t n = end ? (size_t)(end - p) : strlen(p);
		bool digits = n > 0 && n < 20;
		for (size_t i = 0; i < n && digits; i++)
			digits = p[i] >= '0' && p[i] <= '9';
		if (digits)
			return strtoull(p, NULL, 10);
		if (!end)
			break;
		p = end + 1;
	}
	return UINT64_MAX;
}

/* The GGML type the converter stores GGUF tensor name (of n_dims dimensions, from
 * checkpoint block bid) as, for ftype. */
static uint32_t out_type(const struct st_config *c, const char *name, uint32_t n_dims,
                         uint64_t bid, enum st_ftype ftype)
{
	if (n_dims <= 1 || ends_with(name, "_norm.weight"))
		return GGML_TYPE_F32;
	if (st_names_always_f32(c->names, name, bid) ||
	    !(ends_with(name, ".weight") || ends_with(name, ".lora_a") ||
	      ends_with(name, ".lora_b")))
		return GGML_TYPE_F32;
	return ftype == ST_FTYPE_F16 ? GGML_TYPE_F16 :
	       ftype == ST_FTYPE_BF16 ? GGML_TYPE_BF16 :
	       ftype == ST_FTYPE_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_F32;
}

/* One checkpoint tensor t of shard into the plan's next entry: 1, 0 when the converter
 * drops it, -1 with err. */
static int plan_one(const struct st_config *c, const struct st_tensor *t, uint32_t shard,
                    enum st_ftype ftype, struct st_out *o, char err[GGUF_ERR_MAX])
{
	static const char *const dropped[] = { ".attention.masked_bias", ".attention.bias",
	                                       ".rotary_emb.inv_freq" };
	for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
		if (ends_with(t->name, dropped[i]))
			return 0;
	char name[GGUF_ERR_MAX];
	if (!st_names_map(c->names, t->name, strlen(t->name), c->block_count, name,
	                  sizeof name)) {
		gguf_errf(err, "tensor '%.96s' is not one the converter maps (architecture %s)",
		          t->name, c->hf_arch);
		return -1;
	}
	if (t->n_dims == 0) {
		gguf_errf(err, "tensor '%.96s' is a scalar, which ggufs does not convert",
		          t->name);
		return -1;
	}
	memset(o, 0, sizeof *o);
	if (!(o->name = strdup(name))) {
		gguf_errf(err, "out of memory");
		return -1;
	}
	o->n_dims = t->n_dims;
	for (uint32_t i = 0; i < t->n_dims; i++)
		o->ne[i] = t->shape[t->n_dims - 1 - i];
	o->type = out_type(c, name, t->n_dims, block_id(t->name), ftype);
	/* gguf-py quantizes rows of a multiple of the block only; else F16 (its QuantError
	 * fallback) */
	if (o->type == GGML_TYPE_Q8_0 && t->shape[t->n_dims - 1] % ST_Q8_BLOCK != 0)
		o->type = GGML_TYPE_F16;
	o->size = o->type == GGML_TYPE_Q8_0 ? t->n_elements / ST_Q8_BLOCK * ST_Q8_BYTES :
	          t->n_elements * (o->type == GGML_TYPE_F32 ? 4 : 2);
	o->shard = shard;
	o->src = t;
	o->rows = t->shape[0] ? t->shape[0] : 1;
	o->row_len = t->shape[0] ? t->n_elements / t->shape[0] : 0;
	const bool q = ends_with(t->name, "q_proj.weight") || ends_with(t->name, "q_proj.bias");
	const bool k = ends_with(t->name, "k_proj.weight") || ends_with(t->name, "k_proj.bias");
	if (q || k) {
		o->permute_heads = st_permute_heads(k, c->n_head, c->n_head_kv);
		if (!st_permute_fits(o->rows, o->permute_heads)) {
			gguf_errf(err, "tensor '%.96s' has %llu rows, not %u heads of an even count",
			          t->name, (unsigned long long)o->rows, o->permute_heads);
			free(o->name);
			return -1;
		}
	}
	return 1;
}

int st_plan_make(const struct st_config *c, const struct st_header *const *shards,
                 uint32_t n, enum st_ftype ftype, struct st_plan *p,
                 char err[GGUF_ERR_MAX])
{
	memset(p, 0, sizeof *p);
	size_t total = 0;
	for (uint32_t s = 0; s < n; s++)
		total += shards[s]->n;
	p->t = calloc(total ? total : 1, sizeof *p->t);
	if (!p->t) {
		gguf_errf(err, "out of memory");
		return -1;
	}
	uint64_t off = 0;
	for (uint32_t s = 0; s < n; s++)
		for (size_t i = 0; i < shards[s]->n; i++) {
			struct st_out *o = &p->t[p->n];
			const int r = plan_one(c, &shards[s]->t[i], s, ftype, o, err);
			if (r < 0) {
				st_plan_free(p);
				return -1;
			}
			if (r == 0)
				continue;
			/* sizes are bounded by the files (st_header): no sum overflows */
			o->offset = off;
			off += (o->size + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN;
			p->n++;
		}
	p->data_size = off;
	return 0;
}

void st_plan_free(struct st_plan *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->t[i].name);
	free(p->t);
	memset(p, 0, sizeof *p);
}

void st_plan_write_infos(const struct st_plan *p, struct vbytes *b)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct st_out *o = &p->t[i];
		vbytes_le(b, strlen(o->name), 8);
		vbytes_put(b, o->name, strlen(o->name));
		vbytes_le(b, o->n_dims, 4);
		for (uint32_t d = 0; d < o->n_dims; d++)
			vbytes_le(b, o->ne[d], 8);
		vbytes_le(b, o->type, 4);
		vbytes_le(b, o->offset, 8);
	}
}

/* A float16 as numpy's astype(float16) makes it from a float: ggml's rounding (to
 * nearest, ties to even, subnormals and overflow to inf alike), and a NaN as numpy
 * keeps it (its top mantissa bits, kept a NaN) where ggml makes every NaN 0x7e00. */
static uint16_t numpy_fp16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) {
		uint16_t h = (uint16_t)(0x7c00u + ((u & 0x007fffffu) >> 13));
		if (h == 0x7c00u)
			h++;
		return (uint16_t)(((u >> 16) & 0x8000u) | h);
	}
	return f32_to_fp16(f);
}

/* Element i of n checkpoint elements of dtype d at s, as a float (the converter's
 * to(float32) for BF16 and F64; F16 widened exactly). */
static float elem_f32(const uint8_t *s, enum st_dtype d, uint64_t i)
{
	switch (d) {
	case ST_F16:
		return fp16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
	case ST_BF16:
		return bf16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
	case ST_F32: {
		float f;
		memcpy(&f, s + 4 * i, 4);
		return f;
	}
	default: {
		double x;
		memcpy(&x, s + 8 * i, 8);
		return (float)x;
	}
	}
}

/* n elements of dtype d at s converted to GGML type out at o. An F16 checkpoint into an
 * F16 tensor keeps its bits (numpy's astype of a float16 array to float16); BF16 is
 * gguf-py's rounding of the float (to nearest, ties to even; a NaN quieted), which is
 * ggml's f32_to_bf16 bit for bit, a BF16 checkpoint's values widened to float first as
 * the converter widens them. The common pairs have loops of their own (no choice per
 * element): F32 into F16, F32 as it is, F16 as it is. */
static void convert(const uint8_t *s, enum st_dtype d, uint64_t n, uint32_t out, uint8_t *o)
{
	if ((d == ST_F32 && out == GGML_TYPE_F32) || (d == ST_F16 && out == GGML_TYPE_F16)) {
		memcpy(o, s, n * (d == ST_F32 ? 4 : 2));
		return;
	}
	if (d == ST_F32 && out == GGML_TYPE_F16) {
		for (uint64_t i = 0; i < n; i++) {
			float f;
			memcpy(&f, s + 4 * i, 4);
			const uint16_t h = numpy_fp16(f);
			o[2 * i] = (uint8_t)h;
			o[2 * i + 1] = (uint8_t)(h >> 8);
		}
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		const float f = elem_f32(s, d, i);
		if (out == GGML_TYPE_BF16 || out == GGML_TYPE_F16) {
			const uint16_t h = out == GGML_TYPE_BF16 ? f32_to_bf16(f) : numpy_fp16(f);
			o[2 * i] = (uint8_t)h;
			o[2 * i + 1] = (uint8_t)(h >> 8);
		} else {
			memcpy(o + 4 * i, &f, 4);
		}
	}
}

/* Bytes [a, b) of tensor o's converted bytes (b <= o->size) into buf: unit by unit (an
 * element, or a Q8_0 block of 32 elements within one row), in chunks of a row. */
static int read_tensor(const struct st_out *o, uint64_t a, uint64_t b, uint8_t *buf,
                       st_read_fn fn, void *ctx, char why[GGUF_ERR_MAX])
{
	enum { CHUNK = 1024 };
	uint8_t src[CHUNK * 8], out[CHUNK * 4];
	float f[CHUNK];
	const bool q8 = o->type == GGML_TYPE_Q8_0;
	const unsigned ue = q8 ? ST_Q8_BLOCK : 1;
	const unsigned ub = q8 ? ST_Q8_BYTES : o->type == GGML_TYPE_F32 ? 4 : 2;
	const unsigned es = st_dtype_size(o->src->dtype);
	const uint64_t row_len = o->permute_heads ? o->row_len : o->src->n_elements;
	uint64_t u = a / ub;
	const uint64_t u_end = (b + ub - 1) / ub;
	while (u < u_end) {
		const uint64_t e = u * ue;
		const uint64_t row = row_len ? e / row_len : 0, col = row_len ? e % row_len : 0;
		uint64_t n_units = u_end - u;
		if (n_units > (row_len - col) / ue)
			n_units = (row_len - col) / ue;
		if (n_units > CHUNK / ue)
			n_units = CHUNK / ue;
		const uint64_t n = n_units * ue;
		const uint64_t src_row = o->permute_heads ?
			st_permute_row(o->rows, o->permute_heads, row) : row;
		const uint64_t at = o->src->offset + (src_row * row_len + col) * es;
		const int r = fn(ctx, o->shard, at, n * es, src, why);
		if (r < 0)
			return r;
		if (q8) {
			for (uint64_t i = 0; i < n; i++)
				f[i] = elem_f32(src, o->src->dtype, i);
			quant_row(GGML_TYPE_Q8_0, f, out, (int64_t)n);
		} else {
			convert(src, o->src->dtype, n, o->type, out);
		}
		/* the part of these units' bytes inside [a, b) */
		const uint64_t lo = u * ub, hi = (u + n_units) * ub;
		const uint64_t from = lo < a ? a : lo, to = hi > b ? b : hi;
		memcpy(buf + (from - a), out + (from - lo), to - from);
		u += n_units;
	}
	return 0;
}

int st_plan_read(const struct st_plan *p, uint64_t off, uint64_t len, void *buf,
                 st_read_fn fn, void *ctx, char why[GGUF_ERR_MAX])
{
	uint8_t *out = buf;
	/* the first tensor whose padded bytes end past off */
	size_t lo = 0, hi = p->n;
	while (lo < hi) {
		const size_t mid = lo + (hi - lo) / 2;
		const struct st_out *o = &p->t[mid];
		if (o->offset + (o->size + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	const uint64_t end = off + len;
	memset(out, 0, len);   /* padding: zeros */
	for (size_t i = lo; i < p->n && p->t[i].offset < end; i++) {
		const struct st_out *o = &p->t[i];
		const uint64_t a = off > o->offset ? off - o->offset : 0;
		uint64_t b = end - o->offset;
		if (b > o->size)
			b = o->size;
		if (a >= b)
			continue;
		const int r = read_tensor(o, a, b, out + (o->offset + a - off), fn, ctx, why);
		if (r < 0)
			return r;
	}
	return 0;
}
