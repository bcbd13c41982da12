#include "render_check.h"

#include <inttypes.h>
#include <string.h>

#include "json_string.h"
#include "model.h"
#include "names.h"
#include "render_size.h"
#include "render_value.h"

/* What is wrong with tensor g, as the text report words it. */
enum verdict { OK, WARNING, UNHEALTHY, UNCHECKED };

static enum verdict verdict_of(const struct gguf_tensor *g, const struct check_tensor *r)
{
	if (!g->has_f32)
		return UNCHECKED;
	if (stats_unhealthy(&r->s))
		return UNHEALTHY;
	if (r->all_zero || r->s.subnormals)
		return WARNING;
	return OK;
}

void check_count(const struct ggufs_model *m, const struct check_tensor *res,
                 struct check_counts *c)
{
	*c = (struct check_counts){ 0 };
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		const enum verdict v = verdict_of(g, &res[i]);
		c->unhealthy += v == UNHEALTHY;
		c->warnings += v == WARNING;
		c->not_checked += v == UNCHECKED;
		if (g->has_f32) {
			c->checked++;
			c->bytes += g->size;
		}
	}
}

static uint64_t blocks_of(const struct gguf_tensor *g)
{
	return g->n_elements / g->ti->block_elems;
}

/* The text line of a tensor that is not healthy (verdict v). */
static void text_line(struct sink *out, const struct gguf_tensor *g,
                      const struct check_tensor *r, enum verdict v)
{
	static const char *const label[] = { "", "warning", "unhealthy", "not checked" };
	const struct tensor_stats *s = &r->s;
	char tn[16];
	sink_printf(out, "%s: ", label[v]);
	render_escaped(out, g->name.ptr, g->name.len);
	sink_printf(out, " (%s): ", ggml_type_name(g->type, tn));
	if (v == UNCHECKED) {
		sink_puts(out, "no dequantizer for this type\n");
		return;
	}
	const char *sep = "";
	if (v == WARNING) {
		if (r->all_zero) {
			sink_printf(out, "all %" PRIu64 " values are zero", s->elements);
			sep = "; ";
		}
		if (s->subnormals)
			sink_printf(out, "%s%" PRIu64 " of %" PRIu64 " values are subnormal", sep,
			            s->subnormals, s->elements);
		sink_putc(out, '\n');
		return;
	}
	const uint64_t counts[] = { s->nan, s->pos_inf, s->neg_inf };
	static const char *const what[] = { "NaN", "+inf", "-inf" };
	for (int k = 0; k < 3; k++) {
		if (!counts[k])
			continue;
		sink_printf(out, "%s%" PRIu64 " %s", sep, counts[k], what[k]);
		sep = ", ";
	}
	if (*sep)
		sink_printf(out, " of %" PRIu64 " values", s->elements);
	if (s->bad_blocks)
		sink_printf(out, "%s%" PRIu64 " of %" PRIu64 " blocks with a NaN or infinite scale",
		            *sep ? "; " : "", s->bad_blocks, blocks_of(g));
	sink_putc(out, '\n');
}

void render_check_text(struct sink *s, const struct ggufs_model *m,
                       const struct check_tensor *res, const struct check_counts *c)
{
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const enum verdict v = verdict_of(model_tensor(m, i), &res[i]);
		if (v != OK)
			text_line(s, model_tensor(m, i), &res[i], v);
	}
	char size[RENDER_SIZE_MAX];
	sink_puts(s, model_path(m));
	sink_printf(s, ": %" PRIu64 " tensors checked (%s): %" PRIu64 " unhealthy, %" PRIu64
	            " with warnings", c->checked, render_size((double)c->bytes, size),
	            c->unhealthy, c->warnings);
	if (c->not_checked)
		sink_printf(s, ", %" PRIu64 " not checked", c->not_checked);
	sink_putc(s, '\n');
}

/* A float figure as a JSON number, or null when there is none (no finite values). */
static void json_float(struct sink *s, const char *key, double v, bool f32)
{
	char buf[RENDER_SCALAR_MAX];
	if (v != v) {
		sink_printf(s, ", \"%s\": null", key);
		return;
	}
	if (f32)
		render_f32((float)v, buf);
	else
		render_f64(v, buf);
	sink_printf(s, ", \"%s\": %s", key, buf);
}

/* The figures of tensor g after its "stats" member. */
static void json_figures(struct sink *out, const struct gguf_tensor *g,
                         const struct tensor_stats *s)
{
	sink_puts(out, ", \"problems\": [");
	const char *sep = "";
	const struct { bool on; const char *name; } problems[] = {
		{ s->nan != 0, "nan" }, { s->pos_inf != 0, "pos_inf" },
		{ s->neg_inf != 0, "neg_inf" }, { s->bad_blocks != 0, "bad_blocks" },
		{ s->elements && s->zeros == s->elements, "all_zero" },
		{ s->subnormals != 0, "subnormals" },
	};
	for (size_t k = 0; k < sizeof problems / sizeof problems[0]; k++) {
		if (!problems[k].on)
			continue;
		sink_printf(out, "%s\"%s\"", sep, problems[k].name);
		sep = ", ";
	}
	sink_printf(out, "], \"elements\": %" PRIu64, s->elements);
	json_float(out, "min", s->min, true);
	json_float(out, "max", s->max, true);
	json_float(out, "mean", s->mean, false);
	json_float(out, "std", s->std, false);
	json_float(out, "absmax", s->absmax, true);
	sink_printf(out, ", \"nan\": %" PRIu64 ", \"pos_inf\": %" PRIu64 ", \"neg_inf\": %" PRIu64
	            ", \"zeros\": %" PRIu64 ", \"subnormals\": %" PRIu64, s->nan, s->pos_inf,
	            s->neg_inf, s->zeros, s->subnormals);
	if (s->has_scales)
		sink_printf(out, ", \"blocks\": %" PRIu64 ", \"bad_blocks\": %" PRIu64 "}",
		            blocks_of(g), s->bad_blocks);
	else
		sink_puts(out, ", \"blocks\": null, \"bad_blocks\": null}");
}

void render_check_json(struct sink *s, const struct ggufs_model *m,
                       const struct check_tensor *res, const struct check_counts *c)
{
	sink_puts(s, "{\"file\": ");
	render_json_string(s, model_path(m), strlen(model_path(m)));
	sink_printf(s, ", \"bytes\": %" PRIu64 ", \"tensors\": [", c->bytes);
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		static const char *const status[] = { "ok", "warning", "unhealthy", "not checked" };
		char tn[16];
		sink_puts(s, i ? ",\n  {\"name\": " : "\n  {\"name\": ");
		render_json_string(s, g->name.ptr, g->name.len);
		sink_printf(s, ", \"type\": \"%s\", \"status\": \"%s\"", ggml_type_name(g->type, tn),
		            status[verdict_of(g, &res[i])]);
		if (!g->has_f32) {
			sink_puts(s, ", \"stats\": null}");
			continue;
		}
		/* the tensor's file under stats/, as the tree names it */
		char rel[sizeof "stats/" + NAMES_BUF] = "stats/";
		size_t rl = names_encode(g->name.ptr, g->name.len, true, rel + strlen("stats/"));
		sink_puts(s, ", \"stats\": ");
		render_json_string(s, rel, strlen("stats/") + rl);
		json_figures(s, g, &res[i].s);
	}
	sink_printf(s, "\n], \"unhealthy\": %" PRIu64 ", \"warnings\": %" PRIu64
	            ", \"not_checked\": %" PRIu64 ", \"healthy\": %s}\n",
	            c->unhealthy, c->warnings, c->not_checked, c->unhealthy ? "false" : "true");
}
