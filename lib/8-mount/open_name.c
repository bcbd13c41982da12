/* Opening what a name names (open_name.h): a local file, a URL, an hf:// name, an s3://
 * name, or a library of any of them, with the command line's remote options. */
#include "open_name.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_dir.h"
#include "library.h"
#include "libsource.h"
#include "libsource_hub.h"
#include "remote.h"
#include "s3.h"
#include "s3_config.h"
#include "st_model.h"
#include "stream.h"
#include "model.h"
#include "path.h"
#include "token.h"
#include "url.h"

/* The value of the environment variable name as o reads it, or NULL. */
static const char *open_name_env(const struct open_name_opts *o, const char *name)
{
	return o->env ? o->env(name) : NULL;
}

/* Tells o's note sink one line (printf-style), if there is one. */
__attribute__((format(printf, 2, 3)))
static void open_name_note(const struct open_name_opts *o, const char *fmt, ...)
{
	if (!o->note)
		return;
	char line[GGUF_ERR_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	o->note(o->note_arg, line);
}

/* The remote options every remote model of o shares (the command line's). */
static struct remote_opts open_name_remote_opts(const struct open_name_opts *o)
{
	return (struct remote_opts){ .cafile = o->cafile, .timeout = o->timeout,
	                             .cache_size = o->cache_size,
	                             .cache_dir = cache_dir_default(o->cache_dir),
	                             .cache_max = o->cache_max,
	                             .waiting = o->waiting, .waiting_arg = o->waiting_arg,
	                             .leaving = o->leaving };
}

/* An hf:// name parsed, with what the hub's API is reached with for it (hub_http_make:
 * $HF_ENDPOINT, o's token or $HF_TOKEN) and o's remote options, which a hub library's
 * files are read with (the disk cache as for any remote model: -o cache_dir=none is
 * none, not a folder of that name). */
struct open_name_hub {
	struct hub_name n;
	struct hub_http http;
	struct remote_opts ro;
};

/* Parses name into h and makes its access for o. False with one line in err (nothing to
 * free); else open_name_hub_free(h) follows. */
static bool open_name_hub(const char *name, const struct open_name_opts *o,
                          struct open_name_hub *h, char err[GGUF_ERR_MAX])
{
	if (!hub_name_parse(name, &h->n, err))
		return false;
	h->ro = open_name_remote_opts(o);
	if (hub_http_make(&h->http, open_name_env(o, "HF_ENDPOINT"), o->token_file,
	                  open_name_env(o, "HF_TOKEN"), o->cafile, o->timeout, &h->ro, err))
		return true;
	hub_name_free(&h->n);
	return false;
}

static void open_name_hub_free(struct open_name_hub *h)
{
	hub_http_free(&h->http);
	hub_name_free(&h->n);
}

/* For hf://OWNER/REPO:QUANT, the one model's pinned hf:// name, said as a note. NULL
 * with one line in err. */
static char *open_name_quant(const char *name, const struct open_name_opts *o,
                             char err[GGUF_ERR_MAX])
{
	struct open_name_hub h;
	if (!open_name_hub(name, o, &h, err))
		return NULL;
	char *pinned = hub_quant_model(&h.n, &h.http, err);
	if (pinned)
		open_name_note(o, "%s is %s", name, pinned);
	open_name_hub_free(&h);
	return pinned;
}

/* For a browser's https://HOST/OWNER/REPO/blob/REV/PATH (the page that shows the file),
 * its resolve/ form (malloc'ed), said as a note; NULL when url is of no such page, or
 * out of memory (*oom). */
static char *open_name_blob(const char *url, const struct open_name_opts *o, bool *oom)
{
	*oom = false;
	const char *p = strstr(url, "://");
	const char *path = p ? strchr(p + 3, '/') : NULL;
	if (!path || strncasecmp(url, "http", 4) != 0)
		return NULL;
	const char *owner_end = strchr(path + 1, '/');
	const char *repo_end = owner_end ? strchr(owner_end + 1, '/') : NULL;
	if (!repo_end || strncmp(repo_end, "/blob/", 6) != 0 || owner_end == path + 1 ||
	    repo_end == owner_end + 1)
		return NULL;
	size_t n = strlen(url) + 8;
	char *resolved = malloc(n);
	if (!resolved) {
		*oom = true;
		return NULL;
	}
	snprintf(resolved, n, "%.*s/resolve/%s", (int)(repo_end - url), url, repo_end + 6);
	char *shown = url_display(resolved);
	open_name_note(o, "note: %s is the hub's page of the file: reading %s", url,
	               shown ? shown : "its resolve/ URL");
	free(shown);
	return resolved;
}

/* The whole of the remote file at url (its name as shown: shown) fetched with ro into
 * *b: true, or false with one line in err. */
static bool open_name_fetch(const char *url, const char *shown, const struct remote_opts *ro,
                            struct open_name_bytes *b, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	struct remote *r = remote_new(ro, why);
	long status;
	struct remote_file *f = r ? remote_open(r, url, shown, REMOTE_FIRST_BYTES, why, &status)
	                          : NULL;
	struct source *src = f ? remote_source(f) : NULL;
	bool ok = false;
	if (src) {
		const uint64_t size = remote_size(f);
		b->data = size <= SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
		b->size = size;
		snprintf(why, sizeof why, "out of memory for its %llu bytes", (unsigned long long)size);
		ok = b->data != NULL;
		for (uint64_t off = 0; ok && off < size;) {
			const uint64_t k = size - off < (16u << 20) ? size - off : (16u << 20);
			ok = source_read(src, off, k, b->data + off, why) == 0;
			off += k;
		}
	}
	if (!ok) {
		gguf_errf(err, "%s: %s", shown, why[0] ? why : "cannot be read");
		free(b->data);
		b->data = NULL;
	}
	source_close(src);
	remote_free(r);
	return ok;
}

/* Opens the remote model at name (http, https or hf://, expanded with $HF_ENDPOINT; the
 * token as token_choose says), or with bytes not NULL reads the whole file into it
 * instead (NULL returned). *shown gets the URL as it may be shown. NULL with one line
 * in err. */
static struct ggufs_model *open_name_remote(const char *name, const struct open_name_opts *o,
                                            char **shown, struct open_name_bytes *bytes,
                                            char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	struct ggufs_model *m = NULL;
	char *token = NULL;
	struct url_rev rev;
	const char *endpoint = open_name_env(o, "HF_ENDPOINT");
	char *url = url_expand(name, endpoint, &rev, why, sizeof why);
	const bool hf = strncasecmp(name, "hf://", 5) == 0;
	*shown = hf ? strdup(name) : url_display(name);
	if (!url || !*shown) {
		gguf_errf(err, "%s: %s", *shown ? *shown : "the URL given", url ? "out of memory" : why);
		goto out;
	}
	struct remote_opts ro = open_name_remote_opts(o);
	ro.hub_rev = rev;
	ro.cancelled = o->cancelled;   /* a mount's transfers end with it */
	ro.cancel_arg = o->cancel_arg;
	/* which server gets which token: token.h */
	if (token_choose(url, hf, endpoint, o->token_file, open_name_env(o, "HF_TOKEN"), &ro,
	                 &token, err) < 0)
		goto out;
	ro.token = token;
	if (bytes) {
		open_name_fetch(url, *shown, &ro, bytes, err);
		goto out;
	}
	long status;
	m = model_open_remote(url, *shown, &ro, err, &status);
	/* a server that ignores Range requests (a 200 to the first one) is read as one
	 * stream where the caller reads in order; a URL of a folder is not a file */
	if (!m && status == 200 && o->stream_ok && !url_names_folder(url)) {
		struct stream_opts so = { .token = token, .cafile = ro.cafile, .timeout = ro.timeout };
		m = model_open_stream(url, *shown, &so, err);
	}
out:
	token_free(token);
	free(url);
	return m;
}

/* Opens s3://BUCKET/KEY (s3_config_access), or with bytes not NULL reads it whole into
 * it (NULL returned). *shown gets the name as given (it holds no secret). NULL with one
 * line in err. */
static struct ggufs_model *open_name_s3(const char *name, const struct open_name_opts *o,
                                        char **shown, struct open_name_bytes *bytes,
                                        char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	struct s3_config_access a;
	*shown = strdup(name);
	if (!*shown) {
		gguf_errf(err, "out of memory");
		return NULL;
	}
	if (s3_config_access(&a, name, o->env, o->s3_anonymous, o->s3_virtual_host, err) < 0)
		return NULL;
	struct remote_opts ro = open_name_remote_opts(o);
	ro.s3 = &a.s3;
	ro.cancelled = o->cancelled;   /* a mount's transfers end with it */
	ro.cancel_arg = o->cancel_arg;
	struct ggufs_model *m = NULL;
	char *url = s3_object_url(a.endpoint, a.bucket, a.key, a.virtual_host, why, sizeof why);
	if (!url)
		gguf_errf(err, "%s: %s", *shown, why);
	else if (bytes)
		open_name_fetch(url, *shown, &ro, bytes, err);
	else
		m = model_open_remote(url, *shown, &ro, err, NULL);
	free(url);
	s3_config_access_free(&a);
	return m;
}

bool open_name_outtype_ok(const char *name)
{
	enum st_outtype out;
	return st_outtype_parse(name, &out);
}

char *open_name_shown(const char *name)
{
	if (strncasecmp(name, "hf://", 5) == 0 || !url_is_remote(name))
		return NULL;
	return url_display(name);
}

char *open_name_scrub_args(int argc, char *argv[], const char **name)
{
	char *shown = *name ? open_name_shown(*name) : NULL;
	if (!shown)
		return NULL;
	char *copy = strdup(*name);
	if (!copy) {
		free(shown);
		return NULL;
	}
	const size_t k = strlen(shown);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], copy) != 0)
			continue;
		/* the argument's own bytes only: the next one follows its NUL */
		const size_t n = strlen(argv[i]), kept = k < n ? k : n;
		memcpy(argv[i], shown, kept);
		memset(argv[i] + kept, 0, n - kept);
	}
	free(shown);
	*name = copy;
	return copy;
}

struct ggufs_model *open_name_model(const char *name, const struct open_name_opts *o,
                                    char **shown, char err[GGUF_ERR_MAX])
{
	*shown = NULL;
	struct ggufs_model *m = NULL;
	const enum name_kind kind = name_kind_of(name);
	bool oom = false;
	char *rewritten = NULL;
	switch (kind) {
	case NAME_KIND_S3_OBJECT:
	case NAME_KIND_S3_LIBRARY:
		m = open_name_s3(name, o, shown, NULL, err);
		break;
	case NAME_KIND_HUB_QUANT:
		rewritten = open_name_quant(name, o, err);
		if (rewritten)
			m = open_name_remote(rewritten, o, shown, NULL, err);
		break;
	case NAME_KIND_URL:
		rewritten = open_name_blob(name, o, &oom);
		if (oom)
			gguf_errf(err, "out of memory");
		else
			m = open_name_remote(rewritten ? rewritten : name, o, shown, NULL, err);
		break;
	case NAME_KIND_HUB_FILE:
	case NAME_KIND_HUB_LIBRARY:
		m = open_name_remote(name, o, shown, NULL, err);
		break;
	case NAME_KIND_SCHEME:
		gguf_errf(err, "%s: unsupported URL scheme '%.*s' (ggufs reads http://, https://, "
		          "hf:// and s3:// URLs, or a local file)", name,
		          (int)name_kind_scheme_len(name), name);
		break;
	case NAME_KIND_MODEL_FOLDER: {
		enum st_outtype out = ST_OUT_AUTO;
		const struct model_opener opener = model_opener_local(o->confine);
		if (o->outtype && !st_outtype_parse(o->outtype, &out))
			gguf_errf(err, "-o outtype=%s: not one of " OUTTYPES, o->outtype);
		else
			m = st_model_open(name, out, &opener, err);
		break;
	}
	case NAME_KIND_FILE:
	case NAME_KIND_FOLDER: {
		/* read by others under the named file's owner and mode: so must its shards be */
		const struct model_opener opener = model_opener_local(o->confine);
		m = model_open_by(name, &opener, err);
		break;
	}
	}
	free(rewritten);
	if (!m) {
		free(*shown);
		*shown = NULL;
	}
	return m;
}

/* The source of the hub library name names, its revision resolved and folder listed
 * with o's token, CA file and remote options; its transfers end when o->cancelled. NULL
 * with one line in err. */
static struct lib_source *open_name_hub_source(const char *name, const struct open_name_opts *o,
                                               char err[GGUF_ERR_MAX])
{
	struct open_name_hub h;
	if (!open_name_hub(name, o, &h, err))
		return NULL;
	h.ro.cancelled = o->cancelled;
	h.ro.cancel_arg = o->cancel_arg;
	struct lib_source *src = lib_source_hub(&h.n, &h.http, &h.ro, err);
	open_name_hub_free(&h);
	return src;
}

/* The source of the s3:// bucket or prefix name names (its credentials found as for an
 * object). NULL with one line in err. */
static struct lib_source *open_name_s3_source(const char *name, const struct open_name_opts *o,
                                              char err[GGUF_ERR_MAX])
{
	struct s3_config_access a;
	if (s3_config_access(&a, name, o->env, o->s3_anonymous, o->s3_virtual_host, err) < 0)
		return NULL;
	struct remote_opts ro = open_name_remote_opts(o);
	ro.s3 = &a.s3;
	struct lib_source *src = lib_source_s3(&ro, a.endpoint, a.bucket, a.key, a.virtual_host,
	                                       err);
	s3_config_access_free(&a);
	return src;
}

/* The source of the local folder name (confined: lib_source_local's), unless it holds
 * mountpoint (absolute, or NULL). NULL with one line in err. */
static struct lib_source *open_name_local_source(const char *name, bool confine,
                                                 const char *mountpoint,
                                                 char err[GGUF_ERR_MAX])
{
	if (mountpoint) {
		char *root = realpath(name, NULL);
		char *mnt = realpath(mountpoint, NULL);
		const bool inside = root && mnt && path_within(mnt, root);
		free(root);
		free(mnt);
		if (inside) {
			gguf_errf(err, "%s: the mount point %s is inside the library's folder", name,
			          mountpoint);
			return NULL;
		}
	}
	return lib_source_local(name, confine, err);
}

struct library *open_name_library(const char *name, enum name_kind kind,
                                  const struct open_name_opts *o, const char *mountpoint,
                                  const struct tree_kit *kit, char err[GGUF_ERR_MAX])
{
	struct lib_source *src = kind == NAME_KIND_HUB_LIBRARY ? open_name_hub_source(name, o, err)
	                       : kind == NAME_KIND_S3_LIBRARY ? open_name_s3_source(name, o, err)
	                       : open_name_local_source(name, o->confine, mountpoint, err);
	return src ? library_open(src, kit, err) : NULL;
}

/* The whole of the local file path into *b: true, or false with one line in err. */
static bool open_name_read_local(const char *path, struct open_name_bytes *b,
                                 char err[GGUF_ERR_MAX])
{
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		gguf_errf(err, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		gguf_errf(err, "%s: not a regular file", path);
		close(fd);
		return false;
	}
	b->size = (uint64_t)st.st_size;
	b->data = (uint64_t)st.st_size <= SIZE_MAX ? malloc(st.st_size ? (size_t)st.st_size : 1)
	                                           : NULL;
	if (!b->data) {
		gguf_errf(err, "%s: out of memory for its %llu bytes", path,
		          (unsigned long long)st.st_size);
		close(fd);
		return false;
	}
	uint64_t got = 0;
	while (got < b->size) {
		const ssize_t n = read(fd, b->data + got, b->size - got > (1u << 30) ? (1u << 30)
		                                                                     : b->size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			gguf_errf(err, "%s: %s", path, n < 0 ? strerror(errno)
			                                     : "the file shrank while it was read");
			break;
		}
		got += (uint64_t)n;
	}
	close(fd);
	if (got < b->size) {
		free(b->data);
		b->data = NULL;
		return false;
	}
	return true;
}

bool open_name_bytes(const char *name, const struct open_name_opts *o,
                     struct open_name_bytes *b, char err[GGUF_ERR_MAX])
{
	*b = (struct open_name_bytes){ 0 };
	char *shown = NULL;
	switch (name_kind_of(name)) {
	case NAME_KIND_FILE:
		return open_name_read_local(name, b, err);
	case NAME_KIND_URL:
	case NAME_KIND_HUB_FILE:
	case NAME_KIND_HUB_LIBRARY:   /* hf://OWNER/REPO/PATH of another suffix than .gguf */
		open_name_remote(name, o, &shown, b, err);
		break;
	case NAME_KIND_S3_OBJECT:
		open_name_s3(name, o, &shown, b, err);
		break;
	case NAME_KIND_SCHEME:
		gguf_errf(err, "%s: unsupported URL scheme '%.*s' (ggufs reads http://, https://, "
		          "hf:// and s3:// URLs, or a local file)", name,
		          (int)name_kind_scheme_len(name), name);
		break;
	default:
		gguf_errf(err, "%s: not one file", name);
		break;
	}
	free(shown);
	return b->data != NULL;
}
