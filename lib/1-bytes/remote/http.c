#include "http.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ggufs_config.h"

/* What the callbacks share during one transfer. */
struct transfer {
	const struct http_request *req;
	struct http_response *resp;
	uint64_t want;
};

/* Copies a header value (trimmed) into dst, or leaves dst "" when it does not fit or
 * holds a control byte. */
static void keep_value(char *dst, size_t size, const char *v, size_t n)
{
	while (n && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	/* too long, or with a control byte inside (a lone CR, say): not kept, as it would
	 * otherwise go back to the server in a header line (If-Match) and split it */
	bool control = false;
	for (size_t i = 0; i < n; i++)
		control |= ((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f;
	if (n >= size || control) {
		dst[0] = 0;
		return;
	}
	memcpy(dst, v, n);
	dst[n] = 0;
}

/* Parses "bytes A-B/TOTAL" or "bytes *\/TOTAL" into resp. */
static void parse_content_range(struct http_response *resp, const char *v)
{
	uint64_t a, b, total;
	int used = 0;
	while (*v == ' ')
		v++;
	resp->has_range = false;
	if (sscanf(v, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64 "%n", &a, &b, &total, &used) == 3 &&
	    used > 0 && a <= b && b < total) {
		resp->range_first = a, resp->range_last = b, resp->total = total;
		resp->has_range = true;
	} else if (sscanf(v, "bytes */%" SCNu64 "%n", &total, &used) == 1 && used > 0) {
		resp->range_first = 1, resp->range_last = 0, resp->total = total;
		resp->has_range = true;
	}
}

/* Retry-After's seconds from now: delay-seconds, or an HTTP date (0 when past); -1 for
 * anything else. Capping is the caller's. */
static long parse_retry_after(const char *v)
{
	if (*v >= '0' && *v <= '9') {
		char *end;
		unsigned long long n = strtoull(v, &end, 10);
		if (*end)
			return -1;
		return n > 86400 ? 86400 : (long)n;
	}
	time_t when = curl_getdate(v, NULL);
	if (when == -1)
		return -1;
	time_t now = time(NULL);
	return when <= now ? 0 : when - now > 86400 ? 86400 : (long)(when - now);
}

/* One header line: a status line starts a new response (a 100 Continue, say), so what
 * was noted is forgotten. */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct transfer *t = arg;
	struct http_response *r = t->resp;
	size_t len = size * n;
	char tmp[HTTP_LOCATION_MAX];
	(void)size;
	r->header_bytes += len;
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', len);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->has_range = false;
		r->etag[0] = r->last_modified[0] = r->repo_commit[0] = r->location[0] = 0;
		r->encoding[0] = 0;
		r->has_length = false;
		r->retry_after = -1;
		r->bucket_region[0] = 0;
		r->error_body_len = 0;
		return len;
	}
	const char *colon = memchr(line, ':', len);
	if (!colon)
		return len;
	size_t name = (size_t)(colon - line);
	const char *v = colon + 1;
	size_t vn = len - name - 1;
#define IS(h) (name == sizeof h - 1 && strncasecmp(line, h, name) == 0)
	if (IS("ETag")) {
		keep_value(r->etag, sizeof r->etag, v, vn);
	} else if (IS("Last-Modified")) {
		keep_value(r->last_modified, sizeof r->last_modified, v, vn);
	} else if (IS("x-amz-bucket-region")) {
		keep_value(r->bucket_region, sizeof r->bucket_region, v, vn);
	} else if (IS("X-Repo-Commit")) {
		keep_value(r->repo_commit, sizeof r->repo_commit, v, vn);
	} else if (IS("Location")) {
		keep_value(r->location, sizeof r->location, v, vn);
	} else if (IS("Retry-After")) {
		keep_value(tmp, sizeof tmp, v, vn);
		r->retry_after = parse_retry_after(tmp);
	} else if (IS("Content-Range")) {
		keep_value(tmp, sizeof tmp, v, vn);
		parse_content_range(r, tmp);
	} else if (IS("Content-Encoding")) {
		/* a value too long to keep or holding control bytes is still an encoding */
		keep_value(tmp, sizeof tmp, v, vn);
		if (strcasecmp(tmp, "identity") != 0)
			snprintf(r->encoding, sizeof r->encoding, "%s",
			         !tmp[0] || strlen(tmp) >= sizeof r->encoding ? "?" : tmp);
	} else if (IS("Content-Length")) {
		char *end;
		keep_value(tmp, sizeof tmp, v, vn);
		r->content_length = strtoull(tmp, &end, 10);
		r->has_length = tmp[0] >= '0' && tmp[0] <= '9' && !*end;
		if (!r->has_length)   /* unreadable: no length that could agree */
			r->content_length = UINT64_MAX, r->has_length = true;
	}
#undef IS
	return len;
}

/* The body: only a 206 for exactly the range asked is kept; anything else (a 200 with
 * the whole file, an error page, a longer body) ends the transfer at its first bytes,
 * but for an error body asked for, kept up to its bound. */
static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct transfer *t = arg;
	struct http_response *r = t->resp;
	size_t len = size * n;
	if (r->status == 200 && t->req->body) {
		struct http_body *b = t->req->body;
		if (len > b->max - b->data.len) {
			r->aborted = true;
			return 0;
		}
		vbytes_put(&b->data, data, len);
		return b->data.failed ? 0 : len;
	}
	if (r->status >= 300 && t->req->keep_error_body) {
		size_t room = sizeof r->error_body - r->error_body_len;
		size_t take = len < room ? len : room;
		memcpy(r->error_body + r->error_body_len, data, take);
		r->error_body_len += take;
		return take == len ? len : 0;
	}
	if (r->status != 206 || r->encoding[0] || len > t->want - r->got) {
		r->aborted = r->status == 206 && !r->encoding[0];
		return 0;
	}
	if (t->req->segs) {   /* across as many pieces as the data spans */
		const struct http_request *q = t->req;
		for (size_t done = 0; done < len;) {
			size_t at = (size_t)(r->got % q->seg_len);
			size_t piece = q->seg_len - at < len - done ? q->seg_len - at : len - done;
			memcpy(q->segs[r->got / q->seg_len] + at, data + done, piece);
			done += piece;
			r->got += piece;
			if ((r->got % q->seg_len == 0 || r->got == t->want) && q->seg_ready &&
			    !q->seg_ready(q->seg_arg, r, (size_t)((r->got - 1) / q->seg_len))) {
				r->rejected = true;
				return 0;
			}
		}
		return len;
	}
	memcpy(t->req->buf + r->got, data, len);
	r->got += len;
	return len;
}

/* Sets h up to have libcurl sign its request for S3 with s (the headers it signs
 * along, x-amz-content-sha256 and x-amz-security-token, are among the request's lines). */
static void sign_sigv4(CURL *h, const struct http_sigv4 *s)
{
	char provider[96];
	snprintf(provider, sizeof provider, "aws:amz:%s:s3", s->region);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, provider);
	curl_easy_setopt(h, CURLOPT_USERNAME, s->access_key);
	curl_easy_setopt(h, CURLOPT_PASSWORD, s->secret_key);
}

/* Polled by libcurl about once a second and on every chunk: aborts the transfer once
 * the caller says so (the mount is ending). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	struct transfer *t = arg;
	if (t->req->cancelled && t->req->cancelled(t->req->cancel_arg)) {
		t->resp->aborted = true;
		return 1;
	}
	return 0;
}

void http_get_range(CURL *h, const struct http_request *req, struct http_response *resp)
{
	struct transfer t = { .req = req, .resp = resp, .want = req->last - req->first + 1 };
	struct curl_slist *headers = NULL;
	char range[64], line[HTTP_ETAG_MAX + 64];

	memset(resp, 0, sizeof *resp);
	resp->retry_after = -1;
	curl_easy_reset(h);
	snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, req->first, req->last);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	if (!req->body)
		curl_easy_setopt(h, CURLOPT_RANGE, range);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "ggufs/" GGUFS_VERSION);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)http_connect_timeout(req->timeout));
	/* a server that drips bytes slower than min_rate is as good as stalled, and even one
	 * just faster may not hold a reader past the attempt's deadline */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)(req->min_rate ? req->min_rate : 1));
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(req->timeout ? req->timeout : 1));
	if (req->min_rate)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
		                 (long)((req->timeout + t.want / req->min_rate) * 1000 + 999));
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (req->cafile)
		curl_easy_setopt(h, CURLOPT_CAINFO, req->cafile);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
	/* header values never carry a line break (remote_new checks tokens; keep_value
	 * drops an ETag with a control byte) */
	if (req->if_match) {
		snprintf(line, sizeof line, "If-Match: %s", req->if_match);
		headers = curl_slist_append(headers, line);
	}
	/* the file's own bytes, never a compressed form of them (nothing decodes here) */
	struct curl_slist *ae = curl_slist_append(headers, "Accept-Encoding: identity");
	if (ae)
		headers = ae;
	bool complete = true;   /* a request without all its lines is not sent */
	for (unsigned i = 0; i < req->n_headers && complete; i++) {
		struct curl_slist *more = curl_slist_append(headers, req->headers[i]);
		if (more)
			headers = more;
		else
			complete = false;
	}
	if (headers)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	/* an S3 key's "." and ".." parts are its own, not to be resolved away (and the
	 * signature is over the path sent) */
	if (req->path_as_is || req->sigv4)
		curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	if (req->sigv4)
		sign_sigv4(h, req->sigv4);
	resp->code = complete ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
	/* nothing of the credentials stays behind in the handle or in our copies */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	if (req->sigv4) {
		curl_easy_setopt(h, CURLOPT_USERNAME, NULL);
		curl_easy_setopt(h, CURLOPT_PASSWORD, NULL);
	}
	for (struct curl_slist *l = headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(headers);
}
