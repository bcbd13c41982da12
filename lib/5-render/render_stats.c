#include "render_stats.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "render_value.h"

/* The widest text of each kind of value: render_f32 of any float32 ("-1.17549435e-38",
 * and below 1e16 written out in full, "-9999999800000000"), render_f64 of any float64
 * ("-2.2250738585072014e-308"); a count is at most the element count. */
enum { WIDTH_F32 = 17, WIDTH_F64 = 24 };

enum field_kind { COUNT, F32, F64, BLOCKS };
#define AT(member) offsetof(struct tensor_stats, member)
static const struct field {
	const char *key;
	enum field_kind kind;
	size_t at;             /* of the member of struct tensor_stats */
} fields[] = {
	{ "elements", COUNT, AT(elements) },
	{ "min", F32, AT(min) },
	{ "max", F32, AT(max) },
	{ "mean", F64, AT(mean) },
	{ "std", F64, AT(std) },
	{ "absmax", F32, AT(absmax) },
	{ "nan", COUNT, AT(nan) },
	{ "pos_inf", COUNT, AT(pos_inf) },
	{ "neg_inf", COUNT, AT(neg_inf) },
	{ "zeros", COUNT, AT(zeros) },
	{ "subnormals", COUNT, AT(subnormals) },
	{ "bad_blocks", BLOCKS, AT(bad_blocks) },
};
enum { N_FIELDS = sizeof fields / sizeof fields[0] };

/* Decimal digits of v. */
static uint64_t digits(uint64_t v)
{
	uint64_t d = 1;
	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* The widest text field k can have for tensor g. */
static uint64_t width(const struct gguf_tensor *g, int k)
{
	switch (fields[k].kind) {
	case F32:
		return WIDTH_F32;
	case F64:
		return WIDTH_F64;
	default:
		/* every count, blocks included, is at most the element count; "-" is 1 */
		return digits(g->n_elements);
	}
}

/* The text of field k of st into buf; its length. bad_blocks is "-" for a type without
 * block scales. */
static size_t text(const struct tensor_stats *st, int k, char buf[RENDER_SCALAR_MAX])
{
	const char *p = (const char *)st + fields[k].at;
	float f;
	double d;
	uint64_t v;
	switch (fields[k].kind) {
	case F32:
		memcpy(&f, p, sizeof f);
		return render_f32(f, buf);
	case F64:
		memcpy(&d, p, sizeof d);
		return render_f64(d, buf);
	case BLOCKS:
		if (!st->has_scales)
			return (size_t)snprintf(buf, RENDER_SCALAR_MAX, "-");
		break;
	default:
		break;
	}
	memcpy(&v, p, sizeof v);
	return (size_t)snprintf(buf, RENDER_SCALAR_MAX, "%" PRIu64, v);
}

/* n spaces. */
static void pad(struct sink *s, uint64_t n)
{
	static const char spaces[32] = "                                ";
	for (; n > sizeof spaces; n -= sizeof spaces)
		sink_put(s, spaces, sizeof spaces);
	sink_put(s, spaces, n);
}

uint64_t render_stats_size(const struct gguf_tensor *g)
{
	uint64_t size = 0;
	for (int k = 0; k < N_FIELDS; k++)
		size += strlen(fields[k].key) + 1 + width(g, k) + 1;
	return size;
}

void render_stats(struct sink *s, const struct gguf_tensor *g, const struct tensor_stats *st)
{
	char buf[RENDER_SCALAR_MAX];
	for (int k = 0; k < N_FIELDS; k++) {
		size_t len = text(st, k, buf);
		sink_puts(s, fields[k].key);
		sink_putc(s, ' ');
		sink_put(s, buf, len);
		pad(s, width(g, k) - len);
		sink_putc(s, '\n');
	}
}

void render_stats_tsv_header(struct sink *s)
{
	sink_puts(s, "tensor");
	for (int k = 0; k < N_FIELDS; k++) {
		sink_putc(s, '\t');
		sink_puts(s, fields[k].key);
	}
	sink_putc(s, '\n');
}

uint64_t render_stats_tsv_line_size(const struct gguf_tensor *g, const char *name)
{
	struct sink s = sink_counter();
	render_escaped(&s, name, strlen(name));
	for (int k = 0; k < N_FIELDS; k++)
		s.pos += 1 + width(g, k);
	return s.pos + 1;
}

void render_stats_tsv_line(struct sink *s, const struct gguf_tensor *g, const char *name,
                           const struct tensor_stats *st)
{
	(void)g;
	char buf[RENDER_SCALAR_MAX];
	render_escaped(s, name, strlen(name));
	for (int k = 0; k < N_FIELDS; k++) {
		size_t len = text(st, k, buf);
		sink_putc(s, '\t');
		sink_put(s, buf, len);
	}
	sink_putc(s, '\n');
}

void render_stats_tsv_fill(struct sink *s, uint64_t n)
{
	static const char newlines[32] = "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n"
	                                 "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n";
	for (; n > sizeof newlines && !sink_done(s); n -= sizeof newlines)
		sink_put(s, newlines, sizeof newlines);
	if (!sink_done(s))
		sink_put(s, newlines, n);
}
