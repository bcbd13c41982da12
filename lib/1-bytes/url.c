#include "url.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

bool url_is_remote(const char *s)
{
	return strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0 ||
	       strncasecmp(s, "hf://", 5) == 0;
}

/* A handle holding url, or NULL when it does not parse as http(s). */
static CURLU *parse(const char *url)
{
	CURLU *h = curl_url();
	char *scheme = NULL;
	if (!h)
		return NULL;
	if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)) {
		curl_free(scheme);
		curl_url_cleanup(h);
		return NULL;
	}
	curl_free(scheme);
	return h;
}

/* The whole URL of h as a malloc'ed string (not curl's allocator). */
static char *whole(CURLU *h)
{
	char *u = NULL, *copy = NULL;
	if (curl_url_get(h, CURLUPART_URL, &u, 0) == CURLUE_OK)
		copy = strdup(u);
	curl_free(u);
	return copy;
}

/* hf://OWNER/REPO[@REVISION]/PATH: every part non-empty, no "." or ".." part that could
 * lead out of the repository's resolve/ path. */
static char *expand_hf(const char *rest, const char *endpoint, struct url_rev *where,
                       char *err, size_t size)
{
	const char *slash1 = strchr(rest, '/');
	const char *slash2 = slash1 ? strchr(slash1 + 1, '/') : NULL;
	if (!slash1 || !slash2 || slash1 == rest || slash2 == slash1 + 1 || !slash2[1]) {
		snprintf(err, size, "not hf://OWNER/REPO[@REVISION]/PATH");
		return NULL;
	}
	const char *at = memchr(slash1 + 1, '@', (size_t)(slash2 - slash1 - 1));
	const char *repo_end = at ? at : slash2;
	const char *rev = at ? at + 1 : "main";
	size_t rev_len = at ? (size_t)(slash2 - at - 1) : 4;
	if (repo_end == slash1 + 1 || rev_len == 0) {
		snprintf(err, size, "not hf://OWNER/REPO[@REVISION]/PATH");
		return NULL;
	}
	for (const char *p = rest; *p; p++) {
		if (*p == '?' || *p == '#' || (unsigned char)*p <= 0x20 || *p == 0x7f) {
			snprintf(err, size, "hf:// names cannot hold '?', '#', spaces or control bytes");
			return NULL;
		}
	}
	for (const char *p = rest; p;) {
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
			snprintf(err, size, "hf:// names cannot hold '.' or '..' parts");
			return NULL;
		}
		p = end ? end + 1 : NULL;
	}
	if (!endpoint || !*endpoint)
		endpoint = HF_ENDPOINT_DEFAULT;
	size_t ep = strlen(endpoint);
	while (ep && endpoint[ep - 1] == '/')
		ep--;
	size_t n = ep + strlen(rest) + rev_len + 32;
	char *url = malloc(n);
	if (!url) {
		snprintf(err, size, "out of memory");
		return NULL;
	}
	int rev_at = snprintf(url, n, "%.*s/%.*s/resolve/", (int)ep, endpoint,
	                      (int)(repo_end - rest), rest);
	snprintf(url + rev_at, n - (size_t)rev_at, "%.*s%s", (int)rev_len, rev, slash2);
	*where = (struct url_rev){ (size_t)rev_at, rev_len };
	CURLU *h = parse(url);
	if (!h) {
		/* the endpoint's fault only when it does not parse alone: else the name's */
		char *alone = strndup(endpoint, ep);
		CURLU *e = alone ? parse(alone) : NULL;
		if (e)
			snprintf(err, size, "the hf:// name holds a byte that no URL may hold");
		else
			snprintf(err, size, "HF_ENDPOINT '%.*s' is not an http(s) URL", (int)ep, endpoint);
		curl_url_cleanup(e);
		free(alone);
		free(url);
		return NULL;
	}
	curl_url_cleanup(h);
	return url;
}

char *url_expand(const char *given, const char *endpoint, struct url_rev *rev, char *err,
                 size_t size)
{
	struct url_rev none;
	if (!rev)
		rev = &none;
	*rev = (struct url_rev){ 0, 0 };
	if (strncasecmp(given, "hf://", 5) == 0)
		return expand_hf(given + 5, endpoint, rev, err, size);
	CURLU *h = parse(given);
	if (!h) {
		snprintf(err, size, "not a valid http(s) URL");
		return NULL;
	}
	curl_url_cleanup(h);
	char *url = strdup(given);
	if (!url)
		snprintf(err, size, "out of memory");
	return url;
}

char *url_hub_endpoint(const char *given)
{
	char *d = strdup(given && *given ? given : HF_ENDPOINT_DEFAULT);
	for (size_t n = d ? strlen(d) : 0; n > 0 && d[n - 1] == '/'; n--)
		d[n - 1] = 0;
	return d;
}

char *url_display(const char *url)
{
	CURLU *h = parse(url);
	if (!h)
		return NULL;
	curl_url_set(h, CURLUPART_USER, NULL, 0);
	curl_url_set(h, CURLUPART_PASSWORD, NULL, 0);
	curl_url_set(h, CURLUPART_OPTIONS, NULL, 0);
	curl_url_set(h, CURLUPART_QUERY, NULL, 0);
	curl_url_set(h, CURLUPART_FRAGMENT, NULL, 0);
	char *d = whole(h);
	curl_url_cleanup(h);
	return d;
}

char *url_cache_key(const char *url)
{
	CURLU *h = parse(url);
	if (!h)
		return NULL;
	char *query = NULL;
	if (curl_url_get(h, CURLUPART_QUERY, &query, 0) != CURLUE_OK)
		query = NULL;
	curl_url_cleanup(h);
	char *shown = url_display(url);
	char *key = NULL;
	if (shown && !query) {
		key = shown;
		shown = NULL;
	} else if (shown) {
		XXH128_hash_t q = XXH3_128bits(query, strlen(query));
		size_t n = strlen(shown) + 64;
		key = malloc(n);
		if (key)
			snprintf(key, n, "%s?xxh3:%016llx%016llx", shown, (unsigned long long)q.high64,
			         (unsigned long long)q.low64);
	}
	curl_free(query);
	free(shown);
	return key;
}

char *url_resolve(const char *base, const char *loc)
{
	CURLU *h = parse(base);
	if (!h)
		return NULL;
	char *r = NULL;
	if (curl_url_set(h, CURLUPART_URL, loc, 0) == CURLUE_OK) {
		r = whole(h);
		CURLU *check = r ? parse(r) : NULL;   /* the target must be http(s) too */
		if (!check) {
			free(r);
			r = NULL;
		}
		curl_url_cleanup(check);
	}
	curl_url_cleanup(h);
	return r;
}

/* Scheme, host and port of url (port: the scheme's default when not given). */
static bool origin(const char *url, char **scheme, char **host, char **port)
{
	CURLU *h = parse(url);
	*scheme = *host = *port = NULL;
	if (!h)
		return false;
	bool ok = curl_url_get(h, CURLUPART_SCHEME, scheme, 0) == CURLUE_OK &&
	          curl_url_get(h, CURLUPART_HOST, host, 0) == CURLUE_OK &&
	          curl_url_get(h, CURLUPART_PORT, port, CURLU_DEFAULT_PORT) == CURLUE_OK;
	curl_url_cleanup(h);
	return ok;
}

bool url_same_origin(const char *a, const char *b)
{
	char *sa, *ha, *pa, *sb, *hb, *pb;
	bool oa = origin(a, &sa, &ha, &pa), ob = origin(b, &sb, &hb, &pb);
	bool same = oa && ob && strcasecmp(sa, sb) == 0 && strcasecmp(ha, hb) == 0 &&
	            strcmp(pa, pb) == 0;
	curl_free(sa), curl_free(ha), curl_free(pa);
	curl_free(sb), curl_free(hb), curl_free(pb);
	return same;
}

char *url_with_revision(const char *url, struct url_rev rev, const char *revision)
{
	size_t n = strlen(url);
	if (rev.at > n || rev.len > n - rev.at)
		return NULL;
	size_t r = strlen(revision);
	char *out = malloc(n - rev.len + r + 1);
	if (!out)
		return NULL;
	memcpy(out, url, rev.at);
	memcpy(out + rev.at, revision, r);
	memcpy(out + rev.at + r, url + rev.at + rev.len, n - rev.at - rev.len + 1);
	return out;
}

bool url_names_folder(const char *url)
{
	size_t n = strcspn(url, "?#");
	return n > 0 && url[n - 1] == '/';
}
