/* The general.* keys of a converted folder (st_meta.h), gguf-py's metadata.py in C. */
#include "st_meta.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Name parts are annotated with these (a set each). */
enum { T_BASENAME = 1, T_SIZE = 2, T_FINETUNE = 4, T_VERSION = 8, T_TYPE = 16 };

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Digits from *p (at least one): true with *p past them. */
static bool digits(const char **p)
{
	if (!is_digit(**p))
		return false;
	while (is_digit(**p))
		(*p)++;
	return true;
}

/* re.fullmatch(r'(v|iter)?\d+([.]\d+)*', s, re.IGNORECASE) */
static bool is_version(const char *s)
{
	if (strncasecmp(s, "iter", 4) == 0 && is_digit(s[4]))
		s += 4;
	else if ((*s == 'v' || *s == 'V') && is_digit(s[1]))
		s++;
	if (!digits(&s))
		return false;
	while (*s == '.') {
		s++;
		if (!digits(&s))
			return false;
	}
	return *s == '\0';
}

/* Python's \w on ASCII. */
static bool is_word(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* re.fullmatch(r'i?q\d(_\w)*|b?fp?(16|32)', s, re.IGNORECASE) */
static bool is_quant_type(const char *s)
{
	const char *p = s;
	if (*p == 'i' || *p == 'I')
		p++;
	if ((*p == 'q' || *p == 'Q') && is_digit(p[1])) {
		p += 2;
		while (p[0] == '_' && p[1] && is_word(p[1]))
			p += 2;
		if (*p == '\0')
			return true;
	}
	p = s;
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p != 'f' && *p != 'F')
		return false;
	p++;
	if (*p == 'p' || *p == 'P')
		p++;
	return strcmp(p, "16") == 0 || strcmp(p, "32") == 0;
}

/* \d+([._]\d+)?[KMBT][\d]? to the end of s, case-insensitive. */
static bool size_rest(const char *s)
{
	if (!digits(&s))
		return false;
	if ((*s == '.' || *s == '_') && is_digit(s[1])) {
		s++;
		digits(&s);
	}
	if (!*s || !strchr("KMBTkmbt", *s))
		return false;
	s++;
	if (is_digit(*s))
		s++;
	return *s == '\0';
}

/* re.fullmatch(r'(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)',
 * s, re.IGNORECASE) */
static bool is_size(const char *s)
{
	static const char *const words[] = { "small", "mini", "medium", "large", "xl", "xxl" };
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		if (strcasecmp(s, words[i]) == 0)
			return true;
	if (size_rest(s))
		return true;
	if ((*s == 'a' || *s == 'A') && size_rest(s + 1))
		return true;
	/* \d+[x] then the rest: every split of the leading digits before an x */
	const char *p = s;
	if (!digits(&p))
		return false;
	return (*p == 'x' || *p == 'X') && size_rest(p + 1);
}

/* Python's float(s) for what a size part leaves before its suffix: digits with one
 * optional dot (all that the size pattern lets through without a prefix). */
static bool py_float(const char *s, size_t n, double *out)
{
	char buf[64];
	if (n == 0 || n >= sizeof buf)
		return false;
	bool dot = false, any = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && !dot)
			dot = true;
		else if (is_digit(s[i]))
			any = true;
		else
			return false;
	}
	if (!any)
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	*out = strtod(buf, NULL);
	return true;
}

/* "-".join(parts whose types hold t, and not skip), each once when dedup: malloc'ed or
 * NULL for none. */
static char *join(char **parts, const unsigned *types, size_t n, unsigned t, unsigned skip,
                  bool dedup)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += strlen(parts[i]) + 1;
	char *out = calloc(len + 1, 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!(types[i] & t) || (types[i] & skip))
			continue;
		bool seen = false;
		for (size_t j = 0; dedup && j < i; j++)
			seen |= (types[j] & t) && !(types[j] & skip) && strcmp(parts[j], parts[i]) == 0;
		if (seen)
			continue;
		if (*out)
			strcat(out, "-");
		strcat(out, parts[i]);
	}
	if (!*out) {
		free(out);
		return NULL;
	}
	return out;
}

int st_meta_id_components(const char *id, int64_t total_params, struct st_name_parts *p,
                          char err[GGUF_ERR_MAX])
{
	memset(p, 0, sizeof *p);
	for (const char *c = id; *c; c++)
		if ((unsigned char)*c >= 0x80) {
			gguf_errf(err, "the name '%.64s' is not ASCII, which ggufs does not name "
			          "models from yet", id);
			return -1;
		}
	if (strchr(id, ' ')) {
		if (!(p->full = strdup(id)))
			goto oom;
		return 0;
	}
	const char *slash = strchr(id, '/'), *full = slash ? slash + 1 : id;
	if (slash && slash > id && id[0] != '.' && !(p->org = strndup(id, (size_t)(slash - id))))
		goto oom;
	if (!(p->full = strdup(full)))
		goto oom;
	/* the parts, empty ones dropped (each one of the copy, cut at its dash) */
	char *copy = strdup(full);
	size_t n = 0, cap = strlen(full) / 2 + 1;
	char **parts = calloc(cap, sizeof *parts);
	unsigned *types = calloc(cap, sizeof *types);
	if (!copy || !parts || !types) {
		free(copy);
		free(parts);
		free(types);
		goto oom;
	}
	for (char *s = copy, *dash; s; s = dash ? dash + 1 : NULL) {
		if ((dash = strchr(s, '-')))
			*dash = '\0';
		if (*s)
			parts[n++] = s;
	}
	char sizes[64][64];   /* size parts rewritten */
	if (n > 64) {
		gguf_errf(err, "the name '%.64s' has more than 64 parts", id);
		free(copy);
		free(parts);
		free(types);
		st_meta_parts_free(p);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char *part = parts[i];
		if (is_version(part)) {
			types[i] |= T_VERSION;
		} else if (is_quant_type(part)) {
			types[i] |= T_TYPE;
			for (char *c = part; *c; c++)
				*c = (char)toupper((unsigned char)*c);
		} else if (i > 0 && strlen(part) < 60 && is_size(part)) {
			char *q = sizes[i];
			snprintf(q, sizeof sizes[i], "%s", part);
			for (char *c = q; *c; c++)
				if (*c == '_')
					*c = '.';
			size_t len = strlen(q);
			if (is_digit(q[len - 1])) {   /* bloom's 7b1: 7.1b */
				const char last = q[len - 1], before = q[len - 2];
				q[len - 2] = '.';
				q[len - 1] = last;
				q[len] = before;
				q[++len] = '\0';
			}
			if (len > 1 && is_digit(q[len - 2]) && strchr("kmbt", q[len - 1]))
				q[len - 1] = (char)toupper((unsigned char)q[len - 1]);
			double label;
			if (total_params != 0 && py_float(q, len - 1, &label)) {
				const char *at = strchr(" KMBT", q[len - 1]);
				label *= pow(1000, at ? (double)(at - " KMBT") : -1.0);
				const double total = (double)total_params;
				if ((total_params < 0 && label < (double)(-total_params / 8)) ||
				    (total_params > 0 && fabs(label - total) > (double)(7 * total_params / 8))) {
					types[i] |= T_FINETUNE;
					q[len - 1] = (char)tolower((unsigned char)q[len - 1]);
				}
			}
			if (!types[i])
				types[i] |= T_SIZE;
			parts[i] = q;
		} else if (i > 0 && (strcasecmp(part, "chat") == 0 ||
		                     strcasecmp(part, "instruct") == 0 ||
		                     strcasecmp(part, "vision") == 0 ||
		                     strcasecmp(part, "lora") == 0)) {
			types[i] |= T_FINETUNE;
		}
	}
	/* word-based size labels dropped when a number-based one is there */
	bool numbered = false;
	for (size_t i = 0; i < n; i++)
		for (const char *c = parts[i]; (types[i] & T_SIZE) && *c; c++)
			numbered |= is_digit(*c);
	if (numbered)
		for (size_t i = 0; i < n; i++) {
			bool alpha = true;
			for (const char *c = parts[i]; *c; c++)
				alpha &= isalpha((unsigned char)*c) != 0;
			if ((types[i] & T_SIZE) && alpha)
				types[i] &= ~(unsigned)T_SIZE;
		}
	bool at_start = true;
	for (size_t i = 0; i < n; i++) {
		if (at_start && ((!types[i] && isalpha((unsigned char)parts[i][0])) ||
		                 (types[i] & T_VERSION))) {
			types[i] |= T_BASENAME;
		} else {
			at_start = false;
			if (!types[i])
				types[i] |= T_FINETUNE;
		}
	}
	for (size_t i = n; i-- > 0;) {
		if ((types[i] & T_BASENAME) && (types[i] & ~(unsigned)T_BASENAME))
			types[i] &= ~(unsigned)T_BASENAME;
		else
			break;
	}
	p->basename = join(parts, types, n, T_BASENAME, 0, false);
	p->size_label = join(parts, types, n, T_SIZE, 0, true);
	p->finetune = join(parts, types, n, T_FINETUNE, 0, false);
	p->version = join(parts, types, n, T_VERSION, T_BASENAME, false);
	if (!p->size_label && !p->finetune && !p->version) {
		free(p->basename);
		p->basename = NULL;
	}
	free(copy);
	free(parts);
	free(types);
	return 0;
oom:
	st_meta_parts_free(p);
	gguf_errf(err, "out of memory");
	return -1;
}

void st_meta_parts_free(struct st_name_parts *p)
{
	free(p->full);
	free(p->org);
	free(p->basename);
	free(p->finetune);
	free(p->version);
	free(p->size_label);
	memset(p, 0, sizeof *p);
}

/* Whether word w (len bytes) is one id_to_title keeps: not all lower case (Python's
 * islower: a cased letter, none upper), or a version "v1.2", or starting with a digit. */
static bool title_keeps(const char *w, size_t len)
{
	bool lower = false;
	for (size_t i = 0; i < len; i++) {
		if (isupper((unsigned char)w[i]))
			return true;
		lower |= islower((unsigned char)w[i]) != 0;
	}
	if (!lower || is_digit(w[0]))
		return true;
	char buf[256];
	if (len >= sizeof buf)
		return false;
	memcpy(buf, w, len);
	buf[len] = '\0';
	return buf[0] == 'v' && is_digit(buf[1]) && is_version(buf) && !strchr(buf, 'V');
}

bool st_meta_title(const char *s, char *out, size_t size)
{
	size_t k = 0;
	for (const char *p = s; *p;) {
		while (*p == '-' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *w = p;
		while (*p && *p != '-' && !isspace((unsigned char)*p))
			p++;
		const size_t len = (size_t)(p - w);
		if (k + (k > 0) + len + 1 > size)
			return false;
		if (k > 0)
			out[k++] = ' ';
		const bool keep = title_keeps(w, len);
		for (size_t i = 0; i < len; i++) {
			const bool after_letter = i > 0 && isalpha((unsigned char)w[i - 1]);
			out[k++] = keep ? w[i] : (char)(after_letter ? tolower((unsigned char)w[i])
			                                             : toupper((unsigned char)w[i]));
		}
	}
	if (size == 0)
		return false;
	out[k] = '\0';
	return true;
}

void st_meta_size_label(uint64_t total, char out[32])
{
	double scaled;
	char suffix;
	if ((double)total > 1e12) {
		scaled = (double)total * 1e-12;
		suffix = 'T';
	} else if ((double)total > 1e9) {
		scaled = (double)total * 1e-9;
		suffix = 'B';
	} else if ((double)total > 1e6) {
		scaled = (double)total * 1e-6;
		suffix = 'M';
	} else {
		scaled = (double)total * 1e-3;
		suffix = 'K';
	}
	char digits_of[32];
	snprintf(digits_of, sizeof digits_of, "%.0f", nearbyint(scaled));
	const char *d = digits_of;
	while (*d == '0')
		d++;
	const int len = (int)strlen(d), fix = len < 2 ? 2 - len : 0;
	snprintf(out, 32, "%.*f%c", fix, scaled, suffix);
}

int st_meta_write(const char *folder_name, uint64_t total_params, struct st_kv *kv,
                  char err[GGUF_ERR_MAX])
{
	struct st_name_parts p;
	if (st_meta_id_components(folder_name, (int64_t)total_params, &p, err) < 0)
		return -1;
	char name[GGUF_ERR_MAX];
	if (!st_meta_title(p.full, name, sizeof name)) {
		gguf_errf(err, "the name '%.64s' is too long", folder_name);
		st_meta_parts_free(&p);
		return -1;
	}
	st_kv_str(kv, "general.name", name);
	if (p.version)
		st_kv_str(kv, "general.version", p.version);
	if (p.org) {
		char org[GGUF_ERR_MAX];
		if (st_meta_title(p.org, org, sizeof org))
			st_kv_str(kv, "general.organization", org);
	}
	if (p.finetune)
		st_kv_str(kv, "general.finetune", p.finetune);
	if (p.basename)
		st_kv_str(kv, "general.basename", p.basename);
	char label[32];
	if (!p.size_label)
		st_meta_size_label(total_params, label);
	if (p.size_label || total_params > 0)
		st_kv_str(kv, "general.size_label", p.size_label ? p.size_label : label);
	st_meta_parts_free(&p);
	return 0;
}
