#include "value_text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The short names people type (setfattr -v u32, as numpy and ggml spell them), in
 * enum order; the attribute always reads back as the long name. */
static const char *const short_names[GGUF_TYPE_COUNT] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", NULL, NULL, NULL, "u64", "i64", "f64",
};

/* Scalar names in enum order, with bool, or their short forms: what value_type_parse
 * accepts as a leaf. */
static int leaf_type(const char *s, size_t n)
{
	for (uint32_t t = 0; t < GGUF_TYPE_COUNT; t++) {
		const char *name = t == GGUF_TYPE_BOOL ? "bool" : gguf_vtype_name(t);
		if (t != GGUF_TYPE_ARRAY && name && strlen(name) == n && memcmp(name, s, n) == 0)
			return (int)t;
		if (short_names[t] && strlen(short_names[t]) == n && memcmp(short_names[t], s, n) == 0)
			return (int)t;
	}
	return -1;
}

int value_type_parse(const char *s, size_t n, struct value_type *t)
{
	uint32_t depth = 0;
	while (n >= 7 && memcmp(s, "array[", 6) == 0 && s[n - 1] == ']') {
		if (++depth > GGUF_MAX_ARRAY_DEPTH)
			return -1;
		s += 6;
		n -= 7;
	}
	/* "array" alone: an inner array of unknown element type, never the top level */
	if (n == 5 && memcmp(s, "array", 5) == 0 && depth > 0) {
		*t = (struct value_type){ .depth = depth, .leaf = GGUF_TYPE_ARRAY };
		return 0;
	}
	int leaf = leaf_type(s, n);
	if (leaf < 0)
		return -1;
	*t = (struct value_type){ .depth = depth, .leaf = (uint32_t)leaf };
	return 0;
}

void value_buf_free(struct value_buf *b)
{
	free(b->buf);
	*b = (struct value_buf){ .buf = NULL };
}

int value_buf_copy(struct value_buf *b, const struct gguf_value *v)
{
	*b = (struct value_buf){ .v = *v };
	if (v->size) {
		if (v->size > SIZE_MAX || !(b->buf = malloc((size_t)v->size)))
			return -1;
		memcpy(b->buf, v->data, (size_t)v->size);
	}
	b->v.data = b->buf;
	return 0;
}

void vbytes_put(struct vbytes *b, const void *p, uint64_t n)
{
	uint64_t end;
	if (b->failed || __builtin_add_overflow(b->len, n, &end) || end > SIZE_MAX / 2) {
		b->failed = true;
		return;
	}
	if (end > b->cap) {
		uint64_t cap = b->cap ? b->cap : 64;
		while (cap < end)
			cap *= 2;
		uint8_t *q = realloc(b->p, (size_t)cap);
		if (!q) {
			b->failed = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, (size_t)n);
	b->len = end;
}

void vbytes_le(struct vbytes *b, uint64_t v, int n)
{
	uint8_t x[8];
	for (int i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	vbytes_put(b, x, (uint64_t)n);
}

void vbytes_patch(struct vbytes *b, uint64_t at, uint64_t v, int n)
{
	if (b->failed)
		return;
	for (int i = 0; i < n; i++)
		b->p[at + (uint64_t)i] = (uint8_t)(v >> (8 * i));
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Decimal digits with an optional sign: the magnitude, whether negative; false when
 * not decimal or past 2^64 - 1. */
static bool decimal(const char *s, size_t n, uint64_t *mag, bool *neg)
{
	size_t i = 0;
	*neg = false;
	if (n && (s[0] == '-' || s[0] == '+')) {
		*neg = s[0] == '-';
		i = 1;
	}
	if (i == n)
		return false;
	uint64_t v = 0;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(s[i] - '0'), &v))
			return false;
	}
	*mag = v;
	return true;
}

/* True when [s, s + n) is text strtod reads as a decimal number, nan or inf: no hex
 * floats, no "nan(...)", no trailing junk. */
static bool float_text(const char *s, size_t n)
{
	size_t i = 0;
	if (n && (s[0] == '-' || s[0] == '+'))
		i = 1;
	const char *w = s + i;
	size_t m = n - i;
	if ((m == 3 && (strncasecmp(w, "nan", 3) == 0 || strncasecmp(w, "inf", 3) == 0)) ||
	    (m == 8 && strncasecmp(w, "infinity", 8) == 0))
		return true;
	bool digits = false;
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		digits = true;
	if (i < n && s[i] == '.')
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			digits = true;
	if (!digits)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			i++;
		if (i == n || s[i] < '0' || s[i] > '9')
			return false;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	return i == n;
}

int value_scalar_parse(uint32_t type, const char *s, size_t n, uint8_t out[8],
                       char err[GGUF_ERR_MAX])
{
	while (n && is_space(s[0]))
		s++, n--;
	while (n && is_space(s[n - 1]))
		n--;
	const char *name = type == GGUF_TYPE_BOOL ? "bool" : gguf_vtype_name(type);
	char shown[48];
	snprintf(shown, sizeof shown, "%.*s%s", (int)(n < 32 ? n : 32), s, n > 32 ? "..." : "");
	for (size_t i = 0; i < strlen(shown); i++)
		if ((unsigned char)shown[i] < 0x20 || (unsigned char)shown[i] >= 0x7f)
			shown[i] = '?';
	uint64_t mag;
	bool neg;
	switch (type) {
	case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
	case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64: {
		size_t size = gguf_vtype_size(type);
		bool is_signed = type == GGUF_TYPE_INT8 || type == GGUF_TYPE_INT16 ||
		                 type == GGUF_TYPE_INT32 || type == GGUF_TYPE_INT64;
		if (!decimal(s, n, &mag, &neg)) {
			snprintf(err, GGUF_ERR_MAX, "'%s' is not a decimal %s", shown, name);
			return -1;
		}
		uint64_t bits;
		uint64_t top = size == 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
		if (!is_signed) {
			if ((neg && mag) || mag > top)
				goto range;
			bits = mag;
		} else {
			uint64_t lim = top / 2;   /* the largest positive value */
			if ((!neg && mag > lim) || (neg && mag > lim + 1))
				goto range;
			bits = (neg ? (uint64_t)0 - mag : mag) & top;
		}
		for (size_t i = 0; i < size; i++)
			out[i] = (uint8_t)(bits >> (8 * i));
		return 0;
range:
		snprintf(err, GGUF_ERR_MAX, "%s is out of the range of %s", shown, name);
		return -1;
	}
	case GGUF_TYPE_BOOL:
		if (n == 4 && memcmp(s, "true", 4) == 0)
			out[0] = 1;
		else if (n == 5 && memcmp(s, "false", 5) == 0)
			out[0] = 0;
		else {
			snprintf(err, GGUF_ERR_MAX, "'%s' is not true or false", shown);
			return -1;
		}
		return 0;
	case GGUF_TYPE_FLOAT32:
	case GGUF_TYPE_FLOAT64: {
		char tmp[512];
		if (!float_text(s, n) || n >= sizeof tmp) {
			snprintf(err, GGUF_ERR_MAX, "'%s' is not a decimal %s", shown, name);
			return -1;
		}
		memcpy(tmp, s, n);
		tmp[n] = '\0';
		if (type == GGUF_TYPE_FLOAT32) {
			float f = strtof(tmp, NULL);   /* correctly rounded to the nearest float */
			uint32_t u;
			memcpy(&u, &f, 4);
			for (int i = 0; i < 4; i++)
				out[i] = (uint8_t)(u >> (8 * i));
		} else {
			double d = strtod(tmp, NULL);
			uint64_t u;
			memcpy(&u, &d, 8);
			for (int i = 0; i < 8; i++)
				out[i] = (uint8_t)(u >> (8 * i));
		}
		return 0;
	}
	default:
		snprintf(err, GGUF_ERR_MAX, "type %s is not a scalar", name ? name : "unknown");
		return -1;
	}
}

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

int value_hexdigit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
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

void value_buf_take(struct value_buf *b, const struct value_type *t, struct vbytes *bytes)
{
	*b = (struct value_buf){ .buf = bytes->p };
	uint64_t skip = 0;
	if (t->depth) {
		b->v.type = GGUF_TYPE_ARRAY;
		b->v.elem_type = gguf_le32(bytes->p);
		b->v.count = gguf_le64(bytes->p + 4);
		skip = 12;
	} else {
		b->v.type = t->leaf;
	}
	b->v.data = bytes->len > skip ? bytes->p + skip : NULL;
	b->v.size = bytes->len - skip;
	*bytes = (struct vbytes){ .p = NULL };
}
