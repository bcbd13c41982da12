/* Opening the model the command line names: a local file, or a URL (http, https,
 * hf://, s3://) with its token or AWS credentials, CA file, cache and timeout options. Shared by a mount and by
 * --check, so that both open a model alike. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"
#include "remote.h"
#include "s3.h"
#include "s3_config.h"
#include "url.h"

/* The bearer token in file path, without its trailing newline: malloc'ed, or NULL after
 * one line on stderr. Never echoed. Refused, as ssh refuses a private key others can
 * read: a file readable by group or others (the token is as good as theirs), and a NUL
 * byte in the line (it would cut the token short, silently). */
static char *read_token(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		log_errf("%s: cannot read the token file: %s", path, strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 044)) {
		log_errf("%s: the token file is readable by group or others "
		        "(mode %04o): chmod go-rw it", path, (unsigned)(st.st_mode & 07777));
		fclose(f);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, f);
	fclose(f);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = 0;
	if (n <= 0) {
		log_errf("%s: the token file is empty", path);
		free(line);
		return NULL;
	}
	if (memchr(line, 0, (size_t)n)) {
		log_errf("%s: the token file holds a NUL byte", path);
		explicit_bzero(line, (size_t)n);
		free(line);
		return NULL;
	}
	return line;
}

/* The token for url (the http(s) URL given, hf:// expanded): -o token_file's for any
 * URL; $HF_TOKEN's only for the hub, an hf:// URL or one on $HF_ENDPOINT's scheme, host
 * and port (ro->hub), as the hub's own client does, so that a hub token set in a shell
 * never goes to some other server named on the command line. malloc'ed, or NULL: none
 * (ro->token_withheld says that HF_TOKEN was set but not for this URL), or unreadable
 * (*failed, after one line on stderr). */
static char *token_for(const struct options *o, const char *url, bool hf, const char *endpoint,
                       struct remote_opts *ro, bool *failed)
{
	*failed = false;
	ro->hub = hf || url_same_origin(url, endpoint && *endpoint ? endpoint : HF_ENDPOINT_DEFAULT);
	if (o->token_file) {
		char *token = read_token(o->token_file);
		*failed = !token;
		return token;
	}
	const char *env = getenv("HF_TOKEN");
	if (!env || !*env)
		return NULL;
	if (!ro->hub) {
		ro->token_withheld = true;
		return NULL;
	}
	ro->token_from_env = true;
	char *token = strdup(env);
	if (!token) {
		log_errf("out of memory");
		*failed = true;
	}
	return token;
}

/* remote_opts.waiting: what a remote mount waits for, on the terminal. */
static void say_waiting(void *arg, const char *line)
{
	(void)arg;
	log_errf("%s", line);
}

/* getenv as s3_config_find reads the environment. */
static const char *env_get(const char *name)
{
	return getenv(name);
}

/* The remote options every remote model shares (the command line's). */
static struct remote_opts common_opts(const struct options *o)
{
	return (struct remote_opts){ .cafile = o->cafile, .timeout = o->timeout,
	                             .cache_size = o->cache_size, .cache_dir = o->cache_dir,
	                             .cache_max = o->cache_max,
	                             .waiting = isatty(STDERR_FILENO) ? say_waiting : NULL };
}

/* Opens the remote model named by o->model: hf:// expanded with $HF_ENDPOINT, the token
 * as token_for says. *shown gets the URL as it may be shown (malloc'ed). NULL after one
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
	bool failed;
	token = token_for(o, url, hf, endpoint, &ro, &failed);
	if (failed)
		goto out;
	ro.token = token;
	m = model_open_remote(url, *shown, &ro, err);
	if (!m)
		log_errf("%s", err);
out:
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	free(url);
	return m;
}

/* Opens s3://BUCKET/KEY: the credentials, region and endpoint found as the AWS CLI finds
 * them (s3_config.h), the object's URL virtual-hosted on AWS (when the bucket can be a
 * host name) or with -o s3_virtual_host, else path style. *shown gets the name as given
 * (it holds no secret). NULL after one line on stderr, which names the credentials'
 * source, the region and the endpoint, never a secret. */
static struct ggufs_model *open_s3(const struct options *o, char **shown)
{
	char err[GGUF_ERR_MAX], context[3 * S3_FROM_MAX + 512];
	char *bucket = NULL, *key = NULL, *endpoint = NULL, *url = NULL;
	struct ggufs_model *m = NULL;
	struct s3_config c = { 0 };
	*shown = strdup(o->model);
	if (!*shown) {
		log_errf("out of memory");
		return NULL;
	}
	if (s3_split(o->model, &bucket, &key, err, sizeof err) < 0) {
		log_errf("%s: %s", *shown, err);
		goto out;
	}
	if (!key[0] || key[strlen(key) - 1] == '/') {
		log_errf("%s: names a bucket or a prefix, not an object: mount "
		         "s3://BUCKET/KEY.gguf", *shown);
		goto out;
	}
	if (s3_config_find(&c, env_get, o->s3_anonymous, err, sizeof err) < 0) {
		log_errf("%s: %s", *shown, err);
		goto out;
	}
	endpoint = c.endpoint ? strdup(c.endpoint) : s3_aws_endpoint(c.region);
	if (!endpoint) {
		log_errf("out of memory");
		goto out;
	}
	/* AWS's own endpoint names a bucket by host where it can (its certificate covers
	 * one label); another endpoint (MinIO, Ceph, a proxy) by path unless told */
	bool virtual_host = o->s3_virtual_host || (!c.endpoint && s3_bucket_is_host(bucket));
	url = s3_object_url(endpoint, bucket, key, virtual_host, err, sizeof err);
	if (!url) {
		log_errf("%s: %s", *shown, err);
		goto out;
	}
	snprintf(context, sizeof context, "credentials: %s; region %s (%s); endpoint %s (%s)",
	         c.credentials_from, c.region, c.region_from, endpoint, c.endpoint_from);
	struct remote_s3 s3 = {
		.sign = { .access_key = c.access_key, .secret_key = c.secret_key,
		          .session_token = c.session_token, .region = c.region },
		.bucket = bucket, .context = context,
	};
	struct remote_opts ro = common_opts(o);
	ro.s3 = &s3;
	m = model_open_remote(url, *shown, &ro, err);
	if (!m)
		log_errf("%s", err);
out:
	s3_config_free(&c);
	free(bucket);
	free(key);
	free(endpoint);
	free(url);
	return m;
}

/* The length of the scheme when s starts like a URL ("ftp://..."), else 0. */
static size_t url_scheme_len(const char *s)
{
	size_t n = 0;
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return 0;
	while (s[n] && (strchr("+-.", s[n]) || (s[n] >= '0' && s[n] <= '9') ||
	                (s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z')))
		n++;
	return strncmp(s + n, "://", 3) == 0 ? n : 0;
}

struct ggufs_model *open_model(const struct options *o, char **shown)
{
	*shown = NULL;
	if (s3_is_name(o->model))
		return open_s3(o, shown);
	if (url_is_remote(o->model))
		return open_remote(o, shown);
	/* a URL of another scheme, unless a local file has that name after all */
	size_t scheme = url_scheme_len(o->model);
	struct stat st;
	if (scheme && stat(o->model, &st) != 0 && errno == ENOENT) {
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
