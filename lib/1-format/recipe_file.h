/* A recipe file (-o recipes=FILE): quant files of a file type and llama-quantize's
 * per-tensor options, one a line:
 *
 *     # NAME   BASE    llama-quantize options
 *     Q4_K_L   Q4_K_M  --output-tensor-type q8_0 --token-embedding-type q8_0
 *     MIX3     IQ3_M   --tensor-type ffn_down=q4_k --tensor-type "blk\.[0-3]\.attn_v=q8_0"
 *
 * A line is split into words as a shell splits it (blanks apart; "..." groups, a
 * backslash inside kept but before " \ $ `; '...' groups as written; a backslash outside
 * quotes takes the next byte as it is; a word starting with # comments out the rest);
 * blank lines and comment lines are skipped. NAME: 1 to 64 bytes of [A-Za-z0-9_.+-], not
 * starting with ".", no built-in NAME (nor llama-quantize's aliases), in any case, and
 * each once. BASE: a NAME quant_rules.h knows, in any case as llama-quantize reads it,
 * or its aliases Q4_K and Q5_K. The options, as llama-quantize parses them
 * (tools/quantize/quantize.cpp): --tensor-type PATTERN=TYPE (repeatable; PATTERN up to
 * the first "=", lowercased byte by byte, compiled as std::regex compiles it: ecma_regex.h;
 * the first that matches a name gives its type), --output-tensor-type TYPE,
 * --token-embedding-type TYPE (the last one given counts), --pure,
 * --leave-output-tensor. TYPE: a ggml type name in any case (q8_0, Q4_K, bf16) of a type
 * llama.cpp converts to. */
#ifndef GGUFS_RECIPE_FILE_H
#define GGUFS_RECIPE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ecma_regex.h"
#include "errline.h"
#include "quant_rules.h"

#define RECIPE_NAME_MAX 64
#define RECIPE_FILE_MAX (1u << 20)   /* bytes of a recipe file */
#define RECIPE_MAX 1024              /* recipes in one file */
#define RECIPE_OVERRIDES_MAX 1024    /* --tensor-type options of one recipe */

/* One --tensor-type: its pattern (lowercased, NUL-terminated) compiled, and its type. */
struct recipe_override {
	char *pattern;
	struct ecma_regex *re;
	uint32_t type;
};

struct recipe {
	char name[RECIPE_NAME_MAX + 1];
	const struct quant_name *base;
	uint32_t line;                  /* where it is in the file, from 1 */
	uint32_t output_tensor_type;    /* or QUANT_TYPE_NONE */
	uint32_t token_embedding_type;  /* or QUANT_TYPE_NONE */
	bool pure, leave_output_tensor;
	size_t n_overrides;
	struct recipe_override *overrides;
};

struct recipe_set {
	size_t n;
	struct recipe *recipes;
};

/* Parses text (len bytes) as a recipe file named file (for the error line only). 0 with
 * the recipes in rs (in file order), or -1 with one line in err naming file and the line
 * ("FILE:LINE: ..."), rs then empty: a malformed line (an unclosed quote, a trailing
 * backslash, a NUL, fewer than two words), a bad or repeated NAME, an unknown BASE or
 * TYPE or option, an option's value missing, a PATTERN=TYPE without its "=", PATTERN or
 * TYPE, a PATTERN std::regex refuses, a file over RECIPE_FILE_MAX bytes or RECIPE_MAX
 * recipes, a recipe over RECIPE_OVERRIDES_MAX overrides, or out of memory. */
int recipes_parse(const char *text, size_t len, const char *file, struct recipe_set *rs,
                  char err[GGUF_ERR_MAX]);

/* Reads and parses the file at path, as above; its refusals name path. */
int recipes_read(const char *path, struct recipe_set *rs, char err[GGUF_ERR_MAX]);

void recipes_free(struct recipe_set *rs);

/* The recipe called name (exactly), or NULL. */
const struct recipe *recipe_find(const struct recipe_set *rs, const char *name);

/* p as llama-quantize OPTIONS ... BASE sets it: BASE's ftype, the recipe's options, its
 * overrides as p's tensor_type (r must outlive p's use). The rest of p (a matrix,
 * allow_requantize) as quant_params_default leaves it. */
void recipe_params(const struct recipe *r, struct quant_params *p);

/* The type of the first override of r (a const struct recipe *) whose pattern matches
 * name (len bytes), QUANT_TYPE_NONE when none does, QUANT_TYPE_TOO_COMPLEX when a
 * search passed its bound: quant_params.tensor_type. */
uint32_t recipe_tensor_type(void *r, const char *name, size_t len);

#endif
