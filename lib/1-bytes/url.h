/* URLs of remote models: which arguments are URLs, hf:// names, what may be shown of a
 * URL, where a redirect leads, and whether two URLs share an origin (the token's rule).
 * Every function returns malloc'ed strings the caller frees, or NULL. */
#ifndef GGUFS_URL_H
#define GGUFS_URL_H

#include <stdbool.h>
#include <stddef.h>

#define HF_ENDPOINT_DEFAULT "https://huggingface.co"

/* True when s names a remote model: http://, https:// or hf:// (scheme in any case). */
bool url_is_remote(const char *s);

/* The hub's endpoint: given ($HF_ENDPOINT; NULL or "": HF_ENDPOINT_DEFAULT) without
 * a trailing '/'. */
char *url_hub_endpoint(const char *given);

/* Where the REVISION of an expanded hf:// URL lies in it (len 0: not an hf:// URL). */
struct url_rev {
	size_t at, len;
};

/* The http(s) URL that given names: an http(s) URL as it is (checked to parse), or
 * hf://OWNER/REPO[@REVISION]/PATH as ENDPOINT/OWNER/REPO/resolve/REVISION/PATH with
 * endpoint (NULL or "": HF_ENDPOINT_DEFAULT) and REVISION main by default; *rev (may be
 * NULL) says where REVISION is. NULL with a reason in err (size bytes) for a malformed
 * one. */
char *url_expand(const char *given, const char *endpoint, struct url_rev *rev, char *err,
                 size_t size);

/* url with the rev.len bytes at rev.at replaced by revision (a hub URL pinned to a
 * commit); NULL when out of memory or rev is not inside url. */
char *url_with_revision(const char *url, struct url_rev rev, const char *revision);

/* What may be shown of url (messages, fsname, summary.txt): without user:password@,
 * query and fragment. NULL if url does not parse. */
char *url_display(const char *url);

/* The disk cache's key for url: the URL as given without user:password@ and fragment,
 * its query kept (?f=a and ?f=b are two resources, whatever their ETags) but only as a
 * hash ("?xxh3:" and 32 hex digits of XXH3-128), so that a signature in it is never
 * written to the cache. NULL if url does not parse. */
char *url_cache_key(const char *url);

/* The URL that a Location header loc leads to from base (loc may be relative); NULL
 * unless it parses and is http or https. */
char *url_resolve(const char *base, const char *loc);

/* True when a and b have the same scheme, host (case-insensitive) and port (the
 * scheme's default when none is given). */
bool url_same_origin(const char *a, const char *b);

/* Whether url's path ends in '/' (its query and fragment aside): a folder, whose page
 * a server sends whole (an index) whatever Range says. */
bool url_names_folder(const char *url);

#endif
