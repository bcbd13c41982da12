/* Remote models: a GGUF file read over HTTP(S) by range requests, pinned to the version
 * seen at mount, through a bounded memory cache of fixed-size blocks.
 *
 * A struct remote is what the files of one mount share: options, a pool of libcurl easy
 * handles (each used by one thread at a time; their connections are kept between
 * requests), the block cache and the read-ahead threads. A struct remote_file is one
 * URL: its header prefix (fetched at mount, kept for the mount's life: the parsed header
 * points into it) and its pins (size, ETag, Last-Modified, X-Repo-Commit). It is a
 * struct source (source.h) for the model's tensor bytes.
 *
 * The process must have called remote_process_start before any thread exists. */
#ifndef GGUFS_REMOTE_H
#define GGUFS_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "errline.h"
#include "source.h"
#include "url.h"

/* The header's requests at mount (model_open_remote): the first asks for
 * REMOTE_FIRST_BYTES, each further one for REMOTE_GROWTH times the prefix so far, up to
 * REMOTE_HEADER_MAX (a header larger than this is refused). */
#define REMOTE_FIRST_BYTES (1u << 20)
#define REMOTE_GROWTH 4
#define REMOTE_HEADER_MAX (1ull << 30)
/* The memory cache of a mount when remote_opts.cache_size is 0. */
#define REMOTE_CACHE_DEFAULT (256ull << 20)

/* An s3:// model's S3 side: every request to the endpoint's origin signed (unless
 * anonymous), the key's path sent as it is, and an error's S3 code read from its body
 * for a refusal that names the credentials' source, region and endpoint (context),
 * never a secret. */
struct remote_s3 {
	const char *access_key;     /* NULL: anonymous, nothing signed */
	const char *secret_key;
	const char *session_token;  /* NULL when none */
	const char *region;
	const char *bucket;
	const char *context;        /* "credentials from ..., region ... (from ...), endpoint
	                             * ... (from ...)" */
};

/* Copies *s into *d, d owning its strings (remote_s3_free): for whoever keeps an S3
 * store's options beyond the caller's. False when out of memory; what was copied is in
 * d to free all the same. */
bool remote_s3_copy(struct remote_s3 *d, const struct remote_s3 *s);

/* Frees the strings of a remote_s3_copy, the secrets wiped first. */
void remote_s3_free(struct remote_s3 *s);

struct leaving;

struct remote_opts {
	const struct remote_s3 *s3;  /* an s3:// model, or NULL */
	const char *token;          /* sent only to the origin of each URL as given; may be NULL */
	bool token_from_env;        /* for the hint in a 401/403 message */
	bool token_withheld;        /* HF_TOKEN is set, but not for this URL's server */
	bool hub;                   /* the URL is the hub's (hf://, or on HF_ENDPOINT), the only
	                             * one HF_TOKEN goes to: a 401/403 hint names it only then */
	const char *cafile;         /* extra CA file, or NULL */
	unsigned timeout;           /* seconds without progress; 0: the default */
	uint64_t cache_size;        /* bytes; 0: the default */
	const char *cache_dir;      /* the disk cache's directory (cache_dir.h), or NULL */
	uint64_t cache_max;         /* its bound in bytes; 0: the default */
	bool (*cancelled)(void *arg);  /* true once the mount is ending: transfers stop */
	void *cancel_arg;
	/* the mount's hand-over (leaving.h), or NULL: when it runs, nothing more is stored
	 * in the disk cache (dc_leaving); a new mount of the same files shares its entries
	 * with this one meanwhile, however long this one takes to exit */
	struct leaving *leaving;
	/* NULL, or told at mount, in one line without "ggufs: ", what the mount waits for
	 * once it has waited a few seconds (REMOTE_WAIT_SAY_S): an attempt without an
	 * answer yet, or a retry, at most once per attempt (a terminal shows it; silence
	 * when all is well) */
	void (*waiting)(void *arg, const char *line);
	void *waiting_arg;
	struct url_rev hub_rev;     /* an hf:// model: where the revision is in each URL (the
	                             * shards' differ only after it); once the hub names the
	                             * commit it served, later requests ask for that commit */
};

struct remote;
struct remote_file;

/* The shared state of one mount; NULL with err on failure (a token with anything but
 * visible ASCII in it, which could smuggle a header in, is refused; a cache_dir that
 * cannot be made or written). Copies what o points to; a disk cache is added to
 * o->leaving (its stores end at once when it has run). */
struct remote *remote_new(const struct remote_opts *o, char err[GGUF_ERR_MAX]);
/* Stops the read-ahead threads and frees everything; the files must be closed first. */
void remote_free(struct remote *r);

/* Opens the http(s) url: one range request for its first `first` bytes, which notes
 * the size and the pins. name: the file as the user gave it (an hf:// name), which the
 * lines said while it opens (waiting for the server, the disk cache's warnings) and
 * later the event log call it; NULL for the URL shown. NULL on failure with one phrase
 * in err (no URL prefix), e.g. "not found (HTTP 404)"; *status is the HTTP status that
 * caused it (0 if none). */
struct remote_file *remote_open(struct remote *r, const char *url, const char *name,
                                uint64_t first, char err[GGUF_ERR_MAX], long *status);

/* The header prefix fetched so far, its length, and the file's size. */
const uint8_t *remote_prefix(const struct remote_file *f, uint64_t *len);
uint64_t remote_size(const struct remote_file *f);
/* Grows the prefix to len bytes (<= size) with one request, pinned. 0, or -1 with err.
 * The prefix may move: pointers into it from before are stale. */
int remote_grow_prefix(struct remote_file *f, uint64_t len, char err[GGUF_ERR_MAX]);

/* Last-Modified as a time, or -1 when the server sent none. */
time_t remote_mtime(const struct remote_file *f);
/* The ETag the file is pinned to, as the server sent it; "" if none. */
const char *remote_etag(const struct remote_file *f);
/* The hub's X-Repo-Commit from the first answer: the commit mounted; "" if none. */
const char *remote_repo_commit(const struct remote_file *f);

/* What a mount's fetcher has done so far (counted as it happens; read for the
 * user.ggufs.* attributes of the mount's root). */
struct remote_counters {
	uint64_t requests;          /* HTTP requests sent, mount's included, retries included */
	uint64_t bytes_fetched;     /* body bytes received */
	uint64_t memory_hits;       /* blocks a read found in the memory cache (fetched
	                             * earlier, or by read-ahead) */
	uint64_t disk_hits;         /* blocks read from the disk cache instead of fetched */
	uint64_t retries;           /* attempts after a first that failed */
	uint64_t failures;          /* fetches that failed for good, and files that changed */
	bool disk_cache;            /* -o cache_dir is in use */
	char last_error[GGUF_ERR_MAX];  /* "NAME: cause" of the last failure; "" if none */
	time_t last_error_time;     /* when it happened (wall clock) */
};
void remote_counters(struct remote *r, struct remote_counters *c);
/* Why the first read of r's files that failed did (a fetch that failed for good, a file
 * that changed), as the event log said it after the file's name, into cause: true; false
 * (cause "") while none has. What a caller that names the file and the tensor itself
 * says as the cause of its failed read. */
bool remote_first_cause(struct remote *r, char cause[GGUF_ERR_MAX]);

/* The file as a byte source; closing the source closes the file. */
struct source *remote_source(struct remote_file *f);
/* The remote file that src (from remote_source) is. */
const struct remote_file *remote_of_source(const struct source *src);

/* libcurl's process-wide state, set up once before the process starts any thread (its
 * setup is not thread-safe) and before any remote is made: true, or false with a line in
 * err (then nothing remote may be opened). */
bool remote_process_start(char err[GGUF_ERR_MAX]);

/* Ends what remote_process_start set up, once every remote is freed and no thread uses
 * libcurl. */
void remote_process_end(void);

#endif
