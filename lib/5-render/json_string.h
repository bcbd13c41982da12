/* JSON strings: the escaping primitive that gguf.json (render_json.c) and the JSON
 * arrays inside metadata files (render_value.c) both sit on, so that neither renderer
 * calls the other. */
#ifndef GGUFS_JSON_STRING_H
#define GGUFS_JSON_STRING_H

#include <stdint.h>

#include "sink.h"

/* Emits p[0..len) as a JSON string with its quotes. " and \ are escaped, control bytes
 * use \b \f \n \r \t or \u00XX, 0x7f is \u007f. Bytes that are not well-formed UTF-8
 * (overlongs, surrogates, past U+10FFFF, stray or missing continuation bytes) become
 * U+FFFD, one per maximal ill-formed subpart as Unicode recommends and Python's
 * decode(errors="replace") does. */
void render_json_string(struct sink *s, const char *p, uint64_t len);

#endif
