#include "remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "blockcache.h"
#include "clock.h"
#include "diskcache.h"
#include "evlog.h"
#include "http.h"
#include "s3_error.h"
#include "url.h"

/* A job for the read-ahead threads: blocks [first, first + n) of a file, each claimed
 * in the cache (loading: readers of them wait), fetched with one range request. */
struct ahead_job {
	struct ahead_job *next;
	struct remote_file *f;
	uint64_t first;
	unsigned n;
	struct bc_block *blocks[];
};

struct remote {
	struct remote_opts o;       /* token, cafile and s3: copies owned here */
	struct remote_s3 s3;        /* what o.s3 points to (its strings owned here) */
	struct blockcache *cache;
	struct diskcache *disk;     /* -o cache_dir, or NULL */

	pthread_mutex_t pool_lock;  /* idle easy handles, each used by one thread at a time */
	CURL **pool;
	size_t n_pool, pool_cap;

	pthread_mutex_t ahead_lock; /* the queue, and each file's read-ahead state */
	pthread_cond_t ahead_cond;
	struct ahead_job *q_head, *q_tail;
	bool stopping;
	bool ahead_wanted;          /* the cache has room for read-ahead */
	unsigned window_max;        /* blocks: REMOTE_WINDOW_MAX_BLOCKS or half the cache */
	bool ahead_started;         /* the threads were started (on the first read-ahead) */
	pthread_t threads[REMOTE_READAHEAD_THREADS];
	unsigned n_threads;

	/* counters (remote_counters): relaxed atomics, bumped where they happen and read
	 * only when asked */
	atomic_uint_fast64_t n_requests, n_bytes, n_memory_hits, n_disk_hits, n_retries,
	                     n_failures;
	pthread_mutex_t error_lock;  /* the last failure */
	char last_error[GGUF_ERR_MAX];
	time_t last_error_time;
};

struct remote_file {
	struct source src;          /* first: the source is the file */
	struct remote *r;
	char *url;                  /* as given (may hold credentials: never shown) */
	char *display;              /* as shown */
	char *name;                 /* as the user named it (hf://...), for the log; NULL:
	                             * display */

	/* pins, from the first response */
	uint64_t size;
	char etag[HTTP_ETAG_MAX];
	char last_modified[HTTP_DATE_MAX];
	char repo_commit[HTTP_COMMIT_MAX];
	char *etag_origin;          /* the URL whose origin gave the ETag: If-Match goes there */
	time_t mtime;
	struct dc_entry *entry;     /* this version's blocks on disk, or NULL */

	uint8_t *prefix;            /* the first prefix_len bytes, fixed once mounted */
	uint64_t prefix_len;

	pthread_mutex_t lock;       /* target, failed */
	char *target;               /* where the last redirect led (used first), or NULL */
	struct {                    /* blocks whose fetch failed lately (REMOTE_FAILED_HOLD_MS) */
		uint64_t index;
		double until;           /* clock_now_s() before this: reads of it fail at once */
	} failed[REMOTE_FAILED_SLOTS];
	unsigned failed_next;       /* the slot to use next (oldest first) */

	atomic_bool changed;        /* the remote file is not the one pinned: reads fail */

	/* read-ahead, under r->ahead_lock */
	uint64_t ra_next;           /* the block after the furthest read; UINT64_MAX: none */
	uint64_t ra_end;            /* blocks before this one are fetched or being fetched */
	unsigned ra_request;        /* blocks per request now */
	unsigned ra_window;         /* blocks kept ahead of the reader now */
	unsigned ahead_pending;     /* jobs queued or running for this file */
};

/* Set by fetch_block on the thread whose bc_get fetched (or loaded from disk): a block
 * bc_get returned without it came from memory. */
static _Thread_local bool fetched_here;

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

/* True once the mount is ending: no transfer or pause should go on. */
static bool cancelled(const struct remote *r)
{
	return r->o.cancelled && r->o.cancelled(r->o.cancel_arg);
}

/* Sleeps ms milliseconds in short steps, ending early when the mount is ending. */
static void backoff(const struct remote *r, unsigned ms)
{
	for (unsigned slept = 0; slept < ms && !cancelled(r); slept += 50) {
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

/* Keeps block index of f in the disk cache, or says (once; then counted) that it could
 * not: no room that may be freed under cache_max, or a write error. */
static void store_block(struct remote_file *f, uint64_t index, const uint8_t *data, size_t len)
{
	if (!dc_store(f->entry, index, data, len))
		evlog(EVLOG_WARNING, "dc store", "the disk cache could not keep a block (no room "
		      "that may be freed under cache_max, or a write error): it is fetched again "
		      "when read again");
}

/* Bytes of block index: the whole block, or what is left of the file. */
static size_t block_len(const struct remote_file *f, uint64_t index)
{
	uint64_t first = index * REMOTE_BLOCK_SIZE;
	return f->size - first < REMOTE_BLOCK_SIZE ? (size_t)(f->size - first) : REMOTE_BLOCK_SIZE;
}

/* A read-ahead job's blocks, filled by one request (and by its retries, each asking
 * from the first block not yet whole): each block is handed to the cache as soon as it
 * is whole, so that a reader waits for its block, not for the whole request. */
struct blocks_sink {
	struct remote_file *f;
	struct bc_block **blocks;
	uint64_t first_index;       /* of blocks[0] in the file */
	unsigned n, done;           /* blocks; those handed over whole */
	unsigned base;              /* the block where this attempt's body starts */
	uint64_t first, last;       /* this attempt's range */
	bool checked;               /* this attempt's response is the range and version asked */
	uint8_t *segs[REMOTE_REQUEST_MAX_BLOCKS];
};

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
		store_block(f, sink->first_index + sink->done, bc_block_data(b),
		            block_len(f, sink->first_index + sink->done));
	bc_fill_done(f->r->cache, b, 0);
	sink->done++;
	return true;
}

/* Why a transfer failed, in ggufs's words (libcurl's name its internals: "Timeout was
 * reached", "Couldn't connect to server"), with the option that bears on it. */
static void network_phrase(char err[GGUF_ERR_MAX], CURLcode code, unsigned timeout)
{
	switch (code) {
	case CURLE_COULDNT_CONNECT:
		gguf_errf(err, "cannot connect to the server (refused, or no route to it)");
		break;
	case CURLE_COULDNT_RESOLVE_HOST:
		gguf_errf(err, "cannot resolve the server's host name");
		break;
	case CURLE_COULDNT_RESOLVE_PROXY:
		gguf_errf(err, "cannot resolve the proxy's host name");
		break;
	case CURLE_OPERATION_TIMEDOUT:
		gguf_errf(err, "no answer from the server in time, or too slow (at most 10 s to "
		     "connect, then less than %u bytes/s for %u s: -o timeout=%u)", REMOTE_MIN_RATE,
		     timeout, timeout);
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
		gguf_errf(err, "the server's TLS certificate is not trusted (failed verification; "
		     "-o cafile=PATH trusts its CA)");
		break;
	case CURLE_SSL_CACERT_BADFILE:
		gguf_errf(err, "the CA certificates of -o cafile cannot be read");
		break;
	case CURLE_SSL_CONNECT_ERROR:
		gguf_errf(err, "the TLS handshake with the server failed");
		break;
	case CURLE_GOT_NOTHING:
		gguf_errf(err, "the server closed the connection without an answer");
		break;
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
		gguf_errf(err, "the connection broke (reset by the server or the network)");
		break;
	case CURLE_PARTIAL_FILE:
		gguf_errf(err, "the server's reply was cut short");
		break;
	default:
		gguf_errf(err, "network error: %s", curl_easy_strerror(code));
		break;
	}
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
		if (resp->aborted && cancelled(f->r)) {
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
	if (st == 200) {
		gguf_errf(err, "the server ignores Range requests (HTTP 200 instead of 206): download "
		     "the file and mount the local copy");
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
		            w->f->display, waited, w->attempt, REMOTE_ATTEMPTS, r->o.timeout);
	return r->o.cancelled && r->o.cancelled(r->o.cancel_arg);
}

/* One attempt at bytes [first, last] into buf, following redirects from the remembered
 * target or the URL as given. The token goes only to the origin of the URL as given.
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
		struct http_request req = {
			.url = url, .first = first, .last = last,
			.token = url_same_origin(url, f->url) ? r->o.token : NULL,
			.if_match = pinned && strong_etag(f->etag) &&
			            url_same_origin(url, f->etag_origin) ? f->etag : NULL,
			.cafile = r->o.cafile, .timeout = r->o.timeout, .min_rate = REMOTE_MIN_RATE,
			/* the keys sign requests to the endpoint only, wherever a redirect leads */
			.sigv4 = r->o.s3 && r->s3.sign.access_key && url_same_origin(url, f->url) ?
			         &r->s3.sign : NULL,
			.keep_error_body = r->o.s3 != NULL, .path_as_is = r->o.s3 != NULL,
			.cancelled = wait ? poll_mount_wait : r->o.cancelled,
			.cancel_arg = wait ? (void *)wait : r->o.cancel_arg, .buf = buf,
			.segs = sink ? sink->segs + sink->done : NULL, .seg_len = REMOTE_BLOCK_SIZE,
			.seg_ready = sink ? block_ready : NULL, .seg_arg = sink,
		};
		if (sink) {
			sink->base = sink->done;
			sink->first = first;
			sink->last = last;
			sink->checked = false;
		}
		http_get_range(h, &req, resp);
		atomic_fetch_add_explicit(&r->n_requests, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&r->n_bytes, resp->got, memory_order_relaxed);
		*status = resp->status;
		*retry_after = resp->retry_after;
		long st = resp->status;
		if (resp->repo_commit[0] && !commit[0])
			memcpy(commit, resp->repo_commit, sizeof commit);
		if (st >= 300 && st < 400 && st != 304 && resp->location[0]) {
			if (hops + 1 >= REMOTE_MAX_REDIRECTS) {
				gguf_errf(err, "more than %d redirects", REMOTE_MAX_REDIRECTS);
				goto done;
			}
			char *next = url_resolve(url, resp->location);
			if (!next) {
				gguf_errf(err, "a redirect to a location that is not an http(s) URL");
				goto done;
			}
			if (is_directory_redirect(url, next)) {
				gguf_errf(err, "not a file: the server redirects it to a directory (a URL "
				     "ending in /)");
				free(next);
				goto done;
			}
			/* an https mount fetches only over https, wherever a redirect leads */
			if (strncasecmp(f->url, "https://", 8) == 0 && strncasecmp(next, "https://", 8) != 0) {
				gguf_errf(err, "a redirect from https to plain http: refused");
				free(next);
				goto done;
			}
			free(url);
			url = next;
			at_target = true;
			continue;
		}
		if (st == 206 && (resp->code == CURLE_OK || resp->rejected || resp->encoding[0])) {
			out = check_206(f, resp, url, first, last, pinned, commit, err);
			if (out == GOT && strcmp(url, f->url) != 0) {
				pthread_mutex_lock(&f->lock);
				if (!f->target || strcmp(f->target, url) != 0) {
					free(f->target);
					f->target = url;
					url = NULL;
				}
				pthread_mutex_unlock(&f->lock);
			}
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

/* The file as the log names it: as the user gave it. */
static const char *log_name(const struct remote_file *f)
{
	return f->name ? f->name : f->display;
}

/* Keeps why (one phrase about f) as the mount's last failure. */
static void note_failure(struct remote_file *f, const char *why)
{
	struct remote *r = f->r;
	atomic_fetch_add_explicit(&r->n_failures, 1, memory_order_relaxed);
	pthread_mutex_lock(&r->error_lock);
	snprintf(r->last_error, sizeof r->last_error, "%s: %s", log_name(f), why);
	r->last_error_time = time(NULL);
	pthread_mutex_unlock(&r->error_lock);
}

/* Says once, in the event log, that the remote file changed under the mount (why holds
 * the validators mounted and seen). */
static void mark_changed(struct remote_file *f, const char *why)
{
	if (!atomic_exchange(&f->changed, true)) {
		note_failure(f, why);
		evlog(EVLOG_ERR, NULL, "%s: %s: data reads fail with EIO from now on", log_name(f),
		      why);
	}
}

/* The rate limit's key of a failed fetch: the file and the cause with its numbers left
 * out (byte ranges and counts differ from one failure to the next; the cause does not). */
static void failure_key(char *key, size_t size, const struct remote_file *f, long status,
                        const char *err)
{
	snprintf(key, size, "fetch %s %ld ", log_name(f), status);
	evlog_key_cause(key, size, err);
}

/* Notes that block index of f failed after every retry (not when the mount is ending:
 * nothing reads then). */
static void note_failed(struct remote_file *f, uint64_t index)
{
	if (cancelled(f->r))
		return;
	pthread_mutex_lock(&f->lock);
	unsigned i = f->failed_next++ % REMOTE_FAILED_SLOTS;
	f->failed[i].index = index;
	f->failed[i].until = clock_now_s() + REMOTE_FAILED_HOLD_MS / 1e3;
	pthread_mutex_unlock(&f->lock);
}

/* Whether block index of f failed less than REMOTE_FAILED_HOLD_MS ago. */
static bool failed_lately(struct remote_file *f, uint64_t index)
{
	double now = clock_now_s();
	bool yes = false;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < REMOTE_FAILED_SLOTS && !yes; i++)
		yes = f->failed[i].until > now && f->failed[i].index == index;
	pthread_mutex_unlock(&f->lock);
	return yes;
}

/* Fetches bytes [first, last] into buf (or, with segs, into the blocks segs points to,
 * REMOTE_BLOCK_SIZE bytes each), retrying transient failures as remote.h says, and
 * starting once afresh from the URL as given when a redirect target refuses. 0, or -1
 * with err. At mount (at_mount) a failure is only err, with the attempts and time when
 * there were retries: the mount's one line says it; a wait is said through
 * remote_opts.waiting. Later, a failure is logged (evlog) and kept as the last error. */
static int fetch(struct remote_file *f, uint64_t first, uint64_t last, uint8_t *buf,
                 struct blocks_sink *sink, bool pinned, bool at_mount, char err[GGUF_ERR_MAX],
                 long *status)
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
		if (o == FAILED || n + 1 == REMOTE_ATTEMPTS || cancelled(r))
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
			            "timeout=%u bounds each)", f->display, err, ms / 1e3, n + 2,
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
	if (ret < 0 && !at_mount && o != CHANGED && !cancelled(r)) {
		char key[GGUF_ERR_MAX + 64];
		note_failure(f, err);
		failure_key(key, sizeof key, f, *status, err);
		evlog(EVLOG_ERR, key, "%s: bytes %" PRIu64 "-%" PRIu64 " could not be fetched after "
		      "%u attempt%s in %.1f s: %s: reads of them fail with EIO", log_name(f), first,
		      last, attempts, attempts == 1 ? "" : "s", clock_now_s() - started, err);
	}
	return ret;
}

/* The bytes of block index, for the memory cache: from the disk cache when it holds
 * them, else fetched (and then kept on disk). */
static int fetch_block(void *arg, uint64_t index, uint8_t *buf, size_t len)
{
	struct remote_file *f = arg;
	char err[GGUF_ERR_MAX];
	long status;
	uint64_t first = index * REMOTE_BLOCK_SIZE;
	if (f->entry && dc_load(f->entry, index, buf, len)) {
		atomic_fetch_add_explicit(&f->r->n_disk_hits, 1, memory_order_relaxed);
		return 0;
	}
	fetched_here = true;
	if (fetch(f, first, first + len - 1, buf, NULL, true, false, err, &status) != 0) {
		note_failed(f, index);
		return -EIO;
	}
	if (f->entry)
		store_block(f, index, buf, len);
	return 0;
}

/* Fetches blocks [i, j) of job with one request (none once the file has changed),
 * each handed over as it arrives whole (block_ready, which keeps it on disk too), and
 * ends the claims of the others: 0, or -EIO for the blocks that did not arrive. */
static int fetch_run(struct ahead_job *job, unsigned i, unsigned j)
{
	struct remote_file *f = job->f;
	struct remote *r = f->r;
	struct blocks_sink sink = { .f = f, .blocks = job->blocks + i, .n = j - i,
	                            .first_index = job->first + i };
	int error = -EIO;
	if (!atomic_load(&f->changed)) {
		char err[GGUF_ERR_MAX];
		long status;
		for (unsigned n = 0; n < sink.n; n++)
			sink.segs[n] = bc_block_data(sink.blocks[n]);
		uint64_t first = (job->first + i) * REMOTE_BLOCK_SIZE;
		uint64_t last = (job->first + j - 1) * REMOTE_BLOCK_SIZE +
		                block_len(f, job->first + j - 1) - 1;
		error = fetch(f, first, last, NULL, &sink, true, false, err, &status) == 0 ? 0 : -EIO;
	}
	if (!error && sink.done < sink.n)   /* never: a whole body hands every block over */
		error = -EIO;
	for (unsigned n = sink.done; n < sink.n; n++) {   /* those not handed over whole */
		if (error)
			note_failed(f, sink.first_index + n);
		bc_fill_done(r->cache, sink.blocks[n], error);
	}
	return error;
}

/* Ends the claims of job's blocks: those the disk cache holds from there, the others
 * fetched, each run of them with one request. 0, or -EIO when a run failed (its blocks
 * get it). Frees the job; called without locks. */
static int run_job(struct ahead_job *job)
{
	struct remote_file *f = job->f;
	int error = 0;
	for (unsigned i = 0; i < job->n;) {
		uint64_t k = job->first + i;
		if (f->entry && dc_load(f->entry, k, bc_block_data(job->blocks[i]), block_len(f, k))) {
			atomic_fetch_add_explicit(&f->r->n_disk_hits, 1, memory_order_relaxed);
			bc_fill_done(f->r->cache, job->blocks[i++], 0);
			continue;
		}
		unsigned j = i + 1;
		while (j < job->n && !(f->entry && dc_holds(f->entry, job->first + j)))
			j++;
		if (fetch_run(job, i, j))
			error = -EIO;
		i = j;
	}
	free(job);
	return error;
}

/* Puts job at the end of the queue and counts it as its file's. The caller wakes the
 * threads. Called with ahead_lock held. */
static void enqueue_job(struct remote *r, struct ahead_job *job)
{
	job->next = NULL;
	if (r->q_tail)
		r->q_tail->next = job;
	else
		r->q_head = job;
	r->q_tail = job;
	job->f->ahead_pending++;
}

/* Takes the job at *p (prev is the one before it, NULL at the head) out of the queue.
 * Called with ahead_lock held. */
static struct ahead_job *dequeue_at(struct remote *r, struct ahead_job **p,
                                    struct ahead_job *prev)
{
	struct ahead_job *job = *p;
	*p = job->next;
	if (r->q_tail == job)
		r->q_tail = prev;
	return job;
}

/* A job's end: one fewer pending for its file (remote_close waits for none). Called
 * with ahead_lock held. */
static void job_ended(struct remote *r, struct remote_file *f)
{
	f->ahead_pending--;
	pthread_cond_broadcast(&r->ahead_cond);
}

/* Read-ahead thread: takes jobs, oldest first, until the remote is freed. */
static void *ahead_main(void *arg)
{
	struct remote *r = arg;
	pthread_mutex_lock(&r->ahead_lock);
	for (;;) {
		while (!r->q_head && !r->stopping)
			pthread_cond_wait(&r->ahead_cond, &r->ahead_lock);
		if (r->stopping)
			break;
		struct ahead_job *job = dequeue_at(r, &r->q_head, NULL);
		struct remote_file *f = job->f;
		pthread_mutex_unlock(&r->ahead_lock);
		run_job(job);
		pthread_mutex_lock(&r->ahead_lock);
		job_ended(r, f);
	}
	pthread_mutex_unlock(&r->ahead_lock);
	return NULL;
}

/* Starts the read-ahead threads if they are not yet: here, at the first read-ahead, not
 * at mount, because the daemon forks after mounting and a fork keeps only the thread
 * that calls it. False when there are none. Called with ahead_lock held. */
static bool threads_running(struct remote *r)
{
	if (!r->ahead_started) {
		r->ahead_started = true;
		for (; r->n_threads < REMOTE_READAHEAD_THREADS; r->n_threads++)
			if (pthread_create(&r->threads[r->n_threads], NULL, ahead_main, r) != 0)
				break;
	}
	return r->n_threads > 0;
}

/* Queues blocks [from, to) of f that are neither in the header prefix nor cached nor
 * being fetched, in runs of at most `request` blocks, each run claimed in the cache and
 * fetched with one request. Returns the block where it stopped: to, or earlier when the
 * cache has no room (or no memory). Called with ahead_lock held. */
static uint64_t queue_blocks(struct remote_file *f, uint64_t from, uint64_t to, unsigned request)
{
	struct remote *r = f->r;
	uint64_t n_blocks = (f->size + REMOTE_BLOCK_SIZE - 1) / REMOTE_BLOCK_SIZE;
	if (to > n_blocks)
		to = n_blocks;
	struct ahead_job *job = NULL;
	uint64_t k = from;
	for (; k < to && !r->stopping; k++) {
		struct bc_block *b = NULL;
		bool skip = k * REMOTE_BLOCK_SIZE + block_len(f, k) <= f->prefix_len;
		if (!skip) {
			b = bc_claim(r->cache, f, k, block_len(f, k));
			skip = !b && bc_contains(r->cache, f, k);
		}
		if (job && (!b || job->n == request)) {   /* the run ends: off it goes */
			enqueue_job(r, job);
			job = NULL;
		}
		if (!b) {
			if (skip)
				continue;
			break;   /* no room */
		}
		if (!job) {
			job = malloc(sizeof *job + request * sizeof job->blocks[0]);
			if (!job) {
				bc_fill_done(r->cache, b, -ENOMEM);
				break;
			}
			job->f = f;
			job->first = k;
			job->n = 0;
		}
		job->blocks[job->n++] = b;
	}
	if (job)
		enqueue_job(r, job);
	pthread_cond_broadcast(&r->ahead_cond);
	return k;
}

/* Read-ahead for a read of blocks [k0, k1]: its own blocks after the first are fetched
 * beside it, and a sequential reader (one that reads on from near where its furthest
 * read ended) gets the window past it kept fetched when it goes further, the window and
 * the request size growing at each read that issues requests. Any other read starts
 * them afresh. */
static void read_ahead(struct remote_file *f, uint64_t k0, uint64_t k1)
{
	struct remote *r = f->r;
	if (!r->ahead_wanted)
		return;
	pthread_mutex_lock(&r->ahead_lock);
	if (!threads_running(r)) {
		pthread_mutex_unlock(&r->ahead_lock);
		return;
	}
	bool sequential = f->ra_next != UINT64_MAX && k0 + REMOTE_SEQUENTIAL_SLACK >= f->ra_next &&
	                  k0 <= f->ra_next + f->ra_window;
	if (!sequential) {
		f->ra_request = REMOTE_REQUEST_MIN_BLOCKS;
		f->ra_window = REMOTE_WINDOW_MIN_BLOCKS;
		f->ra_next = k1 + 1;
		f->ra_end = k0 + 1;
		if (k1 > k0)
			f->ra_end = queue_blocks(f, k0 + 1, k1 + 1, REMOTE_REQUEST_MAX_BLOCKS);
	} else if (k1 + 1 > f->ra_next) {   /* a read behind the furthest issues nothing */
		f->ra_next = k1 + 1;
		if (f->ra_end < k0 + 1)
			f->ra_end = k0 + 1;
		unsigned window = f->ra_window < r->window_max ? f->ra_window : r->window_max;
		unsigned request = f->ra_request < window / 2 ? f->ra_request : window / 2;
		if (!request)
			request = 1;
		/* whole requests only (a run cut short costs a request's latency for little),
		 * except at the end of the file */
		uint64_t n_blocks = (f->size + REMOTE_BLOCK_SIZE - 1) / REMOTE_BLOCK_SIZE;
		uint64_t target = f->ra_next + window;
		if (f->ra_end < target && target < n_blocks)
			target -= (target - f->ra_end) % request;
		if (f->ra_end < target) {
			f->ra_end = queue_blocks(f, f->ra_end, target, request);
			if (f->ra_request < REMOTE_REQUEST_MAX_BLOCKS)
				f->ra_request *= 2;
			if (f->ra_window < r->window_max)
				f->ra_window *= 2;
		}
	}
	pthread_mutex_unlock(&r->ahead_lock);
}

/* When block k of f waits in the read-ahead queue, not started: takes its job out and
 * runs it here, so that a reader never waits behind other requests (nor longer than one
 * fetch's bound). 1 when it ran and failed, else 0 (ran, or nothing to take). */
static int run_queued(struct remote_file *f, uint64_t k)
{
	struct remote *r = f->r;
	pthread_mutex_lock(&r->ahead_lock);
	struct ahead_job **p = &r->q_head, *prev = NULL;
	while (*p && !((*p)->f == f && k >= (*p)->first && k < (*p)->first + (*p)->n)) {
		prev = *p;
		p = &(*p)->next;
	}
	struct ahead_job *job = *p ? dequeue_at(r, p, prev) : NULL;
	pthread_mutex_unlock(&r->ahead_lock);
	if (!job)
		return 0;
	int error = run_job(job);
	pthread_mutex_lock(&r->ahead_lock);
	job_ended(r, f);
	pthread_mutex_unlock(&r->ahead_lock);
	return error ? 1 : 0;
}

/* Source read: from the header prefix where it holds the bytes, else block by block
 * through the cache, with read-ahead (read_ahead above). */
static int remote_read(struct source *src, uint64_t off, uint64_t len, void *out)
{
	struct remote_file *f = (struct remote_file *)src;
	uint8_t *dst = out;
	if (atomic_load(&f->changed))
		return -EIO;
	if (len == 0)
		return 0;
	if (off > f->size || len > f->size - off)
		return -EIO;
	uint64_t k0 = off / REMOTE_BLOCK_SIZE, k1 = (off + len - 1) / REMOTE_BLOCK_SIZE;
	read_ahead(f, k0, k1);
	for (uint64_t k = k0; k <= k1; k++) {
		uint64_t bstart = k * REMOTE_BLOCK_SIZE;
		uint64_t from = off > bstart ? off - bstart : 0;
		uint64_t to = off + len - bstart < REMOTE_BLOCK_SIZE ? off + len - bstart : REMOTE_BLOCK_SIZE;
		size_t blen = block_len(f, k);
		if (bstart + blen <= f->prefix_len) {
			memcpy(dst, f->prefix + bstart + from, to - from);
		} else {
			struct bc_block *held;
			int error;
			if (failed_lately(f, k))   /* the kernel's READ again after a failed one */
				return -EIO;
			if (run_queued(f, k))
				return -EIO;
			fetched_here = false;
			const uint8_t *data = bc_get(f->r->cache, f, k, blen, fetch_block, f, &error, &held);
			if (!data)
				return -EIO;
			if (!fetched_here)
				atomic_fetch_add_explicit(&f->r->n_memory_hits, 1, memory_order_relaxed);
			memcpy(dst, data + from, to - from);
			bc_release(f->r->cache, held);
		}
		dst += to - from;
	}
	return atomic_load(&f->changed) ? -EIO : 0;
}

/* Source close: the file and its header prefix go. */
static void remote_source_close(struct source *src)
{
	remote_close((struct remote_file *)src);
}

/* Source expect: a file nobody has read yet takes the sequential reader of prev as its
 * own from block off on, with prev's request size and window (read_ahead's state), so
 * that its first read there issues a whole window at once. A file already being read
 * keeps its own state. */
static void remote_expect(struct source *src, uint64_t off, struct source *prev)
{
	struct remote_file *f = (struct remote_file *)src;
	const struct remote_file *p = (const struct remote_file *)prev;
	if (f->r != p->r || off >= f->size)
		return;
	pthread_mutex_lock(&f->r->ahead_lock);
	if (f->ra_next == UINT64_MAX && p->ra_next != UINT64_MAX) {
		f->ra_next = off / REMOTE_BLOCK_SIZE;
		f->ra_end = f->ra_next;
		f->ra_request = p->ra_request;
		f->ra_window = p->ra_window;
	}
	pthread_mutex_unlock(&f->r->ahead_lock);
}

static const struct source_ops remote_ops = {
	.read = remote_read,
	.close = remote_source_close,
	.expect = remote_expect,
};

/* True when token can be a bearer token: visible ASCII only (RFC 6750's characters are
 * fewer). Anything else, a CR LF above all, would make a header of its own. */
static bool token_ok(const char *token)
{
	for (const unsigned char *p = (const unsigned char *)token; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return false;
	return *token != 0;
}

/* A copy of s (NULL stays NULL). */
static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Copies *s into r->s3 and points r->o.s3 at it; false when out of memory (what was
 * copied is freed by free_s3). */
static bool copy_s3(struct remote *r, const struct remote_s3 *s)
{
	r->s3.sign.access_key = dup_or_null(s->sign.access_key);
	r->s3.sign.secret_key = dup_or_null(s->sign.secret_key);
	r->s3.sign.session_token = dup_or_null(s->sign.session_token);
	r->s3.sign.region = dup_or_null(s->sign.region);
	r->s3.bucket = dup_or_null(s->bucket);
	r->s3.context = dup_or_null(s->context);
	r->o.s3 = &r->s3;
	return (r->s3.sign.access_key || !s->sign.access_key) &&
	       (r->s3.sign.secret_key || !s->sign.secret_key) &&
	       (r->s3.sign.session_token || !s->sign.session_token) &&
	       (r->s3.sign.region || !s->sign.region) && (r->s3.bucket || !s->bucket) &&
	       (r->s3.context || !s->context);
}

/* Frees s's strings, the secrets wiped first. */
static void free_s3(struct remote_s3 *s)
{
	const char *secret[] = { s->sign.access_key, s->sign.secret_key, s->sign.session_token };
	for (size_t i = 0; i < 3; i++) {
		if (secret[i]) {
			explicit_bzero((char *)secret[i], strlen(secret[i]));
			free((char *)secret[i]);
		}
	}
	free((char *)s->sign.region);
	free((char *)s->bucket);
	free((char *)s->context);
}

struct remote *remote_new(const struct remote_opts *o, char err[GGUF_ERR_MAX])
{
	if (o->token && !token_ok(o->token)) {
		gguf_errf(err, "the token (%s) holds a space, a line break or another byte that no "
		     "bearer token has", o->token_from_env ? "HF_TOKEN" : "token_file");
		return NULL;
	}
	struct remote *r = calloc(1, sizeof *r);
	if (!r) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	r->o = *o;
	r->o.token = o->token ? strdup(o->token) : NULL;
	r->o.cafile = o->cafile ? strdup(o->cafile) : NULL;
	bool s3_copied = !o->s3 || copy_s3(r, o->s3);
	if (!r->o.timeout)
		r->o.timeout = REMOTE_TIMEOUT_DEFAULT;
	if (!r->o.cache_size)
		r->o.cache_size = REMOTE_CACHE_DEFAULT;
	r->o.cache_dir = NULL;   /* only the open cache is kept */
	r->cache = bc_new(r->o.cache_size, REMOTE_BLOCK_SIZE);
	/* every lock before the first remote_free, which takes ahead_lock */
	pthread_mutex_init(&r->pool_lock, NULL);
	pthread_mutex_init(&r->error_lock, NULL);
	pthread_mutex_init(&r->ahead_lock, NULL);
	pthread_cond_init(&r->ahead_cond, NULL);
	if (o->cache_dir) {
		r->disk = dc_open(o->cache_dir, o->cache_max, REMOTE_BLOCK_SIZE, err, GGUF_ERR_MAX);
		if (!r->disk) {
			remote_free(r);
			return NULL;
		}
	}
	if (!r->cache || (o->token && !r->o.token) || (o->cafile && !r->o.cafile) || !s3_copied) {
		gguf_errf(err, "out of memory");
		remote_free(r);
		return NULL;
	}
	/* read-ahead only where the cache holds twice its least window; it never uses more
	 * than half the cache, so that it cannot push out what the reader is reading */
	uint64_t half = r->o.cache_size / REMOTE_BLOCK_SIZE / 2;
	r->ahead_wanted = half >= REMOTE_WINDOW_MIN_BLOCKS;
	r->window_max = half < REMOTE_WINDOW_MAX_BLOCKS ? (unsigned)half : REMOTE_WINDOW_MAX_BLOCKS;
	return r;
}

void remote_set_cancel(struct remote *r, bool (*is_cancelled)(void *arg), void *arg)
{
	r->o.cancelled = is_cancelled;
	r->o.cancel_arg = arg;
}

void remote_free(struct remote *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->ahead_lock);
	r->stopping = true;
	pthread_cond_broadcast(&r->ahead_cond);
	pthread_mutex_unlock(&r->ahead_lock);
	for (unsigned i = 0; i < r->n_threads; i++)
		pthread_join(r->threads[i], NULL);
	for (struct ahead_job *job = r->q_head, *next; job; job = next) {   /* none: files closed */
		next = job->next;
		for (unsigned i = 0; i < job->n; i++)
			bc_fill_done(r->cache, job->blocks[i], -EIO);
		free(job);
	}
	for (size_t i = 0; i < r->n_pool; i++)
		curl_easy_cleanup(r->pool[i]);
	free(r->pool);
	bc_free(r->cache);
	dc_close(r->disk);
	if (r->o.token) {
		explicit_bzero((char *)r->o.token, strlen(r->o.token));
		free((char *)r->o.token);
	}
	free((char *)r->o.cafile);
	free_s3(&r->s3);
	pthread_mutex_destroy(&r->pool_lock);
	pthread_mutex_destroy(&r->error_lock);
	pthread_mutex_destroy(&r->ahead_lock);
	pthread_cond_destroy(&r->ahead_cond);
	free(r);
}

/* A commit id as the hub sends it: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits. */
static bool is_commit(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");
	return (n == 40 || n == 64) && !s[n];
}

/* For an hf:// model whose first answer named the commit served (X-Repo-Commit): the
 * URL as given asks for that commit from now on, not the branch or tag, so that a fresh
 * redirect (a signed URL that expired) leads to the same version of the file even when
 * the branch has moved on. The origin stays the same, and so do the token's rules. */
static void pin_commit(struct remote_file *f)
{
	struct url_rev rev = f->r->o.hub_rev;
	if (!rev.len || !is_commit(f->repo_commit))
		return;
	if (rev.len == strlen(f->repo_commit) && strncmp(f->url + rev.at, f->repo_commit, rev.len) == 0)
		return;
	char *pinned = url_with_revision(f->url, rev, f->repo_commit);
	if (pinned) {   /* else the branch, checked by the ETag all the same */
		free(f->url);
		f->url = pinned;
	}
}

/* Opens f's entry in the disk cache, keyed by the URL (url_cache_key: its query too,
 * hashed), the size and the ETag (or Last-Modified); without either, when another mount
 * holds the entry, or when none can be made, f is read without the disk cache, and the
 * event log says why. */
static void open_disk_entry(struct remote_file *f)
{
	char *key = url_cache_key(f->url);
	if (!key)
		return;   /* out of memory: no disk cache */
	char version[HTTP_ETAG_MAX + 32];
	if (f->etag[0])
		snprintf(version, sizeof version, "ETag %s", f->etag);
	else if (f->last_modified[0])
		snprintf(version, sizeof version, "Last-Modified %s", f->last_modified);
	else
		version[0] = 0;
	bool busy;
	f->entry = dc_entry_open(f->r->disk, key, f->size, version, &busy);
	free(key);
	if (busy)
		evlog(EVLOG_WARNING, NULL, "%s: another mount uses its disk cache entry: this "
		      "mount reads without the disk cache", f->display);
	else if (!f->entry && !version[0])
		evlog(EVLOG_WARNING, NULL, "%s: the server sends neither ETag nor Last-Modified, "
		      "so a later version could not be told apart: this file is read without the "
		      "disk cache", f->display);
	else if (!f->entry)
		evlog(EVLOG_WARNING, NULL, "%s: the disk cache refused an entry for this file (no "
		      "room under cache_max, a URL too long, or a write error): it is read without "
		      "the disk cache", f->display);
}

struct remote_file *remote_open(struct remote *r, const char *url, uint64_t first,
                                char err[GGUF_ERR_MAX], long *status)
{
	struct remote_file *f = calloc(1, sizeof *f);
	*status = 0;
	if (!f) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	f->src.ops = &remote_ops;
	f->r = r;
	f->mtime = -1;
	f->ra_next = UINT64_MAX;   /* no read yet: the first is not sequential */
	pthread_mutex_init(&f->lock, NULL);
	f->url = strdup(url);
	f->display = url_display(url);
	f->prefix = malloc(first ? first : 1);
	if (!f->url || !f->display || !f->prefix) {
		gguf_errf(err, "out of memory");
		goto fail;
	}
	if (fetch(f, 0, first - 1, f->prefix, NULL, false, true, err, status) < 0)
		goto fail;
	f->prefix_len = f->size < first ? f->size : first;
	pin_commit(f);
	if (f->last_modified[0])
		f->mtime = curl_getdate(f->last_modified, NULL);
	if (r->disk)
		open_disk_entry(f);
	return f;
fail:
	remote_close(f);
	return NULL;
}

const uint8_t *remote_prefix(const struct remote_file *f, uint64_t *len)
{
	*len = f->prefix_len;
	return f->prefix;
}

uint64_t remote_size(const struct remote_file *f)
{
	return f->size;
}

int remote_grow_prefix(struct remote_file *f, uint64_t len, char err[GGUF_ERR_MAX])
{
	long status;
	if (len > f->size)
		len = f->size;
	if (len <= f->prefix_len)
		return 0;
	uint8_t *p = realloc(f->prefix, len);
	if (!p) {
		gguf_errf(err, "out of memory for a header of %" PRIu64 " bytes", len);
		return -1;
	}
	f->prefix = p;
	if (fetch(f, f->prefix_len, len - 1, p + f->prefix_len, NULL, true, true, err, &status) < 0)
		return -1;
	f->prefix_len = len;
	return 0;
}

time_t remote_mtime(const struct remote_file *f)
{
	return f->mtime;
}

const char *remote_repo_commit(const struct remote_file *f)
{
	return f->repo_commit;
}

void remote_set_name(struct remote_file *f, const char *name)
{
	free(f->name);
	f->name = strdup(name);   /* or the URL shown, when out of memory */
}

void remote_counters(struct remote *r, struct remote_counters *c)
{
	c->requests = atomic_load_explicit(&r->n_requests, memory_order_relaxed);
	c->bytes_fetched = atomic_load_explicit(&r->n_bytes, memory_order_relaxed);
	c->memory_hits = atomic_load_explicit(&r->n_memory_hits, memory_order_relaxed);
	c->disk_hits = atomic_load_explicit(&r->n_disk_hits, memory_order_relaxed);
	c->retries = atomic_load_explicit(&r->n_retries, memory_order_relaxed);
	c->failures = atomic_load_explicit(&r->n_failures, memory_order_relaxed);
	c->disk_cache = r->disk != NULL;
	pthread_mutex_lock(&r->error_lock);
	snprintf(c->last_error, sizeof c->last_error, "%s", r->last_error);
	c->last_error_time = r->last_error_time;
	pthread_mutex_unlock(&r->error_lock);
}

struct source *remote_source(struct remote_file *f)
{
	return &f->src;
}

const struct remote_file *remote_of_source(const struct source *src)
{
	return (const struct remote_file *)src;
}

void remote_close(struct remote_file *f)
{
	if (!f)
		return;
	/* read-ahead jobs and cached blocks name f: none may outlive it */
	struct remote *r = f->r;
	pthread_mutex_lock(&r->ahead_lock);
	for (struct ahead_job **p = &r->q_head, *prev = NULL; *p;) {
		if ((*p)->f != f) {
			prev = *p;
			p = &(*p)->next;
			continue;
		}
		struct ahead_job *job = dequeue_at(r, p, prev);
		for (unsigned i = 0; i < job->n; i++)
			bc_fill_done(r->cache, job->blocks[i], -EIO);
		free(job);
		f->ahead_pending--;
	}
	while (f->ahead_pending)
		pthread_cond_wait(&r->ahead_cond, &r->ahead_lock);
	pthread_mutex_unlock(&r->ahead_lock);
	bc_drop_owner(r->cache, f);
	dc_entry_close(f->entry);
	free(f->url);
	free(f->display);
	free(f->name);
	free(f->prefix);
	free(f->target);
	free(f->etag_origin);
	pthread_mutex_destroy(&f->lock);
	free(f);
}
