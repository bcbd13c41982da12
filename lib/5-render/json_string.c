#include "json_string.h"

#include <stdio.h>

/* Length of the well-formed UTF-8 sequence at p[0..n) (1..4), or, when it is
 * ill-formed, minus the length of its maximal ill-formed subpart: the bytes that a
 * single U+FFFD replaces. p[0] >= 0x80 and n >= 1. */
static int utf8_seq(const unsigned char *p, uint64_t n)
{
	unsigned char c = p[0];
	int need;
	unsigned char lo = 0x80, hi = 0xbf;   /* the second byte's range */
	if (c >= 0xc2 && c <= 0xdf) {
		need = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		need = 3;
		if (c == 0xe0)
			lo = 0xa0;        /* below is overlong */
		else if (c == 0xed)
			hi = 0x9f;        /* above is a surrogate */
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 4;
		if (c == 0xf0)
			lo = 0x90;        /* below is overlong */
		else if (c == 0xf4)
			hi = 0x8f;        /* above is past U+10FFFF */
	} else {
		return -1;                /* continuation byte, C0, C1, F5..FF */
	}
	int got = 1;
	for (; got < need; got++) {
		if ((uint64_t)got >= n)
			break;
		unsigned char b = p[got];
		unsigned char l = got == 1 ? lo : 0x80, h = got == 1 ? hi : 0xbf;
		if (b < l || b > h)
			break;
	}
	return got == need ? need : -got;
}

void render_json_string(struct sink *s, const char *str, uint64_t len)
{
	const unsigned char *p = (const unsigned char *)str;
	sink_putc(s, '"');
	uint64_t run = 0;   /* start of the pending run of bytes that go out unchanged */
	uint64_t i = 0;
	while (i < len) {
		unsigned char c = p[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			i++;
			continue;
		}
		if (c >= 0x80) {
			int k = utf8_seq(p + i, len - i);
			if (k > 0) {
				i += (uint64_t)k;
				continue;
			}
			sink_put(s, p + run, i - run);
			sink_put(s, "\xef\xbf\xbd", 3);   /* U+FFFD */
			i += (uint64_t)-k;
			run = i;
		} else {
			sink_put(s, p + run, i - run);
			char esc[8];
			switch (c) {
			case '"': sink_put(s, "\\\"", 2); break;
			case '\\': sink_put(s, "\\\\", 2); break;
			case '\b': sink_put(s, "\\b", 2); break;
			case '\f': sink_put(s, "\\f", 2); break;
			case '\n': sink_put(s, "\\n", 2); break;
			case '\r': sink_put(s, "\\r", 2); break;
			case '\t': sink_put(s, "\\t", 2); break;
			default:
				snprintf(esc, sizeof esc, "\\u%04x", c);
				sink_put(s, esc, 6);
				break;
			}
			i++;
			run = i;
		}
		if (sink_done(s))
			return;
	}
	sink_put(s, p + run, len - run);
	sink_putc(s, '"');
}
