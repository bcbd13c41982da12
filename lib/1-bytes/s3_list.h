/* One folder of an S3 bucket, listed with ListObjectsV2 (list-type=2, prefix, delimiter
 * "/", continuation-token pages), signed as the mount's object requests are, the XML of
 * every page read with expat as hostile input: bounded (pages, entries, name lengths,
 * depth, no DTD), and a name that is not one part under the prefix ("", ".", "..", a
 * '/', a NUL byte, a key outside the prefix) left out and logged. */
#ifndef GGUFS_S3_LIST_H
#define GGUFS_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "errline.h"
#include "remote.h"

#define S3_LIST_PAGES_MAX 10000
#define S3_LIST_ENTRIES_MAX (1u << 20)
#define S3_NAME_MAX 1024            /* S3's own bound on a key, in bytes */

/* One entry directly under the prefix. */
struct s3_entry {
	char *name;                 /* the part after the prefix, without a final '/' */
	bool is_prefix;             /* a common prefix (a folder), not an object */
	uint64_t size;
	char etag[128];             /* "" for a prefix */
	time_t mtime;               /* LastModified; 0 when absent */
};

/* The entries directly under prefix ("" or ending in '/') of the bucket whose URL is
 * bucket_url (s3_object_url of key ""), through r's signer (remote_opts.s3), sorted by
 * name, each name once (a listing that changed between pages gives a name once). 0, or
 * -1 with one phrase in err (S3's error code, the context). */
int s3_list(struct remote *r, const char *bucket_url, const char *prefix,
            struct s3_entry **out, size_t *n, char err[GGUF_ERR_MAX]);
void s3_entries_free(struct s3_entry *e, size_t n);

#endif
