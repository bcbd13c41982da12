/* A model from GGUF files (model_source.h): one file, or every shard of a split set,
 * local (opened by an opener, mapped) or remote (fetched by range requests, all shards
 * sharing one struct remote) or streamed (one file, read once in order), each parsed and
 * checked against the others, then handed to model_new as one list of tensors. */
#include "model_source.h"
#include "local.h"
#include "local_check.h"
#include "nameset.h"
#include "remote.h"
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One file of a GGUF model: what model_file describes to the model, and its own. */
struct model_shard {
	char *path;             /* a remote shard: its URL as shown (no credentials, no query) */
	const uint8_t *map;     /* the header: a local file's whole mapping (the source's),
	                         * a remote file's fetched prefix */
	uint64_t size;          /* file size at open */
	struct stat st;         /* a local shard: fstat of the descriptor that was mapped and
	                         * parsed, at open: which file, and which version of its bytes */
	struct gguf_file gf;
	struct source *src;     /* the file's bytes, local or remote; gf points into map */
};

/* A GGUF model being opened, then the model's source (model_desc.ctx): its shards, and
 * what model_new is given of them. */
struct gguf_set {
	const char *path;       /* as the user gave it (the model's copy once made) */
	struct stat st;         /* of the given file (a local one's, of the descriptor
	                         * mapped): modes, owner, times */
	uint32_t n_shards;
	struct model_shard *shards;
	struct model_file *files;      /* one per shard, for the model */
	uint64_t n_tensors;
	struct model_tensor *tensors;  /* shard order, then file order */
	struct remote *remote;  /* what the shards of a remote model share; NULL if local */
	char *source_buf;       /* a remote model's URL and the hub's commit, when it names one */
	long open_status;       /* while a remote model is opened: the HTTP status of the
	                         * answer that made a shard fail (0 for none) */
};

/* Opens one file by opener (named: as model_opener.open has it), maps and parses it into
 * shard s, its stat in s->st: 0, or -errno (the opener's: -ENOENT, no such file; -EINVAL
 * for a file opened that is no model) with "PATH: problem" in err. */
static int shard_open(struct model_shard *s, const char *path, const struct model_opener *o,
                      const struct stat *named, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];

	s->path = strdup(path);
	if (!s->path) {
		gguf_errf(err, "%s: out of memory", path);
		return -ENOMEM;
	}
	int fd = o->open(o->ctx, path, named, err);
	if (fd < 0)
		return fd;
	s->src = local_open_fd(fd, path, &s->st, &s->map, &s->size, err);
	if (!s->src)
		return -EINVAL;
	if (gguf_parse(s->map, s->size, &s->gf, why) < 0) {
		gguf_errf(err, "%s: %s", path, why);
		return -EINVAL;
	}
	return 0;
}

/* model_opener.open of model_opener_local: ctx is shared, as a pointer-sized number. */
static int open_local(void *ctx, const char *path, const struct stat *named,
                      char err[GGUF_ERR_MAX])
{
	const bool shared = (uintptr_t)ctx != 0;
	char why[GGUF_ERR_MAX];
	struct stat st;
	int pfd = local_check_resolve(AT_FDCWD, path, &st);
	if (pfd < 0) {
		gguf_errf(err, "%s: %s", path, strerror(-pfd));
		return pfd;
	}
	int fd = local_check_regular(&st, path, err);
	if (fd == 0 && shared && named && !local_check_reads(named, &st, why)) {
		gguf_errf(err, "%s: not read, as other users read the model: %s", path, why);
		fd = -EACCES;
	}
	if (fd == 0)
		fd = local_check_reopen(pfd, &st, path, err);
	close(pfd);
	return fd;
}

struct model_opener model_opener_local(bool shared)
{
	return (struct model_opener){ .open = open_local, .ctx = (void *)(uintptr_t)shared };
}

/* Where a shard's header comes from when the file is fetched: its first bytes, as many
 * as the parser asks for (remote_prefix, stream_prefix). */
struct header_reader {
	/* At least want (at most the file's size) of the file's first bytes: their start,
	 * their count into *have, or NULL with why. */
	const uint8_t *(*prefix)(void *ctx, uint64_t want, uint64_t *have, char why[GGUF_ERR_MAX]);
	void *ctx;
	uint64_t max;        /* a larger header is refused here (0: prefix's own bound) */
	bool rest_with_it;   /* a rest of the file smaller than a step comes with it */
};

/* Parses the header of shard s (of s->size bytes) from ever longer prefixes:
 * REMOTE_FIRST_BYTES first, then REMOTE_GROWTH times the last, or what the parser says
 * it needs where that is more (at most hr->max). On failure err holds "SHOWN: problem". */
static int parse_header(struct model_shard *s, const char *shown, const struct header_reader *hr,
                        char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	for (uint64_t want = REMOTE_FIRST_BYTES;;) {
		uint64_t have, need;
		s->map = hr->prefix(hr->ctx, want < s->size ? want : s->size, &have, why);
		if (!s->map) {
			gguf_errf(err, "%s: %s", shown, why);
			return -1;
		}
		int r = gguf_parse_prefix(s->map, have, s->size, &s->gf, why, &need);
		if (r == 0)
			return 0;
		if (r < 0) {
			gguf_errf(err, "%s: %s", shown, why);
			return -1;
		}
		if (hr->max && need > hr->max) {
			gguf_errf(err, "%s: the header is larger than %llu MiB, the most ggufs fetches",
			          shown, (unsigned long long)(hr->max >> 20));
			return -1;
		}
		if (have >= s->size) {   /* never: the parser knows the size */
			gguf_errf(err, "%s: the header does not fit in the file", shown);
			return -1;
		}
		want = hr->max && have > hr->max / REMOTE_GROWTH ? hr->max : have * REMOTE_GROWTH;
		if (want < need)
			want = need;
		/* a rest of the file smaller than this request comes with it: one round trip
		 * saved, at most as many bytes again */
		if (hr->rest_with_it && want < s->size && s->size - want < want - have)
			want = s->size;
	}
}

/* header_reader.prefix of a remote file (ctx): what it holds, fetched further when
 * that is short of want (remote_grow_prefix). */
static const uint8_t *remote_header_prefix(void *ctx, uint64_t want, uint64_t *have,
                                           char why[GGUF_ERR_MAX])
{
	if (remote_grow_prefix(ctx, want, why) < 0)
		return NULL;
	return remote_prefix(ctx, have);
}

/* Opens one remote shard: its header, fetched with as few requests as the parser
 * needs, growing the prefix geometrically. On failure err holds "SHOWN: problem". */
static int shard_open_remote(struct gguf_set *m, struct model_shard *s, const char *url,
                             const char *shown, bool missing_if_404, const char *missing,
                             char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	long status;

	s->map = NULL;
	s->path = strdup(shown);
	if (!s->path) {
		gguf_errf(err, "%s: out of memory", shown);
		return -1;
	}
	struct remote_file *f = remote_open(m->remote, url, shown, REMOTE_FIRST_BYTES, why,
	                                    &status);
	if (!f) {
		m->open_status = status;
		if (missing_if_404 && (status == 404 || status == 410))
			gguf_errf(err, "%s: %s", shown, missing);
		else
			gguf_errf(err, "%s: %s", shown, why);
		return -1;
	}
	s->src = remote_source(f);
	s->size = remote_size(f);
	if (s->size == 0) {
		gguf_errf(err, "%s: empty file, not GGUF", shown);
		return -1;
	}
	struct header_reader hr = { remote_header_prefix, f, REMOTE_HEADER_MAX, true };
	return parse_header(s, shown, &hr, err);
}

static void shard_close(struct model_shard *s)
{
	gguf_file_free(&s->gf);
	source_close(s->src);   /* the header (map) is the source's */
	free(s->path);
}

bool model_split_key(const struct gguf_str *k)
{
	static const char *const keys[] = { "split.no", "split.count", "split.tensors.count" };
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (k->len == strlen(keys[i]) && memcmp(k->ptr, keys[i], k->len) == 0)
			return true;
	return false;
}

bool model_split_name(const char *path, size_t *prefix, unsigned *no, unsigned *count)
{
	size_t n = strlen(path);
	const char *tail = "-00000-of-00000.gguf";
	size_t tl = strlen(tail);
	if (n < tl)
		return false;
	const char *p = path + n - tl;
	for (size_t i = 0; i < tl; i++) {
		bool digit = tail[i] == '0';
		if (digit ? !(p[i] >= '0' && p[i] <= '9') : p[i] != tail[i])
			return false;
	}
	*no = (unsigned)strtoul(p + 1, NULL, 10);
	*count = (unsigned)strtoul(p + 10, NULL, 10);
	*prefix = n - tl;
	return *no >= 1 && *count >= 1 && *no <= *count;
}

/* Checks that shard i (from 0) of count belongs to the set that shard 0 starts. */
static int split_check(struct gguf_set *m, uint32_t i, uint64_t tensors_total,
                       char err[GGUF_ERR_MAX])
{
	const struct model_shard *s = &m->shards[i];
	uint64_t no, count, total;
	if (!gguf_kv_uint(gguf_find_kv(&s->gf, "split.no"), &no) ||
	    !gguf_kv_uint(gguf_find_kv(&s->gf, "split.count"), &count)) {
		gguf_errf(err, "%s: shard %u of %u has no split.no or split.count key", s->path, i + 1,
		     m->n_shards);
		return -1;
	}
	if (count != m->n_shards || no != i) {
		gguf_errf(err, "%s: not shard %u of %u of this model: its split.no is %" PRIu64
		     " and split.count %" PRIu64, s->path, i + 1, m->n_shards, no, count);
		return -1;
	}
	if (gguf_kv_uint(gguf_find_kv(&s->gf, "split.tensors.count"), &total) && total != tensors_total) {
		gguf_errf(err, "%s: belongs to another model: split.tensors.count is %" PRIu64
		     ", the first shard says %" PRIu64, s->path, total, tensors_total);
		return -1;
	}
	return 0;
}

/* Opens shard s at path (local, by opener; named as model_opener.open has it), or at url
 * shown as path (remote); missing is the message for a remote 404 when the shard is one
 * of a split set the user did not name. 0, or -errno (-ENOENT: a local file that is not
 * there) with the line in err. */
static int open_one(struct gguf_set *m, struct model_shard *s, const char *path,
                    const char *url, const struct model_opener *opener,
                    const struct stat *named, const char *missing, char err[GGUF_ERR_MAX])
{
	if (!m->remote)
		return shard_open(s, path, opener, named, err);
	return shard_open_remote(m, s, url, path, missing != NULL, missing, err) < 0 ? -EIO : 0;
}

/* The -0000K-of-0000N.gguf name of shard no of count, at prefix bytes of name, with
 * what followed the name (a remote URL's query) kept after it: malloc'ed. */
static char *shard_name(const char *name, size_t prefix, const char *after, unsigned no,
                        unsigned count)
{
	size_t n = prefix + 32 + strlen(after);
	char *s = malloc(n);
	if (s)
		snprintf(s, n, "%.*s-%05u-of-%05u.gguf%s", (int)prefix, name, no, count, after);
	return s;
}

/* Opens every shard of the split set that path belongs to, or path alone: the file
 * named first, then the others in order. For a local model opener opens each file, and
 * m->st is the named file's; for a remote model path is the URL as shown and url the
 * one fetched (whose query, if any, each shard's URL keeps). */
static int open_shards(struct gguf_set *m, const char *path, const char *url,
                       const struct model_opener *opener, char err[GGUF_ERR_MAX])
{
	size_t prefix, url_prefix = 0;
	unsigned no, count, url_no, url_count;
	const char *query = url ? strchr(url, '?') : NULL;
	char *url_path = url ? strndup(url, query ? (size_t)(query - url) : strlen(url)) : NULL;
	if (url && !url_path) {
		gguf_errf(err, "%s: out of memory", path);
		return -1;
	}
	bool split = model_split_name(path, &prefix, &no, &count) && count > 1;
	if (split && url)   /* both names end the same way: shown is url without credentials */
		split = model_split_name(url_path, &url_prefix, &url_no, &url_count) && url_no == no &&
		        url_count == count;

	if (!split) {
		free(url_path);
		m->shards = calloc(1, sizeof *m->shards);
		if (!m->shards) {
			gguf_errf(err, "%s: out of memory", path);
			return -1;
		}
		m->n_shards = 1;
		if (open_one(m, &m->shards[0], path, url, opener, NULL, NULL, err) < 0)
			return -1;
		m->st = m->shards[0].st;
		uint64_t c;
		if (gguf_kv_uint(gguf_find_kv(&m->shards[0].gf, "split.count"), &c) && c > 1) {
			gguf_errf(err, "%s: shard of a model split in %" PRIu64 " files, but its name is not "
			     "NAME-0000N-of-0000M.gguf, so the others cannot be found", path, c);
			return -1;
		}
		return 0;
	}
	m->shards = calloc(count, sizeof *m->shards);
	if (!m->shards) {
		free(url_path);
		gguf_errf(err, "%s: out of memory", path);
		return -1;
	}
	m->n_shards = count;   /* those not opened yet are zeros, which close as nothing */
	for (unsigned k = 0; k < count; k++) {
		/* the file named first: the others are checked against it */
		const unsigned i = k == 0 ? no - 1 : k - 1 < no - 1 ? k - 1 : k;
		char missing[64];
		char *name = shard_name(path, prefix, "", i + 1, count);
		char *name_url = url ? shard_name(url_path, url_prefix, query ? query : "", i + 1,
		                                  count) : NULL;
		if (!name || (url && !name_url)) {
			free(name);
			free(name_url);
			free(url_path);
			gguf_errf(err, "%s: out of memory", path);
			return -1;
		}
		snprintf(missing, sizeof missing, "shard %u of %u is missing", i + 1, count);
		int r = open_one(m, &m->shards[i], name, name_url, opener, k == 0 ? NULL : &m->st,
		                 k == 0 ? NULL : missing, err);
		if (r == -ENOENT)
			gguf_errf(err, "%s: %s", name, missing);
		free(name);
		free(name_url);
		if (r < 0) {
			free(url_path);
			return -1;
		}
		if (k == 0)
			m->st = m->shards[i].st;
	}
	free(url_path);
	uint64_t total = 0;
	for (unsigned i = 0; i < count; i++)
		total += m->shards[i].gf.n_tensors;
	uint64_t claimed = total;
	gguf_kv_uint(gguf_find_kv(&m->shards[0].gf, "split.tensors.count"), &claimed);
	for (unsigned i = 0; i < count; i++)
		if (split_check(m, i, claimed, err) < 0)
			return -1;
	if (claimed != total) {
		gguf_errf(err, "%s: split.tensors.count is %" PRIu64 " but the %u shards hold %" PRIu64
		     " tensors", m->shards[0].path, claimed, count, total);
		return -1;
	}
	return 0;
}

/* Frees a set and all it holds: its shards (their sources and parses), then the remote
 * they share (model_source_ops.close, and a set that failed to open). */
static void set_free(void *ctx)
{
	struct gguf_set *m = ctx;
	if (!m)
		return;
	for (uint32_t i = 0; i < m->n_shards; i++)
		shard_close(&m->shards[i]);
	free(m->shards);
	free(m->files);
	free(m->tensors);
	remote_free(m->remote);
	free(m->source_buf);
	free(m);
}

static const struct model_source_ops gguf_ops = { .close = set_free };

/* What every kind of GGUF model does once its shards are open: the one list of tensors
 * (and the check that no name is in two shards), and the files as the model sees them. */
static int set_finish(struct gguf_set *m, char err[GGUF_ERR_MAX])
{
	for (uint32_t s = 0; s < m->n_shards; s++)
		m->n_tensors += m->shards[s].gf.n_tensors;
	m->tensors = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->tensors);
	m->files = calloc(m->n_shards, sizeof *m->files);
	struct nameset seen;
	if (!m->tensors || !m->files || !nameset_init(&seen, m->n_tensors)) {
		gguf_errf(err, "%s: out of memory", m->path);
		return -1;
	}
	uint64_t k = 0;
	for (uint32_t s = 0; s < m->n_shards; s++) {
		const struct model_shard *sh = &m->shards[s];
		for (uint64_t i = 0; i < sh->gf.n_tensors; i++, k++) {
			const struct gguf_tensor *t = &sh->gf.tensors[i];
			m->tensors[k] = (struct model_tensor){ .t = t, .file = s };
			if (!nameset_add(&seen, &t->name)) {
				char q[80];
				gguf_errf(err, "%s: tensor '%s' is also in an earlier shard", sh->path,
				     gguf_quote(&t->name, q));
				nameset_free(&seen);
				return -1;
			}
		}
		const bool local = !m->remote && source_mapped(sh->src);
		m->files[s] = (struct model_file){ .path = sh->path, .size = sh->size,
			.st = local ? &sh->st : NULL, .remote = m->remote ? remote_of_source(sh->src) : NULL,
			.src = sh->src, .head = sh->map, .gguf = &sh->gf };
	}
	nameset_free(&seen);
	return 0;
}

/* The model of the open set m (url: model_url's, NULL for a local model), which it
 * closes from then on; NULL out of memory (m then still the caller's). */
static struct ggufs_model *set_model(struct gguf_set *m, const char *url,
                                     char err[GGUF_ERR_MAX])
{
	const struct model_desc d = {
		.path = m->path, .url = url, .st = m->st, .meta = &m->shards[0].gf,
		.tensors = m->tensors, .n_tensors = m->n_tensors,
		.files = m->files, .n_files = m->n_shards, .remote = m->remote,
		.ops = &gguf_ops, .ctx = m,
	};
	struct ggufs_model *model = model_new(&d);
	if (!model)
		gguf_errf(err, "%s: out of memory", m->path);
	return model;
}

struct ggufs_model *model_open_by(const char *path, const struct model_opener *opener,
                                  char err[GGUF_ERR_MAX])
{
	struct gguf_set *m = calloc(1, sizeof *m);
	if (!m) {
		gguf_errf(err, "%s: out of memory", path);
		return NULL;
	}
	m->path = path;
	struct ggufs_model *model = NULL;
	if (open_shards(m, path, NULL, opener, err) == 0 && set_finish(m, err) == 0)
		model = set_model(m, NULL, err);
	if (!model)
		set_free(m);
	return model;
}

struct ggufs_model *model_open(const char *path, char err[GGUF_ERR_MAX])
{
	const struct model_opener o = model_opener_local(false);
	return model_open_by(path, &o, err);
}

/* What the file's own stat gives a local model, for one fetched: read-only, the mounting
 * user's, of size bytes, times from mtime (Last-Modified) or, without one (-1), now. */
static void fetched_stat(struct gguf_set *m, uint64_t size, time_t mtime)
{
	m->st.st_mode = S_IFREG | 0444;
	m->st.st_nlink = 1;
	m->st.st_uid = getuid();
	m->st.st_gid = getgid();
	m->st.st_size = (off_t)size;
	m->st.st_mtim.tv_sec = mtime >= 0 ? mtime : time(NULL);
	m->st.st_atim = m->st.st_ctim = m->st.st_mtim;
}

struct ggufs_model *model_open_remote(const char *url, const char *shown,
                                      const struct remote_opts *o, char err[GGUF_ERR_MAX],
                                      long *status)
{
	char why[GGUF_ERR_MAX];
	if (status)
		*status = 0;
	struct gguf_set *m = calloc(1, sizeof *m);
	if (!m) {
		gguf_errf(err, "%s: out of memory", shown);
		return NULL;
	}
	m->path = shown;
	m->remote = remote_new(o, why);
	if (!m->remote) {
		gguf_errf(err, "%s: %s", shown, why);
		goto fail;
	}
	if (open_shards(m, shown, url, NULL, err) < 0 || set_finish(m, err) < 0)
		goto fail;
	/* the stat is that of the shard named (fetched_stat) */
	const struct model_shard *given = &m->shards[0];
	for (uint32_t s = 0; s < m->n_shards; s++)
		if (strcmp(m->shards[s].path, shown) == 0)
			given = &m->shards[s];
	const struct remote_file *gf = remote_of_source(given->src);
	time_t mtime = remote_mtime(gf);
	/* the hub names the commit it served: summary.txt's source line says which */
	const char *commit = remote_repo_commit(gf);
	if (*commit) {
		size_t n = strlen(shown) + strlen(commit) + 16;
		m->source_buf = malloc(n);
		if (!m->source_buf) {
			gguf_errf(err, "%s: out of memory", shown);
			goto fail;
		}
		snprintf(m->source_buf, n, "%s (commit %s)", shown, commit);
	}
	fetched_stat(m, given->size, mtime);
	struct ggufs_model *model = set_model(m, m->source_buf ? m->source_buf : shown, err);
	if (model)
		return model;
fail:
	if (status)
		*status = m->open_status;
	set_free(m);
	return NULL;
}

/* header_reader.prefix of a stream (ctx: its source): exactly want bytes. */
static const uint8_t *stream_header_prefix(void *ctx, uint64_t want, uint64_t *have,
                                           char why[GGUF_ERR_MAX])
{
	*have = want;
	return stream_prefix(ctx, want, why);
}

struct ggufs_model *model_open_stream(const char *url, const char *shown,
                                      const struct stream_opts *o, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	size_t prefix;
	unsigned no, count;
	struct gguf_set *m = calloc(1, sizeof *m);
	if (!m || !(m->shards = calloc(1, sizeof *m->shards))) {
		gguf_errf(err, "%s: out of memory", shown);
		free(m);
		return NULL;
	}
	m->path = shown;
	struct model_shard *s = &m->shards[0];
	m->n_shards = 1;
	if (model_split_name(shown, &prefix, &no, &count) && count > 1) {
		gguf_errf(err, "%s: the server ignores Range requests, and a split model's shards "
		          "cannot be read without them", shown);
		goto fail;
	}
	if (!(s->path = strdup(shown))) {
		gguf_errf(err, "%s: out of memory", shown);
		goto fail;
	}
	s->src = stream_open(url, o, &s->size, why);
	if (!s->src) {
		gguf_errf(err, "%s: %s", shown, why);
		goto fail;
	}
	if (s->size == 0) {
		gguf_errf(err, "%s: empty file, not GGUF", shown);
		goto fail;
	}
	/* the header, kept apart as it arrives (stream_prefix bounds it; the bytes come
	 * anyway) */
	struct header_reader hr = { stream_header_prefix, s->src, 0, false };
	if (parse_header(s, shown, &hr, err) < 0)
		goto fail;
	uint64_t c;
	if (gguf_kv_uint(gguf_find_kv(&s->gf, "split.count"), &c) && c > 1) {
		gguf_errf(err, "%s: shard of a model split in %" PRIu64 " files: the server ignores "
		          "Range requests, and the shards cannot be read without them", shown, c);
		goto fail;
	}
	if (set_finish(m, err) < 0)
		goto fail;
	fetched_stat(m, s->size, -1);
	struct ggufs_model *model = set_model(m, shown, err);
	if (model)
		return model;
fail:
	set_free(m);
	return NULL;
}
