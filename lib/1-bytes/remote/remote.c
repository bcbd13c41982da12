/* The remote file: its header prefix and pins from the first answer, its blocks
 * through the memory cache (and the disk cache, with -o cache_dir), read as a struct
 * source; and the mount's shared state (struct remote). Fetching is remote_fetch.c's,
 * read-ahead remote_ahead.c's. */
#include "remote_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "copy_or_null.h"
#include "evlog.h"
#include "token.h"

/* Set by fetch_block on the thread whose bc_get fetched (or loaded from disk): a block
 * bc_get returned without it came from memory. */
static _Thread_local bool fetched_here;

static void remote_close(struct remote_file *f);

/* Keeps block index of f in the disk cache; one it could not keep (the disk cache says
 * why in the event log) is fetched again when read again. */
void remote_store_block(struct remote_file *f, uint64_t index, const uint8_t *data,
                        size_t len)
{
	dc_store(f->entry, index, data, len);
}

/* Notes that block index of f failed after every retry (not when the mount is ending:
 * nothing reads then). */
void remote_note_failed(struct remote_file *f, uint64_t index)
{
	if (remote_cancelled(f->r))
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
	if (remote_fetch(f, first, first + len - 1, buf, NULL, true, false, err, &status) != 0) {
		remote_note_failed(f, index);
		return -EIO;
	}
	if (f->entry)
		remote_store_block(f, index, buf, len);
	return 0;
}

/* A read of f fails: -EIO, with f's last failure (the fetch that failed for good, or
 * the change seen on the server, said when it happened) as why. */
static int read_failed(struct remote_file *f, char why[GGUF_ERR_MAX])
{
	if (why) {
		pthread_mutex_lock(&f->lock);
		snprintf(why, GGUF_ERR_MAX, "%s", f->failure);
		pthread_mutex_unlock(&f->lock);
	}
	return -EIO;
}

/* Source read: from the header prefix where it holds the bytes, else block by block
 * through the cache, with read-ahead (read_ahead above). */
static int remote_read(struct source *src, uint64_t off, uint64_t len, void *out,
                       char why[GGUF_ERR_MAX])
{
	struct remote_file *f = (struct remote_file *)src;
	uint8_t *dst = out;
	if (atomic_load(&f->changed))
		return read_failed(f, why);
	if (len == 0)
		return 0;
	if (off > f->size || len > f->size - off) {
		if (why)
			gguf_errf(why, "%s: a read past its end", remote_log_name(f));
		return -EIO;
	}
	uint64_t k0 = off / REMOTE_BLOCK_SIZE, k1 = (off + len - 1) / REMOTE_BLOCK_SIZE;
	ahead_read(f, k0, k1);
	for (uint64_t k = k0; k <= k1; k++) {
		uint64_t bstart = k * REMOTE_BLOCK_SIZE;
		uint64_t from = off > bstart ? off - bstart : 0;
		uint64_t to = off + len - bstart < REMOTE_BLOCK_SIZE ? off + len - bstart : REMOTE_BLOCK_SIZE;
		size_t blen = block_len(f, k);
		if (bstart + blen <= f->prefix_len) {
			memcpy(dst, f->prefix + bstart + from, to - from);
		} else {
			struct bc_block *held;
			const uint8_t *data;
			if (failed_lately(f, k))   /* the kernel's READ again after a failed one */
				return read_failed(f, why);
			if (ahead_run_queued(f, k))
				return read_failed(f, why);
			fetched_here = false;
			if (bc_get(f->r->cache, f, k, blen, fetch_block, f, &data, &held) < 0)
				return read_failed(f, why);
			if (!fetched_here)
				atomic_fetch_add_explicit(&f->r->n_memory_hits, 1, memory_order_relaxed);
			memcpy(dst, data + from, to - from);
			bc_release(f->r->cache, held);
		}
		dst += to - from;
	}
	return atomic_load(&f->changed) ? read_failed(f, why) : 0;
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
	if (f->r == p->r && off < f->size)
		ahead_take_over(f, off, p);
}

/* Source want: read-ahead only inside the ranges (ahead_want). */
static bool remote_want(struct source *src, const struct source_range *ranges, size_t n)
{
	return ahead_want((struct remote_file *)src, ranges, n);
}

static const struct source_ops remote_ops = {
	.read = remote_read,
	.close = remote_source_close,
	.expect = remote_expect,
	.want = remote_want,
};

bool remote_s3_copy(struct remote_s3 *d, const struct remote_s3 *s)
{
	bool ok = true;
	d->access_key = copy_or_null(s->access_key, &ok);
	d->secret_key = copy_or_null(s->secret_key, &ok);
	d->session_token = copy_or_null(s->session_token, &ok);
	d->region = copy_or_null(s->region, &ok);
	d->bucket = copy_or_null(s->bucket, &ok);
	d->context = copy_or_null(s->context, &ok);
	return ok;
}

void remote_s3_free(struct remote_s3 *s)
{
	token_free((char *)s->access_key);
	token_free((char *)s->secret_key);
	token_free((char *)s->session_token);
	free((char *)s->region);
	free((char *)s->bucket);
	free((char *)s->context);
}

/* Copies *s into r->s3 (and its keys into r->sigv4) and points r->o.s3 at it; false
 * when out of memory (what was copied is freed by remote_s3_free). */
static bool copy_s3(struct remote *r, const struct remote_s3 *s)
{
	bool copied = remote_s3_copy(&r->s3, s);
	r->o.s3 = &r->s3;
	r->sigv4 = (struct http_sigv4){ .access_key = r->s3.access_key,
	                                .secret_key = r->s3.secret_key,
	                                .session_token = r->s3.session_token,
	                                .region = r->s3.region };
	return copied;
}

/* The mount is ending (r->leave's fn, r's disk cache): nothing more is stored in it
 * (dc_leaving); a new mount of the same files shares its entries meanwhile. */
static void remote_leave(void *r)
{
	dc_leaving(((struct remote *)r)->disk);
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
	r->sign = o->s3 ? remote_sign_s3 : remote_sign_bearer;
	bool copied = true;
	r->o.token = copy_or_null(o->token, &copied);
	r->o.cafile = copy_or_null(o->cafile, &copied);
	if (o->s3 && !copy_s3(r, o->s3))
		copied = false;
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
	if (!r->cache || !copied) {
		gguf_errf(err, "out of memory");
		remote_free(r);
		return NULL;
	}
	/* read-ahead only where the cache holds twice its least window; it never uses more
	 * than half the cache, so that it cannot push out what the reader is reading */
	uint64_t half = r->o.cache_size / REMOTE_BLOCK_SIZE / 2;
	r->ahead_wanted = half >= REMOTE_WINDOW_MIN_BLOCKS;
	r->window_max = half < REMOTE_WINDOW_MAX_BLOCKS ? (unsigned)half : REMOTE_WINDOW_MAX_BLOCKS;
	if (r->disk) {
		r->leave = (struct leaving_entry){ .fn = remote_leave, .ctx = r };
		leaving_add(o->leaving, &r->leave);
	}
	return r;
}

void remote_free(struct remote *r)
{
	if (!r)
		return;
	leaving_remove(&r->leave);   /* (waits for its dc_leaving under way) */
	ahead_stop(r);
	remote_fetch_pool_free(r);
	bc_free(r->cache);
	dc_close(r->disk);
	token_free((char *)r->o.token);
	free((char *)r->o.cafile);
	remote_s3_free(&r->s3);
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
 * hashed), the size and the ETag (or Last-Modified), shared with every other mount of
 * the same file; without either, or when none can be made, f is read without the disk
 * cache, and the event log says why. */
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
	f->entry = dc_entry_open(f->r->disk, key, f->size, version);
	free(key);
	if (!f->entry && !version[0])
		evlog(EVLOG_WARNING, NULL, "%s: the server sends neither ETag nor Last-Modified, "
		      "so a later version could not be told apart: this file is read without the "
		      "disk cache", remote_log_name(f));
	else if (!f->entry)
		evlog(EVLOG_WARNING, NULL, "%s: the disk cache refused an entry for this file (no "
		      "room under cache_max, a URL too long, a write error, or an older ggufs "
		      "holding it): it is read without the disk cache", remote_log_name(f));
}

struct remote_file *remote_open(struct remote *r, const char *url, const char *name,
                                uint64_t first, char err[GGUF_ERR_MAX], long *status)
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
	f->name = name ? strdup(name) : NULL;   /* what the mount's own lines call it */
	f->prefix = malloc(first ? first : 1);
	if (!f->url || !f->display || !f->prefix || (name && !f->name)) {
		gguf_errf(err, "out of memory");
		goto fail;
	}
	if (remote_fetch(f, 0, first - 1, f->prefix, NULL, false, true, err, status) < 0)
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
	if (remote_fetch(f, f->prefix_len, len - 1, p + f->prefix_len, NULL, true, true, err,
	                 &status) < 0)
		return -1;
	f->prefix_len = len;
	return 0;
}

time_t remote_mtime(const struct remote_file *f)
{
	return f->mtime;
}

const char *remote_etag(const struct remote_file *f)
{
	return f->etag;
}

const char *remote_repo_commit(const struct remote_file *f)
{
	return f->repo_commit;
}

bool remote_first_cause(struct remote *r, char cause[GGUF_ERR_MAX])
{
	pthread_mutex_lock(&r->error_lock);
	snprintf(cause, GGUF_ERR_MAX, "%s", r->first_cause);
	pthread_mutex_unlock(&r->error_lock);
	return cause[0] != 0;
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

/* Closes f (its source's close): its read-ahead jobs, cached blocks and prefix go. */
static void remote_close(struct remote_file *f)
{
	if (!f)
		return;
	/* read-ahead jobs and cached blocks name f: none may outlive it */
	struct remote *r = f->r;
	ahead_forget(f);
	bc_drop_owner(r->cache, f);
	dc_entry_close(f->entry);
	free(f->url);
	free(f->display);
	free(f->name);
	free(f->prefix);
	free(f->target);
	free(f->want);
	free(f->etag_origin);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

bool remote_process_start(char err[GGUF_ERR_MAX])
{
	CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (c != CURLE_OK)
		gguf_errf(err, "libcurl cannot start: %s", curl_easy_strerror(c));
	return c == CURLE_OK;
}

void remote_process_end(void)
{
	curl_global_cleanup();
}
