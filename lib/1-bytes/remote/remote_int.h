/* The remote layer's insides, shared by its three jobs and by nothing outside
 * lib/1-bytes/remote/ (remote.h is what other layers see):
 *   remote_fetch.c  the retrying fetch: one range of a file, attempts and their pauses,
 *                   redirects, the pins' validators, what each failure means and says;
 *   remote_ahead.c  the read-ahead scheduler: jobs of blocks for a sequential reader,
 *                   run by the read-ahead threads or by the reader that needs them;
 *   remote.c        the remote file: its header prefix and pins, its blocks through the
 *                   memory and disk caches, the source a model reads, the mount's state.
 * Locks: a file's lock (target, failed), the mount's ahead_lock (the queue and every
 * file's read-ahead state), pool_lock, error_lock; none is held while another is taken. */
#ifndef GGUFS_REMOTE_INT_H
#define GGUFS_REMOTE_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "blockcache.h"
#include "diskcache.h"
#include "http.h"
#include "leaving.h"
#include "remote.h"
#include "url.h"

#define REMOTE_BLOCK_SIZE (128u << 10)      /* fetch and cache unit, aligned in the file */
/* A file the server claims is larger than this is refused at mount: no GGUF file is
 * near it (the hub takes files of 50 GB at most; larger models come split), and nothing
 * is sized from a claim beyond it. */
#define REMOTE_SIZE_MAX (4ull << 40)        /* 4 TiB */
#define REMOTE_TIMEOUT_DEFAULT 30
#define REMOTE_MAX_REDIRECTS 10

/* Retries: a fetch that meets a 5xx, a 429, a reset or refused connection, a body cut
 * short or nothing for timeout seconds tries again, at most REMOTE_ATTEMPTS times in
 * all, pausing REMOTE_BACKOFF_MS doubled at each retry (up to REMOTE_BACKOFF_MAX_MS),
 * each pause a random 50-100 % of that (so that readers that failed together do not
 * retry together), or as long as Retry-After says if longer, up to
 * REMOTE_RETRY_AFTER_MAX. No attempt starts once REMOTE_RETRY_SPAN x timeout have
 * passed since the first: a stalled (or dripping) server costs a read at most
 * (REMOTE_RETRY_SPAN + 1) x timeout, 120 s with the default timeout. */
/* A transfer that averages less than REMOTE_MIN_RATE bytes/s over timeout seconds is
 * abandoned as stalled (a server that drips bytes: 8 bytes/s met the old 1 byte/s limit
 * for ever), and an attempt at n bytes ends after timeout + n / REMOTE_MIN_RATE seconds
 * whatever its pace. 4 KiB/s per connection: nine at once (a reader and its read-ahead)
 * still work over a 300 kbit/s link. */
#define REMOTE_MIN_RATE 4096
/* A block whose fetch failed after every retry fails the reads that want it at once,
 * without a fetch, for this long: the kernel sends a failed read-ahead READ again for
 * its first page at once, and a second full retry cycle doubled the time to EIO. */
#define REMOTE_FAILED_HOLD_MS 2000
#define REMOTE_FAILED_SLOTS 16              /* blocks remembered so, per file */
#define REMOTE_ATTEMPTS 5
#define REMOTE_BACKOFF_MS 250
#define REMOTE_BACKOFF_MAX_MS 4000
#define REMOTE_RETRY_AFTER_MAX 10           /* seconds */
#define REMOTE_RETRY_SPAN 3
/* At mount, a wait this long (an attempt without an answer, or retries) is said to the
 * user through remote_opts.waiting, once per attempt. */
#define REMOTE_WAIT_SAY_S 3

/* Read-ahead for a sequential reader: requests of REMOTE_REQUEST_MIN_BLOCKS blocks at
 * first, doubling at each read that issues some up to REMOTE_REQUEST_MAX_BLOCKS, keeping
 * a window of REMOTE_WINDOW_MIN_BLOCKS past the reader, doubling likewise up to
 * REMOTE_WINDOW_MAX_BLOCKS and half the cache, fetched by REMOTE_READAHEAD_THREADS
 * threads (each its own connection) at once. A read elsewhere starts again from the
 * least. A request is at most half the window, so that two are in flight at least. */
#define REMOTE_REQUEST_MIN_BLOCKS 2         /* 256 KiB */
#define REMOTE_REQUEST_MAX_BLOCKS 32        /* 4 MiB */
#define REMOTE_WINDOW_MIN_BLOCKS 8          /* 1 MiB */
#define REMOTE_WINDOW_MAX_BLOCKS 512        /* 64 MiB */
#define REMOTE_WINDOW_FREE_BLOCKS 256       /* 32 MiB: past it, at most twice the run */
#define REMOTE_READAHEAD_THREADS 8
/* A read this many blocks behind the furthest one read is still the same sequential
 * reader (the kernel sends the pieces of its own read-ahead to several threads, which
 * reach us slightly out of order). */
#define REMOTE_SEQUENTIAL_SLACK 16

/* What a request carries besides its range and validators: header lines made for the
 * URL it goes to (the URL as given, or where a redirect led) and the bytes it asks
 * for. The fetch follows redirects, retries and checks the replies; what credentials a
 * request carries, and to which server, is the signer's business alone (the mount's
 * bearer token: remote_sign_bearer; an S3 store's Signature V4: remote_sign_s3). */
#define REMOTE_SIGN_LINES 4
/* Fills lines with up to REMOTE_SIGN_LINES malloc'ed "Name: value" lines for a request
 * of bytes [first, last] of url, of the file whose URL as given is given, and sets
 * *sigv4 to the keys libcurl signs the whole request with (S3's Signature V4, over the
 * method, path, query and every line), or NULL. Returns how many lines (0: none), or -1
 * when out of memory. The fetch wipes and frees them. */
typedef int remote_sign_fn(const struct remote *r, const char *given, const char *url,
                           uint64_t first, uint64_t last, char *lines[REMOTE_SIGN_LINES],
                           const struct http_sigv4 **sigv4);
/* Wipes and frees the n lines a signer made, once the request is sent: nothing of the
 * credentials stays in our memory. */
void remote_unsign(char *lines[REMOTE_SIGN_LINES], int n);

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
	struct remote_s3 s3;        /* what o.s3 points to, for an s3:// model (its strings
	                             * owned here) */
	struct http_sigv4 sigv4;    /* s3's keys as libcurl's signer takes them */
	remote_sign_fn *sign;       /* each request's credentials */
	struct blockcache *cache;
	struct diskcache *disk;     /* -o cache_dir, or NULL */
	struct leaving_entry leave; /* in o.leaving while disk is: dc_leaving (stores end) */

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
	char first_cause[GGUF_ERR_MAX];  /* remote_first_cause's, "" until a read fails */
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

	pthread_mutex_t lock;       /* target, failed, failure */
	char *target;               /* where the last redirect led (used first), or NULL */
	char failure[GGUF_ERR_MAX]; /* its last fetch that failed for good, as the mount's
	                             * last error says it ("NAME: HTTP 503"): the why of the
	                             * reads it fails; "" while none has */
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
	uint64_t ra_run;            /* blocks the reader's sequential run has gone: the
	                             * window is at most twice that */
	unsigned ahead_pending;     /* jobs queued or running for this file */
	/* the blocks the reader wants (source_want), sorted, merged: [first, end) each;
	 * NULL for all of them */
	struct ahead_span { uint64_t first, end; } *want;
	size_t n_want;
};

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

/* The file as the mount's lines name it: as the user gave it (an hf:// name, not the
 * URL it became), else the URL shown. */
static inline const char *remote_log_name(const struct remote_file *f)
{
	return f->name ? f->name : f->display;
}

/* Bytes of block index: the whole block, or what is left of the file. */
static inline size_t block_len(const struct remote_file *f, uint64_t index)
{
	uint64_t first = index * REMOTE_BLOCK_SIZE;
	return f->size - first < REMOTE_BLOCK_SIZE ? (size_t)(f->size - first) : REMOTE_BLOCK_SIZE;
}

/* ---- remote_fetch.c ---- */

/* True once the mount is ending: no transfer or pause should go on. */
bool remote_cancelled(const struct remote *r);

/* Fetches bytes [first, last] of f into buf (or, with sink, into the blocks of a
 * read-ahead job as they arrive), retrying transient failures as the constants above
 * say, and starting once afresh from the URL as given when a redirect target refuses.
 * pinned: the file's pins are known and every reply must match them (else the reply
 * sets them). 0, or -1 with err. At mount (at_mount) a failure is only err, with the
 * attempts and time when there were retries (the mount's one line says it), and a wait
 * is said through remote_opts.waiting; later, a failure is logged (evlog) and kept as
 * the last error. *status: the HTTP status that caused a failure (0 if none). */
int remote_fetch(struct remote_file *f, uint64_t first, uint64_t last, uint8_t *buf,
                 struct blocks_sink *sink, bool pinned, bool at_mount,
                 char err[GGUF_ERR_MAX], long *status);

/* The bearer token of the mount (remote_opts.token), to the origin of the URL as given
 * only: never to where a redirect leads (a CDN's signed URL carries its own rights). */
remote_sign_fn remote_sign_bearer;
/* An s3:// model's signature (remote_opts.s3), to the endpoint's origin only (the
 * origin of the URL as given): libcurl's Signature V4 with the lines it signs along,
 * x-amz-content-sha256 (a GET's empty body) and x-amz-security-token; nothing for an
 * anonymous one. */
remote_sign_fn remote_sign_s3;

/* Frees the mount's idle easy handles (at remote_free). */
void remote_fetch_pool_free(struct remote *r);

/* ---- remote_ahead.c ---- */

/* Read-ahead for a read of blocks [k0, k1] of f (see REMOTE_REQUEST_MIN_BLOCKS). */
void ahead_read(struct remote_file *f, uint64_t k0, uint64_t k1);
/* When block k of f waits in the queue, not started: runs its job here, so that a
 * reader never waits behind other requests. 1 when it ran and failed, else 0. */
int ahead_run_queued(struct remote_file *f, uint64_t k);
/* f, not read yet, takes over prev's sequential reader from byte off on. */
void ahead_take_over(struct remote_file *f, uint64_t off, const struct remote_file *prev);
/* Drops f's queued jobs and waits for its running ones (at remote_close). */
void ahead_forget(struct remote_file *f);
/* Limits f's read-ahead to the blocks of ranges (source_want): false out of memory. */
bool ahead_want(struct remote_file *f, const struct source_range *ranges, size_t n);
/* Stops the read-ahead threads and drops what is queued (at remote_free). */
void ahead_stop(struct remote *r);

/* ---- remote.c ---- */

/* Keeps block index of f in the disk cache, or says (once; then counted) that it
 * could not. */
void remote_store_block(struct remote_file *f, uint64_t index, const uint8_t *data,
                        size_t len);
/* Notes that block index of f failed after every retry, so that reads of it fail at
 * once for REMOTE_FAILED_HOLD_MS. */
void remote_note_failed(struct remote_file *f, uint64_t index);

#endif
