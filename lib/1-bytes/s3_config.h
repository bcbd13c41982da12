/* Where an s3:// mount's credentials, region and endpoint come from, found as the AWS
 * CLI finds them:
 *   credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else
 *     the profile (AWS_PROFILE, else "default") in AWS_SHARED_CREDENTIALS_FILE (else
 *     ~/.aws/credentials), else the same profile in the config file;
 *   region: AWS_REGION, AWS_DEFAULT_REGION, the profile's region in AWS_CONFIG_FILE
 *     (else ~/.aws/config; section [profile NAME], [default] for default), us-east-1;
 *   endpoint: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url (its
 *     "s3 =" block's first), else AWS's own (none here: custom_endpoint false).
 * A file that holds a secret and is readable by group or others is refused, as
 * -o token_file is. The secrets are never part of any message. */
#ifndef GGUFS_S3_CONFIG_H
#define GGUFS_S3_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "errline.h"
#include "remote.h"

#define S3_FROM_MAX 512

struct s3_config {
	char *access_key;        /* NULL: anonymous (no signature) */
	char *secret_key;
	char *session_token;     /* NULL when none */
	char *region;
	char *endpoint;          /* NULL: AWS's (s3_aws_endpoint(region)) */
	/* where each came from, for messages: "AWS_ACCESS_KEY_ID", "profile 'x' in
	 * /root/.aws/credentials", "-o s3_anonymous"; "AWS_REGION", "the default" */
	char credentials_from[S3_FROM_MAX];
	char region_from[S3_FROM_MAX];
	char endpoint_from[S3_FROM_MAX];
};

/* How the environment is read (getenv; a test passes its own). */
typedef const char *(*s3_env_fn)(const char *name);

/* Fills c (zeroed first) from env and the files it names; anonymous: no credentials are
 * looked for. 0, or -1 with one phrase in err (no secret in it): no credentials at all,
 * half of a pair, an AWS_PROFILE that neither file has, an unreadable or too open file,
 * a key, secret, token or region holding a byte that cannot go into a request. */
int s3_config_find(struct s3_config *c, s3_env_fn env, bool anonymous, char *err,
                   size_t size);

/* Frees what c holds, the secrets wiped first. */
void s3_config_free(struct s3_config *c);

/* What an s3:// name is fetched with: its bucket and key, the configuration found
 * (s3_config_find), the endpoint, the addressing, and the S3 side of the remote options
 * (s3, whose strings point into this struct: it must stay where it is while used). */
struct s3_config_access {
	char *bucket, *key, *endpoint;
	bool virtual_host;
	struct s3_config c;
	char context[3 * S3_FROM_MAX + 512];
	struct remote_s3 s3;
};

/* Fills a (zeroed first) for name (s3://BUCKET[/KEY]), the configuration read from env:
 * anonymous as s3_config_find; AWS's own endpoint is addressed virtual-hosted where the
 * bucket can be a host name (its certificate covers one label), any other (MinIO, Ceph,
 * a proxy) by path unless virtual_host. 0, or -1 with one line in err ("NAME: ...")
 * that names the credentials' source, region and endpoint, never a secret; a is freed
 * then. */
int s3_config_access(struct s3_config_access *a, const char *name, s3_env_fn env,
                     bool anonymous, bool virtual_host, char err[GGUF_ERR_MAX]);
/* Frees what a holds, the secrets wiped first. */
void s3_config_access_free(struct s3_config_access *a);

#endif
