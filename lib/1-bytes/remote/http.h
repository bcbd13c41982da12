/* One HTTP range request with libcurl: GET bytes [first, last] of a URL into a buffer,
 * with the headers that matter to a pinned remote file noted, signed for S3 if asked
 * (sigv4). Redirects are not followed here (the caller decides where credentials may
 * go); the transfer stops at the
 * first body byte of anything but a 206, so a server that ignores Range costs nothing.
 * Accept-Encoding: identity is sent; a 206 with any other Content-Encoding is stopped at
 * its first body byte too, none of it kept (its bytes are not the file's). */
#ifndef GGUFS_HTTP_H
#define GGUFS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "vbytes.h"

#define HTTP_ETAG_MAX 256
#define HTTP_DATE_MAX 64
#define HTTP_COMMIT_MAX 64
#define HTTP_LOCATION_MAX 8192
#define HTTP_ERROR_BODY_MAX 8192    /* an error body kept (keep_error_body) up to this */

struct http_response;

/* A whole 200 body (a listing), instead of a range: grown up to max bytes. */
struct http_body {
	struct vbytes data;         /* data.p malloc'ed, the caller frees it */
	size_t max;
};

/* AWS Signature Version 4 for S3, made by libcurl (CURLOPT_AWS_SIGV4): it signs the
 * method, the path and query exactly as the URL holds them (the caller encodes them by
 * S3's rules), the Host, its own X-Amz-Date and every header line of the request, where
 * the caller puts x-amz-content-sha256 (libcurl 7.88 does not add it) and, for a session
 * token, x-amz-security-token. */
struct http_sigv4 {
	const char *access_key, *secret_key;
	const char *session_token;  /* NULL when none */
	const char *region;
};

struct http_request {
	const char *url;
	uint64_t first, last;       /* inclusive */
	const char *const *headers; /* n_headers more header lines ("Name: value", no line
	                             * break): the request's credentials (the caller makes
	                             * them for this URL; nothing here knows what they are) */
	unsigned n_headers;
	const char *if_match;       /* If-Match; NULL for none */
	const char *cafile;         /* CA file used besides the system's; NULL for none */
	const struct http_sigv4 *sigv4;  /* sign the request for S3; NULL: not signed */
	bool keep_error_body;       /* keep the body of a status >= 300 (S3's error XML) */
	bool path_as_is;            /* the path sent as the URL holds it, "." and ".." parts
	                             * too (an S3 key's own; sigv4 implies it) */
	struct http_body *body;     /* no Range: a 200's whole body into it (more than its
	                             * max: resp->aborted); first and last only bound the
	                             * time (min_rate) */
	unsigned timeout;           /* s without progress before giving up; connect:
	                             * http_connect_timeout */
	unsigned min_rate;          /* bytes/s: a transfer slower than this on average over
	                             * any timeout seconds is abandoned, and so is one not
	                             * done after timeout + its length / min_rate s (0: only
	                             * "no byte for timeout seconds") */
	bool (*cancelled)(void *arg);  /* polled during the transfer: true aborts it */
	void *cancel_arg;
	uint8_t *buf;               /* room for last - first + 1 bytes, or NULL with segs */
	uint8_t *const *segs;       /* else: the body in pieces of seg_len bytes (the last may
	                             * be shorter), one buffer each: cache blocks filled in place */
	size_t seg_len;
	/* with segs, NULL or called as each piece i is complete, in order, with the response
	 * so far (its headers all in): false stops the transfer (resp->rejected) */
	bool (*seg_ready)(void *arg, const struct http_response *resp, size_t i);
	void *seg_arg;
};

struct http_response {
	CURLcode code;              /* CURLE_OK, or why the transfer failed */
	bool aborted;               /* by cancelled(), or a body other than the range asked */
	bool rejected;              /* by seg_ready */
	long status;                /* 0 when no response arrived */
	uint64_t got;               /* body bytes written to buf (206 only) */
	bool has_range;             /* a valid Content-Range: bytes A-B/TOTAL, or bytes *\/TOTAL */
	uint64_t range_first, range_last, total;
	char etag[HTTP_ETAG_MAX];           /* "" when absent (or too long to trust) */
	char last_modified[HTTP_DATE_MAX];
	char repo_commit[HTTP_COMMIT_MAX];  /* X-Repo-Commit */
	char location[HTTP_LOCATION_MAX];   /* "" when absent or too long */
	char encoding[32];          /* Content-Encoding other than identity ("?" when too
	                             * long); "" when absent: the body is then the bytes */
	uint64_t header_bytes;      /* of every header line received, status lines too */
	bool has_length;            /* a Content-Length came: content_length */
	uint64_t content_length;
	long retry_after;           /* Retry-After in seconds from now (a delay or a date), or
	                             * -1 when absent or unreadable */
	char bucket_region[64];     /* S3's x-amz-bucket-region; "" when absent */
	char error_body[HTTP_ERROR_BODY_MAX];  /* with keep_error_body: the body of a status */
	size_t error_body_len;                 /* >= 300, its first bytes when longer */
};

/* The seconds a request of timeout seconds (http_request.timeout) waits for its
 * connection: the timeout, but at most 10 and at least 1. */
static inline unsigned http_connect_timeout(unsigned timeout)
{
	return timeout < 1 ? 1 : timeout < 10 ? timeout : 10;
}

/* Performs req on handle h (reset first; its connections stay for reuse) and fills
 * resp. Never follows a redirect, never sends anything but the headers above. */
void http_get_range(CURL *h, const struct http_request *req, struct http_response *resp);

#endif
