#include "parse_value.h"
#include "json_read.h"
#include "render_value.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int parse_value_type_of(const struct gguf_value *v, struct value_type *t)
{
	char buf[RENDER_TYPE_MAX];
	size_t n = render_value_type(v, buf);
	return value_type_parse(buf, n, t);
}

/* One line of a string array, render_escaped undone, appended as a GGUF string. */
static int unescape_line(const char *p, size_t n, struct vbytes *out, char err[GGUF_ERR_MAX])
{
	uint64_t at = out->len;
	vbytes_le(out, 0, 8);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '\\')
			continue;
		vbytes_put(out, p + run, i - run);
		if (i + 1 == n) {
			snprintf(err, GGUF_ERR_MAX, "a backslash ends the line (write \\\\ for one)");
			return -1;
		}
		char c = p[++i], lit;
		switch (c) {
		case '\\': lit = '\\'; break;
		case 'n': lit = '\n'; break;
		case 'r': lit = '\r'; break;
		case 't': lit = '\t'; break;
		case 'x': {
			int hi = i + 2 < n ? value_hexdigit(p[i + 1]) : -1;
			int lo = i + 2 < n ? value_hexdigit(p[i + 2]) : -1;
			if (hi < 0 || lo < 0) {
				snprintf(err, GGUF_ERR_MAX, "\\x is not followed by two hex digits");
				return -1;
			}
			lit = (char)(hi << 4 | lo);
			i += 2;
			break;
		}
		default:
			snprintf(err, GGUF_ERR_MAX, "unknown escape \\%c (\\\\ \\n \\r \\t \\xHH are known)",
			         (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? c : '?');
			return -1;
		}
		vbytes_put(out, &lit, 1);
		run = i + 1;
	}
	vbytes_put(out, p + run, n - run);
	vbytes_patch(out, at, out->len - at - 8, 8);
	return 0;
}

/* The lines of text as elements of array type t appended to b (after its element type
 * and count), their count into *count: 0, or -1 with "line N: why" in err, the first
 * line numbered first_line. */
static int parse_lines(const char *text, uint64_t len, const struct value_type *t,
                       uint64_t first_line, struct vbytes *b, uint64_t *count,
                       char err[GGUF_ERR_MAX])
{
	struct value_type inner = { t->depth - 1, t->leaf };
	uint64_t pos = 0;
	*count = 0;
	while (pos < len) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', (size_t)(len - pos));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(len - pos);
		pos += n + (nl ? 1 : 0);
		char why[GGUF_ERR_MAX] = "";
		int rc = 0;
		if (inner.depth) {
			struct json_cur c = { .p = line, .end = line + n };
			if (!json_value(&c, &inner, b)) {
				rc = -1;
				snprintf(why, sizeof why, "%s", c.err);
			} else {
				json_ws(&c);
				if (c.p != c.end) {
					rc = -1;
					snprintf(why, sizeof why, "text after the array");
				}
			}
		} else if (t->leaf == GGUF_TYPE_STRING) {
			rc = unescape_line(line, n, b, why);
		} else {
			uint8_t v[8];
			rc = value_scalar_parse(t->leaf, line, n, v, why);
			if (rc == 0)
				vbytes_put(b, v, gguf_vtype_size(t->leaf));
		}
		if (rc < 0) {
			snprintf(err, GGUF_ERR_MAX, "line %" PRIu64 ": %s", first_line + *count, why);
			return -1;
		}
		++*count;
	}
	return 0;
}

int parse_value(const char *text, uint64_t len, const struct value_type *t,
                struct value_buf *out, char err[GGUF_ERR_MAX])
{
	struct vbytes b = { 0 };
	*out = (struct value_buf){ .buf = NULL };
	if (t->depth == 0) {
		if (t->leaf == GGUF_TYPE_STRING) {
			uint64_t n = len && text[len - 1] == '\n' ? len - 1 : len;
			vbytes_le(&b, n, 8);
			vbytes_put(&b, text, n);
		} else {
			uint8_t v[8];
			if (value_scalar_parse(t->leaf, text, (size_t)len, v, err) < 0)
				return -1;
			vbytes_put(&b, v, gguf_vtype_size(t->leaf));
		}
	} else {
		uint32_t et = t->depth > 1 ? GGUF_TYPE_ARRAY : t->leaf;
		vbytes_le(&b, et, 4);
		vbytes_le(&b, 0, 8);
		uint64_t count;
		if (parse_lines(text, len, t, 1, &b, &count, err) < 0) {
			free(b.p);
			return -1;
		}
		vbytes_patch(&b, 4, count, 8);
	}
	if (b.failed) {
		snprintf(err, GGUF_ERR_MAX, "out of memory for a value of %" PRIu64 " bytes", len);
		free(b.p);
		return -1;
	}
	value_buf_take(out, t, &b);
	return 0;
}

int parse_value_lines(const char *text, uint64_t len, const struct value_type *t,
                      uint64_t first_line, uint64_t *count, char err[GGUF_ERR_MAX])
{
	struct vbytes b = { 0 };
	int r = parse_lines(text, len, t, first_line, &b, count, err);
	free(b.p);
	return r;
}
