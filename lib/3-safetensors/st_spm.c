/* A sentencepiece model's pieces, from its protobuf (st_spm.h). */
#include "st_spm.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A cursor over protobuf bytes: [p, end). */
struct pb {
	const uint8_t *p, *end;
};

/* A varint (at most ten bytes): true with *v, false when the bytes end first or it is
 * longer. */
static bool pb_varint(struct pb *c, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70 && c->p < c->end; shift += 7) {
		const uint8_t b = *c->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* One field's key and, for a length-delimited one, its bytes into *sub: 1, 0 at the end
 * of c, -1 for bytes no protobuf message holds. Varint and fixed values of other
 * fields are read into *v (a fixed32's bits, a fixed64's). */
static int pb_field(struct pb *c, uint32_t *field, uint32_t *wire, uint64_t *v,
                    struct pb *sub)
{
	if (c->p == c->end)
		return 0;
	uint64_t key;
	if (!pb_varint(c, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
		return -1;
	*field = (uint32_t)(key >> 3);
	*wire = (uint32_t)(key & 7);
	const uint64_t left = (uint64_t)(c->end - c->p);
	switch (*wire) {
	case 0:
		return pb_varint(c, v) ? 1 : -1;
	case 1:
	case 5: {
		const unsigned n = *wire == 1 ? 8 : 4;
		if (left < n)
			return -1;
		uint64_t x = 0;
		for (unsigned i = 0; i < n; i++)
			x |= (uint64_t)c->p[i] << (8 * i);
		c->p += n;
		*v = x;
		return 1;
	}
	case 2: {
		uint64_t n;
		if (!pb_varint(c, &n) || n > (uint64_t)(c->end - c->p))
			return -1;
		sub->p = c->p;
		sub->end = c->p + n;
		c->p += n;
		return 1;
	}
	default:
		return -1;   /* groups (3, 4), and 6, 7: none in a sentencepiece model */
	}
}

/* Whether s[0 .. n) is UTF-8 as Python decodes it (no surrogates, no overlong forms,
 * nothing past U+10FFFF). */
static bool utf8_valid(const uint8_t *s, uint64_t n)
{
	for (uint64_t i = 0; i < n;) {
		const uint8_t b = s[i];
		uint32_t cp, need;
		if (b < 0x80) {
			i++;
			continue;
		} else if ((b & 0xe0) == 0xc0) {
			cp = b & 0x1f;
			need = 1;
		} else if ((b & 0xf0) == 0xe0) {
			cp = b & 0x0f;
			need = 2;
		} else if ((b & 0xf8) == 0xf0) {
			cp = b & 0x07;
			need = 3;
		} else {
			return false;
		}
		if (n - i <= need)
			return false;
		for (uint32_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		static const uint32_t least[4] = { 0, 0x80, 0x800, 0x10000 };
		if (cp < least[need] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += need + 1;
	}
	return true;
}

/* One SentencePiece message c into *sp: 0, or -1 with err (piece id for the line). */
static int piece_parse(struct pb c, uint64_t id, const char *shown, struct st_spm_piece *sp,
                       char err[GGUF_ERR_MAX])
{
	sp->text = (const uint8_t *)"";
	sp->len = 0;
	sp->score = 0;
	sp->type = ST_SPM_NORMAL;
	uint32_t field, wire;
	uint64_t v;
	struct pb sub;
	int r;
	while ((r = pb_field(&c, &field, &wire, &v, &sub)) > 0) {
		if (field == 1 && wire == 2) {
			const uint64_t n = (uint64_t)(sub.end - sub.p);
			if (n > UINT32_MAX || !utf8_valid(sub.p, n)) {
				gguf_errf(err, "%s: piece %" PRIu64 " is not UTF-8", shown, id);
				return -1;
			}
			sp->text = sub.p;
			sp->len = (uint32_t)(sub.end - sub.p);
		} else if (field == 2 && wire == 5) {
			uint32_t bits = (uint32_t)v;
			memcpy(&sp->score, &bits, 4);
		} else if (field == 3 && wire == 0) {
			if (v < ST_SPM_NORMAL || v > ST_SPM_BYTE) {
				gguf_errf(err, "%s: piece %" PRIu64 " has type %" PRIu64 ", which "
				          "sentencepiece does not define", shown, id, v);
				return -1;
			}
			sp->type = (enum st_spm_type)v;
		} else if (field <= 3) {
			gguf_errf(err, "%s: piece %" PRIu64 " has field %" PRIu32 " of the wrong "
			          "wire type %" PRIu32, shown, id, field, wire);
			return -1;
		}
	}
	if (r < 0) {
		gguf_errf(err, "%s: piece %" PRIu64 " is no protobuf message", shown, id);
		return -1;
	}
	return 0;
}

int st_spm_parse(const uint8_t *p, uint64_t len, const char *shown, struct st_spm *m,
                 char err[GGUF_ERR_MAX])
{
	memset(m, 0, sizeof *m);
	if (len > ST_SPM_MAX) {
		gguf_errf(err, "%s: %" PRIu64 " bytes, more than the %u MiB ggufs reads", shown,
		          len, ST_SPM_MAX >> 20);
		return -1;
	}
	/* count the pieces first: one allocation, bounded by the file (a piece takes at
	 * least two bytes) */
	struct pb c = { p, p + len }, sub;
	uint32_t field, wire;
	uint64_t v, n = 0;
	int r;
	while ((r = pb_field(&c, &field, &wire, &v, &sub)) > 0)
		if (field == 1) {
			if (wire != 2) {
				gguf_errf(err, "%s: a piece of the wrong wire type %" PRIu32, shown,
				          wire);
				return -1;
			}
			n++;
		}
	if (r < 0) {
		gguf_errf(err, "%s: not a sentencepiece model (its protobuf ends in the middle "
		          "of a field, or has a field no protobuf has)", shown);
		return -1;
	}
	if (n == 0) {
		gguf_errf(err, "%s: a sentencepiece model without pieces", shown);
		return -1;
	}
	m->pieces = calloc(n, sizeof *m->pieces);
	if (!m->pieces) {
		gguf_errf(err, "%s: out of memory", shown);
		return -1;
	}
	c = (struct pb){ p, p + len };
	while (pb_field(&c, &field, &wire, &v, &sub) > 0) {
		if (field != 1)
			continue;
		if (piece_parse(sub, m->n, shown, &m->pieces[m->n], err) < 0) {
			st_spm_free(m);
			return -1;
		}
		m->n++;
	}
	return 0;
}

void st_spm_free(struct st_spm *m)
{
	free(m->pieces);
	memset(m, 0, sizeof *m);
}
