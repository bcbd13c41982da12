/* One folder of an S3 bucket, listed with ListObjectsV2 (list-type=2, prefix, delimiter
 * "/", encoding-type=url, continuation-token pages), signed as the mount's object
 * requests are, the XML of every page read with expat as hostile input: bounded (pages,
 * seconds, entries, bytes of names, depth, no DTD; a continuation token seen before
 * ends it), keys decoded when the page says they are URL-encoded (a server that does
 * not encode them sends them raw, and says nothing), and a name that is not one part
 * under the prefix ("", ".", "..", a '/', a control byte, a key outside the prefix) or
 * longer than a name may be (255 bytes) left out and logged. */
#ifndef GGUFS_S3_LIST_H
#define GGUFS_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "errline.h"
#include "remote.h"

#define S3_LIST_PAGES_MAX 10000
#define S3_LIST_SECONDS 300         /* one folder's listing, all its pages */
#define S3_LIST_ENTRIES_MAX (1u << 20)
#define S3_NAME_MAX 1024            /* S3's own bound on a key, in bytes */
#define S3_PART_MAX 255             /* a name in the library (NAME_MAX) */
#define S3_PART_MAX_TEXT "255"
#define S3_NAMES_MAX (64u << 20)    /* bytes of the names one source keeps, all folders */
#define S3_TOKEN_MAX 4096

/* One entry directly under the prefix. */
struct s3_entry {
	char *name;                 /* the part after the prefix, without a final '/' */
	bool is_prefix;             /* a common prefix (a folder), not an object */
	uint64_t size;
	uint64_t etag;              /* s3_etag_hash of its ETag; 0 for a prefix or none (a
	                             * hash, not the text: a folder of 150,000 keys keeps an
	                             * entry each while it is listed) */
	time_t mtime;               /* LastModified; 0 when absent */
};

/* The hash of an ETag (len bytes) without a weak W/ and its quotes, which a listing and
 * a GET may write either way: two ETags of one object hash the same; 0 for an empty
 * one. */
uint64_t s3_etag_hash(const char *etag, size_t len);

/* The entries directly under prefix ("" or ending in '/') of the bucket whose URL is
 * bucket_url (s3_object_url of key ""), through r's signer (remote_opts.s3), sorted by
 * name, each name once (a listing that changed between pages gives a name once); the
 * names left out are logged. Their names take at most *budget bytes (each with its
 * NUL), which is made less by what they take. 0, or -1 with one phrase in err (S3's
 * error code, the context). */
int s3_list(struct remote *r, const char *bucket_url, const char *prefix, uint64_t *budget,
            struct s3_entry **out, size_t *n, char err[GGUF_ERR_MAX]);
void s3_entries_free(struct s3_entry *e, size_t n);

/* What one page says beside its entries. */
struct s3_page {
	bool truncated;             /* <IsTruncated>true */
	char token[S3_TOKEN_MAX];   /* <NextContinuationToken>, or "" */
	unsigned refused;           /* names left out */
	const char *why;            /* the last one's reason (static text), or NULL */
};

/* One page's XML (len bytes, hostile) read: its entries under prefix appended to *out
 * (*n of them, room for *cap; grown with realloc, the caller frees with
 * s3_entries_free), within *budget bytes of names (made less). 0, or -1 with one
 * phrase in err and nothing of this page added. For s3_list, its tests and the fuzzer. */
int s3_list_parse(const char *xml, size_t len, const char *prefix, struct s3_entry **out,
                  size_t *n, size_t *cap, uint64_t *budget, struct s3_page *res,
                  char err[GGUF_ERR_MAX]);

#endif
