#include "render_quants.h"

#include <inttypes.h>
#include <string.h>

#include "types.h"

/* One made NAME's line. */
static void quant_line(struct sink *s, const struct quant_name *qn, const struct quant_plan *qp)
{
	/* the data bits over the values, in integers as far as they go: bytes x 8 fits
	 * in a double's 53 bits for any file below 2^50 bytes */
	double bpw = qp->n_elements ? (double)qp->data_bytes * 8.0 / (double)qp->n_elements : 0;
	sink_printf(s, "%s\t%" PRIu32 "\t%" PRIu64 "\t%.4f\t", qn->name, qn->ftype, qp->size, bpw);
	uint32_t types[GGML_TYPE_COUNT];
	uint64_t counts[GGML_TYPE_COUNT];
	uint32_t n = quant_plan_type_counts(qp, types, counts, GGML_TYPE_COUNT);
	for (uint32_t i = 0; i < n && i < GGML_TYPE_COUNT; i++) {
		char b[16];
		sink_printf(s, "%s%s:%" PRIu64, i ? "," : "", ggml_type_name(types[i], b), counts[i]);
	}
	sink_putc(s, '\n');
}

void render_quants_tsv(struct sink *s, const struct quant_set *qs)
{
	sink_puts(s, "name\tftype\tbytes\tbits_per_weight\ttensor_types\n");
	for (size_t i = 0; i < qs->n && !sink_done(s); i++)
		if (!qs->why[i][0])
			quant_line(s, &qs->names[i], &qs->plans[i]);
	bool requant = false, needs_matrix = false;
	for (size_t i = 0; i < qs->n && !sink_done(s); i++) {
		if (!qs->why[i][0])
			continue;
		sink_printf(s, "# %s: not made: ", qs->names[i].name);
		/* a reason may quote a tensor name, whose bytes are the file's */
		for (const char *c = qs->why[i]; *c; c++)
			sink_putc(s, (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c);
		sink_putc(s, '\n');
		requant |= strstr(qs->why[i], "requantizing") != NULL;
		needs_matrix |= strstr(qs->why[i], "requires an imatrix") != NULL;
	}
	if (requant && !qs->requantize)
		sink_puts(s, "# the model is already quantized: llama-quantize makes these only with "
		             "--allow-requantize, ggufs with -o requantize\n");
	if (needs_matrix && !qs->imatrix)
		sink_puts(s, "# these need an importance matrix: llama-quantize makes them with "
		             "--imatrix FILE, ggufs with -o imatrix=FILE\n");
}
