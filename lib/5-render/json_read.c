#include "json_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void json_ws(struct json_cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

bool json_eat(struct json_cur *c, char ch)
{
	json_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

static bool jfail(struct json_cur *c, const char *what)
{
	if (!c->err[0])
		snprintf(c->err, sizeof c->err, "%s", what);
	return false;
}

/* Four hex digits of a \u escape. */
static bool hex4(struct json_cur *c, uint32_t *u)
{
	if (c->end - c->p < 4)
		return false;
	*u = 0;
	for (int i = 0; i < 4; i++) {
		int h = value_hexdigit(c->p[i]);
		if (h < 0)
			return false;
		*u = *u << 4 | (uint32_t)h;
	}
	c->p += 4;
	return true;
}

static void put_utf8(struct vbytes *o, uint32_t u)
{
	uint8_t b[4];
	int n;
	if (u < 0x80) {
		b[0] = (uint8_t)u;
		n = 1;
	} else if (u < 0x800) {
		b[0] = (uint8_t)(0xc0 | u >> 6);
		b[1] = (uint8_t)(0x80 | (u & 0x3f));
		n = 2;
	} else if (u < 0x10000) {
		b[0] = (uint8_t)(0xe0 | u >> 12);
		b[1] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
		b[2] = (uint8_t)(0x80 | (u & 0x3f));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | u >> 18);
		b[1] = (uint8_t)(0x80 | (u >> 12 & 0x3f));
		b[2] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
		b[3] = (uint8_t)(0x80 | (u & 0x3f));
		n = 4;
	}
	vbytes_put(o, b, (uint64_t)n);
}

bool json_string(struct json_cur *c, struct vbytes *out)
{
	out->len = 0;
	if (!json_eat(c, '"'))
		return jfail(c, "a string was expected");
	for (;;) {
		const char *run = c->p;
		while (c->p < c->end && *c->p != '"' && *c->p != '\\' && (unsigned char)*c->p >= 0x20)
			c->p++;
		vbytes_put(out, run, (uint64_t)(c->p - run));
		if (c->p == c->end)
			return jfail(c, "a string does not end");
		char ch = *c->p++;
		if (ch == '"')
			break;
		if (ch != '\\')
			return jfail(c, "a string holds a control character");
		if (c->p == c->end)
			return jfail(c, "a string does not end");
		char e = *c->p++, lit;
		switch (e) {
		case '"': lit = '"'; break;
		case '\\': lit = '\\'; break;
		case '/': lit = '/'; break;
		case 'b': lit = '\b'; break;
		case 'f': lit = '\f'; break;
		case 'n': lit = '\n'; break;
		case 'r': lit = '\r'; break;
		case 't': lit = '\t'; break;
		case 'u': {
			uint32_t u, lo;
			if (!hex4(c, &u))
				return jfail(c, "a \\u escape is not four hex digits");
			if (u >= 0xd800 && u < 0xdc00 && c->end - c->p >= 6 && c->p[0] == '\\' &&
			    c->p[1] == 'u') {
				const char *save = c->p;
				c->p += 2;
				if (hex4(c, &lo) && lo >= 0xdc00 && lo < 0xe000)
					u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
				else
					c->p = save;
			}
			if (u >= 0xd800 && u < 0xe000)
				u = 0xfffd;   /* a lone surrogate: what render_json_string writes for bad bytes */
			put_utf8(out, u);
			continue;
		}
		default:
			return jfail(c, "a string has an unknown escape");
		}
		vbytes_put(out, &lit, 1);
	}
	vbytes_put(out, "", 1);
	if (out->failed)
		return jfail(c, "out of memory");
	out->len--;
	return true;
}

bool json_number(struct json_cur *c, const char **s, size_t *n)
{
	json_ws(c);
	const char *start = c->p;
	while (c->p < c->end && (strchr("+-.eE", *c->p) || (*c->p >= '0' && *c->p <= '9')))
		c->p++;
	if (c->p == start)
		return jfail(c, "a number was expected");
	*s = start;
	*n = (size_t)(c->p - start);
	return true;
}

bool json_skip(struct json_cur *c)
{
	json_ws(c);
	if (c->p == c->end)
		return jfail(c, "a value was expected");
	char ch = *c->p;
	if (ch == '"') {
		struct vbytes tmp = { 0 };
		bool ok = json_string(c, &tmp);
		free(tmp.p);
		return ok;
	}
	if (ch == '[' || ch == '{') {
		if (++c->depth > JSON_MAX_DEPTH)
			return jfail(c, "nested too deep");
		c->p++;
		char close = ch == '[' ? ']' : '}';
		if (!json_eat(c, close)) {
			do {
				if (ch == '{') {
					struct vbytes k = { 0 };
					bool ok = json_string(c, &k);
					free(k.p);
					if (!ok || !json_eat(c, ':'))
						return jfail(c, "an object member is malformed");
				}
				if (!json_skip(c))
					return false;
			} while (json_eat(c, ','));
			if (!json_eat(c, close))
				return jfail(c, "an array or object does not end");
		}
		c->depth--;
		return true;
	}
	for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1) {
		size_t n = strlen(lit);
		if ((size_t)(c->end - c->p) >= n && memcmp(c->p, lit, n) == 0) {
			c->p += n;
			return true;
		}
	}
	const char *s;
	size_t n;
	return json_number(c, &s, &n);
}

bool json_value(struct json_cur *c, const struct value_type *t, struct vbytes *out)
{
	json_ws(c);
	if (t->depth == 0) {
		uint8_t b[8];
		switch (t->leaf) {
		case GGUF_TYPE_STRING: {
			struct vbytes s = { 0 };
			bool ok = json_string(c, &s);
			if (ok) {
				vbytes_le(out, s.len, 8);
				vbytes_put(out, s.p, s.len);
			}
			free(s.p);
			return ok;
		}
		case GGUF_TYPE_BOOL:
			for (int v = 0; v < 2; v++) {
				const char *lit = v ? "true" : "false";
				size_t n = strlen(lit);
				if ((size_t)(c->end - c->p) >= n && memcmp(c->p, lit, n) == 0) {
					c->p += n;
					b[0] = (uint8_t)v;
					vbytes_put(out, b, 1);
					return true;
				}
			}
			return jfail(c, "true or false was expected");
		case GGUF_TYPE_FLOAT32:
		case GGUF_TYPE_FLOAT64:
			if (c->p < c->end && *c->p == '"') {
				/* nan, inf, -inf: gguf.json writes these as strings */
				struct vbytes s = { 0 };
				bool ok = json_string(c, &s);
				if (ok && value_scalar_parse(t->leaf, (const char *)s.p, s.len, b, c->err) == 0)
					vbytes_put(out, b, gguf_vtype_size(t->leaf));
				else
					ok = jfail(c, "a number was expected");
				free(s.p);
				return ok;
			}
			/* fall through */
		default: {
			const char *s;
			size_t n;
			if (t->leaf == GGUF_TYPE_ARRAY)
				return jfail(c, "an inner array of unknown type holds an element");
			if (!json_number(c, &s, &n))
				return false;
			if (value_scalar_parse(t->leaf, s, n, b, c->err) < 0)
				return false;
			vbytes_put(out, b, gguf_vtype_size(t->leaf));
			return true;
		}
		}
	}
	if (!json_eat(c, '['))
		return jfail(c, "an array was expected");
	if (++c->depth > JSON_MAX_DEPTH)
		return jfail(c, "nested too deep");
	struct value_type inner = { t->depth - 1, t->leaf };
	uint32_t et = inner.depth ? GGUF_TYPE_ARRAY : t->leaf;
	/* an inner array of unknown type is written as one of uint8: it is empty */
	vbytes_le(out, et == GGUF_TYPE_ARRAY && !inner.depth ? GGUF_TYPE_UINT8 : et, 4);
	uint64_t at = out->len, count = 0;
	vbytes_le(out, 0, 8);
	if (!json_eat(c, ']')) {
		do {
			if (!json_value(c, &inner, out))
				return false;
			count++;
		} while (json_eat(c, ','));
		if (!json_eat(c, ']'))
			return jfail(c, "an array does not end");
	}
	c->depth--;
	vbytes_patch(out, at, count, 8);
	if (out->failed)
		return jfail(c, "out of memory");
	return true;
}
