/* The hub's tree and revision APIs (hub_listing.h): one bounded GET each with libcurl,
 * the reply parsed with libjansson. */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "evlog.h"
#include "hub_listing.h"
#include "iso_time.h"
#include "log_escape.h"
#include "url.h"
#include "vbytes.h"

#define LINK_MAX 8192

/* One reply: its body (bounded), status and Link header. */
struct reply {
	struct vbytes body;   /* body.p malloc'ed: the caller frees it */
	bool too_long;
	char link[LINK_MAX];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n;
	if (r->body.len + len > HUB_BODY_MAX) {
		r->too_long = true;
		return 0;   /* ends the transfer */
	}
	vbytes_put(&r->body, p, len);
	return r->body.failed ? 0 : len;
}

/* Keeps the Link header (the last one, whole or not at all). */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n;
	if (len > 5 && strncasecmp(p, "link:", 5) == 0) {
		r->link[0] = 0;
		if (len - 5 < LINK_MAX) {
			memcpy(r->link, p + 5, len - 5);
			r->link[len - 5] = 0;
		}
	} else if (len > 5 && strncmp(p, "HTTP/", 5) == 0) {
		r->link[0] = 0;   /* a new response (after a redirect): its own headers */
	}
	return len;
}

/* GET url (on h's endpoint) into r: 0 with *status 200, or -errno with one line in err
 * naming what (what: "the listing of OWNER/REPO"). */
static int get(const struct hub_http *h, const char *url, const char *what, struct reply *r,
               long *status, char err[GGUF_ERR_MAX])
{
	memset(r, 0, sizeof *r);
	*status = 0;
	CURL *c = curl_easy_init();
	if (!c) {
		gguf_errf(err, "%s: libcurl cannot start", what);
		return -ENOMEM;
	}
	struct curl_slist *hdrs = NULL;
	char auth[4096];
	if (h->token && snprintf(auth, sizeof auth, "Authorization: Bearer %s", h->token) <
	                (int)sizeof auth)
		hdrs = curl_slist_append(hdrs, auth);
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)(h->timeout ? h->timeout : 30));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (h->cafile)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->cafile);
	/* no redirects: the API answers itself, and the token must not follow one */
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hdrs);
	explicit_bzero(auth, sizeof auth);
	curl_easy_cleanup(c);
	if (r->too_long) {
		gguf_errf(err, "%s: the hub's reply is longer than %u bytes", what,
		         HUB_BODY_MAX);
		return -EFBIG;
	}
	if (rc != CURLE_OK) {
		gguf_errf(err, "%s: %s", what, curl_easy_strerror(rc));
		return -EIO;
	}
	if (*status != 200) {
		const char *why = *status == 401 || *status == 403 ? " (a token may be needed: HF_TOKEN "
		                                                     "or -o token_file)"
		                : *status == 404 ? " (no such repository, revision or folder)"
		                : *status == 429 ? " (too many requests: try again later)" : "";
		gguf_errf(err, "%s: the hub answered HTTP %ld%s", what, *status, why);
		return -EIO;
	}
	if (!r->body.len) {
		gguf_errf(err, "%s: the hub's reply is empty", what);
		return -EPROTO;
	}
	return 0;
}

char *hub_escape(const char *s, bool keep_slash)
{
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || strchr("._~-", *p) || (keep_slash && *p == '/'))
			*o++ = (char)*p;
		else
			o += sprintf(o, "%%%02X", *p);
	}
	*o = 0;
	return out;
}

/* True for a commit id the way the hub gives one: 40 (or 64) lower-case hex digits. */
static bool is_commit(const char *s)
{
	size_t n = strlen(s);
	if (n != 40 && n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

int hub_resolve(const struct hub_http *h, const char *repo, const char *revision,
                char commit[65], time_t *date, long *status, char err[GGUF_ERR_MAX])
{
	if (date)
		*date = 0;
	char what[512];
	snprintf(what, sizeof what, "hf://%s@%s: the revision", repo, revision);
	char *rev = hub_escape(revision, false);
	size_t n = strlen(h->endpoint) + strlen(repo) + (rev ? strlen(rev) : 0) + 64;
	char *url = rev ? malloc(n) : NULL;
	if (!url) {
		free(rev);
		gguf_errf(err, "%s: out of memory", what);
		return -ENOMEM;
	}
	snprintf(url, n, "%s/api/models/%s/revision/%s", h->endpoint, repo, rev);
	free(rev);
	struct reply r;
	int ret = get(h, url, what, &r, status, err);
	free(url);
	if (ret < 0) {
		free(r.body.p);
		return ret;
	}
	json_error_t je;
	json_t *doc = json_loadb((const char *)r.body.p, r.body.len, JSON_REJECT_DUPLICATES, &je);
	free(r.body.p);
	json_t *sha = json_is_object(doc) ? json_object_get(doc, "sha") : NULL;
	const char *s = json_is_string(sha) ? json_string_value(sha) : NULL;
	if (!s || strlen(s) != json_string_length(sha) || !is_commit(s)) {
		gguf_errf(err, "%s: the hub's answer names no commit (\"sha\")", what);
		json_decref(doc);
		return -EPROTO;
	}
	snprintf(commit, 65, "%s", s);
	if (date)
		*date = iso_time_parse(json_string_value(json_object_get(doc, "lastModified")));
	json_decref(doc);
	return 0;
}

/* Why path p (len bytes) is left out of a listing, or NULL when it is kept: it could
 * leave its folder (absolute, an empty, "." or ".." part, a NUL, a byte below 0x20 or
 * 0x7f), or a part of it is longer than a name may be (NAME_MAX: it could be listed
 * but never looked up). */
static const char *path_refusal(const char *p, size_t len)
{
	if (len == 0 || len > HUB_PATH_MAX || p[0] == '/' || strlen(p) != len)
		return "could escape the folder";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			return "could escape the folder";
	for (const char *part = p; part; ) {
		const char *slash = strchr(part, '/');
		size_t n = slash ? (size_t)(slash - part) : strlen(part);
		if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.'))
			return "could escape the folder";
		if (n > HUB_NAME_MAX)
			return "has a part longer than " HUB_NAME_MAX_TEXT " bytes";
		part = slash ? slash + 1 : NULL;
	}
	return NULL;
}

static bool is_sha256(const char *s)
{
	if (strlen(s) != 64)
		return false;
	for (size_t i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

int hub_parse_page(const char *body, size_t len, const char *folder, struct hub_listing *l,
                   char err[GGUF_ERR_MAX])
{
	json_error_t je;
	/* a NUL in a string is read, so that its entry alone is refused (path_safe) */
	json_t *doc = json_loadb(body, len, JSON_ALLOW_NUL, &je);
	if (!json_is_array(doc)) {
		/* jansson's text quotes the page near the fault (a newline or an escape
		 * sequence of a terminal included): escaped, so the error stays one line */
		char why[192] = "";
		if (!doc)
			log_escape(why, sizeof why, je.text, strnlen(je.text, sizeof je.text));
		gguf_errf(err, "the hub's listing is not a JSON array%s%s",
		         doc ? "" : ": ", why);
		json_decref(doc);
		return -EPROTO;
	}
	size_t flen = strlen(folder);
	size_t count = json_array_size(doc);
	if (l->n + count > HUB_ENTRIES_MAX) {
		gguf_errf(err, "the hub's listing holds more than %u entries",
		         HUB_ENTRIES_MAX);
		json_decref(doc);
		return -EFBIG;
	}
	struct hub_file *files = realloc(l->files, (l->n + count + 1) * sizeof *files);
	if (!files) {
		json_decref(doc);
		gguf_errf(err, "out of memory reading the hub's listing");
		return -ENOMEM;
	}
	l->files = files;
	for (size_t i = 0; i < count; i++) {
		json_t *e = json_array_get(doc, i);
		json_t *type = json_object_get(e, "type"), *path = json_object_get(e, "path");
		json_t *size = json_object_get(e, "size"), *lfs = json_object_get(e, "lfs");
		const char *t = json_string_value(type), *p = json_string_value(path);
		if (!t || !p || (strcmp(t, "file") && strcmp(t, "directory"))) {
			evlog(EVLOG_WARNING, "hub listing entry", "the hub's listing has an entry without "
			      "a type (file or directory) and a path: left out");
			continue;
		}
		size_t plen = json_string_length(path);
		const char *why = path_refusal(p, plen);
		if (!why && flen && (plen <= flen + 1 || strncmp(p, folder, flen) || p[flen] != '/'))
			why = "lies outside the folder";
		if (why) {
			char shown[128];
			size_t k = 0;
			for (size_t j = 0; j < plen && k + 1 < sizeof shown; j++)
				shown[k++] = (unsigned char)p[j] < 0x20 || p[j] == 0x7f ? '?' : p[j];
			shown[k] = 0;
			/* one line per reason (evlog's key), its first path shown */
			char key[96];
			snprintf(key, sizeof key, "hub listing path %s", why);
			evlog(EVLOG_WARNING, key, "the hub's listing names a path that %s: '%s%s': "
			      "left out", why, shown, plen >= sizeof shown ? "..." : "");
			continue;
		}
		const size_t kept = plen - (flen ? flen + 1 : 0) + 1;
		if (kept > HUB_NAMES_MAX - l->path_bytes) {
			json_decref(doc);
			gguf_errf(err, "the hub's listing's paths take more than %u MiB",
			          HUB_NAMES_MAX >> 20);
			return -EFBIG;
		}
		struct hub_file *f = &l->files[l->n];
		memset(f, 0, sizeof *f);
		f->path = strdup(p + (flen ? flen + 1 : 0));
		if (!f->path) {
			json_decref(doc);
			gguf_errf(err, "out of memory reading the hub's listing");
			return -ENOMEM;
		}
		f->dir = strcmp(t, "directory") == 0;
		f->date = iso_time_parse(json_string_value(json_object_get(
		                         json_object_get(e, "lastCommit"), "date")));
		if (!f->dir) {
			if (!json_is_integer(size) || json_integer_value(size) < 0) {
				free(f->path);
				evlog(EVLOG_WARNING, "hub listing size", "the hub's listing gives a file "
				      "no size: left out");
				continue;
			}
			f->size = (uint64_t)json_integer_value(size);
			const char *oid = json_string_value(json_object_get(lfs, "oid"));
			if (oid && is_sha256(oid)) {
				if (!(f->sha256 = malloc(65))) {
					free(f->path);
					json_decref(doc);
					gguf_errf(err, "out of memory reading the hub's listing");
					return -ENOMEM;
				}
				for (size_t j = 0; j < 64; j++)
					f->sha256[j] = (char)tolower((unsigned char)oid[j]);
				f->sha256[64] = 0;
			}
		}
		l->n++;
		l->path_bytes += kept;
	}
	json_decref(doc);
	return 0;
}

bool hub_link_next(const char *link, char *next, size_t size)
{
	/* <URL>; rel="next", <URL>; rel="prev" ... */
	for (const char *p = link; (p = strchr(p, '<')); ) {
		const char *end = strchr(p, '>');
		if (!end)
			return false;
		const char *params = end + 1, *stop = strchr(params, '<');
		size_t plen = stop ? (size_t)(stop - params) : strlen(params);
		char par[256];
		snprintf(par, sizeof par, "%.*s", (int)(plen < 255 ? plen : 255), params);
		if (strstr(par, "rel=\"next\"") || strstr(par, "rel=next")) {
			size_t n = (size_t)(end - p - 1);
			if (n + 1 > size)
				return false;
			memcpy(next, p + 1, n);
			next[n] = 0;
			return true;
		}
		p = end;
	}
	return false;
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp(((const struct hub_file *)a)->path, ((const struct hub_file *)b)->path);
}

/* Frees what one file of a listing owns. */
static void file_free(struct hub_file *f)
{
	free(f->path);
	free(f->sha256);
}

void hub_listing_free(struct hub_listing *l)
{
	for (size_t i = 0; l->files && i < l->n; i++)
		file_free(&l->files[i]);
	free(l->files);
	l->files = NULL;
	l->n = 0;
	l->path_bytes = 0;
}

const struct hub_file *hub_listing_find(const struct hub_listing *l, const char *path)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(path, l->files[mid].path);
		if (c == 0)
			return &l->files[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Adds to l (sorted, each path once) every folder on the way to one of its paths that
 * it does not name, and sorts it again. The paths under one folder are side by side
 * in byte order, so a folder is new only where a path does not share it with the path
 * before. 0, -ENOMEM, or -EFBIG past HUB_NAMES_MAX. */
static int add_folders(struct hub_listing *l)
{
	struct hub_file *made = NULL;
	size_t n_made = 0, cap = 0;
	uint64_t made_bytes = 0;
	int ret = 0;
	for (size_t i = 0; ret == 0 && i < l->n; i++) {
		const char *p = l->files[i].path, *prev = i ? l->files[i - 1].path : "";
		for (const char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
			const size_t len = (size_t)(slash - p);
			if (strncmp(prev, p, len + 1) == 0)
				continue;   /* the path before is in this folder too */
			char *dir = strndup(p, len);
			if (!dir) {
				ret = -ENOMEM;
				break;
			}
			if (hub_listing_find(l, dir)) {
				free(dir);
				continue;
			}
			if (len + 1 > HUB_NAMES_MAX - l->path_bytes - made_bytes ||
			    l->n + n_made >= HUB_ENTRIES_MAX) {
				free(dir);
				ret = -EFBIG;
				break;
			}
			if (n_made == cap) {
				size_t nc = cap ? 2 * cap : 16;
				struct hub_file *m = realloc(made, nc * sizeof *m);
				if (!m) {
					free(dir);
					ret = -ENOMEM;
					break;
				}
				made = m;
				cap = nc;
			}
			made[n_made++] = (struct hub_file){ .path = dir, .dir = true };
			made_bytes += len + 1;
		}
	}
	struct hub_file *all = ret == 0 && n_made ?
	                       realloc(l->files, (l->n + n_made) * sizeof *all) : NULL;
	if (ret == 0 && n_made && !all)
		ret = -ENOMEM;
	if (ret < 0) {
		for (size_t i = 0; i < n_made; i++)
			file_free(&made[i]);
		free(made);
		return ret;
	}
	if (n_made) {
		memcpy(all + l->n, made, n_made * sizeof *made);
		l->files = all;
		l->n += n_made;
		l->path_bytes += made_bytes;
		qsort(l->files, l->n, sizeof *l->files, path_cmp);
	}
	free(made);
	return 0;
}

int hub_listing_finish(struct hub_listing *l)
{
	if (l->n)
		qsort(l->files, l->n, sizeof *l->files, path_cmp);
	/* a path listed twice (a listing that changed between pages): one kept */
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (k && strcmp(l->files[k - 1].path, l->files[i].path) == 0) {
			evlog(EVLOG_WARNING, "hub listing twice", "the hub's listing names '%s' twice: "
			      "one kept", l->files[i].path);
			l->path_bytes -= strlen(l->files[i].path) + 1;
			file_free(&l->files[i]);
			continue;
		}
		l->files[k++] = l->files[i];
	}
	l->n = k;
	return add_folders(l);
}

int hub_list(const struct hub_http *h, const char *repo, const char *commit, const char *folder,
             struct hub_listing *out, long *status, char err[GGUF_ERR_MAX])
{
	memset(out, 0, sizeof *out);
	snprintf(out->commit, sizeof out->commit, "%s", commit);
	char what[512];
	snprintf(what, sizeof what, "hf://%s@%s%s%s: the listing", repo, commit, *folder ? "/" : "",
	         folder);
	char *path = hub_escape(folder, true);
	size_t n = strlen(h->endpoint) + strlen(repo) + strlen(commit) + (path ? strlen(path) : 0) + 64;
	char *url = path ? malloc(n) : NULL;
	if (url)
		snprintf(url, n, "%s/api/models/%s/tree/%s%s%s?recursive=true", h->endpoint, repo,
		         commit, *folder ? "/" : "", path);
	free(path);
	int ret = url ? 0 : -ENOMEM;
	for (unsigned page = 0; ret == 0 && url; page++) {
		if (page == HUB_PAGES_MAX) {
			gguf_errf(err, "%s: more than %u pages", what, HUB_PAGES_MAX);
			ret = -EFBIG;
			free(url);
			url = NULL;
			break;
		}
		struct reply r;
		ret = get(h, url, what, &r, status, err);
		if (ret == 0) {
			char perr[GGUF_ERR_MAX];
			ret = hub_parse_page((const char *)r.body.p, r.body.len, folder, out, perr);
			if (ret < 0)
				gguf_errf(err, "%s: %s", what, perr);
		}
		free(url);
		url = NULL;
		char next[LINK_MAX];
		if (ret == 0 && hub_link_next(r.link, next, sizeof next)) {
			/* the token goes to the endpoint alone: a next page elsewhere is refused */
			url = url_resolve(h->endpoint, next);
			if (!url || !url_same_origin(url, h->endpoint)) {
				gguf_errf(err, "%s: the next page is not on %s", what, h->endpoint);
				ret = -EPROTO;
				free(url);
				url = NULL;
			}
		}
		free(r.body.p);
	}
	if (ret == -ENOMEM)
		gguf_errf(err, "%s: out of memory", what);
	if (ret < 0) {
		hub_listing_free(out);
		return ret;
	}
	ret = hub_listing_finish(out);
	if (ret == -EFBIG)
		gguf_errf(err, "%s: the paths take more than %u MiB", what, HUB_NAMES_MAX >> 20);
	else if (ret < 0)
		gguf_errf(err, "%s: out of memory", what);
	if (ret < 0)
		hub_listing_free(out);
	return ret;
}
