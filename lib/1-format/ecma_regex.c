#include "ecma_regex.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* backtracking steps a search may take: far more than any tensor name (63 bytes) needs
 * with a pattern that does not nest its quantifiers */
#define ECMA_MATCH_LIMIT 1000000u

struct ecma_regex {
	pcre2_code *code;
};

/* The translation: PCRE2 pattern text in buf, grown as needed. */
struct ecma_out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void out_bytes(struct ecma_out *o, const char *s, size_t n)
{
	if (o->failed)
		return;
	if (n > o->cap - o->len) {
		size_t cap = o->cap ? o->cap : 64;
		while (n > cap - o->len) {
			if (cap > SIZE_MAX / 2) {
				o->failed = true;
				return;
			}
			cap *= 2;
		}
		char *b = realloc(o->buf, cap);
		if (!b) {
			o->failed = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

/* One byte as PCRE2 reads it literally, inside or outside a class. */
static void out_literal(struct ecma_out *o, unsigned char c)
{
	char b[8];
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
		b[0] = (char)c;
		out_bytes(o, b, 1);
	} else if (c > ' ' && c < 0x7f) {
		b[0] = '\\';
		b[1] = (char)c;
		out_bytes(o, b, 2);
	} else {
		snprintf(b, sizeof b, "\\x{%02x}", c);
		out_bytes(o, b, strlen(b));
	}
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Inserts n bytes of s at pos (<= o->len). */
static void out_insert(struct ecma_out *o, size_t pos, const char *s, size_t n)
{
	const size_t tail = o->len - pos;
	out_bytes(o, s, n);   /* grows the buffer; the bytes land at the end first */
	if (o->failed)
		return;
	memmove(o->buf + pos + n, o->buf + pos, tail);
	memcpy(o->buf + pos, s, n);
}

/* What the translation saw last outside a class: what a quantifier may follow. */
enum ecma_last { ECMA_NONE, ECMA_ASSERT, ECMA_ATOM, ECMA_QUANT };

struct ecma_state {
	struct ecma_out o;
	enum ecma_last last;
	size_t atom_start;       /* where the last atom starts in o */
	unsigned long groups;    /* capturing groups opened so far */
	size_t depth;            /* groups open */
	size_t *open;            /* where each open group starts in o */
	bool *open_assert;       /* and whether it is a lookahead */
};

/* The escape at p[*i] (just past the backslash) into st, as libstdc++'s
 * _M_eat_escape_ecma reads it; *i moves past it. false with err when it throws. */
static bool translate_escape(const unsigned char *p, size_t len, size_t *i, bool in_class,
                             struct ecma_state *st, char err[GGUF_ERR_MAX])
{
	struct ecma_out *o = &st->o;
	if (*i >= len) {
		gguf_errf(err, "a trailing backslash escapes nothing");
		return false;
	}
	const unsigned char c = p[(*i)++];
	static const char table[] = "0\0f\fn\nr\rt\tv\v";
	for (size_t k = 0; k + 1 < sizeof table; k += 2)
		if ((char)c == table[k]) {
			out_literal(o, (unsigned char)table[k + 1]);
			return true;
		}
	switch (c) {
	case 'b': case 'B':
		if (in_class && c == 'b') {
			out_literal(o, '\b');
			return true;
		}
		if (in_class) {
			gguf_errf(err, "\\B inside [...]");
			return false;
		}
		out_bytes(o, c == 'b' ? "\\b" : "\\B", 2);
		st->last = ECMA_ASSERT;
		return true;
	case 'd': case 'D': case 's': case 'S': case 'w': case 'W': {
		const char b[2] = { '\\', (char)c };
		out_bytes(o, b, 2);
		if (in_class && *i + 1 < len && p[*i] == '-' && p[*i + 1] != ']') {
			gguf_errf(err, "a range that starts with \\%c", c);
			return false;
		}
		return true;
	}
	case 'c':
		if (*i >= len) {
			gguf_errf(err, "\\c at the end of the pattern");
			return false;
		}
		out_literal(o, p[(*i)++]);
		return true;
	case 'x': case 'u': {
		const size_t n = c == 'x' ? 2 : 4;
		unsigned v = 0;
		for (size_t k = 0; k < n; k++) {
			int h = *i < len ? hexval(p[*i]) : -1;
			if (h < 0) {
				gguf_errf(err, "\\%c wants %zu hexadecimal digits", c, n);
				return false;
			}
			v = v * 16 + (unsigned)h;
			(*i)++;
		}
		out_literal(o, (unsigned char)(v & 0xff));
		return true;
	}
	default:
		break;
	}
	if (c >= '1' && c <= '9') {
		if (in_class) {
			gguf_errf(err, "a backreference inside [...]");
			return false;
		}
		unsigned long n = c - '0';
		while (*i < len && p[*i] >= '0' && p[*i] <= '9') {
			n = n * 10 + (p[(*i)++] - '0');
			if (n > st->groups)
				break;
		}
		if (n > st->groups) {
			gguf_errf(err, "backreference \\%lu: only %lu groups opened before it", n,
			          st->groups);
			return false;
		}
		char b[32];
		snprintf(b, sizeof b, "\\g{%lu}", n);
		out_bytes(o, b, strlen(b));
		return true;
	}
	out_literal(o, c);
	return true;
}

/* {N}, {N,} or {N,M} at p[*i] (at the brace): copied to o, *i past it. false when the
 * brace opens none of them (std::regex's error_badbrace). */
static bool translate_brace(const unsigned char *p, size_t len, size_t *i, struct ecma_out *o)
{
	size_t k = *i + 1, digits = 0;
	while (k < len && p[k] >= '0' && p[k] <= '9')
		k++, digits++;
	if (!digits)
		return false;
	if (k < len && p[k] == ',') {
		k++;
		while (k < len && p[k] >= '0' && p[k] <= '9')
			k++;
	}
	if (k >= len || p[k] != '}')
		return false;
	out_bytes(o, (const char *)p + *i, k + 1 - *i);
	*i = k + 1;
	return true;
}

/* A bracket expression at p[*i] (past its "[") into st, *i past its "]". false with
 * err where std::regex throws. */
static bool translate_class(const unsigned char *p, size_t len, size_t *i,
                            struct ecma_state *st, char err[GGUF_ERR_MAX])
{
	struct ecma_out *o = &st->o;
	const bool negated = *i < len && p[*i] == '^';
	if (negated)
		(*i)++;
	/* a "]" here closes the class: ECMAScript's [] (nothing) and [^] (any byte), given
	 * to PCRE2 as classes of bytes (its own empty class mishandles a quantifier) */
	if (*i < len && p[*i] == ']') {
		(*i)++;
		out_bytes(o, negated ? "[\\x00-\\xff]" : "[^\\x00-\\xff]", negated ? 11 : 12);
		return true;
	}
	out_bytes(o, negated ? "[^" : "[", negated ? 2 : 1);
	while (*i < len) {
		const unsigned char c = p[*i];
		if (c == ']') {
			out_bytes(o, "]", 1);
			(*i)++;
			return true;
		}
		if (c == '\\') {
			(*i)++;
			if (!translate_escape(p, len, i, true, st, err))
				return false;
		} else if (c == '[' && *i + 1 < len && p[*i + 1] == ':') {
			/* [:name:], a class of the classic locale, copied as it is */
			size_t k = *i + 2;
			while (k < len && p[k] >= 'a' && p[k] <= 'z')
				k++;
			if (k == *i + 2 || k + 1 >= len || p[k] != ':' || p[k + 1] != ']') {
				gguf_errf(err, "'[:' opens no [:name:]");
				return false;
			}
			out_bytes(o, (const char *)p + *i, k + 2 - *i);
			*i = k + 2;
		} else if (c == '[' && *i + 1 < len && (p[*i + 1] == '.' || p[*i + 1] == '=')) {
			/* [.x.] and [=x=] of one letter: that letter, as in libstdc++'s
			 * classic locale, whose table of collating names has the letters as
			 * themselves (a digit or a sign goes by a name: "zero", "hyphen",
			 * which are not read here) */
			const unsigned char k = p[*i + 1];
			const unsigned char x = *i + 2 < len ? p[*i + 2] : 0;
			const bool letter = (x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z');
			if (!letter || *i + 4 >= len || p[*i + 3] != k || p[*i + 4] != ']') {
				gguf_errf(err, "[%c...%c] other than of one letter is not supported", k, k);
				return false;
			}
			out_literal(o, p[*i + 2]);
			*i += 5;
		} else if (c == '-' || c == '^') {
			out_bytes(o, (const char *)&p[*i], 1);
			(*i)++;
		} else {
			out_literal(o, c);
			(*i)++;
		}
	}
	gguf_errf(err, "'[' without its ']'");
	return false;
}

/* The pattern as PCRE2 text of the same meaning, into st->o. false with err where
 * std::regex would throw. */
static bool translate(const unsigned char *p, size_t len, struct ecma_state *st,
                      char err[GGUF_ERR_MAX])
{
	struct ecma_out *o = &st->o;
	for (size_t i = 0; i < len;) {
		const unsigned char c = p[i];
		switch (c) {
		case '*': case '+': case '?': case '{': {
			if (st->last == ECMA_NONE || st->last == ECMA_ASSERT) {
				gguf_errf(err, "nothing to repeat before '%c'", c);
				return false;
			}
			/* a quantifier of a quantified atom: libstdc++ repeats the whole */
			if (st->last == ECMA_QUANT) {
				out_insert(o, st->atom_start, "(?:", 3);
				out_bytes(o, ")", 1);
			}
			if (c == '{') {
				if (!translate_brace(p, len, &i, o)) {
					gguf_errf(err, "'{' that opens no {N}, {N,} or {N,M}");
					return false;
				}
			} else {
				out_bytes(o, (const char *)&p[i], 1);
				i++;
			}
			if (i < len && p[i] == '?') {   /* lazy: the same matches for a search */
				out_bytes(o, "?", 1);
				i++;
			}
			st->last = ECMA_QUANT;
			continue;
		}
		case '(': {
			bool lookahead = false;
			if (i + 1 < len && p[i + 1] == '*') {
				gguf_errf(err, "nothing to repeat at '(*'");
				return false;
			}
			st->open[st->depth] = o->len;
			if (i + 1 < len && p[i + 1] == '?') {
				if (i + 2 >= len || (p[i + 2] != ':' && p[i + 2] != '=' && p[i + 2] != '!')) {
					gguf_errf(err, "'(?' opens only (?: (?= and (?!");
					return false;
				}
				lookahead = p[i + 2] != ':';
				out_bytes(o, (const char *)p + i, 3);
				i += 3;
			} else {
				st->groups++;
				out_bytes(o, "(", 1);
				i++;
			}
			st->open_assert[st->depth++] = lookahead;
			st->last = ECMA_NONE;
			continue;
		}
		case ')':
			if (!st->depth) {
				gguf_errf(err, "')' without its '('");
				return false;
			}
			st->depth--;
			st->atom_start = st->open[st->depth];
			st->last = st->open_assert[st->depth] ? ECMA_ASSERT : ECMA_ATOM;
			out_bytes(o, ")", 1);
			i++;
			continue;
		case '|':
			st->last = ECMA_NONE;
			out_bytes(o, "|", 1);
			i++;
			continue;
		case '^': case '$':
			st->last = ECMA_ASSERT;
			out_bytes(o, (const char *)&p[i], 1);
			i++;
			continue;
		default:
			break;
		}
		st->atom_start = o->len;
		st->last = ECMA_ATOM;
		if (c == '\\') {
			i++;
			if (!translate_escape(p, len, &i, false, st, err))
				return false;
		} else if (c == '[') {
			i++;
			if (!translate_class(p, len, &i, st, err))
				return false;
		} else if (c == '.') {
			out_bytes(o, ".", 1);
			i++;
		} else {
			out_literal(o, c);
			i++;
		}
	}
	if (st->depth) {
		gguf_errf(err, "'(' without its ')'");
		return false;
	}
	return true;
}

struct ecma_regex *ecma_regex_compile(const char *pattern, size_t len, char err[GGUF_ERR_MAX])
{
	struct ecma_state st = { .last = ECMA_NONE };
	struct ecma_regex *re = NULL;
	pcre2_compile_context *cc = NULL;
	st.open = malloc((len ? len : 1) * sizeof *st.open);
	st.open_assert = malloc(len ? len : 1);
	if (!st.open || !st.open_assert) {
		gguf_errf(err, "out of memory for a regex");
		goto fail;
	}
	if (!translate((const unsigned char *)pattern, len, &st, err))
		goto fail;
	out_bytes(&st.o, "", 1);
	re = calloc(1, sizeof *re);
	cc = pcre2_compile_context_create(NULL);
	if (st.o.failed || !re || !cc) {
		gguf_errf(err, "out of memory for a regex");
		goto fail;
	}
	pcre2_set_newline(cc, PCRE2_NEWLINE_ANYCRLF);
	int code;
	PCRE2_SIZE at;
	re->code = pcre2_compile((PCRE2_SPTR)st.o.buf, st.o.len - 1,
	                         PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_UTF |
	                         PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C, &code, &at, cc);
	if (!re->code) {
		PCRE2_UCHAR msg[256];
		if (pcre2_get_error_message(code, msg, sizeof msg) < 0)
			strcpy((char *)msg, "unknown error");
		gguf_errf(err, "%s", (const char *)msg);
		goto fail;
	}
	pcre2_compile_context_free(cc);
	free(st.o.buf);
	free(st.open);
	free(st.open_assert);
	return re;
fail:
	pcre2_compile_context_free(cc);
	free(re);
	free(st.o.buf);
	free(st.open);
	free(st.open_assert);
	return NULL;
}

int ecma_regex_search(const struct ecma_regex *re, const char *s, size_t len)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
	pcre2_match_context *mc = pcre2_match_context_create(NULL);
	int r = -1;
	if (md && mc) {
		pcre2_set_match_limit(mc, ECMA_MATCH_LIMIT);
		pcre2_set_depth_limit(mc, ECMA_MATCH_LIMIT);
		int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0, md, mc);
		r = rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
	}
	pcre2_match_context_free(mc);
	pcre2_match_data_free(md);
	return r;
}

void ecma_regex_free(struct ecma_regex *re)
{
	if (!re)
		return;
	pcre2_code_free(re->code);
	free(re);
}
