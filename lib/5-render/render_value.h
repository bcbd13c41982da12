/* Rendering one metadata value: the content of metadata/KEY, its user.gguf.type xattr,
 * and the same value as JSON for gguf.json. Values are walked in place in the image;
 * nothing is allocated, so a huge array costs time only up to the requested window. */
#ifndef GGUFS_RENDER_VALUE_H
#define GGUFS_RENDER_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "sink.h"

/* Room for any scalar's text: "-9223372036854775808" and "-2.2250738585072014e-308"
 * need 21 and 25 bytes with the NUL. */
#define RENDER_SCALAR_MAX 32

/* Room for any type string: GGUF_MAX_ARRAY_DEPTH + 1 times "array[" ... "]" around
 * "float64", with the NUL. */
#define RENDER_TYPE_MAX 96

/* The shortest "%.Ng" text (N in 1..9) that strtof reads back bit for bit; of two
 * equally short texts the one without an exponent ("10000", not "1e+04"). "nan" for
 * any NaN, "inf", "-inf"; "-0" for negative zero. Returns the length (no NUL). */
size_t render_f32(float f, char buf[RENDER_SCALAR_MAX]);

/* The same for float64 with N in 1..17 and strtod. */
size_t render_f64(double d, char buf[RENDER_SCALAR_MAX]);

/* The text of one scalar of GGUF type `type` (integers, bool, floats) read from its
 * little-endian bytes: as metadata/KEY shows it, without the newline. Returns the
 * length, or 0 when `type` is not a scalar type (string, array, unknown). */
size_t render_scalar(uint32_t type, const uint8_t *bytes, char buf[RENDER_SCALAR_MAX]);

/* Emits string bytes escaped so they stay on one line: \\ \n \r \t, other bytes below
 * 0x20 and 0x7f as \xHH (lowercase hex), every other byte unchanged. */
void render_escaped(struct sink *s, const char *p, uint64_t len);

/* The whole content of metadata/KEY for v (ggufs(1): one line per scalar or string,
 * one line per array element, an array of arrays as one JSON array per line). Stops
 * early once the sink's window is full. */
void render_value(struct sink *s, const struct gguf_value *v);

/* render_value from a mark that a sizing pass of the same value recorded (the sink's
 * pos already set to the mark's): the rest of the content after it. */
struct render_mark;
void render_value_from(struct sink *s, const struct gguf_value *v,
                       const struct render_mark *from);

/* v as a JSON value: numbers, true/false, strings (invalid UTF-8 as U+FFFD), arrays
 * complete. Non-finite floats become the strings "nan", "inf", "-inf", since JSON has
 * no such numbers. Stops early once the sink's window is full. */
void render_value_json(struct sink *s, const struct gguf_value *v);

/* render_value_json for the value of kv number kv of gguf.json, from the start (from
 * NULL) or from a mark inside it; marks it records name kv. */
void render_value_json_from(struct sink *s, const struct gguf_value *v, uint64_t kv,
                            const struct render_mark *from);

/* The user.gguf.type string: "uint32", "string", "array[string]", and for arrays of
 * arrays the element type of the first inner array, nested: "array[array[uint8]]".
 * When that cannot be known (the outer array, or the first inner array of arrays, is
 * empty) the chain ends in plain "array": "array[array]". An unknown type id renders
 * as "unknown". Returns the length. */
size_t render_value_type(const struct gguf_value *v, char buf[RENDER_TYPE_MAX]);

#endif
