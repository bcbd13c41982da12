/* GGUF values from text: the parsing half that metadata edits need. A type from its
 * name, a scalar from its decimal (or true/false) text, and the owned buffer such a
 * value lives in (the JSON form of a value is read above, in json_read.h). The text is
 * untrusted: every length is checked, nothing is read past the end given. */
#ifndef GGUFS_VALUE_TEXT_H
#define GGUFS_VALUE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "vbytes.h"

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

/* The bytes of a scalar of type (an integer type, bool, float32, float64) written as
 * [s, s + n), surrounding ASCII whitespace ignored: integers in decimal with an optional
 * sign, range-checked for the type; floats any decimal text strtod reads (no hex), as
 * the nearest float32 or float64, and nan, inf, -inf; bools true or false. Fills
 * gguf_vtype_size(type) bytes of out, little-endian: 0, or -1 with why in err. */
int value_scalar_parse(uint32_t type, const char *s, size_t n, uint8_t out[8],
                       char err[GGUF_ERR_MAX]);

/* The value of a hex digit (either case), or -1. */
int value_hexdigit(char ch);

/* Makes b the value of type t whose payload (from json_value: for an array, element
 * type and count first) is in bytes, taking them over. */
void value_buf_take(struct value_buf *b, const struct value_type *t, struct vbytes *bytes);

#endif
