/* A recipe file (lib/1-format/recipe_file.h) read as llama-quantize reads its options:
 * words split as a shell splits them, NAME, BASE (any case, the aliases), the options
 * and their last-one-counts, patterns lowercased and searched (ecma_regex.h), the first
 * match winning, the parameters a recipe gives; and every refusal, one line naming the
 * file and the line. tests/llama/test_quant_recipes.py checks the files recipes make
 * against llama-quantize itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "recipe_file.h"
#include "types.h"

static int parse(const char *text, struct recipe_set *rs, char err[GGUF_ERR_MAX])
{
	return recipes_parse(text, strlen(text), "mixes.txt", rs, err);
}

static uint32_t lookup(const struct recipe *r, const char *name)
{
	return recipe_tensor_type((void *)r, name, strlen(name));
}

static void test_issue_example(void **state)
{
	(void)state;
	const char *text =
		"# NAME   BASE    llama-quantize options\n"
		"Q4_K_L   Q4_K_M  --output-tensor-type q8_0 --token-embedding-type q8_0\n"
		"\n"
		"   \t\n"
		"MIX3     IQ3_M   --tensor-type ffn_down=q4_k --tensor-type \"blk\\.[0-3]\\.attn_v=q8_0\"\n";
	struct recipe_set rs;
	char err[GGUF_ERR_MAX];
	assert_int_equal(parse(text, &rs, err), 0);
	assert_int_equal(rs.n, 2);
	const struct recipe *l = recipe_find(&rs, "Q4_K_L");
	assert_non_null(l);
	assert_int_equal(l->line, 2);
	assert_string_equal(l->base->name, "Q4_K_M");
	assert_int_equal(l->output_tensor_type, GGML_TYPE_Q8_0);
	assert_int_equal(l->token_embedding_type, GGML_TYPE_Q8_0);
	assert_int_equal(l->n_overrides, 0);
	const struct recipe *m = recipe_find(&rs, "MIX3");
	assert_int_equal(m->line, 5);
	assert_string_equal(m->base->name, "IQ3_M");
	assert_int_equal(m->n_overrides, 2);
	/* the backslashes inside double quotes reach the regex as typed */
	assert_string_equal(m->overrides[1].pattern, "blk\\.[0-3]\\.attn_v");
	assert_int_equal(lookup(m, "blk.7.ffn_down.weight"), GGML_TYPE_Q4_K);
	assert_int_equal(lookup(m, "blk.2.attn_v.weight"), GGML_TYPE_Q8_0);
	assert_int_equal(lookup(m, "blk.4.attn_v.weight"), QUANT_TYPE_NONE);
	assert_int_equal(lookup(m, "blkx2.attn_v.weight"), QUANT_TYPE_NONE);
	assert_null(recipe_find(&rs, "mix3"));
	struct quant_params p;
	recipe_params(m, &p);
	assert_int_equal(p.ftype, QUANT_FTYPE_IQ3_M);
	assert_ptr_equal(p.tensor_type, recipe_tensor_type);
	assert_int_equal(p.output_tensor_type, QUANT_TYPE_NONE);
	assert_true(p.quantize_output_tensor);
	recipe_params(l, &p);
	assert_null(p.tensor_type);
	assert_int_equal(p.output_tensor_type, GGML_TYPE_Q8_0);
	recipes_free(&rs);
	assert_int_equal(rs.n, 0);
}

static void test_options(void **state)
{
	(void)state;
	/* any case for BASE and TYPE, the aliases, the last value counts, the first
	 * pattern wins, patterns lowercased (\D becomes \d), single quotes as written, a
	 * backslash outside quotes, a comment after the words, CRLF */
	const char *text =
		"A q4_k --pure --leave-output-tensor --output-tensor-type Q6_K "
		"--output-tensor-type bf16\r\n"
		"b-1.x Q5_K --tensor-type 'ATTN=q5_0' --tensor-type attn_v=Q8_0 # a comment\n"
		"C+ iq2_xxs --tensor-type 'blk\\.\\D\\.=iq4_nl' --token-embedding-type f16\n"
		"D F16 --tensor-type \"a\\\"b\\\\.c\"=q4_0\n"
		"E Q8_0 --tensor-type a\\ b=q8_0\n";
	struct recipe_set rs;
	char err[GGUF_ERR_MAX];
	if (parse(text, &rs, err) != 0)
		fail_msg("%s", err);
	assert_int_equal(rs.n, 5);
	const struct recipe *a = &rs.recipes[0];
	assert_string_equal(a->base->name, "Q4_K_M");
	assert_true(a->pure && a->leave_output_tensor);
	assert_int_equal(a->output_tensor_type, GGML_TYPE_BF16);
	struct quant_params p;
	recipe_params(a, &p);
	assert_true(p.pure);
	assert_false(p.quantize_output_tensor);
	const struct recipe *b = recipe_find(&rs, "b-1.x");
	assert_string_equal(b->base->name, "Q5_K_M");
	assert_string_equal(b->overrides[0].pattern, "attn");
	assert_int_equal(lookup(b, "blk.0.attn_v.weight"), GGML_TYPE_Q5_0);
	assert_int_equal(lookup(b, "blk.0.ffn_up.weight"), QUANT_TYPE_NONE);
	const struct recipe *c = recipe_find(&rs, "C+");
	assert_string_equal(c->base->name, "IQ2_XXS");
	assert_string_equal(c->overrides[0].pattern, "blk\\.\\d\\.");
	assert_int_equal(lookup(c, "blk.3.ffn_up.weight"), GGML_TYPE_IQ4_NL);
	assert_int_equal(lookup(c, "blk.13.ffn_up.weight"), QUANT_TYPE_NONE);
	assert_int_equal(c->token_embedding_type, GGML_TYPE_F16);
	assert_string_equal(recipe_find(&rs, "D")->overrides[0].pattern, "a\"b\\.c");
	assert_string_equal(recipe_find(&rs, "E")->overrides[0].pattern, "a b");
	recipes_free(&rs);
}

/* text refused with a line that starts with want */
static void refused(const char *text, const char *want)
{
	struct recipe_set rs;
	char err[GGUF_ERR_MAX] = "";
	if (parse(text, &rs, err) == 0)
		fail_msg("accepted: %s", text);
	assert_int_equal(rs.n, 0);
	assert_null(strchr(err, '\n'));
	if (strncmp(err, want, strlen(want)) != 0)
		fail_msg("refusal '%s' is not '%s...'", err, want);
}

static void test_refusals(void **state)
{
	(void)state;
	refused("OK Q4_K_M\nX\n", "mixes.txt:2: a recipe is NAME BASE");
	refused("X Q9_K\n", "mixes.txt:1: unknown BASE 'Q9_K'");
	refused("X COPY\n", "mixes.txt:1: unknown BASE 'COPY'");
	refused("q4_k_m Q4_K_M --pure\n", "mixes.txt:1: NAME 'q4_k_m' is a built-in one");
	refused("Q4_K Q4_K_M\n", "mixes.txt:1: NAME 'Q4_K' is a built-in one");
	refused("IQ2_XXS Q4_K_M\n", "mixes.txt:1: NAME 'IQ2_XXS' is a built-in one");
	refused("a/b Q4_K_M\n", "mixes.txt:1: NAME 'a/b' is not");
	refused(".x Q4_K_M\n", "mixes.txt:1: NAME '.x' is not");
	refused("X Q4_K_M\n\n# c\nx Q8_0\n", "mixes.txt:4: NAME 'x' again (line 1 has it)");
	refused("X Q4_K_M --tensor-type\n", "mixes.txt:1: --tensor-type wants a value");
	refused("X Q4_K_M --output-tensor-type q9_0\n", "mixes.txt:1: unknown type 'q9_0'");
	refused("X Q4_K_M --token-embedding-type i32\n", "mixes.txt:1: unknown type 'i32'");
	refused("X Q4_K_M --token-embedding-type q8_1\n", "mixes.txt:1: unknown type 'q8_1'");
	refused("X Q4_K_M --tensor-type attn\n", "mixes.txt:1: --tensor-type 'attn' is not");
	refused("X Q4_K_M --tensor-type =q8_0\n", "mixes.txt:1: --tensor-type '=q8_0' has no PATTERN");
	refused("X Q4_K_M --tensor-type attn=\n", "mixes.txt:1: --tensor-type 'attn=' has no TYPE");
	refused("X Q4_K_M --tensor-type attn=q8\n", "mixes.txt:1: unknown type 'q8'");
	refused("X Q4_K_M --tensor-type a(b=q8_0\n", "mixes.txt:1: the regex 'a(b' does not compile");
	refused("X Q4_K_M --tensor-type \"(?<!a)b=q8_0\"\n", "mixes.txt:1: the regex");
	/* PATTERN ends at the first "=", as llama-quantize cuts it */
	refused("X Q4_K_M --tensor-type \"(?=a)b=q8_0\"\n", "mixes.txt:1: unknown type 'a)b=q8_0'");
	refused("X Q4_K_M --tensor-type \"\\1(a)=q8_0\"\n", "mixes.txt:1: the regex");
	refused("X Q4_K_M --allow-requantize\n", "mixes.txt:1: '--allow-requantize' is not an option");
	refused("X Q4_K_M --imatrix f\n", "mixes.txt:1: '--imatrix' is not an option");
	refused("X Q4_K_M extra\n", "mixes.txt:1: 'extra' is not an option");
	refused("X Q4_K_M --tensor-type \"attn=q8_0\n", "mixes.txt:1: a \" is not closed");
	refused("X Q4_K_M --tensor-type 'attn=q8_0\n", "mixes.txt:1: a ' is not closed");
	refused("X Q4_K_M \\\n", "mixes.txt:1: a backslash ends the line");
	const char nul[] = "X Q4_K_M\nY Q8_0 \0\n";
	struct recipe_set rs;
	char err[GGUF_ERR_MAX];
	assert_int_equal(recipes_parse(nul, sizeof nul - 1, "f", &rs, err), -1);
	assert_string_equal(err, "f:2: a NUL byte in the line");
}

static void test_bounds(void **state)
{
	(void)state;
	/* RECIPE_MAX recipes are taken, one more is not */
	size_t cap = (RECIPE_MAX + 1) * 16;
	char *text = malloc(cap);
	assert_non_null(text);
	size_t len = 0;
	for (int i = 0; i < RECIPE_MAX; i++)
		len += (size_t)snprintf(text + len, cap - len, "R%d Q8_0\n", i);
	struct recipe_set rs;
	char err[GGUF_ERR_MAX];
	assert_int_equal(recipes_parse(text, len, "f", &rs, err), 0);
	assert_int_equal(rs.n, RECIPE_MAX);
	recipes_free(&rs);
	len += (size_t)snprintf(text + len, cap - len, "R%d Q8_0\n", RECIPE_MAX);
	assert_int_equal(recipes_parse(text, len, "f", &rs, err), -1);
	assert_string_equal(err, "f:1025: more than 1024 recipes");
	free(text);
	/* a search that would backtrack for ever gives up, and says so */
	assert_int_equal(parse("X Q4_K_M --tensor-type \"^(a|a)*[bc]=q8_0\"\n", &rs, err), 0);
	assert_int_equal(lookup(&rs.recipes[0], "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
	                 QUANT_TYPE_TOO_COMPLEX);
	recipes_free(&rs);
	assert_int_equal(recipes_read("/nonexistent/mixes.txt", &rs, err), -1);
	assert_string_equal(err, "/nonexistent/mixes.txt: No such file or directory");
	assert_int_equal(recipes_read("/", &rs, err), -1);
}

UNIT_TESTS(cmocka_unit_test(test_issue_example), cmocka_unit_test(test_options),
           cmocka_unit_test(test_refusals), cmocka_unit_test(test_bounds))
