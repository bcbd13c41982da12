#include "render_value.h"
#include "render_mark.h"
#include "json_string.h"
#include "shortest.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t render_f32(float f, char buf[RENDER_SCALAR_MAX])
{
	return shortest_f32(f, buf);
}

size_t render_f64(double d, char buf[RENDER_SCALAR_MAX])
{
	return shortest_f64(d, buf);
}

/* Decimal text of a magnitude with an optional minus sign: snprintf costs more than
 * the rest of a 150,000-entry token-type array's sizing at mount. */
static size_t format_decimal(bool neg, uint64_t v, char buf[RENDER_SCALAR_MAX])
{
	char tmp[24];
	size_t n = 0, k = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (neg)
		buf[k++] = '-';
	while (n)
		buf[k++] = tmp[--n];
	buf[k] = 0;
	return k;
}

/* |v| as unsigned, INT64_MIN included. */
static size_t signed_decimal(int64_t v, char buf[RENDER_SCALAR_MAX])
{
	return format_decimal(v < 0, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, buf);
}

size_t render_scalar(uint32_t type, const uint8_t *b, char buf[RENDER_SCALAR_MAX])
{
	int n;
	switch (type) {
	case GGUF_TYPE_UINT8:  return format_decimal(false, b[0], buf);
	case GGUF_TYPE_INT8:   return signed_decimal((int8_t)b[0], buf);
	case GGUF_TYPE_UINT16: return format_decimal(false, gguf_le16(b), buf);
	case GGUF_TYPE_INT16:  return signed_decimal((int16_t)gguf_le16(b), buf);
	case GGUF_TYPE_UINT32: return format_decimal(false, gguf_le32(b), buf);
	case GGUF_TYPE_INT32:  return signed_decimal((int32_t)gguf_le32(b), buf);
	case GGUF_TYPE_UINT64: return format_decimal(false, gguf_le64(b), buf);
	case GGUF_TYPE_INT64:  return signed_decimal((int64_t)gguf_le64(b), buf);
	case GGUF_TYPE_BOOL:
		/* any nonzero byte is true, as in llama.cpp */
		n = snprintf(buf, RENDER_SCALAR_MAX, "%s", b[0] ? "true" : "false");
		break;
	case GGUF_TYPE_FLOAT32: {
		uint32_t u = gguf_le32(b);
		float f;
		memcpy(&f, &u, sizeof f);
		return render_f32(f, buf);
	}
	case GGUF_TYPE_FLOAT64: {
		uint64_t u = gguf_le64(b);
		double d;
		memcpy(&d, &u, sizeof d);
		return render_f64(d, buf);
	}
	default:
		buf[0] = '\0';
		return 0;
	}
	return (size_t)n;
}

void render_escaped(struct sink *s, const char *p, uint64_t len)
{
	uint64_t run = 0;   /* start of the pending run of bytes that go out unchanged */
	for (uint64_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 0x20 && c != 0x7f && c != '\\')
			continue;
		sink_put(s, p + run, i - run);
		run = i + 1;
		char esc[5];
		switch (c) {
		case '\\': sink_put(s, "\\\\", 2); break;
		case '\n': sink_put(s, "\\n", 2); break;
		case '\r': sink_put(s, "\\r", 2); break;
		case '\t': sink_put(s, "\\t", 2); break;
		default:
			snprintf(esc, sizeof esc, "\\x%02x", c);
			sink_put(s, esc, 4);
			break;
		}
		if (sink_done(s))
			return;
	}
	sink_put(s, p + run, len - run);
}

/* The walk state shared by the metadata/KEY and JSON renderings. gguf_value_walk
 * announces only arrays nested inside the walked array, so depth 0 means "an element
 * of the top-level array" (or the lone scalar/string of a non-array value). */
struct vwalk {
	struct sink *s;
	bool lines;        /* metadata/KEY: top-level elements are lines, not JSON */
	bool top_array;    /* v itself is an array */
	uint32_t depth;
	bool first[GGUF_MAX_ARRAY_DEPTH + 2];   /* no element yet at this depth */
	const uint8_t *data;   /* v's data, which marks count their bytes from */
	uint64_t kv;           /* the kv that marks name */
};

/* Separator before a JSON array element at the current depth. */
static void json_sep(struct vwalk *w)
{
	if (w->depth >= sizeof w->first / sizeof w->first[0])
		return;
	if (!w->first[w->depth])
		sink_put(w->s, ", ", 2);
	w->first[w->depth] = false;
}

/* True when the element being visited is one line of a metadata/KEY file. */
static bool is_line(const struct vwalk *w)
{
	return w->lines && w->depth == 0;
}

static bool vw_scalar(void *ctx, uint32_t type, const uint8_t *bytes)
{
	struct vwalk *w = ctx;
	char buf[RENDER_SCALAR_MAX];
	size_t n = render_scalar(type, bytes, buf);
	if (is_line(w)) {
		sink_put(w->s, buf, n);
		sink_putc(w->s, '\n');
	} else {
		if (w->top_array)
			json_sep(w);
		/* no number starts with n, i or -i: these are nan, inf, -inf, which JSON
		 * cannot hold as numbers */
		if (buf[0] == 'n' || buf[0] == 'i' || (buf[0] == '-' && buf[1] == 'i')) {
			sink_putc(w->s, '"');
			sink_put(w->s, buf, n);
			sink_putc(w->s, '"');
		} else {
			sink_put(w->s, buf, n);
		}
	}
	return !sink_done(w->s);
}

static bool vw_string(void *ctx, const char *p, uint64_t len)
{
	struct vwalk *w = ctx;
	if (is_line(w)) {
		if (w->top_array)
			render_escaped(w->s, p, len);
		else
			sink_put(w->s, p, len);   /* a lone string: its bytes exactly */
		sink_putc(w->s, '\n');
	} else {
		if (w->top_array)
			json_sep(w);
		render_json_string(w->s, p, len);
	}
	return !sink_done(w->s);
}

static bool vw_array_begin(void *ctx, uint32_t elem_type, uint64_t count)
{
	(void)elem_type;
	(void)count;
	struct vwalk *w = ctx;
	if (w->depth + 1 >= sizeof w->first / sizeof w->first[0])
		return false;   /* deeper than any valid file nests; the parser refuses these */
	if (!is_line(w))
		json_sep(w);
	sink_putc(w->s, '[');
	w->depth++;
	w->first[w->depth] = true;
	return !sink_done(w->s);
}

static bool vw_array_end(void *ctx)
{
	struct vwalk *w = ctx;
	if (w->depth == 0)
		return false;
	sink_putc(w->s, ']');
	w->depth--;
	if (is_line(w))
		sink_putc(w->s, '\n');
	return !sink_done(w->s);
}

/* Before each top-level element: a mark, when the sink records them and one is due. */
static bool vw_element(void *ctx, uint64_t index, const uint8_t *at)
{
	struct vwalk *w = ctx;
	if (render_mark_due(w->s))
		render_mark_add(w->s, (struct render_mark){ .kv = w->kv, .elem = index,
		                                            .byte = (uint64_t)(at - w->data) });
	return true;
}

/* Walks v into s, from the start or from the element that from names. */
static void walk_value(struct sink *s, const struct gguf_value *v, bool lines, uint64_t kv,
                       const struct render_mark *from)
{
	struct vwalk w = { .s = s, .lines = lines, .top_array = v->type == GGUF_TYPE_ARRAY,
	                   .data = v->data, .kv = kv };
	w.first[0] = !from || from->elem == 0;
	struct gguf_walk cb = {
		.scalar = vw_scalar,
		.string = vw_string,
		.array_begin = vw_array_begin,
		.array_end = vw_array_end,
		.element = s->marks ? vw_element : NULL,
		.ctx = &w,
	};
	if (from)
		gguf_value_walk_from(v, &cb, from->elem, from->byte);
	else
		gguf_value_walk(v, &cb);
}

void render_value(struct sink *s, const struct gguf_value *v)
{
	walk_value(s, v, true, 0, NULL);
}

void render_value_from(struct sink *s, const struct gguf_value *v,
                       const struct render_mark *from)
{
	walk_value(s, v, true, 0, from);
}

void render_value_json(struct sink *s, const struct gguf_value *v)
{
	render_value_json_from(s, v, 0, NULL);
}

void render_value_json_from(struct sink *s, const struct gguf_value *v, uint64_t kv,
                            const struct render_mark *from)
{
	bool arr = v->type == GGUF_TYPE_ARRAY;
	if (arr && !from)
		sink_putc(s, '[');
	walk_value(s, v, false, kv, from);
	if (arr)
		sink_putc(s, ']');
}

/* Follows the first inner array of an array of arrays down, one level per
 * array_begin, until an inner array's elements are not arrays or an array level has
 * no first element to look at. */
struct twalk {
	char *buf;
	size_t len;
	uint32_t opened;
	bool done;
};

static void tw_append(struct twalk *t, const char *str)
{
	size_t n = strlen(str);
	if (t->len + n < RENDER_TYPE_MAX) {
		memcpy(t->buf + t->len, str, n);
		t->len += n;
		t->buf[t->len] = '\0';
	}
}

static const char *vtype_name(uint32_t type)
{
	const char *n = gguf_vtype_name(type);
	return n ? n : "unknown";
}

static bool tw_array_begin(void *ctx, uint32_t elem_type, uint64_t count)
{
	(void)count;
	struct twalk *t = ctx;
	/* a sample of the pending array level: its element type is known now */
	if (t->opened >= GGUF_MAX_ARRAY_DEPTH) {
		tw_append(t, "array");   /* deeper than any valid file; keeps the bound */
		t->done = true;
		return false;
	}
	tw_append(t, "array[");
	t->opened++;
	if (elem_type != GGUF_TYPE_ARRAY) {
		tw_append(t, vtype_name(elem_type));
		t->done = true;
		return false;
	}
	return true;
}

static bool tw_stop(void *ctx)
{
	(void)ctx;
	return false;
}

static bool tw_stop_scalar(void *ctx, uint32_t type, const uint8_t *bytes)
{
	(void)type;
	(void)bytes;
	return tw_stop(ctx);
}

static bool tw_stop_string(void *ctx, const char *s, uint64_t len)
{
	(void)s;
	(void)len;
	return tw_stop(ctx);
}

size_t render_value_type(const struct gguf_value *v, char buf[RENDER_TYPE_MAX])
{
	struct twalk t = { .buf = buf };
	buf[0] = '\0';
	if (v->type != GGUF_TYPE_ARRAY) {
		tw_append(&t, vtype_name(v->type));
		return t.len;
	}
	tw_append(&t, "array[");
	if (v->elem_type != GGUF_TYPE_ARRAY) {
		tw_append(&t, vtype_name(v->elem_type));
	} else {
		struct gguf_walk cb = {
			.scalar = tw_stop_scalar,
			.string = tw_stop_string,
			.array_begin = tw_array_begin,
			.array_end = tw_stop,
			.ctx = &t,
		};
		gguf_value_walk(v, &cb);
		/* no sample of the innermost array level (an empty array): type unknown */
		if (!t.done)
			tw_append(&t, "array");
		for (uint32_t i = 0; i < t.opened; i++)
			tw_append(&t, "]");
	}
	tw_append(&t, "]");
	return t.len;
}
