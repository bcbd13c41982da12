/* The retrying fetch: one range of a remote file, in attempts (each following
 * redirects from the remembered target or the URL as given), with jittered exponential
 * pauses between them, every reply checked against the file's pins (size, ETag,
 * Last-Modified) and its range, each failure told in one phrase, logged once per cause.
 * The request itself (the URL and what it carries) is made per hop in attempt. */
#include "remote_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "evlog.h"
#include "s3_error.h"
#include "token.h"

/* An idle easy handle, or a new one; NULL when out of memory. */
static CURL *handle_get(struct remote *r)
{
	CURL *h = NULL;
	pthread_mutex_lock(&r->pool_lock);
	if (r->n_pool)
		h = r->pool[--r->n_pool];
	pthread_mutex_unlock(&r->pool_lock);
	return h ? h : curl_easy_init();
}

/* Back to the pool, its connections kept for the next request. */
static void handle_put(struct remote *r, CURL *h)
{
	pthread_mutex_lock(&r->pool_lock);
	if (r->n_pool == r->pool_cap) {
		size_t cap = r->pool_cap ? 2 * r->pool_cap : 8;
		CURL **p = realloc(r->pool, cap * sizeof *p);
		if (p) {
			r->pool = p;
			r->pool_cap = cap;
		}
	}
	if (r->n_pool < r->pool_cap) {
		r->pool[r->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&r->pool_lock);
	if (h)
		curl_easy_cleanup(h);
}

bool remote_cancelled(const struct remote *r)
{
	return r->o.cancelled && r->o.cancelled(r->o.cancel_arg);
}

/* Sleeps ms milliseconds in short steps, ending early when the mount is ending. */
static void backoff(const struct remote *r, unsigned ms)
{
	for (unsigned slept = 0; slept < ms && !remote_cancelled(r); slept += 50) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* A pseudo-random number for jitter (xorshift, one state per thread: no lock, and no
 * two threads in step). */
static uint64_t jitter_random(void)
{
	static _Thread_local uint64_t state;
	if (!state) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&state ^ (uint64_t)ts.tv_sec;
		state |= 1;
	}
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

/* The pause before retry number `retry` (0 for the first): exponential, jittered to
 * 50-100 %, or the server's Retry-After (seconds, -1 for none, capped) if longer. */
static unsigned pause_ms(unsigned retry, long retry_after)
{
	unsigned ms = REMOTE_BACKOFF_MS;
	for (unsigned i = 0; i < retry && ms < REMOTE_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > REMOTE_BACKOFF_MAX_MS)
		ms = REMOTE_BACKOFF_MAX_MS;
	ms = ms / 2 + (unsigned)(jitter_random() % (ms / 2 + 1));
	if (retry_after >= 0) {
		long cap = retry_after < REMOTE_RETRY_AFTER_MAX ? retry_after : REMOTE_RETRY_AFTER_MAX;
		if ((unsigned long)cap * 1000 > ms)
			ms = (unsigned)cap * 1000;
	}
	return ms;
}

/* An ETag that If-Match can carry: a strong one (If-Match compares strongly). */
static bool strong_etag(const char *etag)
{
	return etag[0] == '"';
}

/* What one attempt came to. */
enum outcome {
	GOT,          /* the bytes, checked */
	RETRY,        /* a transient failure: 5xx, 429, reset, timeout */
	REFETCH,      /* a redirect target refused: start again from the URL as given */
	CHANGED,      /* not the file pinned */
	FAILED,       /* for good: err says why */
};

/* Whether a response is of the version pinned: its size, and every validator the pin
 * holds (ETag, Last-Modified), the same. A validator pinned but absent from the response
 * is a mismatch: a server that drops its ETag (and ignores If-Match) may be serving
 * another version. */
static bool same_version(const struct remote_file *f, const struct http_response *resp)
{
	return resp->total == f->size &&
	       (!f->etag[0] || strcmp(resp->etag, f->etag) == 0) &&
	       (!f->last_modified[0] || strcmp(resp->last_modified, f->last_modified) == 0);
}

/* Checks a 206 against the pins (pinned) or takes them (first request; commit is the
 * X-Repo-Commit a redirect on the way named, which the hub sends with its redirect). */
static enum outcome check_206(struct remote_file *f, const struct http_response *resp,
                              const char *url, uint64_t first, uint64_t last, bool pinned,
                              const char *commit, char err[GGUF_ERR_MAX])
{
	if (!resp->has_range || resp->range_first != first ||
	    (resp->range_last != last && !(!pinned && resp->range_last + 1 == resp->total &&
	                                   resp->range_last < last))) {
		gguf_errf(err, "the server's reply has no Content-Range for bytes %" PRIu64 "-%" PRIu64,
		     first, last);
		return FAILED;
	}
	if (resp->encoding[0]) {
		gguf_errf(err, "the server's reply is encoded (Content-Encoding: %s), not the file's bytes",
		     resp->encoding);
		return FAILED;
	}
	if (pinned && !same_version(f, resp)) {   /* a changed file, cut short or not */
		gguf_errf(err, "changed on the server (size %" PRIu64 ", ETag %s, Last-Modified %s; "
		     "mounted: %" PRIu64 ", ETag %s, Last-Modified %s)", resp->total,
		     resp->etag[0] ? resp->etag : "none",
		     resp->last_modified[0] ? resp->last_modified : "none", f->size,
		     f->etag[0] ? f->etag : "none", f->last_modified[0] ? f->last_modified : "none");
		return CHANGED;
	}
	if (resp->has_length && resp->content_length != resp->range_last - first + 1) {
		gguf_errf(err, "the server's reply has a Content-Length (%" PRIu64 ") other than its "
		     "Content-Range's (%" PRIu64 " bytes)", resp->content_length,
		     resp->range_last - first + 1);
		return RETRY;
	}
	if (resp->got != resp->range_last - first + 1) {
		gguf_errf(err, "the server's reply was cut short (%" PRIu64 " of %" PRIu64 " bytes)",
		     resp->got, resp->range_last - first + 1);
		return RETRY;
	}
	if (!pinned) {
		if (resp->total > REMOTE_SIZE_MAX) {   /* a claim, before anything is sized by it */
			gguf_errf(err, "the server claims a file of %" PRIu64 " bytes, more than the %llu "
			     "TiB ggufs mounts", resp->total, REMOTE_SIZE_MAX >> 40);
			return FAILED;
		}
		f->size = resp->total;
		snprintf(f->etag, sizeof f->etag, "%s", resp->etag);
		snprintf(f->last_modified, sizeof f->last_modified, "%s", resp->last_modified);
		snprintf(f->repo_commit, sizeof f->repo_commit, "%s",
		         resp->repo_commit[0] ? resp->repo_commit : commit);
		f->etag_origin = strdup(url);
		if (!f->etag_origin) {
			gguf_errf(err, "out of memory");
			return FAILED;
		}
	}
	return GOT;
}

/* http_request.seg_ready: block base + i is whole. Nothing is handed over before the
 * response's headers are checked (status, range, a Content-Length that agrees with it,
 * no Content-Encoding, size, validators): a block reaches the caches only once its bytes
 * are known to be exactly those asked for. False stops a response that fails them, and
 * check_206 then says why. */
static bool block_ready(void *arg, const struct http_response *resp, size_t i)
{
	struct blocks_sink *sink = arg;
	if (sink->base + i != sink->done || sink->done >= sink->n)
		return false;   /* never: pieces complete in order */
	if (!sink->checked) {
		if (resp->status != 206 || !resp->has_range || resp->range_first != sink->first ||
		    resp->range_last != sink->last || resp->encoding[0] ||
		    (resp->has_length && resp->content_length != sink->last - sink->first + 1) ||
		    !same_version(sink->f, resp))
			return false;
		sink->checked = true;
	}
	struct remote_file *f = sink->f;
	struct bc_block *b = sink->blocks[sink->done];
	/* stored before the claim ends: after it the bytes may be evicted and gone */
	if (f->entry)
		remote_store_block(f, sink->first_index + sink->done, bc_block_data(b),
		            block_len(f, sink->first_index + sink->done));
	bc_fill_done(f->r->cache, b, 0);
	sink->done++;
	return true;
}

/* Why a transfer failed, in ggufs's words (libcurl's name its internals: "Timeout was
 * reached", "Couldn't connect to server"), with the option that bears on it. */
static void network_phrase(char err[GGUF_ERR_MAX], CURLcode code, unsigned timeout)
{
	static const struct {
		CURLcode code;
		const char *phrase;
	} phrases[] = {
		{ CURLE_COULDNT_CONNECT, "cannot connect to the server (refused, or no route to it)" },
		{ CURLE_COULDNT_RESOLVE_HOST, "cannot resolve the server's host name" },
		{ CURLE_COULDNT_RESOLVE_PROXY, "cannot resolve the proxy's host name" },
		{ CURLE_PEER_FAILED_VERIFICATION, "the server's TLS certificate is not trusted "
		  "(failed verification; -o cafile=PATH trusts its CA)" },
		{ CURLE_SSL_CACERT_BADFILE, "the CA certificates of -o cafile cannot be read" },
		{ CURLE_SSL_CONNECT_ERROR, "the TLS handshake with the server failed" },
		{ CURLE_GOT_NOTHING, "the server closed the connection without an answer" },
		{ CURLE_RECV_ERROR, "the connection broke (reset by the server or the network)" },
		{ CURLE_SEND_ERROR, "the connection broke (reset by the server or the network)" },
		{ CURLE_PARTIAL_FILE, "the server's reply was cut short" },
	};
	if (code == CURLE_OPERATION_TIMEDOUT) {
		gguf_errf(err, "no answer from the server in time, or too slow (at most %u s to "
		          "connect, then less than %u bytes/s for %u s: -o timeout=%u)",
		          http_connect_timeout(timeout), REMOTE_MIN_RATE, timeout, timeout);
		return;
	}
	for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
		if (phrases[i].code == code) {
			gguf_errf(err, "%s", phrases[i].phrase);
			return;
		}
	gguf_errf(err, "network error: %s", curl_easy_strerror(code));
}

/* What a reply of S3 other than a 206 means, in one phrase with S3's code (from the
 * error body) and the mount's credentials source, region and endpoint: 5xx and 429
 * (SlowDown, InternalError) are retried, anything else is refused. */
static enum outcome classify_s3(const struct remote_file *f, const struct http_response *resp,
                                char err[GGUF_ERR_MAX])
{
	const struct remote_s3 *s3 = f->r->o.s3;
	long st = resp->status;
	struct s3_error e;
	s3_error_parse(resp->error_body, resp->error_body_len, &e);
	const char *code = e.code[0] ? e.code : "no S3 error code";
	if (st == 429 || st >= 500) {
		gguf_errf(err, "HTTP %ld %s", st, code);
		return RETRY;
	}
	if (strcmp(e.code, "SignatureDoesNotMatch") == 0)
		gguf_errf(err, "the endpoint refused the signature (HTTP %ld SignatureDoesNotMatch: a "
		     "wrong secret key, or a region other than the bucket's); %s", st, s3->context);
	else if (strcmp(e.code, "InvalidAccessKeyId") == 0)
		gguf_errf(err, "the endpoint knows no such access key id (HTTP %ld "
		     "InvalidAccessKeyId); %s", st, s3->context);
	else if (strcmp(e.code, "NoSuchKey") == 0 || (st == 404 && !e.code[0]))
		gguf_errf(err, "no such key in bucket '%s' (HTTP %ld %s); %s", s3->bucket, st, code,
		     s3->context);
	else if (strcmp(e.code, "NoSuchBucket") == 0)
		gguf_errf(err, "no such bucket '%s' (HTTP %ld NoSuchBucket); %s", s3->bucket, st,
		     s3->context);
	else if (strcmp(e.code, "PermanentRedirect") == 0 || st == 301)
		gguf_errf(err, "bucket '%s' is in another region%s%s%s%s (HTTP %ld %s): set AWS_REGION "
		     "or the endpoint; %s", s3->bucket, resp->bucket_region[0] ? ", " : "",
		     resp->bucket_region, e.endpoint[0] ? ", at " : "", e.endpoint, st, code,
		     s3->context);
	else if (strcmp(e.code, "AuthorizationHeaderMalformed") == 0 && e.region[0])
		gguf_errf(err, "bucket '%s' is in region %s (HTTP %ld AuthorizationHeaderMalformed): "
		     "set AWS_REGION; %s", s3->bucket, e.region, st, s3->context);
	else if (st == 401 || st == 403)
		gguf_errf(err, "access denied (HTTP %ld %s); %s", st, code, s3->context);
	else if (st == 416 && resp->has_range && resp->total == 0)
		gguf_errf(err, "empty file, not GGUF");
	else
		gguf_errf(err, "HTTP %ld %s; %s", st, code, s3->context);
	return FAILED;
}

/* What a reply other than a 206 or a redirect means. */
static enum outcome classify(const struct remote_file *f, const struct http_response *resp,
                             bool at_target, bool pinned, char err[GGUF_ERR_MAX])
{
	long st = resp->status;
	if (resp->code != CURLE_OK && st != 200 && !(st >= 300)) {
		if (resp->aborted && remote_cancelled(f->r)) {
			gguf_errf(err, "the mount is ending");
			return FAILED;
		}
		if (resp->aborted) {   /* on_body stopped a 206 longer than the range asked */
			gguf_errf(err, "the server sent more than the range asked for");
			return FAILED;
		}
		if (resp->code == CURLE_OUT_OF_MEMORY && resp->header_bytes) {
			/* libcurl's word for a header line over its 100 KiB: not our memory */
			gguf_errf(err, "the server's response headers are too large");
			return FAILED;
		}
		network_phrase(err, resp->code, f->r->o.timeout);
		switch (resp->code) {
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_OUT_OF_MEMORY:
			return FAILED;
		default:
			return RETRY;
		}
	}
	if (st == 200 && url_names_folder(f->url)) {
		gguf_errf(err, "not a file: the URL names a directory (it ends in /); give the "
		     "URL of a .gguf file in it");
		return FAILED;
	}
	if (st == 200) {
		gguf_errf(err, "the server ignores Range requests (HTTP 200 instead of 206): download "
		     "the file and use the local copy");
		return FAILED;
	}
	if (pinned && (st == 412 || st == 416)) {
		gguf_errf(err, "changed on the server (HTTP %ld to a request for the version mounted, "
		     "ETag %s; mounted: %" PRIu64 " bytes, ETag %s)", st,
		     resp->etag[0] ? resp->etag : "not sent", f->size, f->etag[0] ? f->etag : "none");
		return CHANGED;
	}
	if (at_target && (st == 401 || st == 403 || st == 404 || st == 410)) {
		gguf_errf(err, "HTTP %ld from the redirect target", st);
		return REFETCH;
	}
	if (f->r->o.s3)
		return classify_s3(f, resp, err);
	if (st == 429 || st >= 500) {
		gguf_errf(err, "HTTP %ld", st);
		return RETRY;
	}
	if ((st == 404 || st == 410) && f->r->o.hub_rev.len) {
		/* an hf:// name: the URL it became shows a wrong HF_ENDPOINT or revision */
		gguf_errf(err, "not found (HTTP %ld) at %s", st, f->display);
	} else if (st == 404 || st == 410) {
		gguf_errf(err, "not found (HTTP %ld)", st);
	} else if (st == 401 || st == 403) {
		if (!f->r->o.token && f->r->o.token_withheld)
			gguf_errf(err, "access denied (HTTP %ld): HF_TOKEN goes only to the hub "
			     "(HF_ENDPOINT); -o token_file=PATH gives this server one", st);
		else if (!f->r->o.token && f->r->o.hub)
			gguf_errf(err, "access denied (HTTP %ld): set HF_TOKEN or -o token_file=PATH", st);
		else if (!f->r->o.token)   /* HF_TOKEN would not be sent here: not a fix */
			gguf_errf(err, "access denied (HTTP %ld): -o token_file=PATH gives this server a "
			     "token", st);
		else
			gguf_errf(err, "access denied (HTTP %ld) with the token given (%s)", st,
			     f->r->o.token_from_env ? "HF_TOKEN" : "token_file");
	} else if (st == 416 && resp->has_range && resp->total == 0) {
		gguf_errf(err, "empty file, not GGUF");
	} else if (st >= 300 && st < 400) {
		gguf_errf(err, "HTTP %ld redirect without a usable Location", st);
	} else {
		gguf_errf(err, "HTTP %ld", st);
	}
	return FAILED;
}

/* True when next is url with a "/" added to its path (its query kept): how a web
 * server answers a directory named without the slash. */
static bool is_directory_redirect(const char *url, const char *next)
{
	size_t path = strcspn(url, "?#"), next_path = strcspn(next, "?#");
	return next_path == path + 1 && next[path] == '/' && strncmp(url, next, path) == 0 &&
	       strcmp(url + path, next + next_path) == 0;
}

/* The wait of a fetch at mount, for remote_opts.waiting: one line per attempt at most. */
struct mount_wait {
	struct remote_file *f;
	unsigned attempt;           /* 1-based, the one running */
	unsigned said;              /* the last attempt a line was said for (0: none) */
	double attempt_started;
};

/* Says line (printf-style) through remote_opts.waiting for attempt w->attempt. */
static void say_waiting(struct mount_wait *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say_waiting(struct mount_wait *w, const char *fmt, ...)
{
	char line[GGUF_ERR_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	w->said = w->attempt;
	w->f->r->o.waiting(w->f->r->o.waiting_arg, line);
}

/* http_request.cancelled during an attempt at mount: polled about once a second, it
 * says that the attempt has had no answer for REMOTE_WAIT_SAY_S, once; never cancels
 * but as the mount's own callback would. */
static bool poll_mount_wait(void *arg)
{
	struct mount_wait *w = arg;
	struct remote *r = w->f->r;
	double waited = clock_now_s() - w->attempt_started;
	if (w->said != w->attempt && waited >= REMOTE_WAIT_SAY_S)
		say_waiting(w, "%s: waiting for the server: no answer after %.0f s (attempt %u of "
		            "%u; -o timeout=%u ends an attempt that gets no data for that long)",
		            remote_log_name(w->f), waited, w->attempt, REMOTE_ATTEMPTS, r->o.timeout);
	return r->o.cancelled && r->o.cancelled(r->o.cancel_arg);
}

int remote_sign_bearer(const struct remote *r, const char *given, const char *url,
                       uint64_t first, uint64_t last, char *lines[REMOTE_SIGN_LINES],
                       const struct http_sigv4 **sigv4)
{
	(void)first;
	(void)last;
	*sigv4 = NULL;
	if (!r->o.token || !url_same_origin(url, given))
		return 0;
	size_t n = strlen(r->o.token) + 32;
	if (!(lines[0] = malloc(n)))
		return -1;
	snprintf(lines[0], n, "Authorization: Bearer %s", r->o.token);
	return 1;
}

/* The SHA-256 of an empty body: a GET's payload, as x-amz-content-sha256 says it. */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

int remote_sign_s3(const struct remote *r, const char *given, const char *url,
                   uint64_t first, uint64_t last, char *lines[REMOTE_SIGN_LINES],
                   const struct http_sigv4 **sigv4)
{
	(void)first;
	(void)last;
	*sigv4 = NULL;
	if (!r->s3.access_key || !url_same_origin(url, given))
		return 0;
	int n = 0;
	if (!(lines[n++] = strdup("x-amz-content-sha256: " EMPTY_SHA256)))
		return -1;
	if (r->s3.session_token) {
		size_t len = strlen(r->s3.session_token) + 32;
		if (!(lines[n] = malloc(len))) {
			free(lines[0]);
			return -1;
		}
		snprintf(lines[n++], len, "x-amz-security-token: %s", r->s3.session_token);
	}
	*sigv4 = &r->sigv4;
	return n;
}

void remote_unsign(char *lines[REMOTE_SIGN_LINES], int n)
{
	for (int i = 0; i < n; i++)
		token_free(lines[i]);
}

/* The request for bytes [first, last] of f at url, made afresh for each hop: the
 * signer's lines (*lines, n_lines, to be unsigned after it) and If-Match where the
 * pinned ETag came from url's origin. -1 when out of memory. */
static int make_request(struct remote_file *f, const char *url, uint64_t first,
                        uint64_t last, uint8_t *buf, struct blocks_sink *sink, bool pinned,
                        struct mount_wait *wait, struct http_request *req,
                        char *lines[REMOTE_SIGN_LINES])
{
	struct remote *r = f->r;
	const struct http_sigv4 *sigv4;
	int n_lines = r->sign(r, f->url, url, first, last, lines, &sigv4);
	if (n_lines < 0)
		return -1;
	*req = (struct http_request){
		.url = url, .first = first, .last = last,
		.headers = (const char *const *)lines, .n_headers = (unsigned)n_lines,
		.sigv4 = sigv4, .keep_error_body = r->o.s3 != NULL, .path_as_is = r->o.s3 != NULL,
		.if_match = pinned && strong_etag(f->etag) &&
		            url_same_origin(url, f->etag_origin) ? f->etag : NULL,
		.cafile = r->o.cafile, .timeout = r->o.timeout, .min_rate = REMOTE_MIN_RATE,
		.cancelled = wait ? poll_mount_wait : r->o.cancelled,
		.cancel_arg = wait ? (void *)wait : r->o.cancel_arg, .buf = buf,
		.segs = sink ? sink->segs + sink->done : NULL, .seg_len = REMOTE_BLOCK_SIZE,
		.seg_ready = sink ? block_ready : NULL, .seg_arg = sink,
	};
	return n_lines;
}

/* Where the redirect from url to location leads: a malloc'ed URL, or NULL with err (a
 * location that is not an http(s) URL, a directory, https to plain http, one redirect
 * too many after hops). */
static char *follow_redirect(const struct remote_file *f, const char *url,
                             const char *location, int hops, char err[GGUF_ERR_MAX])
{
	if (hops + 1 >= REMOTE_MAX_REDIRECTS) {
		gguf_errf(err, "more than %d redirects", REMOTE_MAX_REDIRECTS);
		return NULL;
	}
	char *next = url_resolve(url, location);
	if (!next) {
		gguf_errf(err, "a redirect to a location that is not an http(s) URL");
		return NULL;
	}
	if (is_directory_redirect(url, next)) {
		gguf_errf(err, "not a file: the server redirects it to a directory (a URL "
		     "ending in /)");
		free(next);
		return NULL;
	}
	/* an https mount fetches only over https, wherever a redirect leads */
	if (strncasecmp(f->url, "https://", 8) == 0 && strncasecmp(next, "https://", 8) != 0) {
		gguf_errf(err, "a redirect from https to plain http: refused");
		free(next);
		return NULL;
	}
	return next;
}

/* Remembers url, where a redirect led and the bytes came from, as f's target: the
 * next fetch starts there. Takes url over when it keeps it (*url is then NULL). */
static void remember_target(struct remote_file *f, char **url)
{
	if (strcmp(*url, f->url) == 0)
		return;
	pthread_mutex_lock(&f->lock);
	if (!f->target || strcmp(f->target, *url) != 0) {
		free(f->target);
		f->target = *url;
		*url = NULL;
	}
	pthread_mutex_unlock(&f->lock);
}

/* One attempt at bytes [first, last] into buf, following redirects from the remembered
 * target or the URL as given; each hop's request is made for its URL (make_request).
 * wait: at mount, the wait to say (or NULL). */
static enum outcome attempt(struct remote_file *f, CURL *h, uint64_t first, uint64_t last,
                            uint8_t *buf, struct blocks_sink *sink, bool pinned,
                            bool from_given, struct mount_wait *wait, long *status,
                            long *retry_after, char err[GGUF_ERR_MAX])
{
	struct remote *r = f->r;
	char *url = NULL;
	bool at_target = false;
	if (!from_given) {
		pthread_mutex_lock(&f->lock);
		if (f->target) {
			url = strdup(f->target);
			at_target = true;
		}
		pthread_mutex_unlock(&f->lock);
	}
	if (!url)
		url = strdup(f->url);
	struct http_response *resp = malloc(sizeof *resp);
	enum outcome out = FAILED;
	char commit[HTTP_COMMIT_MAX] = "";
	if (!url || !resp) {
		gguf_errf(err, "out of memory");
		goto done;
	}
	for (int hops = 0;; hops++) {
		struct http_request req;
		char *lines[REMOTE_SIGN_LINES];
		int n_lines = make_request(f, url, first, last, buf, sink, pinned, wait, &req, lines);
		if (n_lines < 0) {
			gguf_errf(err, "out of memory");
			goto done;
		}
		if (sink) {
			sink->base = sink->done;
			sink->first = first;
			sink->last = last;
			sink->checked = false;
		}
		http_get_range(h, &req, resp);
		remote_unsign(lines, n_lines);
		atomic_fetch_add_explicit(&r->n_requests, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->n_bytes, resp->got, memory_order_relaxed);
		*status = resp->status;
		*retry_after = resp->retry_after;
		long st = resp->status;
		if (resp->repo_commit[0] && !commit[0])
			memcpy(commit, resp->repo_commit, sizeof commit);
		if (st >= 300 && st < 400 && st != 304 && resp->location[0]) {
			char *next = follow_redirect(f, url, resp->location, hops, err);
			if (!next)
				goto done;
			free(url);
			url = next;
			at_target = true;
			continue;
		}
		if (st == 206 && (resp->code == CURLE_OK || resp->rejected || resp->encoding[0])) {
			out = check_206(f, resp, url, first, last, pinned, commit, err);
			if (out == GOT)
				remember_target(f, &url);
			goto done;
		}
		out = classify(f, resp, at_target, pinned, err);
		goto done;
	}
done:
	free(url);
	free(resp);
	return out;
}

/* Keeps why (one phrase about f) as the mount's last failure, and as f's: what the reads
 * it fails say (remote_read). */
static void note_failure(struct remote_file *f, const char *why)
{
	struct remote *r = f->r;
	atomic_fetch_add_explicit(&r->n_failures, 1, memory_order_relaxed);
	pthread_mutex_lock(&f->lock);
	snprintf(f->failure, sizeof f->failure, "%s: %s", remote_log_name(f), why);
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_lock(&r->error_lock);
	snprintf(r->last_error, sizeof r->last_error, "%s: %s", remote_log_name(f), why);
	r->last_error_time = time(NULL);
	pthread_mutex_unlock(&r->error_lock);
}

/* Keeps cause (what the event log says of a failed read, after the file's name) as
 * the fetcher's first cause, unless it has one (remote_first_cause). */
static void note_cause(struct remote *r, const char *cause)
{
	/* cut to fit, as the event log's line would be */
	const size_t n = strnlen(cause, sizeof r->first_cause - 1);
	pthread_mutex_lock(&r->error_lock);
	if (!r->first_cause[0]) {
		memcpy(r->first_cause, cause, n);
		r->first_cause[n] = 0;
	}
	pthread_mutex_unlock(&r->error_lock);
}

/* Says once, in the event log, that the remote file changed under the mount (why holds
 * the validators mounted and seen). */
static void mark_changed(struct remote_file *f, const char *why)
{
	if (!atomic_exchange(&f->changed, true)) {
		char cause[GGUF_ERR_MAX];
		note_failure(f, why);
		snprintf(cause, sizeof cause, "%s: data reads fail with EIO from now on", why);
		note_cause(f->r, cause);
		evlog(EVLOG_ERR, NULL, "%s: %s", remote_log_name(f), cause);
	}
}

/* The rate limit's key of a failed fetch: the file and the cause with its numbers left
 * out (byte ranges and counts differ from one failure to the next; the cause does not). */
static void failure_key(char *key, size_t size, const struct remote_file *f, long status,
                        const char *err)
{
	snprintf(key, size, "fetch %s %ld ", remote_log_name(f), status);
	evlog_key_cause(key, size, err);
}

/* (remote_int.h) */
int remote_fetch(struct remote_file *f, uint64_t first, uint64_t last, uint8_t *buf,
                 struct blocks_sink *sink, bool pinned, bool at_mount,
                 char err[GGUF_ERR_MAX], long *status)
{
	struct remote *r = f->r;
	CURL *h = handle_get(r);
	bool from_given = false;
	int ret = -1;
	double started = clock_now_s();
	double give_up = started + (double)REMOTE_RETRY_SPAN * r->o.timeout;
	struct mount_wait wait = { .f = f };
	unsigned retries = 0, n = 0;
	enum outcome o = FAILED;
	*status = 0;
	if (!h) {
		gguf_errf(err, "out of memory");
		return -1;
	}
	for (; n < REMOTE_ATTEMPTS; n++) {
		if (pinned && atomic_load(&f->changed)) {
			gguf_errf(err, "changed on the server");
			o = CHANGED;   /* said when it was found */
			break;
		}
		long retry_after = -1;
		/* blocks that came whole are the readers' already: ask only for the rest */
		uint64_t from = sink ? first + (uint64_t)sink->done * REMOTE_BLOCK_SIZE : first;
		wait.attempt = n + 1;
		wait.attempt_started = clock_now_s();
		o = attempt(f, h, from, last, buf, sink, pinned, from_given,
		            at_mount && r->o.waiting ? &wait : NULL, status, &retry_after, err);
		if (o == GOT) {
			ret = 0;
			break;
		}
		if (o == CHANGED) {
			if (at_mount)
				atomic_store(&f->changed, true);
			else
				mark_changed(f, err);
			break;
		}
		if (o == FAILED || n + 1 == REMOTE_ATTEMPTS || remote_cancelled(r))
			break;
		atomic_fetch_add_explicit(&r->n_retries, 1, memory_order_relaxed);
		if (o == REFETCH) {
			pthread_mutex_lock(&f->lock);
			free(f->target);
			f->target = NULL;
			pthread_mutex_unlock(&f->lock);
			if (from_given)
				break;
			from_given = true;
			continue;
		}
		unsigned ms = pause_ms(retries++, retry_after);
		if (clock_now_s() + ms / 1e3 >= give_up)
			break;
		/* a mount that has waited a while says why it waits on */
		if (at_mount && r->o.waiting && clock_now_s() + ms / 1e3 - started >= REMOTE_WAIT_SAY_S) {
			wait.attempt = n + 2;
			say_waiting(&wait, "%s: %s; trying again in %.1f s (attempt %u of %u; -o "
			            "timeout=%u bounds each)", remote_log_name(f), err, ms / 1e3, n + 2,
			            REMOTE_ATTEMPTS, r->o.timeout);
		}
		backoff(r, ms);
	}
	handle_put(r, h);
	unsigned attempts = n < REMOTE_ATTEMPTS ? n + 1 : REMOTE_ATTEMPTS;
	/* at mount, the mount's one line says it, with what was tried */
	if (ret < 0 && at_mount && attempts > 1 && o != CHANGED) {
		size_t len = strlen(err);
		snprintf(err + len, GGUF_ERR_MAX - len, " (%u attempts in %.1f s)", attempts,
		         clock_now_s() - started);
	}
	/* a read's fetch that failed for good: the log says why, once per cause (a changed
	 * file has said so in mark_changed) */
	if (ret < 0 && !at_mount && o != CHANGED && !remote_cancelled(r)) {
		char key[GGUF_ERR_MAX + 64], cause[GGUF_ERR_MAX + 128];
		note_failure(f, err);
		failure_key(key, sizeof key, f, *status, err);
		snprintf(cause, sizeof cause, "bytes %" PRIu64 "-%" PRIu64 " could not be fetched "
		         "after %u attempt%s in %.1f s: %s: reads of them fail with EIO", first, last,
		         attempts, attempts == 1 ? "" : "s", clock_now_s() - started, err);
		note_cause(r, cause);
		evlog(EVLOG_ERR, key, "%s: %s", remote_log_name(f), cause);
	}
	return ret;
}

void remote_fetch_pool_free(struct remote *r)
{
	for (size_t i = 0; i < r->n_pool; i++)
		curl_easy_cleanup(r->pool[i]);
	free(r->pool);
	r->pool = NULL;
	r->n_pool = r->pool_cap = 0;
}
