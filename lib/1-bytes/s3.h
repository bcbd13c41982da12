/* s3:// names as S3 requests: the bucket and key a name holds, a key encoded by S3's
 * rules (the path is signed exactly as sent: libcurl's Signature V4 signer does not
 * encode it), a query sorted and encoded as Signature V4 wants it, and the http(s) URL
 * of an object at an endpoint, virtual-hosted (BUCKET.HOST) or path style (HOST/BUCKET).
 * Every function that returns a string returns a malloc'ed one the caller frees, or
 * NULL (with err, when it takes one). */
#ifndef GGUFS_S3_H
#define GGUFS_S3_H

#include <stdbool.h>
#include <stddef.h>

/* True when s is an s3:// name (scheme in any case). */
bool s3_is_name(const char *s);

/* The bucket and key of s3://BUCKET[/KEY]: *key is "" for a bucket alone (and for
 * s3://BUCKET/). The key is taken as it is written (no %XX decoding: S3 keys are
 * raw text, as the AWS CLI takes them). -1 with err for a malformed name: a bucket
 * empty, longer than 255 bytes or holding anything but letters, digits, '.', '-' and
 * '_' (S3's names, MinIO's and old us-east-1 ones). */
int s3_split(const char *given, char **bucket, char **key, char *err, size_t size);

/* s with every byte but A-Z a-z 0-9 - . _ ~ written %XX (upper-case hex), and '/' too
 * unless keep_slash: S3's URI encoding of a key (keep_slash) or a query part. */
char *s3_encode(const char *s, bool keep_slash);

/* One query parameter, not encoded. */
struct s3_param {
	const char *name, *value;
};

/* The query of n parameters as Signature V4 signs it and S3 reads it: each name and
 * value encoded (s3_encode), sorted by encoded name then value, joined by '&' ("" for
 * none). */
char *s3_query(const struct s3_param *params, size_t n);

/* True when bucket can be a host name's first label: 3..63 of [a-z0-9-], no dot (a
 * dot would break the certificate's one-label wildcard), starting and ending with a
 * letter or digit. */
bool s3_bucket_is_host(const char *bucket);

/* The URL of key (raw; "" for the bucket itself) in bucket at endpoint (an http(s) URL
 * without query, user or fragment, perhaps with a path): virtual-hosted,
 * scheme://BUCKET.HOST[:PORT]/PATH/KEY, when virtual_host, else path style,
 * scheme://HOST[:PORT]/PATH/BUCKET/KEY; the key encoded by s3_encode. An endpoint
 * refused is named in err as url_display shows it: no user, password or query. */
char *s3_object_url(const char *endpoint, const char *bucket, const char *key,
                    bool virtual_host, char *err, size_t size);

/* The endpoint of AWS's S3 in region: https://s3.REGION.amazonaws.com. */
char *s3_aws_endpoint(const char *region);

#endif
