/* The live counters that a mount's root shows as user.ggufs.* extended attributes, the
 * last error, and the line an EIO is said with (its cause the why the failed read gave:
 * a fetch that failed, a local file that shrank, or was written to under quants/).
 * lib/ reports events through evlog.h and counts its fetches (remote_counters);
 * nothing here costs a read anything but a relaxed atomic add, and the counters are
 * gathered only when an attribute is read. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "iso_time.h"
#include "mount_impl.h"
#include "remote.h"
#include "s3.h"
#include "url.h"

void mount_counters_init(struct mount_counters *c)
{
	atomic_init(&c->reads, 0);
	atomic_init(&c->eio_replies, 0);
	atomic_init(&c->edits_refused, 0);
	pthread_mutex_init(&c->error_lock, NULL);
	c->last_error[0] = 0;
	c->last_error_time = 0;
}

void mount_counters_destroy(struct mount_counters *c)
{
	pthread_mutex_destroy(&c->error_lock);
}

/* n's path in the tree ("tensors/NAME.f32", "gguf.json"), into buf. */
static const char *node_path(const struct tree *t, const struct tree_node *n, char *buf,
                             size_t size)
{
	const struct tree_node *dir = tree_node(t, n->parent);
	if (dir && n->parent != TREE_ROOT_INO)
		snprintf(buf, size, "%s/%s", dir->name, n->name);
	else
		snprintf(buf, size, "%s", n->name);
	return buf;
}

/* Keeps why as the mount's last error (a local model's: a remote one's are the
 * fetcher's), unless it is already: true when it was not. The test and the update are
 * one step under the lock, so two readers failing at once log the cause once. */
static bool note_error(struct mount_counters *c, const char *why)
{
	pthread_mutex_lock(&c->error_lock);
	bool new_error = strcmp(c->last_error, why) != 0;
	if (new_error) {
		snprintf(c->last_error, sizeof c->last_error, "%s", why);
		c->last_error_time = time(NULL);
	}
	pthread_mutex_unlock(&c->error_lock);
	return new_error;
}

void mount_counted_eio(struct mount_counters *c, const struct tree *t, const struct tree_node *n,
                       uint64_t off, uint64_t len, const char *why, struct mount_err *err)
{
	atomic_fetch_add_explicit(&c->eio_replies, 1, memory_order_relaxed);
	char path[320];   /* (a longer path cut in the line) */
	const char *cause = why && why[0] ? why : "the bytes could not be read";
	/* a local model's cause is said here, once while it is the last (once per size a
	 * file shrank to, say): its EIOs are what is counted */
	if (why && why[0] && !model_fetched(tree_model(t)) && note_error(c, why))
		evlog(EVLOG_ERR, NULL, "%s", why);
	err->no = EIO;
	err->level = EVLOG_ERR;
	/* the first EIO of each cause: said with it, the rest counted under the same key
	 * (the cause without its numbers: byte ranges and counts differ between failures
	 * of one cause) */
	snprintf(err->key, sizeof err->key, "eio ");
	evlog_key_cause(err->key, sizeof err->key, cause);
	snprintf(err->cause, sizeof err->cause,
	         "EIO to a read of %s (%" PRIu64 " bytes at %" PRIu64 "), because %s",
	         node_path(t, n, path, sizeof path), len, off, cause);
}

void mount_counted_eio_said(struct mount_counters *c, const char *why, struct mount_err *err)
{
	atomic_fetch_add_explicit(&c->eio_replies, 1, memory_order_relaxed);
	note_error(c, why[0] ? why : "the bytes could not be read");
	mount_fail(err, EIO);
}

void mount_counted_refusal(struct mount_counters *c, int r, const char *why,
                           struct mount_err *err)
{
	atomic_fetch_add_explicit(&c->edits_refused, 1, memory_order_relaxed);
	mount_fail(err, -r);
	err->level = EVLOG_WARNING;
	snprintf(err->cause, sizeof err->cause, "edit refused (%s): %s", strerror(-r), why);
	note_error(c, err->cause);
}

/* ---- user.ggufs.* on the mount's root ---- */

enum counter {
	C_READS, C_EIO, C_LAST_ERROR, C_EDITS_REFUSED, C_URL, C_REQUESTS, C_BYTES, C_MEMORY_HITS,
	C_DISK_HITS, C_RETRIES, C_COUNT
};

static const char *const counter_name[C_COUNT] = {
	"user.ggufs.reads", "user.ggufs.eio_replies", "user.ggufs.last_error",
	"user.ggufs.edits_refused", "user.ggufs.url",
	"user.ggufs.requests", "user.ggufs.bytes_fetched", "user.ggufs.memory_cache_hits",
	"user.ggufs.disk_cache_hits", "user.ggufs.retries",
};

/* Whether counter k applies to this mount: the fetcher's only to a remote model, the
 * disk cache's only with cache_dir, edits_refused only with edits. */
static bool applies(const struct mount_counted *what, const struct remote_counters *rc,
                    enum counter k)
{
	if (k <= C_LAST_ERROR)
		return true;
	if (k == C_EDITS_REFUSED)
		return what->edits;
	if (!what->model || !model_fetched(what->model))
		return false;
	return k != C_DISK_HITS || rc->disk_cache;
}

/* The value of counter k as text (no newline) into buf. */
static void counter_value(struct mount_counters *c, const struct mount_counted *what,
                          const struct remote_counters *rc, enum counter k, char *buf,
                          size_t size)
{
	uint64_t v = 0;
	switch (k) {
	case C_READS: v = atomic_load_explicit(&c->reads, memory_order_relaxed); break;
	case C_EIO: v = atomic_load_explicit(&c->eio_replies, memory_order_relaxed); break;
	case C_EDITS_REFUSED:
		v = atomic_load_explicit(&c->edits_refused, memory_order_relaxed);
		break;
	case C_REQUESTS: v = rc->requests; break;
	case C_BYTES: v = rc->bytes_fetched; break;
	case C_MEMORY_HITS: v = rc->memory_hits; break;
	case C_DISK_HITS: v = rc->disk_hits; break;
	case C_RETRIES: v = rc->retries; break;
	case C_URL: {
		/* as given, less what the man page keeps out of sight (user:password@, a query
		 * that may hold a signature): the root's attributes are every reader's */
		const char *path = model_path(what->model);
		bool plain = strncasecmp(path, "hf://", 5) == 0 || s3_is_name(path);  /* no secret */
		char *shown = plain ? NULL : url_display(path);
		snprintf(buf, size, "%s", plain ? path : shown ? shown : "");
		free(shown);
		return;
	}
	case C_LAST_ERROR: {
		/* the later of the fetcher's and the mount's own */
		char when[ISO_TIME_BUF];
		pthread_mutex_lock(&c->error_lock);
		bool ours = c->last_error[0] &&
		            (!rc->last_error[0] || c->last_error_time >= rc->last_error_time);
		if (ours)
			snprintf(buf, size, "%s %s", iso_time_format(c->last_error_time, when), c->last_error);
		else if (rc->last_error[0])
			snprintf(buf, size, "%s %s", iso_time_format(rc->last_error_time, when), rc->last_error);
		else
			buf[0] = 0;
		pthread_mutex_unlock(&c->error_lock);
		return;
	}
	case C_COUNT: break;
	}
	snprintf(buf, size, "%" PRIu64, v);
}

/* The fetcher's counters now (zero for a local model or a library). */
static void gather(const struct mount_counted *what, struct remote_counters *rc)
{
	memset(rc, 0, sizeof *rc);
	if (what->model)
		model_fetch_counters(what->model, rc);
}

/* Appends name (with its NUL) at *need of buf when it fits. */
static void put_name(char *buf, size_t size, size_t *need, const char *name)
{
	size_t n = strlen(name) + 1;
	if (size && *need + n <= size)
		memcpy(buf + *need, name, n);
	*need += n;
}

int64_t mount_counters_list(struct mount *m, const struct mount_counted *what, char *buf,
                            size_t size)
{
	(void)m;
	struct remote_counters rc;
	gather(what, &rc);
	size_t need = 0;
	for (int k = 0; k < C_COUNT; k++)
		if (applies(what, &rc, (enum counter)k))
			put_name(buf, size, &need, counter_name[k]);
	for (size_t i = 0; i < what->n_extra; i++)
		put_name(buf, size, &need, what->extra[i]);
	return size && need > size ? -ERANGE : (int64_t)need;
}

int64_t mount_counters_get(struct mount *m, const struct mount_counted *what, const char *name,
                           char *buf, size_t size)
{
	if (strncmp(name, "user.ggufs.", 11) != 0)
		return -ENOENT;   /* not ours: the tree's */
	char value[2 * GGUF_ERR_MAX + 64];
	for (size_t i = 0; i < what->n_extra; i++) {
		if (strcmp(name, what->extra[i]) != 0)
			continue;
		int n = snprintf(value, sizeof value, "%" PRIu64, what->extra_value(m, i));
		return mount_xattr_value(buf, size, value, (size_t)n);
	}
	struct remote_counters rc;
	gather(what, &rc);
	for (int k = 0; k < C_COUNT; k++) {
		if (strcmp(name, counter_name[k]) != 0 || !applies(what, &rc, (enum counter)k))
			continue;
		counter_value(&m->counters, what, &rc, (enum counter)k, value, sizeof value);
		return mount_xattr_value(buf, size, value, strlen(value));
	}
	return -ENODATA;
}

int64_t mount_xattr_value(char *buf, size_t size, const char *value, size_t len)
{
	if (size && len > size)
		return -ERANGE;
	if (size)
		memcpy(buf, value, len);
	return (int64_t)len;
}
