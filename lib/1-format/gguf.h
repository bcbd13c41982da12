/* GGUF parsing and validation. gguf_parse() reads a whole GGUF image held in memory
 * (normally an mmap of the file), checks every count, length, type, dimension and offset
 * against the image size, and describes the file without copying anything out of it:
 * names and values point into the image. */
#ifndef GGUFS_GGUF_H
#define GGUFS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "types.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4           /* ggml's GGML_MAX_DIMS */
#define GGUF_MAX_ARRAY_DEPTH 8    /* arrays of arrays nest at most this deep */

enum gguf_vtype {
	GGUF_TYPE_UINT8 = 0,
	GGUF_TYPE_INT8 = 1,
	GGUF_TYPE_UINT16 = 2,
	GGUF_TYPE_INT16 = 3,
	GGUF_TYPE_UINT32 = 4,
	GGUF_TYPE_INT32 = 5,
	GGUF_TYPE_FLOAT32 = 6,
	GGUF_TYPE_BOOL = 7,
	GGUF_TYPE_STRING = 8,
	GGUF_TYPE_ARRAY = 9,
	GGUF_TYPE_UINT64 = 10,
	GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12,
	GGUF_TYPE_COUNT = 13,
};

/* Bytes of one scalar of type t, or 0 for string, array and unknown types. */
size_t gguf_vtype_size(uint32_t t);
/* "uint8" ... "float64", "string", "array"; NULL for an unknown type. */
const char *gguf_vtype_name(uint32_t t);

struct gguf_str {
	const char *ptr;   /* into the image; not NUL-terminated */
	uint64_t len;
};

/* A metadata value as it lies in the image. For an array, data points at the first
 * element and elem_type/count describe it; the elements of a string array or an array
 * of arrays are variable-sized and are walked in order (see gguf_value_walk). */
struct gguf_value {
	uint32_t type;        /* enum gguf_vtype */
	uint32_t elem_type;   /* arrays only */
	uint64_t count;       /* arrays only */
	const uint8_t *data;  /* the payload: scalar bytes, string length field, or first element */
	uint64_t size;        /* bytes of the payload, from data */
};

struct gguf_kv {
	struct gguf_str key;
	struct gguf_value value;
};

struct gguf_tensor {
	struct gguf_str name;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS];   /* GGUF order (ne[0] varies fastest); 1 past n_dims */
	uint32_t type;                /* ggml type id as stored */
	const struct ggml_type *ti;   /* NULL for an unknown id */
	uint64_t n_elements;
	uint64_t offset;              /* absolute offset in its file */
	uint64_t size;                /* bytes: exact for a known layout, else up to the next tensor */
	bool has_f32;                 /* a known block layout, which the dequantizer decodes:
	                               * .f32 and .npy files */
};

struct gguf_file {
	uint32_t version;
	uint64_t alignment;
	uint64_t data_offset;   /* absolute offset of the data section */
	uint64_t n_kv;
	struct gguf_kv *kv;     /* file order */
	uint64_t n_tensors;
	struct gguf_tensor *tensors; /* file order */
	uint64_t n_unknown;     /* tensors without a dequantizer (warned about at mount) */
};

/* Parses and validates the GGUF image [data, data + size). On success fills *out and
 * returns 0; on failure returns -1 and writes one line (no "ggufs: PATH: " prefix, no
 * newline) saying exactly what is wrong into err. Never reads outside the image. */
int gguf_parse(const uint8_t *data, uint64_t size, struct gguf_file *out,
               char err[GGUF_ERR_MAX]);

/* The same parse of a file of size bytes of which only the first avail are at data
 * (a remote file's header, fetched so far). Every check is made against size, exactly
 * as gguf_parse makes it, so a prefix gives the same result as the whole image or asks
 * for more: 0 parsed, -1 invalid (err says why), 1 when the first *need bytes (more
 * than avail) must be at hand to go on. Nothing is allocated beyond what the bytes at
 * hand can justify. With avail >= size this is gguf_parse and never returns 1. */
int gguf_parse_prefix(const uint8_t *data, uint64_t avail, uint64_t size, struct gguf_file *out,
                      char err[GGUF_ERR_MAX], uint64_t *need);

/* Releases what gguf_parse allocated (not the image). */
void gguf_file_free(struct gguf_file *f);

/* Up to 64 bytes of a name for an error message: printable ASCII, others as '?',
 * "..." when cut. Returns buf. */
const char *gguf_quote(const struct gguf_str *s, char buf[80]);

/* The kv with this key, or NULL. */
const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);

/* A non-negative integer value of any integer type as a uint64_t: true, or false for
 * any other type or a negative value. kv may be NULL (a key not found): false. */
bool gguf_kv_uint(const struct gguf_kv *kv, uint64_t *out);

/* Walking a validated value. The callbacks see each scalar or string in order; arrays
 * nested in arrays are announced by begin/end, and each element of an array value
 * itself (not of the arrays nested in it) by element first, with its index and where
 * its bytes start. Any callback may be NULL. Returns early, with false, as soon as a
 * callback returns false. */
struct gguf_walk {
	bool (*scalar)(void *ctx, uint32_t type, const uint8_t *bytes);
	bool (*string)(void *ctx, const char *s, uint64_t len);
	bool (*array_begin)(void *ctx, uint32_t elem_type, uint64_t count);
	bool (*array_end)(void *ctx);
	bool (*element)(void *ctx, uint64_t index, const uint8_t *at);
	void *ctx;
};
bool gguf_value_walk(const struct gguf_value *v, const struct gguf_walk *w);

/* The walk of an array value from its element elem on, that element starting at
 * v->data + byte (as element reported them). False, walking nothing, when elem is past
 * the end or v is not an array. */
bool gguf_value_walk_from(const struct gguf_value *v, const struct gguf_walk *w,
                          uint64_t elem, uint64_t byte);

/* Reads little-endian scalars from an unaligned pointer into the image. */
static inline uint64_t gguf_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}
static inline uint32_t gguf_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint16_t gguf_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

#endif
