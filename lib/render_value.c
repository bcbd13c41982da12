#include "render_value.h"
#include "render_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest %.Ng text of a finite value: scanning N upwards gives the fewest digits
 * that read back; then, since %g switches to an exponent whenever N is at most the
 * decimal exponent, values below 1e16 are written out in full (see below). */
static size_t shortest_g(double x, int max_prec, bool (*reads_back)(const char *, double),
                         char buf[RENDER_SCALAR_MAX])
{
	int n = 0, prec;
	for (prec = 1; prec <= max_prec; prec++) {
		n = snprintf(buf, RENDER_SCALAR_MAX, "%.*g", prec, x);
		if (reads_back(buf, x))
			break;
	}
	/* Large values as a person writes them, as Python's repr does: 10000 and 500000,
	 * not 1e+04 and 5e+05; from 1e16 on, the exponent again. The shortest digits
	 * are kept and padded with zeros, which reads back as the same value. */
	const char *e = strchr(buf, 'e');
	if (!e || e[1] != '+')
		return (size_t)n;
	int exp10 = atoi(e + 2);
	if (exp10 >= 16)
		return (size_t)n;
	char plain[RENDER_SCALAR_MAX];
	int m = 0, digits = 0;
	for (const char *p = buf; p < e; p++) {
		if (*p == '.')
			continue;
		plain[m++] = *p;
		digits += *p >= '0' && *p <= '9';
	}
	while (digits++ <= exp10)
		plain[m++] = '0';
	plain[m] = 0;
	memcpy(buf, plain, (size_t)m + 1);
	return (size_t)m;
}

/* Bitwise comparisons, so that -0 and 0 are told apart. */
static bool f32_reads_back(const char *text, double x)
{
	float back = strtof(text, NULL), want = (float)x;
	return memcmp(&back, &want, sizeof back) == 0;
}

static bool f64_reads_back(const char *text, double x)
{
	double back = strtod(text, NULL);
	return memcmp(&back, &x, sizeof back) == 0;
}

size_t render_f32(float f, char buf[RENDER_SCALAR_MAX])
{
	if (isnan(f))
		return (size_t)snprintf(buf, RENDER_SCALAR_MAX, "nan");
	if (isinf(f))
		return (size_t)snprintf(buf, RENDER_SCALAR_MAX, f < 0 ? "-inf" : "inf");
	return shortest_g((double)f, 9, f32_reads_back, buf);
}

size_t render_f64(double d, char buf[RENDER_SCALAR_MAX])
{
	if (isnan(d))
		return (size_t)snprintf(buf, RENDER_SCALAR_MAX, "nan");
	if (isinf(d))
		return (size_t)snprintf(buf, RENDER_SCALAR_MAX, d < 0 ? "-inf" : "inf");
	return shortest_g(d, 17, f64_reads_back, buf);
}

size_t render_scalar(uint32_t type, const uint8_t *b, char buf[RENDER_SCALAR_MAX])
{
	int n;
	switch (type) {
	case GGUF_TYPE_UINT8:  n = snprintf(buf, RENDER_SCALAR_MAX, "%u", (unsigned)b[0]); break;
	case GGUF_TYPE_INT8:   n = snprintf(buf, RENDER_SCALAR_MAX, "%d", (int)(int8_t)b[0]); break;
	case GGUF_TYPE_UINT16: n = snprintf(buf, RENDER_SCALAR_MAX, "%u", (unsigned)gguf_le16(b)); break;
	case GGUF_TYPE_INT16:
		n = snprintf(buf, RENDER_SCALAR_MAX, "%d", (int)(int16_t)gguf_le16(b));
		break;
	case GGUF_TYPE_UINT32:
		n = snprintf(buf, RENDER_SCALAR_MAX, "%" PRIu32, gguf_le32(b));
		break;
	case GGUF_TYPE_INT32:
		n = snprintf(buf, RENDER_SCALAR_MAX, "%" PRId32, (int32_t)gguf_le32(b));
		break;
	case GGUF_TYPE_UINT64:
		n = snprintf(buf, RENDER_SCALAR_MAX, "%" PRIu64, gguf_le64(b));
		break;
	case GGUF_TYPE_INT64:
		n = snprintf(buf, RENDER_SCALAR_MAX, "%" PRId64, (int64_t)gguf_le64(b));
		break;
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

static void walk_value(struct sink *s, const struct gguf_value *v, bool lines)
{
	struct vwalk w = { .s = s, .lines = lines, .top_array = v->type == GGUF_TYPE_ARRAY };
	w.first[0] = true;
	struct gguf_walk cb = {
		.scalar = vw_scalar,
		.string = vw_string,
		.array_begin = vw_array_begin,
		.array_end = vw_array_end,
		.ctx = &w,
	};
	gguf_value_walk(v, &cb);
}

void render_value(struct sink *s, const struct gguf_value *v)
{
	walk_value(s, v, true);
}

void render_value_json(struct sink *s, const struct gguf_value *v)
{
	bool arr = v->type == GGUF_TYPE_ARRAY;
	if (arr)
		sink_putc(s, '[');
	walk_value(s, v, false);
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
