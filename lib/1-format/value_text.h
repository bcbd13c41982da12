/* GGUF values from text: the parsing half that metadata edits need. A scalar from its
 * decimal (or true/false) text, a value of a known type from JSON (gguf.json's value
 * form), and the owned buffer such a value lives in. The text is untrusted: every
 * length is checked, nesting is bounded, nothing is read past the end given. */
#ifndef GGUFS_VALUE_TEXT_H
#define GGUFS_VALUE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* A value's type as user.gguf.type names it: depth array levels around a leaf type.
 * "uint32" is {0, UINT32}, "array[string]" {1, STRING}, "array[array[uint8]]" {2, UINT8}.
 * A leaf of GGUF_TYPE_ARRAY is an inner array of unknown element type ("array[array]"):
 * only empty inner arrays are of it. */
struct value_type {
	uint32_t depth;
	uint32_t leaf;
};

/* Parses a type name [s, s + n) ("uint8" ... "float64", or short "u8" ... "f64", "bool",
 * "string", "array[T]", nested at most GGUF_MAX_ARRAY_DEPTH deep). 0, or -1 for
 * anything else. */
int value_type_parse(const char *s, size_t n, struct value_type *t);

/* A value that owns its payload: v.data points into buf (or is NULL when empty), laid
 * out exactly as gguf_parse describes a value lying in an image, so everything that
 * renders or writes a parsed value takes it as it is. */
struct value_buf {
	struct gguf_value v;
	uint8_t *buf;
};
void value_buf_free(struct value_buf *b);
/* A copy of v (of a validated image) into b: 0, or -1 out of memory. */
int value_buf_copy(struct value_buf *b, const struct gguf_value *v);

/* Growable bytes with sticky failure (out of memory or past GGUF's 64-bit sizes). */
struct vbytes {
	uint8_t *p;
	uint64_t len;
	uint64_t cap;
	bool failed;
};
void vbytes_put(struct vbytes *b, const void *p, uint64_t n);
void vbytes_le(struct vbytes *b, uint64_t v, int n);
/* Overwrites n little-endian bytes at at (at + n <= len). */
void vbytes_patch(struct vbytes *b, uint64_t at, uint64_t v, int n);

/* The bytes of a scalar of type (an integer type, bool, float32, float64) written as
 * [s, s + n), surrounding ASCII whitespace ignored: integers in decimal with an optional
 * sign, range-checked for the type; floats any decimal text strtod reads (no hex), as
 * the nearest float32 or float64, and nan, inf, -inf; bools true or false. Fills
 * gguf_vtype_size(type) bytes of out, little-endian: 0, or -1 with why in err. */
int value_scalar_parse(uint32_t type, const char *s, size_t n, uint8_t out[8],
                       char err[GGUF_ERR_MAX]);

/* The value of a hex digit (either case), or -1. */
int value_hexdigit(char ch);

/* A bounded reader of JSON text [p, end). */
struct json_cur {
	const char *p;
	const char *end;
	uint32_t depth;     /* of nesting, bounded by JSON_MAX_DEPTH */
	char err[GGUF_ERR_MAX];
};
#define JSON_MAX_DEPTH 32

/* Skips JSON whitespace. */
void json_ws(struct json_cur *c);
/* Consumes the character ch after whitespace: true, or false (nothing consumed). */
bool json_eat(struct json_cur *c, char ch);
/* A JSON string after whitespace, decoded to UTF-8 into out (NUL-terminated too, the
 * length not counting it, in out->len); \u escapes of lone surrogates become U+FFFD.
 * False with err on bad input. */
bool json_string(struct json_cur *c, struct vbytes *out);
/* Skips one JSON value of any kind (depth-bounded). False with err on bad input. */
bool json_skip(struct json_cur *c);
/* A JSON number's text after whitespace (not converted): start and length. */
bool json_number(struct json_cur *c, const char **s, size_t *n);

/* A JSON value of type t as gguf.json writes one (numbers; nan and inf floats as the
 * strings "nan", "inf", "-inf"; true/false; strings; arrays of these, nested), appended
 * to out as the payload of a GGUF value of that type (an array's element type and
 * count first when t is an array; see gguf_header_write). For t of depth 0 only the
 * payload. False with err on bad input or a value out of the type's range. */
bool json_value(struct json_cur *c, const struct value_type *t, struct vbytes *out);

/* Makes b the value of type t whose payload (from json_value: for an array, element
 * type and count first) is in bytes, taking them over. */
void value_buf_take(struct value_buf *b, const struct value_type *t, struct vbytes *bytes);

#endif
