/* A hub repository's files at one commit, as the hub's API lists them:
 *   GET ENDPOINT/api/models/OWNER/REPO/revision/REVISION   -> {"sha": COMMIT, ...}
 *   GET ENDPOINT/api/models/OWNER/REPO/tree/COMMIT[/PATH]?recursive=true
 *       -> [{"type": "file"|"directory", "path": P, "size": N, "lfs": {"oid": SHA256}}]
 *          in pages, each but the last with a Link: <URL>; rel="next" header
 *          (an entry's "lastCommit": {"date": ISO 8601} is read when there).
 * Every reply is hostile input: bodies, pages, entries, path lengths and the bytes of
 * all paths together are bounded; a
 * path that could escape the folder (absolute, "..", ".", empty parts, NUL, control
 * bytes), with a part longer than a name may be (255 bytes) or outside the folder asked
 * for is left out with one log line (one per reason); a next
 * page on another origin than the endpoint (which the token would follow) ends the
 * listing with an error. The JSON is read with libjansson. */
#ifndef GGUFS_HUB_LISTING_H
#define GGUFS_HUB_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "gguf.h"

#define HUB_BODY_MAX (64u << 20)     /* bytes of one reply */
#define HUB_PAGES_MAX 10000
#define HUB_ENTRIES_MAX 1000000
#define HUB_PATH_MAX 4096
#define HUB_NAME_MAX 255             /* bytes of one part of a path (NAME_MAX) */
#define HUB_NAMES_MAX (64u << 20)    /* bytes of all the paths of a listing */
#define HUB_NAME_MAX_TEXT "255"

struct hub_http {
	const char *endpoint;    /* scheme://host[:port], no trailing '/' */
	const char *token;       /* sent to the endpoint only; NULL for none */
	const char *cafile;      /* extra CA file, or NULL */
	unsigned timeout;        /* seconds without progress; 0: 30 */
};

struct hub_file {
	char *path;              /* relative to the folder listed */
	uint64_t size;
	time_t date;             /* its last commit's ("lastCommit": {"date"}), when the
	                          * listing gives it; else 0 */
	char *sha256;            /* an LFS file's, lower-case hex (malloc'ed); NULL for
	                          * others, most files of a large listing */
	bool dir;
};

struct hub_listing {
	char commit[65];         /* the commit the revision named */
	time_t date;             /* the revision's "lastModified" (its commit's date); 0 when
	                          * the hub did not say */
	struct hub_file *files;  /* sorted by path */
	size_t n;
	uint64_t path_bytes;     /* of the paths kept, each with its NUL */
};

/* The commit revision names in repo (OWNER/REPO) into commit, and its date
 * ("lastModified") into *date unless NULL (0 when not given): 0, or -errno with one line
 * in err ("the hub answered 404 to ..."); *status the HTTP status (0: none). */
int hub_resolve(const struct hub_http *h, const char *repo, const char *revision,
                char commit[65], time_t *date, long *status, char err[GGUF_ERR_MAX]);

/* Every file and folder under folder ("" for the whole repository) of repo at commit,
 * every page followed, into *out (hub_listing_free), sorted by path, each path once,
 * every folder on the way to a file among them (a folder the hub did not name is added:
 * a folder's listing is then its entries alone, their names borrowed from these
 * paths). 0, or -errno with one line in err. */
int hub_list(const struct hub_http *h, const char *repo, const char *commit, const char *folder,
             struct hub_listing *out, long *status, char err[GGUF_ERR_MAX]);
void hub_listing_free(struct hub_listing *l);
/* The file or folder of listing l (as hub_list sorts it) at path, or NULL. */
const struct hub_file *hub_listing_find(const struct hub_listing *l, const char *path);

/* Parses one page (a JSON array) into l's files, folder's prefix taken off each path
 * ("" for none): 0, or -EPROTO with one line in err. For tests and the fuzzer. */
int hub_parse_page(const char *body, size_t len, const char *folder, struct hub_listing *l,
                   char err[GGUF_ERR_MAX]);

/* Sorts l's files by path, keeps each path once and adds every folder on the way to a
 * file that l does not name, as hub_list gives a listing: 0, -ENOMEM, or -EFBIG when the
 * folders would take the paths past HUB_NAMES_MAX (l as it was, but sorted). For
 * hub_list, its tests and the fuzzer. */
int hub_listing_finish(struct hub_listing *l);

/* The URL in a Link header's rel="next" part into next (size bytes): false when none. */
bool hub_link_next(const char *link, char *next, size_t size);

/* s with every byte outside [A-Za-z0-9._~-] (and '/' unless keep_slash) as %XX:
 * malloc'ed, or NULL. */
char *hub_escape(const char *s, bool keep_slash);

#endif
