/* Reading JSON: a bounded reader of the JSON text people write back (gguf.json's typed
 * values in an edits file, a metadata file's inner arrays), into the GGUF values of
 * value_text.h. The text is untrusted: nesting is bounded, nothing is read past the
 * end given, and each refusal is one line in the cursor's err. */
#ifndef GGUFS_JSON_READ_H
#define GGUFS_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "value_text.h"
#include "vbytes.h"

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

#endif
