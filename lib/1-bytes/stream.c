/* A file streamed by one GET, through a window (stream.h). A thread runs the transfer;
 * its body callback copies into a ring of STREAM_WINDOW bytes and waits while the ring
 * holds nothing the reader has done with. Byte x of the file is at ring[x % WINDOW] from
 * its arrival until byte x + WINDOW arrives; the callback writes past low + WINDOW only
 * once a read has moved low on, so every byte at or after the last read stays. */
#include "stream.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "clock.h"
#include "ggufs_config.h"

struct stream {
	struct source src;
	CURL *h;
	char *url, *token;
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;      /* bytes arrived, low moved, headers in, or the end */
	uint8_t *ring;            /* STREAM_WINDOW bytes */
	uint64_t pos;             /* bytes of the body arrived */
	uint64_t low;             /* the start of the last read: kept from there on */
	uint8_t *prefix;          /* stream_prefix's copy */
	uint64_t prefix_len;
	bool headers_in;          /* the final answer's headers have been judged */
	bool ended;               /* the transfer is over (failed unless pos == size) */
	bool closing;             /* the source is being closed: the transfer stops */
	bool failed;
	uint64_t size;
	double last_byte;         /* clock_now_s() of the last progress */
	unsigned timeout;
	char encoding[64];        /* the final answer's Content-Encoding, if any */
	char err[GGUF_ERR_MAX];   /* why it failed */
};

static struct stream *stream_of(struct source *src)
{
	return (struct stream *)src;
}

/* Ends the stream as failed with why (the first reason only); under lock. */
static void fail_locked(struct stream *s, const char *why)
{
	if (!s->failed) {
		s->failed = true;
		snprintf(s->err, sizeof s->err, "%s", why);
	}
	pthread_cond_broadcast(&s->cond);
}

/* Judges the final answer once its headers are in: a 200 with a length and no encoding.
 * False (the transfer stops) otherwise. Under lock. */
static bool judge_headers(struct stream *s)
{
	long code = 0;
	curl_off_t length = -1;
	char why[GGUF_ERR_MAX];
	curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(s->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
	s->headers_in = true;
	if (code != 200) {
		snprintf(why, sizeof why, "HTTP %ld", code);
		fail_locked(s, why);
		return false;
	}
	if (s->encoding[0] && strcasecmp(s->encoding, "identity") != 0) {
		snprintf(why, sizeof why, "the server sent the file encoded (Content-Encoding: %s), "
		         "not its bytes", s->encoding);
		fail_locked(s, why);
		return false;
	}
	if (length < 0) {
		fail_locked(s, "the server ignores Range requests and sends no Content-Length: "
		            "the file's size is not known before its end");
		return false;
	}
	s->size = (uint64_t)length;
	pthread_cond_broadcast(&s->cond);
	return true;
}

/* libcurl's header callback: notes Content-Encoding, and judges each answer that is not
 * a redirect being followed when its headers end. */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	const size_t len = size * n;
	static const char ce[] = "content-encoding:";
	if (len > sizeof ce - 1 && strncasecmp(line, ce, sizeof ce - 1) == 0) {
		const char *v = line + sizeof ce - 1;
		size_t vl = len - (sizeof ce - 1);
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		snprintf(s->encoding, sizeof s->encoding, "%.*s", (int)vl, v);
	} else if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		s->encoding[0] = 0;   /* a new answer (after a redirect or a 100) */
	}
	if (len > 2 || (line[0] != '\r' && line[0] != '\n'))
		return len;
	long code = 0;
	curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
	if ((code >= 300 && code < 400 && code != 304) || code == 100)
		return len;   /* followed, or not the answer yet */
	pthread_mutex_lock(&s->lock);
	const bool ok = judge_headers(s);
	pthread_mutex_unlock(&s->lock);
	return ok ? len : 0;
}

/* libcurl's body callback: into the ring, waiting while it is full of kept bytes. */
static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct stream *s = arg;
	const size_t len = size * n;
	pthread_mutex_lock(&s->lock);
	if (!s->headers_in && !judge_headers(s)) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (s->pos + len > s->size) {
		fail_locked(s, "the server sent more bytes than its Content-Length");
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	size_t done = 0;
	while (done < len && !s->closing) {
		const uint64_t room = s->low + STREAM_WINDOW - s->pos;
		if (room == 0) {
			pthread_cond_wait(&s->cond, &s->lock);
			continue;
		}
		size_t k = len - done < room ? len - done : (size_t)room;
		const uint64_t at = s->pos % STREAM_WINDOW;
		if (k > STREAM_WINDOW - at)
			k = (size_t)(STREAM_WINDOW - at);
		memcpy(s->ring + at, data + done, k);
		done += k;
		s->pos += k;
		pthread_cond_broadcast(&s->cond);
	}
	s->last_byte = clock_now_s();   /* time spent waiting for the reader is no stall */
	const bool closing = s->closing;
	pthread_mutex_unlock(&s->lock);
	return closing ? 0 : len;
}

/* libcurl's progress callback: gives up after timeout seconds without a byte. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	struct stream *s = arg;
	pthread_mutex_lock(&s->lock);
	const bool stop = s->closing || clock_now_s() - s->last_byte > (double)s->timeout;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

/* The transfer's thread: runs it to its end, and says how it ended. */
static void *transfer(void *arg)
{
	struct stream *s = arg;
	CURLcode rc = curl_easy_perform(s->h);
	pthread_mutex_lock(&s->lock);
	char why[GGUF_ERR_MAX];
	if (rc == CURLE_ABORTED_BY_CALLBACK && !s->closing) {
		snprintf(why, sizeof why, "no byte from the server for %u s (at byte %" PRIu64 ")",
		         s->timeout, s->pos);
		fail_locked(s, why);
	} else if (rc != CURLE_OK) {
		snprintf(why, sizeof why, "%s (at byte %" PRIu64 ")", curl_easy_strerror(rc), s->pos);
		fail_locked(s, why);
	} else if (!s->headers_in) {
		judge_headers(s);   /* an empty body: no body callback came */
	}
	if (!s->failed && s->pos != s->size) {
		snprintf(why, sizeof why, "the connection ended at byte %" PRIu64 " of %" PRIu64,
		         s->pos, s->size);
		fail_locked(s, why);
	}
	s->ended = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Waits, under lock, until bytes [0, end) have arrived or the stream has failed. */
static void wait_for(struct stream *s, uint64_t end)
{
	while (s->pos < end && !s->failed && !s->ended)
		pthread_cond_wait(&s->cond, &s->lock);
}

/* Source read: the bytes from the ring, once they have arrived; -EIO with the stream's
 * error (stream_error) as why when they will not. */
static int stream_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                       char why[GGUF_ERR_MAX])
{
	struct stream *s = stream_of(src);
	pthread_mutex_lock(&s->lock);
	if (len > STREAM_WINDOW) {
		fail_locked(s, "a read larger than the stream's window");
		if (why)
			gguf_errf(why, "%s", s->err);
		pthread_mutex_unlock(&s->lock);
		return -EIO;
	}
	if (off > s->low) {
		s->low = off;
		pthread_cond_broadcast(&s->cond);
	}
	wait_for(s, off + len);
	/* gone from the ring: a read behind the window, which no reader in order makes */
	const bool have = s->pos >= off + len && off + STREAM_WINDOW >= s->pos;
	if (have) {
		uint64_t done = 0;
		while (done < len) {
			const uint64_t at = (off + done) % STREAM_WINDOW;
			uint64_t k = len - done < STREAM_WINDOW - at ? len - done : STREAM_WINDOW - at;
			memcpy((uint8_t *)buf + done, s->ring + at, k);
			done += k;
		}
	} else if (!s->failed) {
		char passed[GGUF_ERR_MAX];
		snprintf(passed, sizeof passed, "a read of bytes the stream had passed (at %"
		         PRIu64 ", the stream at %" PRIu64 ")", off, s->pos);
		fail_locked(s, passed);
	}
	if (!have && why)
		gguf_errf(why, "%s", s->err);
	pthread_mutex_unlock(&s->lock);
	return have ? 0 : -EIO;
}

const uint8_t *stream_prefix(struct source *src, uint64_t n, char err[GGUF_ERR_MAX])
{
	struct stream *s = stream_of(src);
	pthread_mutex_lock(&s->lock);
	if (n > s->size)
		n = s->size;
	const uint8_t *p = NULL;
	if (n > STREAM_PREFIX_MAX) {
		gguf_errf(err, "the header is larger than %u MiB, the most ggufs keeps of a file "
		          "streamed", STREAM_PREFIX_MAX >> 20);
		goto out;
	}
	if (n <= s->prefix_len) {
		p = s->prefix;
		goto out;
	}
	wait_for(s, n);
	if (s->pos < n || s->pos > STREAM_WINDOW) {
		gguf_errf(err, "%s", s->failed ? s->err : "the stream went past the header");
		goto out;
	}
	uint8_t *grown = realloc(s->prefix, n);
	if (!grown) {
		gguf_errf(err, "out of memory");
		goto out;
	}
	memcpy(grown + s->prefix_len, s->ring + s->prefix_len, n - s->prefix_len);
	s->prefix = grown;
	s->prefix_len = n;
	p = grown;
out:
	pthread_mutex_unlock(&s->lock);
	return p;
}

const char *stream_error(struct source *src)
{
	struct stream *s = stream_of(src);
	pthread_mutex_lock(&s->lock);
	const char *e = s->failed ? s->err : NULL;
	pthread_mutex_unlock(&s->lock);
	return e;
}

static void stream_close(struct source *src)
{
	struct stream *s = stream_of(src);
	if (s->thread_started) {
		pthread_mutex_lock(&s->lock);
		s->closing = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
	}
	if (s->h)
		curl_easy_cleanup(s->h);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->ring);
	free(s->prefix);
	free(s->url);
	free(s->token);
	free(s);
}

static const struct source_ops stream_ops = {
	.read = stream_read,
	.close = stream_close,
};

struct source *stream_open(const char *url, const struct stream_opts *o, uint64_t *size,
                           char err[GGUF_ERR_MAX])
{
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	s->src.ops = &stream_ops;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->timeout = o->timeout ? o->timeout : 30;
	s->last_byte = clock_now_s();
	s->ring = malloc(STREAM_WINDOW);
	s->url = strdup(url);
	s->token = o->token ? strdup(o->token) : NULL;
	s->h = curl_easy_init();
	if (!s->ring || !s->url || (o->token && !s->token) || !s->h) {
		gguf_errf(err, "out of memory");
		stream_close(&s->src);
		return NULL;
	}
	CURL *h = s->h;
	curl_easy_setopt(h, CURLOPT_URL, s->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "ggufs/" GGUFS_VERSION);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (o->cafile)
		curl_easy_setopt(h, CURLOPT_CAINFO, o->cafile);
	if (s->token) {
		/* libcurl sends it to the URL's own host only, not to where a redirect goes */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, s->token);
	}
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, s);
	if (pthread_create(&s->thread, NULL, transfer, s) != 0) {
		gguf_errf(err, "cannot start a thread");
		stream_close(&s->src);
		return NULL;
	}
	s->thread_started = true;
	pthread_mutex_lock(&s->lock);
	while (!s->headers_in && !s->failed && !s->ended)
		pthread_cond_wait(&s->cond, &s->lock);
	const bool ok = s->headers_in && !s->failed;
	if (!ok)
		gguf_errf(err, "%s", s->failed ? s->err : "no answer");
	*size = s->size;
	pthread_mutex_unlock(&s->lock);
	if (!ok) {
		stream_close(&s->src);
		return NULL;
	}
	return &s->src;
}
