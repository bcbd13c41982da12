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

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Decimal digits with an optional sign: the magnitude, whether negative; false when
 * not decimal or past 2^64 - 1. */
static bool read_decimal(const char *s, size_t n, uint64_t *mag, bool *neg)
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
		if (!read_decimal(s, n, &mag, &neg)) {
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
