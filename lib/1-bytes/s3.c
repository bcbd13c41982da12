#include "s3.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "url.h"

#define BUCKET_MAX 255

bool s3_is_name(const char *s)
{
	return strncasecmp(s, "s3://", 5) == 0;
}

int s3_split(const char *given, char **bucket, char **key, char *err, size_t size)
{
	*bucket = *key = NULL;
	if (!s3_is_name(given)) {
		snprintf(err, size, "not an s3:// name");
		return -1;
	}
	const char *b = given + 5;
	size_t n = strcspn(b, "/");
	if (n == 0) {
		snprintf(err, size, "no bucket: s3://BUCKET/KEY");
		return -1;
	}
	if (n > BUCKET_MAX) {
		snprintf(err, size, "the bucket name is longer than %d bytes", BUCKET_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '-' || c == '_')) {
			snprintf(err, size, "the bucket name holds a byte no bucket name has (only "
			         "letters, digits, '.', '-' and '_')");
			return -1;
		}
	}
	*bucket = strndup(b, n);
	*key = strdup(b[n] ? b + n + 1 : "");
	if (!*bucket || !*key) {
		free(*bucket);
		free(*key);
		*bucket = *key = NULL;
		snprintf(err, size, "out of memory");
		return -1;
	}
	return 0;
}

/* Whether c goes into an S3 URI as itself: RFC 3986's unreserved characters. */
static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

char *s3_encode(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = 0;
	return out;
}

/* One parameter encoded: "name=value". */
struct encoded_param {
	char *name, *value;
};

/* qsort: by encoded name, then value (byte order, as Signature V4 sorts). */
static int by_name_value(const void *a, const void *b)
{
	const struct encoded_param *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

char *s3_query(const struct s3_param *params, size_t n)
{
	struct encoded_param *e = calloc(n ? n : 1, sizeof *e);
	char *out = NULL;
	size_t len = 1;
	if (!e)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		e[i].name = s3_encode(params[i].name, false);
		e[i].value = s3_encode(params[i].value, false);
		if (!e[i].name || !e[i].value)
			goto done;
		len += strlen(e[i].name) + strlen(e[i].value) + 2;
	}
	qsort(e, n, sizeof *e, by_name_value);
	out = malloc(len);
	if (!out)
		goto done;
	char *o = out;
	for (size_t i = 0; i < n; i++)
		o += sprintf(o, "%s%s=%s", i ? "&" : "", e[i].name, e[i].value);
	*o = 0;
done:
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	free(e);
	return out;
}

bool s3_bucket_is_host(const char *bucket)
{
	size_t n = strlen(bucket);
	if (n < 3 || n > 63 || bucket[0] == '-' || bucket[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = bucket[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

/* The parts of endpoint URL e: scheme, host, port (NULL when none) and path; false when
 * it is not an http(s) URL without user, query and fragment. */
static bool endpoint_parts(const char *e, char **scheme, char **host, char **port, char **path)
{
	CURLU *h = curl_url();
	char *user = NULL, *query = NULL, *fragment = NULL;
	*scheme = *host = *port = *path = NULL;
	bool ok = h && curl_url_set(h, CURLUPART_URL, e, 0) == CURLUE_OK &&
	          curl_url_get(h, CURLUPART_SCHEME, scheme, 0) == CURLUE_OK &&
	          (strcasecmp(*scheme, "http") == 0 || strcasecmp(*scheme, "https") == 0) &&
	          curl_url_get(h, CURLUPART_HOST, host, 0) == CURLUE_OK &&
	          curl_url_get(h, CURLUPART_PATH, path, 0) == CURLUE_OK &&
	          curl_url_get(h, CURLUPART_USER, &user, 0) == CURLUE_NO_USER &&
	          curl_url_get(h, CURLUPART_QUERY, &query, 0) == CURLUE_NO_QUERY &&
	          curl_url_get(h, CURLUPART_FRAGMENT, &fragment, 0) == CURLUE_NO_FRAGMENT;
	if (ok && curl_url_get(h, CURLUPART_PORT, port, 0) != CURLUE_OK)
		*port = NULL;
	curl_free(user);
	curl_free(query);
	curl_free(fragment);
	curl_url_cleanup(h);
	return ok;
}

char *s3_object_url(const char *endpoint, const char *bucket, const char *key,
                    bool virtual_host, char *err, size_t size)
{
	char *scheme, *host, *port, *path, *url = NULL;
	char *ekey = s3_encode(key, true);
	if (!endpoint_parts(endpoint, &scheme, &host, &port, &path)) {
		/* shown as every URL is: a user:password@ or a query may hold a secret */
		char *shown = url_display(endpoint);
		snprintf(err, size, "the endpoint%s%s%s is not an http(s) URL without user, query "
		         "and fragment", shown ? " '" : "", shown ? shown : "", shown ? "'" : "");
		free(shown);
		goto done;
	}
	if (virtual_host && !s3_bucket_is_host(bucket)) {
		snprintf(err, size, "the bucket '%s' cannot be a host name (virtual-hosted "
		         "addressing: 3 to 63 of a-z, 0-9 and '-'): leave out -o s3_virtual_host",
		         bucket);
		goto done;
	}
	if (!ekey) {
		snprintf(err, size, "out of memory");
		goto done;
	}
	size_t plen = strlen(path);
	while (plen && path[plen - 1] == '/')
		plen--;
	size_t n = strlen(scheme) + strlen(host) + (port ? strlen(port) : 0) + plen +
	           strlen(bucket) + strlen(ekey) + 16;
	url = malloc(n);
	if (!url) {
		snprintf(err, size, "out of memory");
		goto done;
	}
	if (virtual_host)
		snprintf(url, n, "%s://%s.%s%s%s%.*s/%s", scheme, bucket, host, port ? ":" : "",
		         port ? port : "", (int)plen, path, ekey);
	else
		snprintf(url, n, "%s://%s%s%s%.*s/%s%s%s", scheme, host, port ? ":" : "",
		         port ? port : "", (int)plen, path, bucket, key[0] ? "/" : "", ekey);
done:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	free(ekey);
	return url;
}

char *s3_aws_endpoint(const char *region)
{
	size_t n = strlen(region) + 32;
	char *e = malloc(n);
	if (e)
		snprintf(e, n, "https://s3.%s.amazonaws.com", region);
	return e;
}
