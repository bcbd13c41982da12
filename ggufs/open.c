/* Opening the model the command line names: a local file, or a URL (http, https,
 * hf://) with its token, CA file, cache and timeout options. Shared by a mount and by
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
#include "token.h"
#include "url.h"

/* remote_opts.waiting: what a remote mount waits for, on the terminal. */
static void print_waiting(void *arg, const char *line)
{
	(void)arg;
	log_errf("%s", line);
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
	struct remote_opts ro = { .cafile = o->cafile, .timeout = o->timeout,
	                          .cache_size = o->cache_size, .cache_dir = o->cache_dir,
	                          .cache_max = o->cache_max, .hub_rev = rev,
	                          .waiting = isatty(STDERR_FILENO) ? print_waiting : NULL };
	/* which server gets which token: token.h */
	if (token_choose(url, hf, endpoint, o->token_file, getenv("HF_TOKEN"), &ro, &token,
	                 err) < 0) {
		log_errf("%s", err);
		goto out;
	}
	ro.token = token;
	m = model_open_remote(url, *shown, &ro, err);
	if (!m)
		log_errf("%s", err);
out:
	token_free(token);
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
	if (url_is_remote(o->model))
		return open_remote(o, shown);
	/* a URL of another scheme, unless a local file has that name after all */
	size_t scheme = url_scheme_len(o->model);
	struct stat st;
	if (scheme && stat(o->model, &st) != 0 && errno == ENOENT) {
		log_errf("%s: unsupported URL scheme '%.*s' (ggufs reads http://, "
		        "https:// and hf:// URLs, or a local file)", o->model, (int)scheme, o->model);
		return NULL;
	}
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(o->model, err);
	if (!m)
		log_errf("%s", err);
	return m;
}
