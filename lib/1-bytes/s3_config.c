#include "s3_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "s3.h"
#include "token.h"

#define FILE_MAX (1u << 20)   /* an AWS file larger than this is not one */

/* What a profile's section of one file says (each NULL when it does not). */
struct profile {
	bool found;              /* the file has the section */
	char *access_key, *secret_key, *session_token, *region, *endpoint;
	char *s3_endpoint;       /* endpoint_url inside its "s3 =" block */
};

static void profile_free(struct profile *p)
{
	token_free(p->access_key);
	token_free(p->secret_key);
	token_free(p->session_token);
	free(p->region);
	free(p->endpoint);
	free(p->s3_endpoint);
	*p = (struct profile){ 0 };
}

/* s[0..n) without its leading and trailing blanks, as bounds. */
static void trim(const char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t'))
		(*s)++, (*n)--;
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
		(*n)--;
}

/* Whether the section header text h (inside [ ]) names profile in a credentials file
 * (config false: "NAME") or a config file ("profile NAME", or "default"). */
static bool section_is(const char *h, size_t n, const char *profile, bool config)
{
	size_t pn = strlen(profile);
	if (config && n > 8 && strncmp(h, "profile", 7) == 0 && (h[7] == ' ' || h[7] == '\t')) {
		const char *rest = h + 8;
		size_t rn = n - 8;
		trim(&rest, &rn);
		return rn == pn && strncmp(rest, profile, pn) == 0;
	}
	if (config && strcmp(profile, "default") != 0)
		return false;
	return n == pn && strncmp(h, profile, pn) == 0;
}

/* Sets *dst to a copy of v[0..n) unless already set (the first one counts); false when
 * out of memory. */
static bool take(char **dst, const char *v, size_t n)
{
	if (*dst)
		return true;
	*dst = strndup(v, n);
	return *dst != NULL;
}

/* Reads the section of profile from text (an INI file as the AWS CLI writes them:
 * "[section]", "key = value", '#' and ';' comments, an indented block of sub-keys after
 * "name =" with no value). False when out of memory. */
static bool parse_profile(const char *text, const char *profile, bool config, struct profile *p)
{
	bool in = false, in_block = false, in_s3 = false;
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		const char *next = end ? end + 1 : line + n;
		bool indented = n && (line[0] == ' ' || line[0] == '\t');
		const char *s = line;
		trim(&s, &n);
		line = next;
		if (!n || s[0] == '#' || s[0] == ';')
			continue;
		if (s[0] == '[') {
			const char *close = memchr(s, ']', n);
			const char *h = s + 1;
			size_t hn = close ? (size_t)(close - h) : 0;
			trim(&h, &hn);
			in = close && section_is(h, hn, profile, config);
			p->found |= in;
			in_block = in_s3 = false;
			continue;
		}
		if (!in)
			continue;
		const char *eq = memchr(s, '=', n);
		if (!eq)
			continue;
		const char *k = s, *v = eq + 1;
		size_t kn = (size_t)(eq - s), vn = n - kn - 1;
		trim(&k, &kn);
		trim(&v, &vn);
		/* an indented line is a sub-key only inside a block ("name =" then indented
		 * lines); elsewhere it is a key like any other */
		if (!(indented && in_block)) {
			indented = false;
			in_block = vn == 0;
			in_s3 = in_block && kn == 2 && strncmp(k, "s3", 2) == 0;
		}
#define KEY(name) (kn == sizeof name - 1 && strncmp(k, name, kn) == 0)
		bool ok = true;
		if (indented && in_s3) {
			if (KEY("endpoint_url"))
				ok = take(&p->s3_endpoint, v, vn);
		} else if (indented || !vn) {
			continue;   /* another block's sub-keys, or a block's head */
		} else if (KEY("aws_access_key_id")) {
			ok = take(&p->access_key, v, vn);
		} else if (KEY("aws_secret_access_key")) {
			ok = take(&p->secret_key, v, vn);
		} else if (KEY("aws_session_token")) {
			ok = take(&p->session_token, v, vn);
		} else if (KEY("region")) {
			ok = take(&p->region, v, vn);
		} else if (KEY("endpoint_url")) {
			ok = take(&p->endpoint, v, vn);
		}
#undef KEY
		if (!ok)
			return false;
	}
	return true;
}

/* The whole of file path, NUL-terminated, in *text (NULL when the file does not exist:
 * not an error); *open_mode says whether group or others may read it. 0, or -1 with
 * err. */
static int read_file(const char *path, char **text, bool *open_mode, char *err, size_t size)
{
	*text = NULL;
	*open_mode = false;
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, size, "%s: cannot read it: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
		snprintf(err, size, "%s: not a regular file of at most %u bytes", path, FILE_MAX);
		fclose(f);
		return -1;
	}
	*open_mode = (st.st_mode & 044) != 0;
	char *t = malloc((size_t)st.st_size + 1);
	size_t got = t ? fread(t, 1, (size_t)st.st_size, f) : 0;
	bool failed = !t || ferror(f);
	fclose(f);
	if (failed) {
		snprintf(err, size, "%s: cannot read it", path);
		free(t);
		return -1;
	}
	t[got] = 0;
	if (memchr(t, 0, got)) {
		snprintf(err, size, "%s: holds a NUL byte: not an AWS file", path);
		token_free(t);
		return -1;
	}
	*text = t;
	return 0;
}

/* The path of an AWS file: the variable's value, else ~/.aws/NAME (NULL without HOME). */
static char *aws_file(s3_env_fn env, const char *var, const char *name)
{
	const char *v = env(var);
	if (v && *v)
		return strdup(v);
	const char *home = env("HOME");
	if (!home || !*home)
		return NULL;
	size_t n = strlen(home) + strlen(name) + 8;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/.aws/%s", home, name);
	return p;
}

/* env(name) when set and not empty, else NULL. */
static const char *env_set(s3_env_fn env, const char *name)
{
	const char *v = env(name);
	return v && *v ? v : NULL;
}

/* True when s is all visible ASCII (it goes into a header line or libcurl's signer). */
static bool visible(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return false;
	return *s != 0;
}

/* True when s can be a region: 1..64 of [A-Za-z0-9-_] (it is a part of libcurl's
 * "aws:amz:REGION:s3", which ':' would split). */
static bool region_ok(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");
	return n && n <= 64 && !s[n];
}

/* Reads one AWS file (path NULL: none) for profile into p, *open_mode set when group or
 * others may read it (the caller refuses it if it takes a secret from it); 0, or -1
 * with err. */
static int load(const char *path, const char *profile, bool config, struct profile *p,
                bool *open_mode, char *err, size_t size)
{
	char *text;
	if (!path)
		return 0;
	if (read_file(path, &text, open_mode, err, size) < 0)
		return -1;
	if (!text)
		return 0;
	bool ok = parse_profile(text, profile, config, p);
	token_free(text);
	if (!ok) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	return 0;
}

/* What s3_config_find has read: the profile's name and the two AWS files' paths and
 * sections, each file's section with whether others may read that file. */
struct aws_files {
	const char *profile;
	char *cred_path, *conf_path;
	struct profile cred, conf;
	bool cred_open, conf_open;
};

/* Takes the credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN, of which at least one of the first two is set; 0, or -1 with err. */
static int credentials_from_env(struct s3_config *c, s3_env_fn env, char *err, size_t size)
{
	const char *akid = env_set(env, "AWS_ACCESS_KEY_ID");
	const char *secret = env_set(env, "AWS_SECRET_ACCESS_KEY");
	if (!akid || !secret) {
		snprintf(err, size, "%s is set but %s is not", akid ? "AWS_ACCESS_KEY_ID" :
		         "AWS_SECRET_ACCESS_KEY", akid ? "AWS_SECRET_ACCESS_KEY" :
		         "AWS_ACCESS_KEY_ID");
		return -1;
	}
	c->access_key = strdup(akid);
	c->secret_key = strdup(secret);
	const char *token = env_set(env, "AWS_SESSION_TOKEN");
	c->session_token = token ? strdup(token) : NULL;
	if (!c->access_key || !c->secret_key || (token && !c->session_token)) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	snprintf(c->credentials_from, S3_FROM_MAX, "AWS_ACCESS_KEY_ID%s",
	         token ? " and AWS_SESSION_TOKEN" : "");
	return 0;
}

/* Takes the credentials of f's profile from the credentials file, or else from the
 * config file, as the AWS CLI does; a file others may read is refused. 0, or -1 with
 * err. */
static int credentials_from_files(struct s3_config *c, struct aws_files *f, char *err,
                                  size_t size)
{
	struct profile *p = f->cred.access_key || f->cred.secret_key ? &f->cred : &f->conf;
	const char *path = p == &f->cred ? f->cred_path : f->conf_path;
	if (!p->access_key && !p->secret_key) {
		snprintf(err, size, "no AWS credentials: none in AWS_ACCESS_KEY_ID and "
		         "AWS_SECRET_ACCESS_KEY, nor for profile '%s' in %s or %s (-o "
		         "s3_anonymous reads a public bucket without)", f->profile,
		         f->cred_path ? f->cred_path : "~/.aws/credentials",
		         f->conf_path ? f->conf_path : "~/.aws/config");
		return -1;
	}
	if (p == &f->cred ? f->cred_open : f->conf_open) {
		snprintf(err, size, "%s: holds an AWS secret and is readable by group or others: "
		         "chmod go-rw it", path);
		return -1;
	}
	if (!p->access_key || !p->secret_key) {
		snprintf(err, size, "%s: profile '%s' has %s but not %s", path, f->profile,
		         p->access_key ? "aws_access_key_id" : "aws_secret_access_key",
		         p->access_key ? "aws_secret_access_key" : "aws_access_key_id");
		return -1;
	}
	c->access_key = p->access_key, p->access_key = NULL;
	c->secret_key = p->secret_key, p->secret_key = NULL;
	c->session_token = p->session_token, p->session_token = NULL;
	snprintf(c->credentials_from, S3_FROM_MAX, "profile '%s' in %s", f->profile, path);
	return 0;
}

/* Refuses credentials that no AWS key has (an id with ':' or any with a space or a
 * control byte would break the signed header); 0, or -1 with err. */
static int credentials_check(const struct s3_config *c, char *err, size_t size)
{
	if (c->access_key && (!visible(c->access_key) || strchr(c->access_key, ':'))) {
		snprintf(err, size, "the access key id (%s) holds a byte no access key id has",
		         c->credentials_from);
		return -1;
	}
	if ((c->secret_key && !visible(c->secret_key)) ||
	    (c->session_token && !visible(c->session_token))) {
		snprintf(err, size, "the secret key or session token (%s) holds a space, a line "
		         "break or another byte that none has", c->credentials_from);
		return -1;
	}
	return 0;
}

/* Sets the region and where it came from: AWS_REGION, AWS_DEFAULT_REGION, the profile's
 * config, else us-east-1; 0, or -1 with err. */
static int region_find(struct s3_config *c, s3_env_fn env, const struct aws_files *f,
                       char *err, size_t size)
{
	const char *region;
	if ((region = env_set(env, "AWS_REGION"))) {
		snprintf(c->region_from, S3_FROM_MAX, "AWS_REGION");
	} else if ((region = env_set(env, "AWS_DEFAULT_REGION"))) {
		snprintf(c->region_from, S3_FROM_MAX, "AWS_DEFAULT_REGION");
	} else if ((region = f->conf.region)) {
		snprintf(c->region_from, S3_FROM_MAX, "profile '%s' in %s", f->profile, f->conf_path);
	} else {
		region = "us-east-1";
		snprintf(c->region_from, S3_FROM_MAX, "the default");
	}
	if (!region_ok(region)) {
		snprintf(err, size, "the region (%s) is not a region name (letters, digits, '-')",
		         c->region_from);
		return -1;
	}
	if (!(c->region = strdup(region))) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	return 0;
}

/* Sets the endpoint (NULL: AWS's own for the region) and where it came from:
 * AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's config (its s3 block first); 0,
 * or -1 with err. */
static int endpoint_find(struct s3_config *c, s3_env_fn env, const struct aws_files *f,
                         char *err, size_t size)
{
	const char *endpoint;
	if ((endpoint = env_set(env, "AWS_ENDPOINT_URL_S3")))
		snprintf(c->endpoint_from, S3_FROM_MAX, "AWS_ENDPOINT_URL_S3");
	else if ((endpoint = env_set(env, "AWS_ENDPOINT_URL")))
		snprintf(c->endpoint_from, S3_FROM_MAX, "AWS_ENDPOINT_URL");
	else if ((endpoint = f->conf.s3_endpoint ? f->conf.s3_endpoint : f->conf.endpoint))
		snprintf(c->endpoint_from, S3_FROM_MAX, "profile '%s' in %s", f->profile, f->conf_path);
	else
		snprintf(c->endpoint_from, S3_FROM_MAX, "AWS's, for the region");
	c->endpoint = endpoint ? strdup(endpoint) : NULL;
	if (endpoint && !c->endpoint) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	return 0;
}

int s3_config_find(struct s3_config *c, s3_env_fn env, bool anonymous, char *err, size_t size)
{
	*c = (struct s3_config){ 0 };
	const char *profile_env = env_set(env, "AWS_PROFILE");
	struct aws_files f = {
		.profile = profile_env ? profile_env : "default",
		.cred_path = aws_file(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials"),
		.conf_path = aws_file(env, "AWS_CONFIG_FILE", "config"),
	};
	bool from_env = !anonymous && (env_set(env, "AWS_ACCESS_KEY_ID") ||
	                               env_set(env, "AWS_SECRET_ACCESS_KEY"));
	int ret = -1;

	/* the credentials file only when the credentials may come from it */
	if (!anonymous && !from_env &&
	    load(f.cred_path, f.profile, false, &f.cred, &f.cred_open, err, size) < 0)
		goto done;
	if (load(f.conf_path, f.profile, true, &f.conf, &f.conf_open, err, size) < 0)
		goto done;
	if (profile_env && !from_env && !f.cred.found && !f.conf.found && !anonymous) {
		snprintf(err, size, "AWS_PROFILE '%s' is in neither %s nor %s", f.profile,
		         f.cred_path ? f.cred_path : "~/.aws/credentials",
		         f.conf_path ? f.conf_path : "~/.aws/config");
		goto done;
	}
	if (anonymous)
		snprintf(c->credentials_from, S3_FROM_MAX, "none (-o s3_anonymous)");
	else if ((from_env ? credentials_from_env(c, env, err, size)
	                   : credentials_from_files(c, &f, err, size)) < 0)
		goto done;
	if (credentials_check(c, err, size) < 0 || region_find(c, env, &f, err, size) < 0 ||
	    endpoint_find(c, env, &f, err, size) < 0)
		goto done;
	ret = 0;
done:
	if (ret < 0)
		s3_config_free(c);
	profile_free(&f.cred);
	profile_free(&f.conf);
	free(f.cred_path);
	free(f.conf_path);
	return ret;
}

void s3_config_free(struct s3_config *c)
{
	token_free(c->access_key);
	token_free(c->secret_key);
	token_free(c->session_token);
	free(c->region);
	free(c->endpoint);
	c->access_key = c->secret_key = c->session_token = c->region = c->endpoint = NULL;
}

void s3_config_access_free(struct s3_config_access *a)
{
	s3_config_free(&a->c);
	free(a->bucket);
	free(a->key);
	free(a->endpoint);
	memset(a, 0, sizeof *a);
}

int s3_config_access(struct s3_config_access *a, const char *name, s3_env_fn env,
                     bool anonymous, bool virtual_host, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	*a = (struct s3_config_access){ 0 };
	if (s3_split(name, &a->bucket, &a->key, why, sizeof why) < 0 ||
	    s3_config_find(&a->c, env, anonymous, why, sizeof why) < 0) {
		gguf_errf(err, "%s: %s", name, why);
		s3_config_access_free(a);
		return -1;
	}
	a->endpoint = a->c.endpoint ? strdup(a->c.endpoint) : s3_aws_endpoint(a->c.region);
	if (!a->endpoint) {
		gguf_errf(err, "out of memory");
		s3_config_access_free(a);
		return -1;
	}
	a->virtual_host = virtual_host || (!a->c.endpoint && s3_bucket_is_host(a->bucket));
	snprintf(a->context, sizeof a->context, "credentials: %s; region %s (%s); endpoint %s (%s)",
	         a->c.credentials_from, a->c.region, a->c.region_from, a->endpoint,
	         a->c.endpoint_from);
	a->s3 = (struct remote_s3){
		.access_key = a->c.access_key, .secret_key = a->c.secret_key,
		.session_token = a->c.session_token, .region = a->c.region,
		.bucket = a->bucket, .context = a->context,
	};
	return 0;
}
