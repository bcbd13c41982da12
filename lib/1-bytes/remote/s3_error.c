#include "s3_error.h"

#include <expat.h>
#include <limits.h>
#include <string.h>

#define DEPTH_MAX 8

/* The parse's state: where in the document it is, and the text of the element open. */
struct parse {
	XML_Parser p;
	struct s3_error *e;
	unsigned depth;
	bool is_error;           /* the root is <Error> */
	char *field;             /* the s3_error field of the element open (depth 2), or NULL */
	size_t field_size, field_len;
	bool field_bad;          /* its text held a byte it may not */
};

/* Whether c may be in field f of a message: letters and digits for a code, a host
 * name's bytes for a region or endpoint. */
static bool allowed(const struct parse *s, char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return s->field != s->e->code && (c == '-' || c == '.' || c == '_' || c == ':');
}

static void XMLCALL on_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	(void)attrs;
	struct parse *s = arg;
	s->depth++;
	if (s->depth > DEPTH_MAX) {
		XML_StopParser(s->p, XML_FALSE);
		return;
	}
	if (s->depth == 1)
		s->is_error = strcmp(name, "Error") == 0;
	s->field = NULL;
	if (s->depth == 2 && s->is_error) {
		if (strcmp(name, "Code") == 0)
			s->field = s->e->code, s->field_size = sizeof s->e->code;
		else if (strcmp(name, "Region") == 0)
			s->field = s->e->region, s->field_size = sizeof s->e->region;
		else if (strcmp(name, "Endpoint") == 0)
			s->field = s->e->endpoint, s->field_size = sizeof s->e->endpoint;
		if (s->field && s->field[0])
			s->field = NULL;   /* the first one counts */
		s->field_len = 0;
		s->field_bad = false;
	}
}

static void XMLCALL on_end(void *arg, const XML_Char *name)
{
	(void)name;
	struct parse *s = arg;
	if (s->field) {
		s->field[s->field_bad ? 0 : s->field_len] = 0;
		s->field = NULL;
	}
	s->depth--;
}

static void XMLCALL on_text(void *arg, const XML_Char *text, int len)
{
	struct parse *s = arg;
	if (!s->field)
		return;
	for (int i = 0; i < len; i++) {
		if (!allowed(s, text[i]) || s->field_len + 1 >= s->field_size)
			s->field_bad = true;
		else
			s->field[s->field_len++] = text[i];
	}
}

/* A document with a DTD is not S3's: stopped before any entity is declared. */
static void XMLCALL on_doctype(void *arg, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	struct parse *s = arg;
	XML_StopParser(s->p, XML_FALSE);
}

bool s3_error_parse(const char *body, size_t len, struct s3_error *e)
{
	memset(e, 0, sizeof *e);
	if (len > INT_MAX)
		return false;
	struct parse s = { .p = XML_ParserCreate("UTF-8"), .e = e };
	if (!s.p)
		return false;
	XML_SetUserData(s.p, &s);
	XML_SetElementHandler(s.p, on_start, on_end);
	XML_SetCharacterDataHandler(s.p, on_text);
	XML_SetStartDoctypeDeclHandler(s.p, on_doctype);
	bool ok = XML_Parse(s.p, body, (int)len, XML_TRUE) == XML_STATUS_OK && s.is_error;
	XML_ParserFree(s.p);
	if (!ok || !e->code[0]) {   /* no error document: nothing of it kept, as promised */
		memset(e, 0, sizeof *e);
		return false;
	}
	return true;
}
