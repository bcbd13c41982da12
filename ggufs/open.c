/* Opening the model the command line names: a local file, or a URL (http, https,
 * hf://, s3://) with its token or AWS credentials, CA file, cache and timeout options. Shared by a mount and by
 * --check, so that both open a model alike. */
#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"
#include "name_kind.h"
#include "libsource_hub.h"
#include "remote.h"
#include "s3.h"
#include "s3_config.h"
#include "libsource.h"
#include "token.h"
#include "url.h"

/* remote_opts.waiting: what a remote mount waits for, on the terminal. */
static void print_waiting(void *arg, const char *line)
{
	(void)arg;
	log_errf("%s", line);
}

/* $HF_ENDPOINT, or the hub's own, without a trailing '/': malloc'ed, or NULL. */
static char *hub_endpoint(void)
{
	const char *e = getenv("HF_ENDPOINT");
	char *d = strdup(e && *e ? e : HF_ENDPOINT_DEFAULT);
	for (size_t n = d ? strlen(d) : 0; n > 0 && d[n - 1] == '/'; n--)
		d[n - 1] = 0;
	return d;
}

/* What the hub's API is reached with for o: its endpoint and o's token (for hf://),
 * CA file and timeout into http (endpoint and token malloc'ed: hub_http_free), and o's
 * remote options into ro. False after one line on stderr. */
static bool hub_access(const struct options *o, struct hub_http *http, struct remote_opts *ro)
{
	memset(http, 0, sizeof *http);
	*ro = (struct remote_opts){ .cafile = o->cafile, .timeout = o->timeout,
	                            .cache_size = o->cache_size, .cache_dir = o->cache_dir,
	                            .cache_max = o->cache_max,
	                            .waiting = isatty(STDERR_FILENO) ? print_waiting : NULL };
	char err[GGUF_ERR_MAX];
	char *endpoint = hub_endpoint();
	char *token = NULL;
	if (!endpoint) {
		log_errf("out of memory");
		return false;
	}
	/* the hub's API and files are the endpoint's: HF_TOKEN goes there (token.h) */
	if (token_choose(endpoint, true, endpoint, o->token_file, getenv("HF_TOKEN"), ro, &token,
	                 err) < 0) {
		log_errf("%s", err);
		free(endpoint);
		return false;
	}
	*http = (struct hub_http){ .endpoint = endpoint, .token = token, .cafile = o->cafile,
	                           .timeout = o->timeout };
	ro->token = token;
	return true;
}

static void hub_http_free(struct hub_http *http)
{
	token_free((char *)http->token);
	free((char *)http->endpoint);
}

struct lib_source *open_hub_library(const struct options *o, bool (*cancelled)(void *),
                                    void *arg)
{
	char err[GGUF_ERR_MAX];
	struct hub_name n;
	if (!hub_name_parse(o->model, &n, err)) {
		log_errf("%s", err);
		return NULL;
	}
	struct hub_http http;
	struct remote_opts ro;
	struct lib_source *src = NULL;
	if (hub_access(o, &http, &ro)) {
		ro.cancelled = cancelled;
		ro.cancel_arg = arg;
		src = lib_source_hub(&n, &http, &ro, err);
		if (!src)
			log_errf("%s", err);
		hub_http_free(&http);
	}
	hub_name_free(&n);
	return src;
}

/* For hf://OWNER/REPO:QUANT, the one model's pinned hf:// name (malloc'ed: the caller
 * frees it), said on stderr; for a browser's https://HOST/OWNER/REPO/blob/REV/PATH, its
 * resolve/ form, with a note; else NULL with *failed false. NULL with *failed after one
 * line on stderr. */
static char *hub_rewrite(const struct options *o, bool *failed)
{
	*failed = false;
	char err[GGUF_ERR_MAX];
	if (strncasecmp(o->model, "hf://", 5) == 0) {
		struct hub_name n;
		if (!hub_name_parse(o->model, &n, err) || !n.quant) {
			if (n.repo)
				hub_name_free(&n);
			return NULL;
		}
		struct hub_http http;
		struct remote_opts ro;
		char *name = NULL;
		*failed = true;
		if (hub_access(o, &http, &ro)) {
			name = hub_quant_model(&n, &http, err);
			if (name) {
				log_errf("%s is %s", o->model, name);
				*failed = false;
			} else {
				log_errf("%s", err);
			}
			hub_http_free(&http);
		}
		hub_name_free(&n);
		return name;
	}
	/* https://HOST/OWNER/REPO/blob/REV/PATH: the page that shows the file */
	const char *p = strstr(o->model, "://");
	const char *path = p ? strchr(p + 3, '/') : NULL;
	if (!path || strncasecmp(o->model, "http", 4) != 0)
		return NULL;
	const char *owner_end = strchr(path + 1, '/');
	const char *repo_end = owner_end ? strchr(owner_end + 1, '/') : NULL;
	if (!repo_end || strncmp(repo_end, "/blob/", 6) != 0 || owner_end == path + 1 ||
	    repo_end == owner_end + 1)
		return NULL;
	size_t n = strlen(o->model) + 8;
	char *url = malloc(n);
	if (!url) {
		*failed = true;
		log_errf("out of memory");
		return NULL;
	}
	snprintf(url, n, "%.*s/resolve/%s", (int)(repo_end - o->model), o->model, repo_end + 6);
	char *shown = url_display(url);
	log_errf("note: %s is the hub's page of the file: reading %s",
	        o->model, shown ? shown : "its resolve/ URL");
	free(shown);
	return url;
}

/* getenv as s3_config_find reads the environment. */
static const char *env_get(const char *name)
{
	return getenv(name);
}

/* Makes directory path and its missing parents, each mode 0700 (as the XDG spec asks of
 * $XDG_CACHE_HOME): 0, or -1 with errno. */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0700);
		*p = '/';
		if (r != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static char *default_dir;   /* the process's default cache directory, or NULL: none */

/* Sets default_dir, once: $XDG_CACHE_HOME/ggufs (an absolute XDG_CACHE_HOME only, as the
 * XDG spec says), else ~/.cache/ggufs, its parents made (mode 0700) when missing; NULL
 * without a home, or when the parents cannot be made (a cache the user did not ask for
 * never stops a mount). Kept for the process's life: every remote model shares it. */
static void find_default_dir(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	char base[PATH_MAX];
	if (xdg && xdg[0] == '/') {
		snprintf(base, sizeof base, "%s", xdg);
	} else {
		const char *home = getenv("HOME");
		const struct passwd *pw = home && home[0] == '/' ? NULL : getpwuid(geteuid());
		if (pw)
			home = pw->pw_dir;
		if (!home || home[0] != '/')
			return;
		snprintf(base, sizeof base, "%s/.cache", home);
	}
	size_t n = strlen(base);
	while (n > 1 && base[n - 1] == '/')
		base[--n] = 0;
	if (n + sizeof "/ggufs" > sizeof base || make_dirs(base) != 0)
		return;
	default_dir = malloc(n + sizeof "/ggufs");
	if (default_dir)
		snprintf(default_dir, n + sizeof "/ggufs", "%s/ggufs", base);
}

/* The disk cache directory of a remote model: -o cache_dir's; none for -o
 * cache_dir=none; else the default, as llama.cpp's -hf and huggingface_hub keep one
 * (find_default_dir), which dc_open holds to every rule of cache_dir. */
static const char *cache_dir_of(const struct options *o)
{
	if (o->cache_dir)
		return strcmp(o->cache_dir, "none") == 0 ? NULL : o->cache_dir;
	pthread_once(&default_once, find_default_dir);
	return default_dir;
}

/* The remote options every remote model shares (the command line's). */
static struct remote_opts common_opts(const struct options *o)
{
	return (struct remote_opts){ .cafile = o->cafile, .timeout = o->timeout,
	                             .cache_size = o->cache_size, .cache_dir = cache_dir_of(o),
	                             .cache_max = o->cache_max,
	                             .waiting = isatty(STDERR_FILENO) ? print_waiting : NULL };
}

/* Opens the remote model named by o->model: hf:// expanded with $HF_ENDPOINT, the token
 * as token_choose says. *shown gets the URL as it may be shown (malloc'ed). NULL after one
 * line on stderr. */
static struct ggufs_model *open_remote(const struct options *o, char **shown)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = NULL;
	char *token = NULL;
	struct url_rev rev;
	const char *endpoint = getenv("HF_ENDPOINT");
	char *url = url_expand(o->model, endpoint, &rev, err, sizeof err);
	bool hf = strncasecmp(o->model, "hf://", 5) == 0;
	*shown = hf ? strdup(o->model) : url_display(o->model);
	if (!url || !*shown) {
		log_errf("%s: %s", *shown ? *shown : "the URL given",
		        url ? "out of memory" : err);
		goto out;
	}
	struct remote_opts ro = common_opts(o);
	ro.hub_rev = rev;
	/* which server gets which token: token.h */
	if (token_choose(url, hf, endpoint, o->token_file, getenv("HF_TOKEN"), &ro, &token,
	                 err) < 0) {
		log_errf("%s", err);
		goto out;
	}
	ro.token = token;
	long status;
	m = model_open_remote(url, *shown, &ro, err, &status);
	/* --check reads the file in order, so a server that ignores Range requests (a 200
	 * to the first one) is read as one stream instead; a URL of a folder is not a file */
	if (!m && status == 200 && o->check && !url_names_folder(url)) {
		struct stream_opts so = { .token = token, .cafile = ro.cafile, .timeout = ro.timeout };
		m = model_open_stream(url, *shown, &so, err);
	}
	if (!m)
		log_errf("%s", err);
out:
	token_free(token);
	free(url);
	return m;
}

/* What an s3:// name is fetched with: its bucket and key, the credentials, region and
 * endpoint found as the AWS CLI finds them (s3_config.h), the addressing, and the remote
 * options that carry them. */
struct s3_setup {
	char *bucket, *key, *endpoint;
	bool virtual_host;
	struct s3_config c;
	char context[3 * S3_FROM_MAX + 512];
	struct remote_s3 s3;
	struct remote_opts ro;
};

static void s3_setup_free(struct s3_setup *su)
{
	s3_config_free(&su->c);
	free(su->bucket);
	free(su->key);
	free(su->endpoint);
}

/* Fills su for o->model: 0, or -1 after one line on stderr, which names the
 * credentials' source, the region and the endpoint, never a secret. AWS's own endpoint
 * is addressed virtual-hosted where the bucket can be a host name (its certificate
 * covers one label), any other (MinIO, Ceph, a proxy) by path unless
 * -o s3_virtual_host. */
static int s3_setup(const struct options *o, struct s3_setup *su)
{
	char err[GGUF_ERR_MAX];
	*su = (struct s3_setup){ 0 };
	if (s3_split(o->model, &su->bucket, &su->key, err, sizeof err) < 0 ||
	    s3_config_find(&su->c, env_get, o->s3_anonymous, err, sizeof err) < 0) {
		log_errf("%s: %s", o->model, err);
		s3_setup_free(su);
		return -1;
	}
	su->endpoint = su->c.endpoint ? strdup(su->c.endpoint) : s3_aws_endpoint(su->c.region);
	if (!su->endpoint) {
		log_errf("out of memory");
		s3_setup_free(su);
		return -1;
	}
	su->virtual_host = o->s3_virtual_host || (!su->c.endpoint && s3_bucket_is_host(su->bucket));
	snprintf(su->context, sizeof su->context, "credentials: %s; region %s (%s); endpoint %s (%s)",
	         su->c.credentials_from, su->c.region, su->c.region_from, su->endpoint,
	         su->c.endpoint_from);
	su->s3 = (struct remote_s3){
		.access_key = su->c.access_key, .secret_key = su->c.secret_key,
		.session_token = su->c.session_token, .region = su->c.region,
		.bucket = su->bucket, .context = su->context,
	};
	su->ro = common_opts(o);
	su->ro.s3 = &su->s3;
	return 0;
}

/* Opens s3://BUCKET/KEY (s3_setup). *shown gets the name as given (it holds no
 * secret). NULL after one line on stderr. */
static struct ggufs_model *open_s3(const struct options *o, char **shown)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = NULL;
	struct s3_setup su;
	*shown = strdup(o->model);
	if (!*shown) {
		log_errf("out of memory");
		return NULL;
	}
	if (s3_setup(o, &su) < 0)
		return NULL;
	char *url = s3_object_url(su.endpoint, su.bucket, su.key, su.virtual_host, err, sizeof err);
	if (!url)
		log_errf("%s: %s", *shown, err);
	else if (!(m = model_open_remote(url, *shown, &su.ro, err, NULL)))
		log_errf("%s", err);
	free(url);
	s3_setup_free(&su);
	return m;
}

struct lib_source *open_s3_library(const struct options *o)
{
	char err[GGUF_ERR_MAX];
	struct s3_setup su;
	if (s3_setup(o, &su) < 0)
		return NULL;
	struct lib_source *src = lib_source_s3(&su.ro, su.endpoint, su.bucket, su.key,
	                                       su.virtual_host, err);
	if (!src)
		log_errf("%s", err);
	s3_setup_free(&su);
	return src;
}

struct ggufs_model *open_model(const struct options *o, char **shown)
{
	*shown = NULL;
	const enum name_kind kind = name_kind_of(o->model);
	if (kind == NAME_KIND_S3_OBJECT || kind == NAME_KIND_S3_LIBRARY)
		return open_s3(o, shown);
	if (kind == NAME_KIND_URL || kind == NAME_KIND_HUB_FILE || kind == NAME_KIND_HUB_QUANT ||
	    kind == NAME_KIND_HUB_LIBRARY) {
		bool failed;
		char *name = hub_rewrite(o, &failed);
		if (failed)
			return NULL;
		struct options named = *o;
		if (name)
			named.model = name;
		struct ggufs_model *m = open_remote(&named, shown);
		free(name);
		return m;
	}
	if (kind == NAME_KIND_SCHEME) {
		const size_t scheme = name_kind_scheme_len(o->model);
		log_errf("%s: unsupported URL scheme '%.*s' (ggufs reads http://, https://, hf:// "
		         "and s3:// URLs, or a local file)", o->model, (int)scheme, o->model);
		return NULL;
	}
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(o->model, err);
	if (!m)
		log_errf("%s", err);
	return m;
}
