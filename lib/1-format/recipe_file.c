#include "recipe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "types.h"

#define RECIPE_WORDS_MAX (2 * RECIPE_OVERRIDES_MAX + 16)

/* One line's words: copies, NUL-terminated, in one buffer of the line's length. */
struct recipe_words {
	size_t n;
	char *w[RECIPE_WORDS_MAX];
	char *buf;
};

static char recipe_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* llama-quantize's striequals: equal but for ASCII case. */
static bool recipe_iequal(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (recipe_lower(*a) != recipe_lower(*b))
			return false;
	return *a == *b;
}

/* Splits line (len bytes, no newline) into words as a shell does (recipe_file.h) into
 * ws (whose buf the caller frees). 0, or -1 with the reason in why. */
static int recipe_split(const char *line, size_t len, struct recipe_words *ws, char *why,
                        size_t why_len)
{
	ws->n = 0;
	ws->buf = malloc(len + 1);
	if (!ws->buf) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	char *out = ws->buf;
	size_t i = 0;
	for (;;) {
		while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
			i++;
		if (i >= len || line[i] == '#')
			return 0;
		if (ws->n == RECIPE_WORDS_MAX) {
			snprintf(why, why_len, "more than %d words", RECIPE_WORDS_MAX);
			return -1;
		}
		ws->w[ws->n++] = out;
		while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
			const char c = line[i++];
			if (c == '\\') {
				if (i >= len) {
					snprintf(why, why_len, "a backslash ends the line");
					return -1;
				}
				*out++ = line[i++];
			} else if (c == '\'') {
				const char *end = memchr(line + i, '\'', len - i);
				if (!end) {
					snprintf(why, why_len, "a ' is not closed");
					return -1;
				}
				memcpy(out, line + i, (size_t)(end - (line + i)));
				out += end - (line + i);
				i = (size_t)(end - line) + 1;
			} else if (c == '"') {
				for (;;) {
					if (i >= len) {
						snprintf(why, why_len, "a \" is not closed");
						return -1;
					}
					char d = line[i++];
					if (d == '"')
						break;
					if (d == '\\' && i < len && (line[i] == '"' || line[i] == '\\' ||
					                             line[i] == '$' || line[i] == '`'))
						d = line[i++];
					*out++ = d;
				}
			} else {
				*out++ = c;
			}
		}
		*out++ = 0;
	}
}

/* A type name as llama-quantize's parse_ggml_type reads it, of a type it converts to
 * (f32, f16, bf16, or a quantized type of known layout); QUANT_TYPE_NONE when not. */
static uint32_t recipe_type(const char *word)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (!t || !t->block_bytes || !recipe_iequal(t->name, word))
			continue;
		switch (id) {
		case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
		case GGML_TYPE_F64:
			return QUANT_TYPE_NONE;
		default:
			return id;
		}
	}
	return QUANT_TYPE_NONE;
}

/* BASE as llama-quantize's try_parse_ftype reads it, among the NAMEs ggufs has. */
static const struct quant_name *recipe_base(const char *word)
{
	if (recipe_iequal(word, "Q4_K"))
		return quant_name_find("Q4_K_M");
	if (recipe_iequal(word, "Q5_K"))
		return quant_name_find("Q5_K_M");
	size_t n;
	const struct quant_name *t = quant_names(&n);
	for (size_t i = 0; i < n; i++)
		if (recipe_iequal(t[i].name, word))
			return &t[i];
	t = quant_imatrix_names(&n);
	for (size_t i = 0; i < n; i++)
		if (recipe_iequal(t[i].name, word))
			return &t[i];
	return NULL;
}

/* Whether name is one a recipe may take (recipe_file.h); why says why not. */
static bool recipe_name_ok(const char *name, char *why, size_t why_len)
{
	const size_t len = strlen(name);
	if (len > RECIPE_NAME_MAX || name[0] == '.') {
		snprintf(why, why_len, "NAME '%.*s' is not 1 to %d bytes of [A-Za-z0-9_.+-] "
		         "not starting with '.'", RECIPE_NAME_MAX, name, RECIPE_NAME_MAX);
		return false;
	}
	for (size_t i = 0; i < len; i++) {
		const char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '+' || c == '-')) {
			snprintf(why, why_len, "NAME '%s' is not 1 to %d bytes of [A-Za-z0-9_.+-]",
			         name, RECIPE_NAME_MAX);
			return false;
		}
	}
	if (recipe_base(name) || recipe_iequal(name, "COPY")) {
		snprintf(why, why_len, "NAME '%s' is a built-in one", name);
		return false;
	}
	return true;
}

static void recipe_clear(struct recipe *r)
{
	for (size_t i = 0; i < r->n_overrides; i++) {
		free(r->overrides[i].pattern);
		ecma_regex_free(r->overrides[i].re);
	}
	free(r->overrides);
	r->overrides = NULL;
	r->n_overrides = 0;
}

/* --tensor-type's value as parse_tensor_type takes it, appended to r. 0, or -1 with why. */
static int recipe_override_add(struct recipe *r, const char *arg, char *why, size_t why_len)
{
	const char *sep = strchr(arg, '=');
	if (!sep) {
		snprintf(why, why_len, "--tensor-type '%s' is not PATTERN=TYPE", arg);
		return -1;
	}
	if (sep == arg) {
		snprintf(why, why_len, "--tensor-type '%s' has no PATTERN", arg);
		return -1;
	}
	if (!sep[1]) {
		snprintf(why, why_len, "--tensor-type '%s' has no TYPE", arg);
		return -1;
	}
	const uint32_t type = recipe_type(sep + 1);
	if (type == QUANT_TYPE_NONE) {
		snprintf(why, why_len, "unknown type '%s'", sep + 1);
		return -1;
	}
	if (r->n_overrides == RECIPE_OVERRIDES_MAX) {
		snprintf(why, why_len, "more than %d --tensor-type", RECIPE_OVERRIDES_MAX);
		return -1;
	}
	const size_t plen = (size_t)(sep - arg);
	char *pattern = malloc(plen + 1);
	struct recipe_override *o = realloc(r->overrides, (r->n_overrides + 1) * sizeof *o);
	if (!pattern || !o) {
		free(pattern);
		if (o)
			r->overrides = o;
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	r->overrides = o;
	for (size_t i = 0; i < plen; i++)
		pattern[i] = recipe_lower(arg[i]);
	pattern[plen] = 0;
	char rerr[GGUF_ERR_MAX];
	struct ecma_regex *re = ecma_regex_compile(pattern, plen, rerr);
	if (!re) {
		snprintf(why, why_len, "the regex '%.160s' does not compile: %.300s", pattern, rerr);
		free(pattern);
		return -1;
	}
	o[r->n_overrides++] = (struct recipe_override){ .pattern = pattern, .re = re, .type = type };
	return 0;
}

/* One line's words (at least one) as a recipe into r. 0, or -1 with why. */
static int recipe_of_words(const struct recipe_set *rs, const struct recipe_words *ws,
                           struct recipe *r, char *why, size_t why_len)
{
	if (ws->n < 2) {
		snprintf(why, why_len, "a recipe is NAME BASE [OPTIONS]");
		return -1;
	}
	if (!recipe_name_ok(ws->w[0], why, why_len))
		return -1;
	for (size_t i = 0; i < rs->n; i++)
		if (recipe_iequal(rs->recipes[i].name, ws->w[0])) {
			snprintf(why, why_len, "NAME '%s' again (line %u has it)", ws->w[0],
			         (unsigned)rs->recipes[i].line);
			return -1;
		}
	strcpy(r->name, ws->w[0]);
	r->base = recipe_base(ws->w[1]);
	if (!r->base) {
		snprintf(why, why_len, "unknown BASE '%s'", ws->w[1]);
		return -1;
	}
	for (size_t i = 2; i < ws->n; i++) {
		const char *opt = ws->w[i];
		if (!strcmp(opt, "--pure")) {
			r->pure = true;
			continue;
		}
		if (!strcmp(opt, "--leave-output-tensor")) {
			r->leave_output_tensor = true;
			continue;
		}
		const bool valued = !strcmp(opt, "--tensor-type") ||
		                    !strcmp(opt, "--output-tensor-type") ||
		                    !strcmp(opt, "--token-embedding-type");
		if (!valued) {
			snprintf(why, why_len, "'%s' is not an option of a recipe (--tensor-type, "
			         "--output-tensor-type, --token-embedding-type, --pure, "
			         "--leave-output-tensor)", opt);
			return -1;
		}
		if (i + 1 >= ws->n) {
			snprintf(why, why_len, "%s wants a value", opt);
			return -1;
		}
		const char *val = ws->w[++i];
		if (!strcmp(opt, "--tensor-type")) {
			if (recipe_override_add(r, val, why, why_len) < 0)
				return -1;
			continue;
		}
		const uint32_t type = recipe_type(val);
		if (type == QUANT_TYPE_NONE) {
			snprintf(why, why_len, "unknown type '%s'", val);
			return -1;
		}
		if (!strcmp(opt, "--output-tensor-type"))
			r->output_tensor_type = type;
		else
			r->token_embedding_type = type;
	}
	return 0;
}

int recipes_parse(const char *text, size_t len, const char *file, struct recipe_set *rs,
                  char err[GGUF_ERR_MAX])
{
	*rs = (struct recipe_set){ 0 };
	if (len > RECIPE_FILE_MAX) {
		gguf_errf(err, "%s: more than %u bytes", file, RECIPE_FILE_MAX);
		return -1;
	}
	char why[GGUF_ERR_MAX];
	uint32_t lineno = 0;
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(text + at, '\n', len - at);
		const size_t line_len = nl ? (size_t)(nl - (text + at)) : len - at;
		const char *line = text + at;
		at += line_len + (nl ? 1 : 0);
		lineno++;
		if (memchr(line, 0, line_len)) {
			gguf_errf(err, "%s:%u: a NUL byte in the line", file, lineno);
			goto fail;
		}
		struct recipe_words ws;
		if (recipe_split(line, line_len, &ws, why, sizeof why) < 0) {
			free(ws.buf);
			gguf_errf(err, "%s:%u: %s", file, lineno, why);
			goto fail;
		}
		if (ws.n == 0) {
			free(ws.buf);
			continue;
		}
		if (rs->n == RECIPE_MAX) {
			free(ws.buf);
			gguf_errf(err, "%s:%u: more than %d recipes", file, lineno, RECIPE_MAX);
			goto fail;
		}
		struct recipe *more = realloc(rs->recipes, (rs->n + 1) * sizeof *more);
		if (!more) {
			free(ws.buf);
			gguf_errf(err, "%s:%u: out of memory", file, lineno);
			goto fail;
		}
		rs->recipes = more;
		struct recipe *r = &more[rs->n];
		*r = (struct recipe){ .line = lineno, .output_tensor_type = QUANT_TYPE_NONE,
		                      .token_embedding_type = QUANT_TYPE_NONE };
		int rc = recipe_of_words(rs, &ws, r, why, sizeof why);
		free(ws.buf);
		if (rc < 0) {
			recipe_clear(r);
			gguf_errf(err, "%s:%u: %s", file, lineno, why);
			goto fail;
		}
		rs->n++;
	}
	return 0;
fail:
	recipes_free(rs);
	return -1;
}

int recipes_read(const char *path, struct recipe_set *rs, char err[GGUF_ERR_MAX])
{
	*rs = (struct recipe_set){ 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		gguf_errf(err, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		gguf_errf(err, "%s: not a regular file", path);
		close(fd);
		return -1;
	}
	if ((uint64_t)st.st_size > RECIPE_FILE_MAX) {
		gguf_errf(err, "%s: more than %u bytes", path, RECIPE_FILE_MAX);
		close(fd);
		return -1;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		gguf_errf(err, "%s: out of memory", path);
		close(fd);
		return -1;
	}
	size_t got = 0;
	while (got <= RECIPE_FILE_MAX) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size + 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			gguf_errf(err, "%s: %s", path, strerror(errno));
			free(buf);
			close(fd);
			return -1;
		}
		if (r == 0 || (got += (size_t)r) == (size_t)st.st_size + 1)
			break;
	}
	close(fd);
	if (got > (size_t)st.st_size) {
		gguf_errf(err, "%s: grew while read", path);
		free(buf);
		return -1;
	}
	int rc = recipes_parse(buf, got, path, rs, err);
	free(buf);
	return rc;
}

void recipes_free(struct recipe_set *rs)
{
	for (size_t i = 0; i < rs->n; i++)
		recipe_clear(&rs->recipes[i]);
	free(rs->recipes);
	*rs = (struct recipe_set){ 0 };
}

const struct recipe *recipe_find(const struct recipe_set *rs, const char *name)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->recipes[i].name, name))
			return &rs->recipes[i];
	return NULL;
}

uint32_t recipe_tensor_type(void *ctx, const char *name, size_t len)
{
	const struct recipe *r = ctx;
	for (size_t i = 0; i < r->n_overrides; i++) {
		int m = ecma_regex_search(r->overrides[i].re, name, len);
		if (m < 0)
			return QUANT_TYPE_TOO_COMPLEX;
		if (m)
			return r->overrides[i].type;
	}
	return QUANT_TYPE_NONE;
}

void recipe_params(const struct recipe *r, struct quant_params *p)
{
	quant_params_default(p, r->base->ftype);
	p->output_tensor_type = r->output_tensor_type;
	p->token_embedding_type = r->token_embedding_type;
	p->pure = r->pure;
	p->quantize_output_tensor = !r->leave_output_tensor;
	if (r->n_overrides) {
		p->tensor_type = recipe_tensor_type;
		p->tensor_type_ctx = (void *)r;
	}
}
