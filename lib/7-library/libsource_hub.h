/* A library's source in a hub repository (hf://OWNER/REPO[@REVISION][/FOLDER]): the
 * revision resolved to a commit once, the whole folder listed once with the tree API
 * (hub_listing.h), and every file read at that commit through resolve/ (models with
 * model_open_remote, other files through one shared remote fetcher). */
#ifndef GGUFS_LIBSOURCE_HUB_H
#define GGUFS_LIBSOURCE_HUB_H

#include <stdbool.h>

#include "hub_listing.h"
#include "libsource.h"
#include "remote.h"

/* hf://OWNER/REPO[@REVISION][/PATH][:QUANT] split into its parts (malloc'ed; rev "main"
 * when not given, path "" when none, quant NULL when none). False with one line in err
 * for a malformed name (not hf://, no OWNER or REPO, an empty part). */
struct hub_name {
	char *repo, *rev, *path, *quant;
};
bool hub_name_parse(const char *given, struct hub_name *n, char err[GGUF_ERR_MAX]);
void hub_name_free(struct hub_name *n);
/* True when n names a library: no :QUANT, and a path that does not end in .gguf. */
bool hub_name_is_library(const struct hub_name *n);

/* What the hub's API is reached with: its endpoint (endpoint_env, $HF_ENDPOINT's value:
 * url_hub_endpoint) and the token token_choose picks for it from token_file or hf_token
 * ($HF_TOKEN's value), with cafile and timeout, into http (its endpoint and token
 * malloc'ed: hub_http_free); ro's token and hints set to match (ro->token points into
 * http). True, or false with one line in err. */
bool hub_http_make(struct hub_http *http, const char *endpoint_env, const char *token_file,
                   const char *hf_token, const char *cafile, unsigned timeout,
                   struct remote_opts *ro, char err[GGUF_ERR_MAX]);
/* Frees what hub_http_make made, the token wiped first. */
void hub_http_free(struct hub_http *http);

/* The source of folder n->path of repository n->repo at the commit n->rev names, over
 * http (its endpoint, token and CA file) and ro (for the models and files it reads:
 * copied). NULL with one line in err: the revision or the listing failed (a 404, 401,
 * 429 or 5xx), or the listing does not parse. */
struct lib_source *lib_source_hub(const struct hub_name *n, const struct hub_http *http,
                                  const struct remote_opts *ro, char err[GGUF_ERR_MAX]);

/* For hf://OWNER/REPO:QUANT: the one model file (its first shard for a split set) of
 * the repository whose name carries the tag QUANT (case-insensitive, between '-', '.'
 * or '_' and the extension) as "hf://OWNER/REPO@COMMIT/PATH" (malloc'ed), or NULL with
 * one line in err: no model has it, or more than one (listing the tags there are). */
char *hub_quant_model(const struct hub_name *n, const struct hub_http *http,
                      char err[GGUF_ERR_MAX]);

#endif
