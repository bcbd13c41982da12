#include "render_diff.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json_string.h"
#include "model.h"
#include "render_value.h"

/* The figures of the whole model: its compared tensors' sums, and each model's tensor
 * data over all of its tensors. */
struct totals {
	uint64_t tensors;        /* compared */
	struct diff_sums sums;   /* over them */
	double lowest_cosine;    /* NaN when no tensor has a cosine */
	uint64_t lowest_at;      /* its pair */
	/* compared tensors whose cosine or rel_rmse is undefined (an all-zero side: a
	 * destroyed tensor must not hide behind the lowest cosine), and the first of them */
	uint64_t undefined, first_undefined;
	uint64_t bytes_a, bytes_b, elements_a, elements_b;
};

static void totals_of(const struct diff_report *r, struct totals *t)
{
	memset(t, 0, sizeof *t);
	diff_sums_init(&t->sums);
	t->lowest_cosine = NAN;
	for (uint64_t k = 0; k < r->plan->n_same; k++) {
		if (!r->compared[k])
			continue;
		struct diff_figures f;
		diff_figures(&r->sums[k], &f);
		t->tensors++;
		diff_sums_merge(&t->sums, &r->sums[k]);
		if ((isnan(f.cosine) || isnan(f.rel_rmse)) && t->undefined++ == 0)
			t->first_undefined = k;
		if (!isnan(f.cosine) && (isnan(t->lowest_cosine) || f.cosine < t->lowest_cosine)) {
			t->lowest_cosine = f.cosine;
			t->lowest_at = k;
		}
	}
	for (uint64_t i = 0; i < model_n_tensors(r->a); i++) {
		t->bytes_a += model_tensor(r->a, i)->size;
		t->elements_a += model_tensor(r->a, i)->n_elements;
	}
	for (uint64_t i = 0; i < model_n_tensors(r->b); i++) {
		t->bytes_b += model_tensor(r->b, i)->size;
		t->elements_b += model_tensor(r->b, i)->n_elements;
	}
}

/* Bits per weight: tensor data bits over elements; NaN for a model of no elements. */
static double bpw(uint64_t bytes, uint64_t elements)
{
	return elements ? 8.0 * (double)bytes / (double)elements : NAN;
}

/* The model's rel_rmse: √(Σ(b-a)² / Σa²) over every compared position. */
static double model_rel_rmse(const struct diff_sums *s)
{
	return s->elements > s->nonfinite && s->a2 > 0 ? sqrt(s->d2 / s->a2) : NAN;
}

/* A float64 figure in the shortest text that reads back; nothing for NaN (TSV) or
 * null (JSON). */
static void put_f64(struct sink *s, double v, bool json)
{
	char buf[RENDER_SCALAR_MAX];
	if (isnan(v)) {
		if (json)
			sink_puts(s, "null");
		return;
	}
	sink_put(s, buf, render_f64(v, buf));
}

static void put_type(struct sink *s, const struct gguf_tensor *g, bool json)
{
	char buf[16];
	const char *tn = ggml_type_name(g->type, buf);
	if (json)
		render_json_string(s, tn, strlen(tn));
	else
		sink_puts(s, tn);
}

/* A tensor's dims in GGUF order (ne0 first): "256,8000", or a JSON array. */
static void put_dims(struct sink *s, const struct gguf_tensor *g, bool json)
{
	if (json)
		sink_putc(s, '[');
	for (uint32_t d = 0; d < g->n_dims && d < GGUF_MAX_DIMS; d++)
		sink_printf(s, "%s%" PRIu64, d ? (json ? ", " : ",") : "", g->ne[d]);
	if (json)
		sink_putc(s, ']');
}

/* A name: escaped for TSV, a JSON string for JSON. */
static void put_name(struct sink *s, const struct gguf_str *name, bool json)
{
	if (json)
		render_json_string(s, name->ptr, name->len);
	else
		render_escaped(s, name->ptr, name->len);
}

/* A metadata value as metadata/KEY shows it, its final newline dropped and cut at
 * RENDER_DIFF_VALUE_CUT bytes (never inside a UTF-8 sequence), escaped (TSV) or a JSON
 * string; *bytes gets the length of that text uncut: metadata/KEY's size less the final
 * newline, the value's own length (a 300-byte string is 300 bytes, not 301). */
static void diff_value(struct sink *s, const struct gguf_value *v, bool json, uint64_t *bytes)
{
	struct sink count = sink_counter();
	render_value(&count, v);
	*bytes = count.pos;
	if (*bytes > 0) {
		char last;
		struct sink end = sink_window(&last, *bytes - 1, 1);
		render_value(&end, v);
		if (sink_filled(&end) == 1 && last == '\n')
			(*bytes)--;
	}
	char text[RENDER_DIFF_VALUE_CUT + 1];
	struct sink w = sink_window(text, 0, sizeof text);
	render_value(&w, v);
	uint64_t len = sink_filled(&w);
	if (len > RENDER_DIFF_VALUE_CUT) {
		len = RENDER_DIFF_VALUE_CUT;
		/* back to the start of a UTF-8 sequence cut short */
		uint64_t k = len;
		while (k > 0 && len - k < 4 && ((unsigned char)text[k] & 0xc0) == 0x80)
			k--;
		if (k < len && ((unsigned char)text[k] & 0xc0) == 0x80)
			k = len;   /* not UTF-8 after all: cut where asked */
		len = k;
	} else if (len > *bytes) {
		len = *bytes;   /* the final newline */
	}
	if (json)
		render_json_string(s, text, len);
	else
		render_escaped(s, text, len);
	if (!json && *bytes > RENDER_DIFF_VALUE_CUT)
		sink_printf(s, "... (%" PRIu64 " bytes)", *bytes);
}

static void put_vtype(struct sink *s, const struct gguf_value *v, bool json)
{
	char t[RENDER_TYPE_MAX];
	size_t n = render_value_type(v, t);
	if (json)
		render_json_string(s, t, n);
	else
		sink_put(s, t, n);
}

/* One compared tensor's line (TSV) or object (JSON). */
static void put_pair(struct sink *s, const struct diff_report *r, uint64_t k, bool json)
{
	const struct gguf_tensor *ga = model_tensor(r->a, r->plan->same[k].a);
	const struct gguf_tensor *gb = model_tensor(r->b, r->plan->same[k].b);
	struct diff_figures f = { NAN, NAN, NAN, NAN };
	if (r->compared[k])
		diff_figures(&r->sums[k], &f);
	const char *sep = json ? ", \"" : "\t";
	if (json)
		sink_puts(s, "{\"name\": ");
	put_name(s, &ga->name, json);
	sink_printf(s, "%s%s", sep, json ? "type_a\": " : "");
	put_type(s, ga, json);
	sink_printf(s, "%s%s", sep, json ? "type_b\": " : "");
	put_type(s, gb, json);
	sink_printf(s, "%s%s%" PRIu64, sep, json ? "elements\": " : "", ga->n_elements);
	const struct { const char *key; double v; } figs[] = {
		{ "rmse", f.rmse }, { "rel_rmse", f.rel_rmse }, { "max_abs_err", f.max_abs_err },
		{ "cosine", f.cosine },
	};
	for (size_t j = 0; j < sizeof figs / sizeof figs[0]; j++) {
		sink_puts(s, sep);
		if (json)
			sink_printf(s, "%s\": ", figs[j].key);
		put_f64(s, figs[j].v, json);
	}
	sink_printf(s, "%s%s", sep, json ? "nonfinite\": " : "");
	if (r->compared[k])
		sink_printf(s, "%" PRIu64, r->sums[k].nonfinite);
	else if (json)
		sink_puts(s, "null");
	sink_puts(s, json ? "}" : "\n");
}

static void tsv_unpaired(struct sink *s, const struct diff_report *r)
{
	const struct diff_plan *p = r->plan;
	const struct ggufs_model *side[2] = { r->a, r->b };
	const uint64_t *only[2] = { p->only_a, p->only_b }, n_only[2] = { p->n_only_a, p->n_only_b };
	for (int w = 0; w < 2; w++) {
		for (uint64_t k = 0; k < n_only[w]; k++) {
			const struct gguf_tensor *g = model_tensor(side[w], only[w][k]);
			sink_puts(s, w ? "only_b\t" : "only_a\t");
			put_name(s, &g->name, false);
			sink_putc(s, '\t');
			put_type(s, g, false);
			sink_putc(s, '\t');
			put_dims(s, g, false);
			sink_putc(s, '\n');
		}
	}
	for (uint64_t k = 0; k < p->n_dims; k++) {
		const struct gguf_tensor *ga = model_tensor(r->a, p->dims[k].a);
		const struct gguf_tensor *gb = model_tensor(r->b, p->dims[k].b);
		sink_puts(s, "dims\t");
		put_name(s, &ga->name, false);
		const struct gguf_tensor *g2[2] = { ga, gb };
		for (int w = 0; w < 2; w++) {
			sink_putc(s, '\t');
			put_type(s, g2[w], false);
			sink_putc(s, '\t');
			put_dims(s, g2[w], false);
		}
		sink_putc(s, '\n');
	}
	const uint64_t *keys[2] = { p->keys_removed, p->keys_added };
	const uint64_t n_keys[2] = { p->n_keys_removed, p->n_keys_added };
	for (int w = 0; w < 2; w++) {
		for (uint64_t k = 0; k < n_keys[w]; k++) {
			const struct gguf_kv *kv = &model_meta(side[w])->kv[keys[w][k]];
			uint64_t bytes;
			sink_puts(s, w ? "key_added\t" : "key_removed\t");
			put_name(s, &kv->key, false);
			sink_putc(s, '\t');
			put_vtype(s, &kv->value, false);
			sink_putc(s, '\t');
			diff_value(s, &kv->value, false, &bytes);
			sink_putc(s, '\n');
		}
	}
	for (uint64_t k = 0; k < p->n_keys_changed; k++) {
		const struct gguf_kv *kv[2] = { &model_meta(r->a)->kv[p->keys_changed[k].a],
		                                &model_meta(r->b)->kv[p->keys_changed[k].b] };
		uint64_t bytes;
		sink_puts(s, "key_changed\t");
		put_name(s, &kv[0]->key, false);
		for (int w = 0; w < 2; w++) {
			sink_putc(s, '\t');
			put_vtype(s, &kv[w]->value, false);
			sink_putc(s, '\t');
			diff_value(s, &kv[w]->value, false, &bytes);
		}
		sink_putc(s, '\n');
	}
}

void render_diff_tsv(struct sink *s, const struct diff_report *r)
{
	sink_puts(s, "name\ttype_a\ttype_b\telements\trmse\trel_rmse\tmax_abs_err\tcosine\t"
	             "nonfinite\n");
	for (uint64_t k = 0; k < r->plan->n_same; k++)
		put_pair(s, r, k, false);
	tsv_unpaired(s, r);
	struct totals t;
	totals_of(r, &t);
	sink_printf(s, "model\ttensors=%" PRIu64 "\telements=%" PRIu64 "\tnonfinite=%" PRIu64
	            "\trel_rmse=", t.tensors, t.sums.elements, t.sums.nonfinite);
	put_f64(s, model_rel_rmse(&t.sums), false);
	sink_puts(s, "\tlowest_cosine=");
	put_f64(s, t.lowest_cosine, false);
	sink_puts(s, "\tlowest_cosine_tensor=");
	if (!isnan(t.lowest_cosine))
		put_name(s, &model_tensor(r->a, r->plan->same[t.lowest_at].a)->name, false);
	sink_printf(s, "\tundefined=%" PRIu64 "\tundefined_tensor=", t.undefined);
	if (t.undefined)
		put_name(s, &model_tensor(r->a, r->plan->same[t.first_undefined].a)->name, false);
	sink_printf(s, "\tbytes_a=%" PRIu64 "\tbytes_b=%" PRIu64 "\tbpw_a=", t.bytes_a, t.bytes_b);
	put_f64(s, bpw(t.bytes_a, t.elements_a), false);
	sink_puts(s, "\tbpw_b=");
	put_f64(s, bpw(t.bytes_b, t.elements_b), false);
	sink_putc(s, '\n');
}

/* "KEY": [ ... ] of the tensors of one model that do not pair. */
static void json_only(struct sink *s, const char *key, const struct ggufs_model *m,
                      const uint64_t *only, uint64_t n)
{
	sink_printf(s, ",\n\"%s\": [", key);
	for (uint64_t k = 0; k < n; k++) {
		const struct gguf_tensor *g = model_tensor(m, only[k]);
		sink_puts(s, k ? ",\n  {\"name\": " : "\n  {\"name\": ");
		put_name(s, &g->name, true);
		sink_puts(s, ", \"type\": ");
		put_type(s, g, true);
		sink_puts(s, ", \"dims\": ");
		put_dims(s, g, true);
		sink_putc(s, '}');
	}
	sink_putc(s, ']');
}

/* "KEY": [ ... ] of the keys of one model that the other has not. */
static void json_keys(struct sink *s, const char *key, const struct ggufs_model *m,
                      const uint64_t *keys, uint64_t n)
{
	sink_printf(s, ",\n\"%s\": [", key);
	for (uint64_t k = 0; k < n; k++) {
		const struct gguf_kv *kv = &model_meta(m)->kv[keys[k]];
		uint64_t bytes;
		sink_puts(s, k ? ",\n  {\"key\": " : "\n  {\"key\": ");
		put_name(s, &kv->key, true);
		sink_puts(s, ", \"type\": ");
		put_vtype(s, &kv->value, true);
		sink_puts(s, ", \"value\": ");
		diff_value(s, &kv->value, true, &bytes);
		sink_printf(s, ", \"bytes\": %" PRIu64 "}", bytes);
	}
	sink_putc(s, ']');
}

static void json_unpaired(struct sink *s, const struct diff_report *r)
{
	const struct diff_plan *p = r->plan;
	json_only(s, "only_a", r->a, p->only_a, p->n_only_a);
	json_only(s, "only_b", r->b, p->only_b, p->n_only_b);
	sink_puts(s, ",\n\"dims\": [");
	for (uint64_t k = 0; k < p->n_dims; k++) {
		const struct gguf_tensor *g[2] = { model_tensor(r->a, p->dims[k].a),
		                                   model_tensor(r->b, p->dims[k].b) };
		sink_puts(s, k ? ",\n  {\"name\": " : "\n  {\"name\": ");
		put_name(s, &g[0]->name, true);
		for (int w = 0; w < 2; w++) {
			sink_printf(s, ", \"type_%c\": ", "ab"[w]);
			put_type(s, g[w], true);
			sink_printf(s, ", \"dims_%c\": ", "ab"[w]);
			put_dims(s, g[w], true);
		}
		sink_putc(s, '}');
	}
	sink_putc(s, ']');
	json_keys(s, "keys_removed", r->a, p->keys_removed, p->n_keys_removed);
	json_keys(s, "keys_added", r->b, p->keys_added, p->n_keys_added);
	sink_puts(s, ",\n\"keys_changed\": [");
	for (uint64_t k = 0; k < p->n_keys_changed; k++) {
		const struct gguf_kv *kv[2] = { &model_meta(r->a)->kv[p->keys_changed[k].a],
		                                &model_meta(r->b)->kv[p->keys_changed[k].b] };
		sink_puts(s, k ? ",\n  {\"key\": " : "\n  {\"key\": ");
		put_name(s, &kv[0]->key, true);
		for (int w = 0; w < 2; w++) {
			uint64_t bytes;
			sink_printf(s, ", \"type_%c\": ", "ab"[w]);
			put_vtype(s, &kv[w]->value, true);
			sink_printf(s, ", \"value_%c\": ", "ab"[w]);
			diff_value(s, &kv[w]->value, true, &bytes);
			sink_printf(s, ", \"bytes_%c\": %" PRIu64, "ab"[w], bytes);
		}
		sink_putc(s, '}');
	}
	sink_putc(s, ']');
}

void render_diff_json(struct sink *s, const struct diff_report *r)
{
	sink_puts(s, "{\"a\": ");
	render_json_string(s, model_path(r->a), strlen(model_path(r->a)));
	sink_puts(s, ", \"b\": ");
	render_json_string(s, model_path(r->b), strlen(model_path(r->b)));
	sink_puts(s, ",\n\"tensors\": [");
	for (uint64_t k = 0; k < r->plan->n_same; k++) {
		sink_puts(s, k ? ",\n  " : "\n  ");
		put_pair(s, r, k, true);
	}
	sink_putc(s, ']');
	json_unpaired(s, r);
	struct totals t;
	totals_of(r, &t);
	sink_printf(s, ",\n\"model\": {\"tensors\": %" PRIu64 ", \"elements\": %" PRIu64
	            ", \"nonfinite\": %" PRIu64 ", \"rel_rmse\": ", t.tensors, t.sums.elements,
	            t.sums.nonfinite);
	put_f64(s, model_rel_rmse(&t.sums), true);
	sink_puts(s, ", \"lowest_cosine\": ");
	put_f64(s, t.lowest_cosine, true);
	sink_puts(s, ", \"lowest_cosine_tensor\": ");
	if (isnan(t.lowest_cosine))
		sink_puts(s, "null");
	else
		put_name(s, &model_tensor(r->a, r->plan->same[t.lowest_at].a)->name, true);
	sink_printf(s, ", \"undefined\": %" PRIu64 ", \"undefined_tensor\": ", t.undefined);
	if (t.undefined)
		put_name(s, &model_tensor(r->a, r->plan->same[t.first_undefined].a)->name, true);
	else
		sink_puts(s, "null");
	sink_printf(s, ", \"bytes_a\": %" PRIu64 ", \"bytes_b\": %" PRIu64 ", \"bpw_a\": ",
	            t.bytes_a, t.bytes_b);
	put_f64(s, bpw(t.bytes_a, t.elements_a), true);
	sink_puts(s, ", \"bpw_b\": ");
	put_f64(s, bpw(t.bytes_b, t.elements_b), true);
	sink_puts(s, "}}\n");
}
