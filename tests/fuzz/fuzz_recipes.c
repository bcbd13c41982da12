/* libFuzzer target: one input as a recipe file (recipes_parse). A file refused must
 * leave one non-empty line naming the file and a line; one read must give recipes
 * whose NAMEs are found by name, each a BASE, line numbers that grow, types of the
 * table, patterns that search a few tensor names without crashing (a search may give
 * up), and parameters recipe_params fills. Any broken promise aborts. Also built
 * without libFuzzer into a regression runner (replay.c) over corpus_recipes/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recipe_file.h"
#include "types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_recipes: %s\n", why);
	abort();
}

static bool type_ok(uint32_t t, bool none_ok)
{
	return (none_ok && t == QUANT_TYPE_NONE) || (t < GGML_TYPE_COUNT && ggml_type_get(t));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"token_embd.weight", "blk.0.attn_v.weight", "blk.12.ffn_down.weight",
		"output.weight", "", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
	};
	/* a copy of exactly size bytes, so that a read past it is seen */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	if (size)
		memcpy(text, data, size);
	struct recipe_set rs;
	char err[GGUF_ERR_MAX] = "";
	if (recipes_parse(text, size, "f", &rs, err) != 0) {
		if (strncmp(err, "f:", 2) || strchr(err, '\n'))
			broken("a refusal without its one line naming the file");
		if (rs.n || rs.recipes)
			broken("a refusal that leaves recipes");
		free(text);
		return 0;
	}
	uint32_t last_line = 0;
	for (size_t i = 0; i < rs.n; i++) {
		const struct recipe *r = &rs.recipes[i];
		if (recipe_find(&rs, r->name) != r)
			broken("a recipe not found by its NAME, or a NAME twice");
		if (!r->base || quant_name_find(r->base->name) != r->base)
			broken("a recipe without a BASE of the table");
		if (r->line <= last_line)
			broken("line numbers that do not grow");
		last_line = r->line;
		if (!type_ok(r->output_tensor_type, true) || !type_ok(r->token_embedding_type, true))
			broken("an option's type not of the table");
		for (size_t k = 0; k < r->n_overrides; k++)
			if (!r->overrides[k].re || !type_ok(r->overrides[k].type, false))
				broken("an override without its regex or type");
		for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
			uint32_t t = recipe_tensor_type((void *)r, names[k], strlen(names[k]));
			if (t != QUANT_TYPE_TOO_COMPLEX && !type_ok(t, true))
				broken("a lookup that gives no type of the table");
		}
		struct quant_params p;
		recipe_params(r, &p);
		if (p.ftype != r->base->ftype || p.pure != r->pure ||
		    p.quantize_output_tensor == r->leave_output_tensor)
			broken("parameters that are not the recipe's");
	}
	recipes_free(&rs);
	free(text);
	return 0;
}
