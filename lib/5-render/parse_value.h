/* Parsing the content of metadata/KEY: the exact inverse of render_value, so that what
 * a file shows, written back, is the value it showed (ggufs(1), METADATA EDITS). */
#ifndef GGUFS_PARSE_VALUE_H
#define GGUFS_PARSE_VALUE_H

#include <stdint.h>

#include "gguf.h"
#include "value_text.h"

/* Parses [text, text + len) as a value of type t:
 *   a number or bool: its text, surrounding whitespace (a final newline too) ignored;
 *   a string: the text less one final newline when it ends with one, every other byte
 *     as written (CR, NUL and bad UTF-8 included);
 *   an array: one element per line (the last line's newline may be missing; an empty
 *     text is an empty array), strings with render_escaped's escapes decoded, inner
 *     arrays as JSON arrays.
 * 0 with the value in out (value_buf_free it), or -1 with one line in err that names
 * the line and what is wrong with it. */
int parse_value(const char *text, uint64_t len, const struct value_type *t,
                struct value_buf *out, char err[GGUF_ERR_MAX]);

/* Whether every line of text (each ended by a newline, the last one's maybe not)
 * parses as an element of array type t (depth > 0), as parse_value reads them: 0 with
 * the number of lines in *count, or -1 with "line N: why" in err, text's first line
 * numbered first_line. Keeps nothing: for checking a text part by part as it comes. */
int parse_value_lines(const char *text, uint64_t len, const struct value_type *t,
                      uint64_t first_line, uint64_t *count, char err[GGUF_ERR_MAX]);

/* t from the type of a value as it is (render_value_type's reading of it). 0, or -1
 * for a value whose type has no parser (an unknown type id). */
int parse_value_type_of(const struct gguf_value *v, struct value_type *t);

#endif
