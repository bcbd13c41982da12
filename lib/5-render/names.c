#include "names.h"
#include "hash.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Output under construction. Units (an escape, a whole UTF-8 character, or a lone
 * byte) go in whole or not at all, so a cut never splits one; once a unit does not
 * fit, nothing more goes in and the name gets its hash suffix. */
struct out {
	char *buf;
	size_t len;
	bool over;
};

static void put_unit(struct out *o, const char *p, size_t n)
{
	if (o->over)
		return;
	if (o->len + n > NAMES_CUT) {
		o->over = true;
		return;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

/* Bytes in the UTF-8 character that starts at p[0..n): 2..4 when they are a well-formed
 * sequence, else 1 (an ASCII or stray byte stands alone). */
static size_t utf8_len(const unsigned char *p, uint64_t n)
{
	unsigned char c = p[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xbf;
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		lo = c == 0xe0 ? 0xa0 : 0x80;
		hi = c == 0xed ? 0x9f : 0xbf;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		lo = c == 0xf0 ? 0x90 : 0x80;
		hi = c == 0xf4 ? 0x8f : 0xbf;
	} else {
		return 1;
	}
	if (n < need)
		return 1;
	for (size_t k = 1; k < need; k++) {
		unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
		if (p[k] < l || p[k] > h)
			return 1;
	}
	return need;
}

bool names_vim_probe(const char *name, uint64_t len)
{
	if (len < 4 || len > 9 || name[0] == '0')
		return false;
	unsigned long v = 0;
	for (uint64_t i = 0; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(name[i] - '0');
	}
	return v >= 4913 && (v - 4913) % 123 == 0;
}

/* True when c is a byte a file name may hold escaped, as "%XX" (names_escape): rule 1's
 * '/', '%' and NUL; a '.' (the name "." or "..", the dot of a suffix); and the first or
 * last byte of a key that would look like a scratch name ('.', '#', '~', vim's probe's
 * leading digit). The one table of the escapes, for names_encode and names_decode. */
static bool escapable(unsigned char c)
{
	return c == '/' || c == '%' || c == '\0' || c == '.' || c == '#' || c == '~' ||
	       (c >= '0' && c <= '9');
}

/* Appends c escaped, "%XX" with two upper-case hex digits (c escapable). */
static void put_escape(struct out *o, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char esc[3] = { '%', hex[c >> 4], hex[c & 0xf] };
	put_unit(o, esc, 3);
}

/* The value of the upper-case hex digit d, or -1 (lower case is no escape names_encode
 * writes). */
static int hex_digit(char d)
{
	return d >= '0' && d <= '9' ? d - '0' : d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
}

static bool ends_with(const char *s, uint64_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

size_t names_encode(const char *name, uint64_t len, bool tensor, char out[NAMES_BUF])
{
	struct out o = { .buf = out };
	const unsigned char *p = (const unsigned char *)name;

	if (len == 0) {
		memcpy(out, "%", 2);
		return 1;
	}
	/* "." and ".." would be the directory itself or its parent */
	bool all_dots = (len == 1 || len == 2) && p[0] == '.' && p[len - 1] == '.';
	/* the '.' that would make NAME look like another tensor's NAME.f32 or NAME.npy, or
	 * like the model itself: only the root's model.gguf ends in ".gguf" */
	uint64_t suffix_dot = UINT64_MAX;
	if (tensor && (ends_with(name, len, ".f32") || ends_with(name, len, ".npy")))
		suffix_dot = len - 4;
	else if (ends_with(name, len, ".gguf"))
		suffix_dot = len - 5;

	/* a key's file name never looks like an editor's temporary (scratch.h: a leading
	 * '.', a trailing '~', "#...#", vim's probe 4913): that first or last byte escaped */
	bool scratch_first = !tensor && !all_dots &&
	                     (p[0] == '.' || (len >= 2 && p[0] == '#' && p[len - 1] == '#') ||
	                      names_vim_probe(name, len));
	bool scratch_last = !tensor && p[len - 1] == '~';

	for (uint64_t i = 0; i < len && !o.over;) {
		unsigned char c = p[i];
		if ((i == 0 && scratch_first) || (i == len - 1 && scratch_last) || c == '/' ||
		    c == '%' || c == '\0' || (c == '.' && (all_dots || i == suffix_dot))) {
			put_escape(&o, c);
		} else {
			size_t n = utf8_len(p + i, len - i);
			put_unit(&o, name + i, n);
			i += n;
			continue;
		}
		i++;
	}
	if (o.over) {
		/* hashed names are longer than NAMES_CUT, so they never equal an uncut one */
		snprintf(out + o.len, NAMES_BUF - o.len, "~%016llx",
		         (unsigned long long)hash_fnv1a(name, len, HASH_FNV1A_BASIS));
		o.len += 17;
	}
	out[o.len] = '\0';
	return o.len;
}

int names_decode(const char *file, char key[NAMES_BUF], uint64_t *len)
{
	if (strnlen(file, NAMES_BUF) >= NAMES_BUF)
		return -ENAMETOOLONG;
	uint64_t n = 0;
	for (const char *p = file; *p; p++) {
		int hi = p[0] == '%' ? hex_digit(p[1]) : -1, lo = hi >= 0 ? hex_digit(p[2]) : -1;
		if (lo >= 0 && escapable((unsigned char)(hi << 4 | lo))) {
			key[n++] = (char)(hi << 4 | lo);
			p += 2;
		} else {
			key[n++] = *p;
		}
	}
	if (strcmp(file, "%") == 0)
		n = 0;   /* the empty name's file */
	char again[NAMES_BUF];
	names_encode(key, n, false, again);
	if (strcmp(again, file) != 0)
		return -EINVAL;
	*len = n;
	return 0;
}
