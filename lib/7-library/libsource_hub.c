/* A library's source in a hub repository, pinned to one commit (libsource_hub.h). */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <xxhash.h>

#include "copy_or_null.h"
#include "libsource_hub.h"
#include "model.h"
#include "source.h"
#include "token.h"

struct hub_source {
	struct hub_http http;     /* its strings owned */
	char *repo, *folder;
	struct hub_listing l;
	struct remote_opts ro;    /* for models and plain files; its strings owned */
	pthread_mutex_t lock;     /* plain */
	struct remote *plain;     /* the fetcher of plain files, made at the first */
};

void hub_name_free(struct hub_name *n)
{
	free(n->repo);
	free(n->rev);
	free(n->path);
	free(n->quant);
	memset(n, 0, sizeof *n);
}

bool hub_name_parse(const char *given, struct hub_name *n, char err[GGUF_ERR_MAX])
{
	memset(n, 0, sizeof *n);
	if (strncasecmp(given, "hf://", 5) != 0) {
		gguf_errf(err, "%s: not an hf:// name", given);
		return false;
	}
	const char *p = given + 5;
	const char *slash = strchr(p, '/');
	if (!slash || slash == p) {
		gguf_errf(err, "%s: no OWNER/REPO", given);
		return false;
	}
	const char *repo_end = slash + 1 + strcspn(slash + 1, "/@:");
	if (repo_end == slash + 1) {
		gguf_errf(err, "%s: no REPO after OWNER/", given);
		return false;
	}
	n->repo = strndup(p, (size_t)(repo_end - p));
	const char *q = repo_end;
	if (*q == '@') {
		size_t len = strcspn(q + 1, "/:");
		n->rev = len ? strndup(q + 1, len) : NULL;
		if (!len) {
			gguf_errf(err, "%s: an empty REVISION after @", given);
			hub_name_free(n);
			return false;
		}
		q += 1 + len;
	}
	if (*q == ':' ) {
		n->quant = strdup(q + 1);
		if (!q[1] || strchr(q + 1, '/')) {
			gguf_errf(err, "%s: a :QUANT tag is the name's end (hf://OWNER/REPO:QUANT)",
			         given);
			hub_name_free(n);
			return false;
		}
		q += strlen(q);
	}
	const char *path = *q == '/' ? q + 1 : q;
	size_t plen = strlen(path);
	while (plen && path[plen - 1] == '/')
		plen--;
	n->path = strndup(path, plen);
	if (!n->rev)
		n->rev = strdup("main");
	if (!n->repo || !n->rev || !n->path || (q[0] == ':' && !n->quant)) {
		gguf_errf(err, "out of memory");
		hub_name_free(n);
		return false;
	}
	for (const char *s = n->path; *s; ) {
		size_t len = strcspn(s, "/");
		if (len == 0 || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
			gguf_errf(err, "%s: an empty, '.' or '..' part in the path", given);
			hub_name_free(n);
			return false;
		}
		s += len + (s[len] == '/');
	}
	return true;
}

bool hub_http_make(struct hub_http *http, const char *endpoint_env, const char *token_file,
                   const char *hf_token, const char *cafile, unsigned timeout,
                   struct remote_opts *ro, char err[GGUF_ERR_MAX])
{
	memset(http, 0, sizeof *http);
	char *endpoint = url_hub_endpoint(endpoint_env);
	char *token = NULL;
	if (!endpoint) {
		gguf_errf(err, "out of memory");
		return false;
	}
	/* the hub's API and files are the endpoint's: HF_TOKEN goes there (token.h) */
	if (token_choose(endpoint, true, endpoint, token_file, hf_token, ro, &token, err) < 0) {
		free(endpoint);
		return false;
	}
	*http = (struct hub_http){ .endpoint = endpoint, .token = token, .cafile = cafile,
	                           .timeout = timeout };
	ro->token = token;
	return true;
}

void hub_http_free(struct hub_http *http)
{
	token_free((char *)http->token);
	free((char *)http->endpoint);
	memset(http, 0, sizeof *http);
}

bool hub_name_is_library(const struct hub_name *n)
{
	size_t len = strlen(n->path);
	return !n->quant && !(len >= 5 && strcasecmp(n->path + len - 5, ".gguf") == 0);
}

/* The first file at or after from whose path's first n bytes do not come before
 * prefix's (or, past, after them) in the sorted listing: its index. */
static size_t bound(const struct hub_source *hs, size_t from, const char *prefix, size_t n,
                    bool past)
{
	size_t lo = from, hi = hs->l.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strncmp(hs->l.files[mid].path, prefix, n);
		if (c < 0 || (past && c == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* What the library shows of an entry: read-only, owned by the mounting user, dated
 * date (a file's last commit's, when the listing gave it) or else the commit's (a
 * folder's always: the listing names a folder once for each file under it). */
static void entry_stat(const struct hub_source *hs, struct stat *st, bool dir, uint64_t size,
                       time_t date)
{
	memset(st, 0, sizeof *st);
	st->st_mode = dir ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_size = (off_t)size;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_nlink = dir ? 2 : 1;
	st->st_mtim.tv_sec = date ? date : hs->l.date;
	st->st_atim = st->st_ctim = st->st_mtim;
}

static uint64_t version_of(const char *path, const struct hub_file *f)
{
	XXH3_state_t *s = XXH3_createState();
	if (!s)
		return 0;
	XXH3_64bits_reset(s);
	XXH3_64bits_update(s, path, strlen(path));
	if (f) {
		if (f->sha256)
			XXH3_64bits_update(s, f->sha256, strlen(f->sha256));
		XXH3_64bits_update(s, &f->size, sizeof f->size);
	}
	uint64_t v = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	return v;
}

/* The entries of folder dir: the files and folders of the listing whose paths are dir's
 * and one part more (hub_list names every folder), each lending its path. The paths
 * under a subfolder are skipped by a binary search past them. */
static int hub_list_dir(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                        uint64_t *version, char err[GGUF_ERR_MAX])
{
	struct hub_source *hs = ctx;
	*out = NULL;
	*n = 0;
	*version = 1;   /* pinned: a folder never changes */
	size_t dlen = strlen(dir);
	char *prefix = malloc(dlen + 2);
	if (!prefix) {
		gguf_errf(err, "out of memory");
		return -ENOMEM;
	}
	snprintf(prefix, dlen + 2, "%s%s", dir, dlen ? "/" : "");
	const size_t plen = strlen(prefix), first = bound(hs, 0, prefix, plen, false);
	size_t count = 0;
	/* counted first, then made: the array is as long as the folder, no longer */
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && count && !(*out = calloc(count, sizeof **out))) {
			free(prefix);
			gguf_errf(err, "out of memory");
			return -ENOMEM;
		}
		for (size_t i = first; i < hs->l.n; ) {
			const struct hub_file *f = &hs->l.files[i];
			if (strncmp(f->path, prefix, plen) != 0)
				break;
			const char *rest = f->path + plen;
			const char *slash = strchr(rest, '/');
			if (slash) {   /* under a subfolder, which has its own entry */
				i = bound(hs, i, f->path, (size_t)(slash - f->path) + 1, true);
				continue;
			}
			if (pass == 1) {
				struct lib_entry *e = &(*out)[(*n)++];
				e->path = f->path;
				e->name = f->path + plen;
				e->lent = true;
				e->type = f->dir ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
				e->version = version_of(f->path, f->dir ? NULL : f);
				entry_stat(hs, &e->st, f->dir, f->dir ? 0 : f->size, f->dir ? 0 : f->date);
			} else {
				count++;
			}
			i++;
		}
	}
	free(prefix);
	return 0;
}

static bool hub_unchanged(void *ctx, const char *dir, uint64_t version)
{
	(void)ctx, (void)dir, (void)version;
	return true;
}

static int hub_stat(void *ctx, const char *path, struct lib_entry *e)
{
	struct hub_source *hs = ctx;
	const struct hub_file *f = hub_listing_find(&hs->l, path);
	memset(e, 0, sizeof *e);
	if (f) {
		e->type = f->dir ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
		e->version = version_of(f->path, f->dir ? NULL : f);
		entry_stat(hs, &e->st, f->dir, f->size, f->dir ? 0 : f->date);
		return 0;
	}
	if (*path)
		return -ENOENT;
	/* the folder listed itself */
	entry_stat(hs, &e->st, true, 0, 0);
	e->type = LIB_ENTRY_DIR;
	e->version = 1;
	return 0;
}

/* ENDPOINT/REPO/resolve/COMMIT/FOLDER/path (path's bytes escaped), malloc'ed, and where
 * the commit lies in it (ro's hub_rev). */
static char *resolve_url(const struct hub_source *hs, const char *path, struct url_rev *rev)
{
	size_t n = strlen(hs->folder) + strlen(path) + 2;
	char *full = malloc(n);
	if (!full)
		return NULL;
	snprintf(full, n, "%s%s%s", hs->folder, *hs->folder ? "/" : "", path);
	char *esc = hub_escape(full, true);
	free(full);
	if (!esc)
		return NULL;
	n = strlen(hs->http.endpoint) + strlen(hs->repo) + strlen(esc) + 80;
	char *url = malloc(n);
	if (url) {
		int at = snprintf(url, n, "%s/%s/resolve/", hs->http.endpoint, hs->repo);
		snprintf(url + at, n - (size_t)at, "%s/%s", hs->l.commit, esc);
		rev->at = (size_t)at;
		rev->len = strlen(hs->l.commit);
	}
	free(esc);
	return url;
}

static char *hub_model_name(void *ctx, const char *path);

static struct ggufs_model *hub_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	struct hub_source *hs = ctx;
	struct remote_opts ro = hs->ro;
	char *url = resolve_url(hs, path, &ro.hub_rev);
	/* named as a mount of the one file would name it, pinned */
	char *shown = hub_model_name(ctx, path);
	if (!url || !shown) {
		free(url);
		free(shown);
		gguf_errf(err, "%s: out of memory", path);
		return NULL;
	}
	struct ggufs_model *m = shown ? model_open_remote(url, shown, &ro, err, NULL) : NULL;
	free(url);
	free(shown);
	return m;
}

/* An open plain file: its bytes through the shared fetcher, and its size. */
struct hub_plain {
	struct source *src;
	uint64_t size;
};

static int hub_open_file(void *ctx, const char *path, uint64_t version, void **file,
                         char why[GGUF_ERR_MAX])
{
	(void)version;   /* a commit's files never change */
	struct hub_source *hs = ctx;
	const struct hub_file *f = hub_listing_find(&hs->l, path);
	char err[GGUF_ERR_MAX];
	*file = NULL;
	if (!f || f->dir)
		return -ENOENT;
	pthread_mutex_lock(&hs->lock);
	if (!hs->plain)
		hs->plain = remote_new(&hs->ro, err);
	struct remote *r = hs->plain;
	pthread_mutex_unlock(&hs->lock);
	struct hub_plain *p = calloc(1, sizeof *p);
	struct remote_opts ro = hs->ro;
	char *url = resolve_url(hs, path, &ro.hub_rev);
	if (!r || !p || !url) {
		free(p);
		free(url);
		if (r)
			gguf_errf(why, "%s: out of memory", path);
		else
			gguf_errf(why, "%s: %s", path, err);
		return r ? -ENOMEM : -EIO;
	}
	long status = 0;
	p->size = f->size;
	struct remote_file *rf = f->size ? remote_open(r, url, NULL,
	                                               f->size < 65536 ? f->size : 65536,
	                                               err, &status) : NULL;
	free(url);
	if (f->size && !rf) {
		free(p);
		gguf_errf(why, "%s: %s", path, err);
		return -EIO;
	}
	p->src = rf ? remote_source(rf) : NULL;
	*file = p;
	return 0;
}

static int64_t hub_read_file(void *ctx, void *file, char *buf, uint64_t len, uint64_t off)
{
	(void)ctx;
	struct hub_plain *p = file;
	if (off >= p->size)
		return 0;
	uint64_t n = p->size - off < len ? p->size - off : len;
	int r = source_read(p->src, off, n, buf, NULL);
	return r < 0 ? r : (int64_t)n;
}

static void hub_close_file(void *ctx, void *file)
{
	(void)ctx;
	struct hub_plain *p = file;
	if (p->src)
		source_close(p->src);
	free(p);
}

static const char *hub_sha256(void *ctx, const char *path)
{
	const struct hub_source *hs = ctx;
	const struct hub_file *f = hub_listing_find(&hs->l, path);
	return f ? f->sha256 : NULL;
}

static char *hub_model_name(void *ctx, const char *path)
{
	const struct hub_source *hs = ctx;
	size_t n = strlen(hs->repo) + strlen(hs->folder) + strlen(path) + 80;
	char *name = malloc(n);
	if (name)
		snprintf(name, n, "hf://%s@%s/%s%s%s", hs->repo, hs->l.commit, hs->folder,
		         *hs->folder ? "/" : "", path);
	return name;
}

/* Frees what a hub source owns; the token wiped first. */
static void hub_free(void *ctx)
{
	struct hub_source *hs = ctx;
	if (hs->plain)
		remote_free(hs->plain);
	hub_listing_free(&hs->l);
	token_free((char *)hs->http.token);
	free((char *)hs->http.endpoint);
	free((char *)hs->http.cafile);
	free((char *)hs->ro.cache_dir);
	free(hs->repo);
	free(hs->folder);
	pthread_mutex_destroy(&hs->lock);
	free(hs);
}

static const struct lib_source_ops hub_ops = {
	.list = hub_list_dir,
	.unchanged = hub_unchanged,
	.stat = hub_stat,
	.open_model = hub_open_model,
	.open_file = hub_open_file,
	.read_file = hub_read_file,
	.close_file = hub_close_file,
	.sha256 = hub_sha256,
	.free = hub_free,
};

struct lib_source *lib_source_hub(const struct hub_name *n, const struct hub_http *http,
                                  const struct remote_opts *ro, char err[GGUF_ERR_MAX])
{
	struct hub_source *hs = calloc(1, sizeof *hs);
	struct lib_source *s = calloc(1, sizeof *s);
	bool ok = hs && s;
	if (ok) {
		pthread_mutex_init(&hs->lock, NULL);
		hs->http.endpoint = copy_or_null(http->endpoint, &ok);
		hs->http.token = copy_or_null(http->token, &ok);
		hs->http.cafile = copy_or_null(http->cafile, &ok);
		hs->http.timeout = http->timeout;
		hs->ro = *ro;
		hs->ro.token = hs->http.token;
		hs->ro.cafile = hs->http.cafile;
		hs->ro.cache_dir = copy_or_null(ro->cache_dir, &ok);
		hs->repo = copy_or_null(n->repo, &ok);
		hs->folder = copy_or_null(n->path, &ok);
	}
	if (!ok) {
		gguf_errf(err, "out of memory");
		if (hs)
			hub_free(hs);
		free(s);
		return NULL;
	}
	char commit[65];
	time_t date;
	long status;
	if (hub_resolve(&hs->http, n->repo, n->rev, commit, &date, &status, err) < 0 ||
	    hub_list(&hs->http, n->repo, commit, n->path, &hs->l, &status, err) < 0) {
		hub_free(hs);
		free(s);
		return NULL;
	}
	hs->l.date = date;
	s->ops = &hub_ops;
	s->ctx = hs;
	s->pinned = true;
	return s;
}

/* The tag of a model file name: what follows its last '-' or '.' before ".gguf" (and
 * before a split set's -0000K-of-0000N), or NULL; into buf. */
static const char *tag_of(const char *name, char *buf, size_t size)
{
	size_t len = strlen(name), prefix;
	unsigned no, count;
	if (len < 6 || strcasecmp(name + len - 5, ".gguf") != 0)
		return NULL;
	len = model_split_name(name, &prefix, &no, &count) && count > 1 ? prefix : len - 5;
	size_t start = len;
	while (start && name[start - 1] != '-' && name[start - 1] != '.' && name[start - 1] != '/')
		start--;
	if (start == len || len - start >= size)
		return NULL;
	memcpy(buf, name + start, len - start);
	buf[len - start] = 0;
	return buf;
}

char *hub_quant_model(const struct hub_name *n, const struct hub_http *http,
                      char err[GGUF_ERR_MAX])
{
	char commit[65];
	long status;
	struct hub_listing l;
	if (hub_resolve(http, n->repo, n->rev, commit, NULL, &status, err) < 0 ||
	    hub_list(http, n->repo, commit, n->path, &l, &status, err) < 0)
		return NULL;
	const struct hub_file *match = NULL;
	size_t matches = 0;
	char tags[512] = "";
	size_t tl = 0;
	for (size_t i = 0; i < l.n; i++) {
		char tag[128];
		size_t prefix;
		unsigned no, count;
		const char *base = strrchr(l.files[i].path, '/');
		base = base ? base + 1 : l.files[i].path;
		/* one model per split set: its first shard speaks for it */
		if (l.files[i].dir || !tag_of(base, tag, sizeof tag) ||
		    (model_split_name(base, &prefix, &no, &count) && count > 1 && no != 1))
			continue;
		if (!strstr(tags, tag) && tl + strlen(tag) + 3 < sizeof tags)
			tl += (size_t)snprintf(tags + tl, sizeof tags - tl, "%s%s", tl ? ", " : "", tag);
		if (strcasecmp(tag, n->quant) == 0) {
			match = &l.files[i];
			matches++;
		}
	}
	char *out = NULL;
	if (matches == 1) {
		size_t len = strlen(n->repo) + strlen(commit) + strlen(n->path) + strlen(match->path) + 16;
		out = malloc(len);
		if (out)
			snprintf(out, len, "hf://%s@%s/%s%s%s", n->repo, commit, n->path,
			         *n->path ? "/" : "", match->path);
		else
			gguf_errf(err, "out of memory");
	} else {
		gguf_errf(err, "hf://%s:%s: %s model of the repository has the tag %s "
		         "(its tags: %s)", n->repo, n->quant, matches ? "more than one" : "no", n->quant,
		         tags[0] ? tags : "none");
	}
	hub_listing_free(&l);
	return out;
}
