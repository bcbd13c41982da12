/* ListObjectsV2, page by page: each page one signed GET of the bucket's URL with the
 * query sorted and encoded (s3_query), keys asked URL-encoded, retried like a fetch on
 * 5xx, 429 and a broken connection, its XML read with expat into entries; the listing
 * bounded in pages, seconds, entries and bytes of names. */
#include "s3_list.h"

#include <expat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "clock.h"
#include "evlog.h"
#include "iso_time.h"
#include "remote_int.h"
#include "s3.h"
#include "s3_error.h"
#include "sort_unique.h"

#define PAGE_MAX (16u << 20)        /* one page's XML (S3's are about 1,000 keys) */
#define TEXT_MAX S3_TOKEN_MAX
#define DEPTH_MAX 8

/* The parse of one page. Its entries are added with their whole raw keys; the page's
 * end decides (page_names) what each name is, once <EncodingType> is known, which a
 * server may send after the entries. */
struct page {
	XML_Parser p;
	struct s3_entry **out;
	size_t *n, *cap, first;     /* first: the page's first entry in *out */
	unsigned depth;
	bool root_ok;               /* the root is <ListBucketResult> */
	enum { IN_NONE, IN_CONTENTS, IN_PREFIXES } in;
	char text[TEXT_MAX];
	size_t text_len;
	bool text_bad;              /* too long, or a NUL */
	struct s3_entry cur;        /* the Contents or CommonPrefixes being read */
	char key[TEXT_MAX];
	bool has_key;
	bool url_encoded;           /* <EncodingType>url</EncodingType> */
	struct s3_page *res;
	bool failed;                /* out of memory, or too many entries */
};

/* The value of hex digit c, or -1. */
static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes a key sent URL-encoded ('+' a space, %XX a byte) in place: false when it is
 * malformed (a '%' without two hex digits). */
static bool url_decode(char *s)
{
	char *o = s;
	for (const char *p = s; *p; p++) {
		if (*p == '+') {
			*o++ = ' ';
		} else if (*p == '%') {
			int hi = hex_value(p[1]), lo = hi < 0 ? -1 : hex_value(p[2]);
			if (lo < 0)
				return false;
			*o++ = (char)(hi << 4 | lo);
			p += 2;
		} else {
			*o++ = *p;
		}
	}
	*o = 0;
	return true;
}

/* Why the name of key under prefix is left out, or NULL with it at *name (*len bytes):
 * not under the prefix, "", ".", "..", a '/', a control byte (NUL, \n, \t, ESC: a
 * name no listing or table could show as it is), or longer than a name may be. */
static const char *name_refusal(const char *prefix, const char *key, bool is_prefix,
                                const char **name, size_t *len)
{
	size_t pn = strlen(prefix), kn = strlen(key);
	if (kn <= pn || strncmp(key, prefix, pn) != 0)
		return "not under the prefix";
	*name = key + pn;
	size_t n = kn - pn;
	if (is_prefix && (*name)[n - 1] == '/')
		n--;
	for (size_t i = 0; i < kn; i++)
		if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
			return "holding a control byte";
	if (n == 0 || memchr(*name, '/', n) || (n == 1 && (*name)[0] == '.') ||
	    (n == 2 && (*name)[0] == '.' && (*name)[1] == '.'))
		return "empty, '.', '..' or holding '/'";
	if (n > S3_PART_MAX)
		return "longer than " S3_PART_MAX_TEXT " bytes";
	*len = n;
	return NULL;
}

uint64_t s3_etag_hash(const char *etag, size_t len)
{
	if (len >= 2 && etag[0] == 'W' && etag[1] == '/')
		etag += 2, len -= 2;
	if (len >= 2 && etag[0] == '"' && etag[len - 1] == '"')
		etag++, len -= 2;
	return len ? XXH3_64bits(etag, len) : 0;   /* none, as a listing without one */
}

/* Adds the entry read (pg->cur, its whole key pg->key, as sent) to the listing; a key
 * too long or with a NUL is counted as left out. */
static void add_entry(struct page *pg, bool is_prefix)
{
	if (!pg->has_key) {
		pg->res->refused++;
		pg->res->why = "no key, or one too long or holding a NUL";
		return;
	}
	if (*pg->n == S3_LIST_ENTRIES_MAX) {
		pg->failed = true;
		return;
	}
	if (*pg->n == *pg->cap) {
		size_t cap = *pg->cap ? 2 * *pg->cap : 256;
		struct s3_entry *e = realloc(*pg->out, cap * sizeof *e);
		if (!e) {
			pg->failed = true;
			return;
		}
		*pg->out = e;
		*pg->cap = cap;
	}
	struct s3_entry *e = &(*pg->out)[*pg->n];
	*e = pg->cur;
	e->is_prefix = is_prefix;
	e->name = strdup(pg->key);
	if (!e->name) {
		pg->failed = true;
		return;
	}
	(*pg->n)++;
}

/* The page's entries (from pg->first) named by their part under prefix, decoded when
 * the page says it is URL-encoded; the others freed and counted as left out. False
 * when the names would take more than *budget bytes (then less by what they took). */
static bool page_names(struct page *pg, const char *prefix, uint64_t *budget)
{
	struct s3_entry *e = *pg->out;
	size_t k = pg->first;
	for (size_t i = pg->first; i < *pg->n; i++) {
		const char *name = NULL, *why;
		size_t len = 0;
		if (pg->url_encoded && !url_decode(e[i].name))
			why = "not URL-encoded as the listing said";
		else if (strcmp(e[i].name, prefix) == 0)
			why = "";   /* a folder's own marker object: no entry, and no refusal */
		else
			why = name_refusal(prefix, e[i].name, e[i].is_prefix, &name, &len);
		if (why) {
			if (*why) {
				pg->res->refused++;
				pg->res->why = why;
			}
			free(e[i].name);
			continue;
		}
		if (len + 1 > *budget) {
			for (size_t j = i; j < *pg->n; j++)
				free(e[j].name);
			*pg->n = k;
			return false;
		}
		*budget -= len + 1;
		memmove(e[i].name, name, len);
		e[i].name[len] = 0;
		e[k++] = e[i];
	}
	*pg->n = k;
	return true;
}

static void XMLCALL on_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	(void)attrs;
	struct page *pg = arg;
	if (++pg->depth > DEPTH_MAX) {
		XML_StopParser(pg->p, XML_FALSE);
		return;
	}
	pg->text_len = 0;
	pg->text_bad = false;
	if (pg->depth == 1)
		pg->root_ok = strcmp(name, "ListBucketResult") == 0;
	else if (pg->depth == 2 && strcmp(name, "Contents") == 0)
		pg->in = IN_CONTENTS;
	else if (pg->depth == 2 && strcmp(name, "CommonPrefixes") == 0)
		pg->in = IN_PREFIXES;
	if (pg->depth == 2) {
		pg->cur = (struct s3_entry){ 0 };
		pg->has_key = false;
	}
}

static void XMLCALL on_text(void *arg, const XML_Char *text, int len)
{
	struct page *pg = arg;
	if ((size_t)len >= TEXT_MAX - pg->text_len || memchr(text, 0, (size_t)len)) {
		pg->text_bad = true;
		return;
	}
	memcpy(pg->text + pg->text_len, text, (size_t)len);
	pg->text_len += (size_t)len;
}

static void XMLCALL on_end(void *arg, const XML_Char *name)
{
	struct page *pg = arg;
	pg->text[pg->text_len] = 0;
	const char *t = pg->text;
	if (pg->root_ok && pg->depth == 3 && pg->in != IN_NONE && !pg->text_bad) {
		if ((pg->in == IN_CONTENTS && strcmp(name, "Key") == 0) ||
		    (pg->in == IN_PREFIXES && strcmp(name, "Prefix") == 0)) {
			memcpy(pg->key, t, pg->text_len + 1);
			pg->has_key = true;
		} else if (strcmp(name, "Size") == 0) {
			char *end;
			unsigned long long v = strtoull(t, &end, 10);
			pg->cur.size = *t >= '0' && *t <= '9' && !*end ? v : 0;
		} else if (strcmp(name, "ETag") == 0) {
			/* one too long for a GET's to be kept (http.h) is none here too */
			pg->cur.etag = pg->text_len < HTTP_ETAG_MAX ? s3_etag_hash(t, pg->text_len) : 0;
		} else if (strcmp(name, "LastModified") == 0) {
			pg->cur.mtime = iso_time_parse(t);
		}
	} else if (pg->root_ok && pg->depth == 3 && pg->in != IN_NONE && pg->text_bad &&
	           (strcmp(name, "Key") == 0 || strcmp(name, "Prefix") == 0)) {
		pg->has_key = false;   /* a name too long, or with a NUL: refused below */
	} else if (pg->root_ok && pg->depth == 2) {
		if (pg->in == IN_CONTENTS && strcmp(name, "Contents") == 0)
			add_entry(pg, false);
		else if (pg->in == IN_PREFIXES && strcmp(name, "CommonPrefixes") == 0)
			add_entry(pg, true);
		else if (strcmp(name, "IsTruncated") == 0)
			pg->res->truncated = !pg->text_bad && strcmp(t, "true") == 0;
		else if (strcmp(name, "NextContinuationToken") == 0 && !pg->text_bad)
			memcpy(pg->res->token, t, pg->text_len + 1);
		else if (strcmp(name, "EncodingType") == 0)
			pg->url_encoded = !pg->text_bad && strcmp(t, "url") == 0;
		pg->in = IN_NONE;
	}
	pg->text_len = 0;
	pg->depth--;
}

/* A document with a DTD is not S3's: stopped before any entity is declared. */
static void XMLCALL on_doctype(void *arg, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	struct page *pg = arg;
	XML_StopParser(pg->p, XML_FALSE);
}

int s3_list_parse(const char *xml, size_t len, const char *prefix, struct s3_entry **out,
                  size_t *n, size_t *cap, uint64_t *budget, struct s3_page *res,
                  char err[GGUF_ERR_MAX])
{
	*res = (struct s3_page){ 0 };
	struct page *pg = calloc(1, sizeof *pg);
	if (!pg || !(pg->p = XML_ParserCreate("UTF-8"))) {
		free(pg);
		gguf_errf(err, "out of memory");
		return -1;
	}
	pg->out = out;
	pg->n = n;
	pg->cap = cap;
	pg->first = *n;
	pg->res = res;
	XML_SetUserData(pg->p, pg);
	XML_SetElementHandler(pg->p, on_start, on_end);
	XML_SetCharacterDataHandler(pg->p, on_text);
	XML_SetStartDoctypeDeclHandler(pg->p, on_doctype);
	bool ok = len <= INT_MAX && XML_Parse(pg->p, xml, (int)len, XML_TRUE) == XML_STATUS_OK &&
	          pg->root_ok;
	XML_ParserFree(pg->p);
	int ret = -1;
	if (!ok)
		gguf_errf(err, "the listing is not S3's ListObjectsV2 XML");
	else if (pg->failed)
		gguf_errf(err, "out of memory, or more than %u entries in one folder",
		          S3_LIST_ENTRIES_MAX);
	else if (!page_names(pg, prefix, budget))
		gguf_errf(err, "the library's names take more than %u MiB", S3_NAMES_MAX >> 20);
	else
		ret = 0;
	if (ret < 0) {   /* the page's entries go; the pages before it are the caller's */
		for (size_t i = pg->first; i < *n; i++)
			free((*out)[i].name);
		*n = pg->first;
	}
	free(pg);
	return ret;
}

/* One page's GET, retried (5xx, 429, a broken connection) up to REMOTE_ATTEMPTS times:
 * 0 with the XML in body, or -1 with err. */
static int get_page(struct remote *r, const char *url, struct http_body *body,
                    char err[GGUF_ERR_MAX])
{
	CURL *h = curl_easy_init();
	struct http_response *resp = malloc(sizeof *resp);
	int ret = -1;
	if (!h || !resp) {
		gguf_errf(err, "out of memory");
		goto done;
	}
	for (unsigned attempt = 0; attempt < REMOTE_ATTEMPTS && !remote_cancelled(r); attempt++) {
		if (attempt) {
			atomic_fetch_add_explicit(&r->n_retries, 1, memory_order_relaxed);
			struct timespec ts = { 0, (long)(REMOTE_BACKOFF_MS << (attempt - 1)) * 1000000L };
			while (ts.tv_nsec >= 1000000000L)
				ts.tv_sec++, ts.tv_nsec -= 1000000000L;
			nanosleep(&ts, NULL);
		}
		char *lines[REMOTE_SIGN_LINES];
		const struct http_sigv4 *sigv4;
		int n_lines = r->sign(r, url, url, 0, 0, lines, &sigv4);
		if (n_lines < 0) {
			gguf_errf(err, "out of memory");
			goto done;
		}
		body->data.len = 0;   /* (a retry starts afresh) */
		body->data.failed = false;
		struct http_request req = {
			.url = url, .first = 0, .last = PAGE_MAX - 1,
			.headers = (const char *const *)lines, .n_headers = (unsigned)n_lines,
			.sigv4 = sigv4, .keep_error_body = true, .path_as_is = true, .body = body,
			.cafile = r->o.cafile, .timeout = r->o.timeout, .min_rate = REMOTE_MIN_RATE,
			.cancelled = r->o.cancelled, .cancel_arg = r->o.cancel_arg,
		};
		http_get_range(h, &req, resp);
		remote_unsign(lines, n_lines);
		atomic_fetch_add_explicit(&r->n_requests, 1, memory_order_relaxed);
		long st = resp->status;
		if (st == 200 && resp->code == CURLE_OK) {
			ret = 0;
			goto done;
		}
		struct s3_error e;
		s3_error_parse(resp->error_body, resp->error_body_len, &e);
		if (st == 200 && resp->aborted) {
			gguf_errf(err, "a listing page larger than %u bytes", PAGE_MAX);
			goto done;
		}
		if (st == 0 || st == 429 || st >= 500) {
			if (st)
				gguf_errf(err, "listing: HTTP %ld %s", st, e.code[0] ? e.code : "");
			else
				gguf_errf(err, "listing: network error: %s", curl_easy_strerror(resp->code));
			continue;
		}
		gguf_errf(err, "listing refused (HTTP %ld %s); %s", st,
		          e.code[0] ? e.code : "no S3 error code", r->o.s3 ? r->o.s3->context : "");
		goto done;
	}
done:
	if (h)
		curl_easy_cleanup(h);
	free(resp);
	return ret;
}

/* qsort: by name, then a prefix before an object of the same name. */
static int by_name(const void *a, const void *b)
{
	const struct s3_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : (int)y->is_prefix - (int)x->is_prefix;
}

/* True when token was seen before in this listing (its hash among seen[0..n)); else
 * adds it. A server whose tokens go round (A, B, A, ...) would page for ever. */
static bool token_seen(uint64_t *seen, size_t n, const char *token)
{
	uint64_t h = XXH3_64bits(token, strlen(token));
	for (size_t i = 0; i < n; i++)
		if (seen[i] == h)
			return true;
	seen[n] = h;
	return false;
}

int s3_list(struct remote *r, const char *bucket_url, const char *prefix, uint64_t *budget,
            struct s3_entry **out, size_t *n, char err[GGUF_ERR_MAX])
{
	*out = NULL;
	*n = 0;
	size_t cap = 0;
	struct http_body body = { .max = PAGE_MAX };
	struct s3_page *pg = malloc(sizeof *pg);
	char *token = malloc(TEXT_MAX);
	uint64_t *seen = malloc(S3_LIST_PAGES_MAX * sizeof *seen);
	int ret = -1;
	unsigned refused = 0;
	const char *why = NULL;
	double deadline = clock_now_s() + S3_LIST_SECONDS;
	if (!pg || !token || !seen) {
		gguf_errf(err, "out of memory");
		goto done;
	}
	token[0] = 0;
	for (unsigned page = 0;; page++) {
		if (page == S3_LIST_PAGES_MAX) {
			gguf_errf(err, "a listing of more than %u pages", S3_LIST_PAGES_MAX);
			goto done;
		}
		if (page && clock_now_s() > deadline) {
			gguf_errf(err, "a listing still paging after %u seconds (%u pages)",
			          S3_LIST_SECONDS, page);
			goto done;
		}
		/* keys URL-encoded: a key with a byte XML 1.0 cannot hold is then one entry
		 * left out, not a page that does not parse */
		struct s3_param q[5] = { { "list-type", "2" }, { "prefix", prefix },
		                         { "delimiter", "/" }, { "encoding-type", "url" },
		                         { "continuation-token", token } };
		char *query = s3_query(q, token[0] ? 5 : 4);
		size_t ulen = strlen(bucket_url) + (query ? strlen(query) : 0) + 2;
		char *url = query ? malloc(ulen) : NULL;
		if (!url) {
			free(query);
			gguf_errf(err, "out of memory");
			goto done;
		}
		snprintf(url, ulen, "%s?%s", bucket_url, query);
		free(query);
		int got = get_page(r, url, &body, err);
		free(url);
		if (got < 0)
			goto done;
		if (s3_list_parse(body.data.p ? (const char *)body.data.p : "", body.data.len, prefix,
		                  out, n, &cap, budget, pg, err) < 0)
			goto done;
		refused += pg->refused;
		why = pg->why ? pg->why : why;
		if (!pg->truncated)
			break;
		if (!pg->token[0] || token_seen(seen, page, pg->token)) {
			gguf_errf(err, "a truncated listing page without a new continuation token");
			goto done;
		}
		memcpy(token, pg->token, TEXT_MAX);
	}
	/* sorted, each name once: a listing that changed between pages may repeat one */
	*n = sort_unique(*out, *n, sizeof **out, offsetof(struct s3_entry, name), by_name);
	if (refused)
		evlog(EVLOG_WARNING, "s3 list refused", "%s?prefix=%s: %u name%s left out of the "
		      "listing (empty, '.', '..', holding '/' or a control byte, longer than %u "
		      "bytes, or not under the prefix; the last: %s)", bucket_url, prefix, refused,
		      refused == 1 ? "" : "s", S3_PART_MAX, why ? why : "?");
	if (*n == 0) {   /* every name left out: no array, as for an empty folder */
		free(*out);
		*out = NULL;
	}
	ret = 0;
done:
	free(body.data.p);
	free(pg);
	free(token);
	free(seen);
	if (ret < 0) {
		s3_entries_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return ret;
}

void s3_entries_free(struct s3_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(e[i].name);
	free(e);
}
