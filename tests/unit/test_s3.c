/* s3:// names: bucket and key, S3's key and query encoding, the object URL in both
 * addressing styles, credentials found as the AWS CLI finds them (environment, profile
 * in the credentials and config files, refused modes), and S3 error bodies read as
 * hostile XML. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "s3.h"
#include "s3_config.h"
#include "s3_error.h"
#include "s3_list.h"

static void test_split(void **state)
{
	(void)state;
	char err[256], *b, *k;
	assert_true(s3_is_name("s3://b/k") && s3_is_name("S3://b") && !s3_is_name("s3:/b"));
	assert_int_equal(s3_split("s3://my-bucket/dir/a b+c%20.gguf", &b, &k, err, sizeof err), 0);
	assert_string_equal(b, "my-bucket");
	assert_string_equal(k, "dir/a b+c%20.gguf");   /* raw: no %XX decoding */
	free(b), free(k);
	assert_int_equal(s3_split("s3://bkt", &b, &k, err, sizeof err), 0);
	assert_string_equal(k, "");
	free(b), free(k);
	assert_int_equal(s3_split("s3://bkt/", &b, &k, err, sizeof err), 0);
	assert_string_equal(k, "");
	free(b), free(k);
	static const char *const bad[] = { "s3://", "s3:///k", "s3://b b/k", "s3://b%2F/k",
	                                   "s3://b:1/k", "s3://user@b/k", "http://b/k" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		assert_int_equal(s3_split(bad[i], &b, &k, err, sizeof err), -1);
		assert_null(b);
		assert_true(err[0]);
	}
	char longer[300] = "s3://";
	memset(longer + 5, 'a', 256);
	assert_int_equal(s3_split(longer, &b, &k, err, sizeof err), -1);
}

/* s3_encode(s, keep_slash) equals want. */
static void expect_encode(const char *s, bool keep_slash, const char *want)
{
	char *e = s3_encode(s, keep_slash);
	assert_non_null(e);
	assert_string_equal(e, want);
	free(e);
}

static void test_encode(void **state)
{
	(void)state;
	expect_encode("AZaz09-._~", true, "AZaz09-._~");
	expect_encode("dir/a b+c=d%e.gguf", true, "dir/a%20b%2Bc%3Dd%25e.gguf");
	expect_encode("dir/a b", false, "dir%2Fa%20b");
	expect_encode("\xc3\xa9t\xc3\xa9/\xe2\x82\xac", true, "%C3%A9t%C3%A9/%E2%82%AC");
	expect_encode("!*'();:@&$,?#[]", true, "%21%2A%27%28%29%3B%3A%40%26%24%2C%3F%23%5B%5D");
	expect_encode("\x01\x7f\xff", true, "%01%7F%FF");
	expect_encode("", true, "");
}

static void test_query(void **state)
{
	(void)state;
	struct s3_param p[] = {
		{ "prefix", "models/a b/" }, { "list-type", "2" }, { "delimiter", "/" },
		{ "continuation-token", "1/x+y=" }, { "a", "2" }, { "a", "1" },
	};
	char *q = s3_query(p, sizeof p / sizeof p[0]);
	assert_non_null(q);
	assert_string_equal(q, "a=1&a=2&continuation-token=1%2Fx%2By%3D&delimiter=%2F&"
	                       "list-type=2&prefix=models%2Fa%20b%2F");
	free(q);
	q = s3_query(NULL, 0);
	assert_string_equal(q, "");
	free(q);
}

/* s3_object_url(...) equals want. */
static void expect_url(const char *endpoint, const char *bucket, const char *key, bool vh,
                       const char *want)
{
	char err[256];
	char *u = s3_object_url(endpoint, bucket, key, vh, err, sizeof err);
	if (!want) {
		assert_null(u);
		assert_true(err[0]);
		return;
	}
	assert_non_null(u);
	assert_string_equal(u, want);
	free(u);
}

static void test_object_url(void **state)
{
	(void)state;
	expect_url("http://127.0.0.1:9000", "b", "m 1.gguf", false, "http://127.0.0.1:9000/b/m%201.gguf");
	expect_url("http://127.0.0.1:9000/", "b", "d/m.gguf", false, "http://127.0.0.1:9000/b/d/m.gguf");
	expect_url("https://gw.example/s3//", "b", "m", false, "https://gw.example/s3/b/m");
	expect_url("http://localhost:9000", "bkt", "a+b.gguf", true, "http://bkt.localhost:9000/a%2Bb.gguf");
	expect_url("https://s3.eu-west-1.amazonaws.com", "bkt", "k", true,
	           "https://bkt.s3.eu-west-1.amazonaws.com/k");
	expect_url("http://127.0.0.1:9000", "bkt", "", false, "http://127.0.0.1:9000/bkt");
	expect_url("http://localhost:9000", "bkt", "", true, "http://bkt.localhost:9000/");
	expect_url("http://localhost:9000", "my.bucket", "k", true, NULL);   /* not a host label */
	expect_url("http://localhost:9000", "Big", "k", true, NULL);
	expect_url("ftp://localhost:9000", "b", "k", false, NULL);
	expect_url("http://u:p@localhost:9000", "b", "k", false, NULL);
	expect_url("http://localhost:9000/?x=1", "b", "k", false, NULL);
	assert_true(s3_bucket_is_host("abc") && s3_bucket_is_host("a-1-b"));
	assert_false(s3_bucket_is_host("ab") || s3_bucket_is_host("-ab") || s3_bucket_is_host("a.bc") ||
	             s3_bucket_is_host("a_bc"));
	char *e = s3_aws_endpoint("eu-west-1");
	assert_string_equal(e, "https://s3.eu-west-1.amazonaws.com");
	free(e);
}

/* ---- credentials ---- */

/* The environment the config is found in: NAME=VALUE pairs. */
static const char *fake_env[32];

static const char *env_get(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; fake_env[i]; i++)
		if (strncmp(fake_env[i], name, n) == 0 && fake_env[i][n] == '=')
			return fake_env[i] + n + 1;
	return NULL;
}

static char home[64];

/* A file under the test's HOME with text and mode; its path in path. */
static void write_file(const char *name, const char *text, mode_t mode, char *path, size_t size)
{
	snprintf(path, size, "%s/%s", home, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int make_home(void **state)
{
	(void)state;
	snprintf(home, sizeof home, "/tmp/ggufs-s3-test-XXXXXX");
	assert_non_null(mkdtemp(home));
	char aws[96];
	snprintf(aws, sizeof aws, "%s/.aws", home);
	assert_int_equal(mkdir(aws, 0700), 0);
	return 0;
}

static int remove_home(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", home);
	return system(cmd) == 0 ? 0 : -1;
}

/* s3_config_find with the environment given (NULL-ended), which must fail with an error
 * containing want_err (and never the secrets, all "hush..."), or succeed when want_err is NULL. */
static int find(struct s3_config *c, const char *want_err, bool anonymous, ...)
{
	va_list ap;
	va_start(ap, anonymous);
	size_t i = 0;
	static char home_var[96];
	snprintf(home_var, sizeof home_var, "HOME=%s", home);
	fake_env[i++] = home_var;
	for (const char *s; (s = va_arg(ap, const char *)) && i + 1 < 32;)
		fake_env[i++] = s;
	fake_env[i] = NULL;
	va_end(ap);
	char err[512] = "";
	int r = s3_config_find(c, env_get, anonymous, err, sizeof err);
	if (want_err) {
		assert_int_equal(r, -1);
		if (!strstr(err, want_err))
			fail_msg("error '%s' lacks '%s'", err, want_err);
		assert_null(strstr(err, "hush"));
		assert_null(c->secret_key);
	} else if (r != 0) {
		fail_msg("unexpected error: %s", err);
	}
	return r;
}

static void test_config_env(void **state)
{
	(void)state;
	struct s3_config c;
	find(&c, NULL, false, "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=hush",
	     "AWS_SESSION_TOKEN=TOK", "AWS_DEFAULT_REGION=eu-west-3", NULL);
	assert_string_equal(c.access_key, "AKID");
	assert_string_equal(c.secret_key, "hush");
	assert_string_equal(c.session_token, "TOK");
	assert_string_equal(c.region, "eu-west-3");
	assert_string_equal(c.region_from, "AWS_DEFAULT_REGION");
	assert_null(c.endpoint);
	assert_non_null(strstr(c.credentials_from, "AWS_SESSION_TOKEN"));
	s3_config_free(&c);
	/* AWS_REGION before AWS_DEFAULT_REGION; AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL */
	find(&c, NULL, false, "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=hush",
	     "AWS_REGION=ap-south-1", "AWS_DEFAULT_REGION=eu-west-3",
	     "AWS_ENDPOINT_URL=http://a:1", "AWS_ENDPOINT_URL_S3=http://b:2", NULL);
	assert_string_equal(c.region, "ap-south-1");
	assert_string_equal(c.endpoint, "http://b:2");
	assert_string_equal(c.endpoint_from, "AWS_ENDPOINT_URL_S3");
	assert_null(c.session_token);
	s3_config_free(&c);
	find(&c, NULL, false, "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=hush", NULL);
	assert_string_equal(c.region, "us-east-1");
	s3_config_free(&c);
	find(&c, "AWS_SECRET_ACCESS_KEY is not", false, "AWS_ACCESS_KEY_ID=AKID", NULL);
	find(&c, "AWS_ACCESS_KEY_ID is not", false, "AWS_SECRET_ACCESS_KEY=hush", NULL);
	find(&c, "holds a space", false, "AWS_ACCESS_KEY_ID=AKID",
	     "AWS_SECRET_ACCESS_KEY=hush\r\nX-Injected: 1", NULL);
	find(&c, "access key id", false, "AWS_ACCESS_KEY_ID=AK:ID", "AWS_SECRET_ACCESS_KEY=hush", NULL);
	find(&c, "region", false, "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=hush",
	     "AWS_REGION=us:east", NULL);
	find(&c, "no AWS credentials", false, NULL);
	/* anonymous: no credentials looked for, region and endpoint still found */
	find(&c, NULL, true, "AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=hush",
	     "AWS_ENDPOINT_URL=http://e:1", NULL);
	assert_null(c.access_key);
	assert_null(c.secret_key);
	assert_string_equal(c.endpoint, "http://e:1");
	s3_config_free(&c);
}

static void test_config_files(void **state)
{
	(void)state;
	struct s3_config c;
	char cred[128], conf[128], other[128];
	write_file(".aws/credentials",
	           "# comment\n[default]\naws_access_key_id = DEFKEY\naws_secret_access_key=hushDEF\n"
	           "\n[work]\n  aws_access_key_id=WORKKEY  \n; c\naws_secret_access_key = hushWORK\n"
	           "aws_session_token = WORKTOKEN\r\n[half]\naws_access_key_id = H\n",
	           0600, cred, sizeof cred);
	write_file(".aws/config",
	           "[default]\nregion = eu-north-1\n[profile work]\nregion=us-west-2\n"
	           "s3 =\n  addressing_style = path\n  endpoint_url = http://127.0.0.1:9\n"
	           "endpoint_url = http://elsewhere:1\n[profile cfgonly]\naws_access_key_id = C\n"
	           "aws_secret_access_key = hushC\n[profile nocreds]\nregion = sa-east-1\n",
	           0644, conf, sizeof conf);
	find(&c, NULL, false, NULL);
	assert_string_equal(c.access_key, "DEFKEY");
	assert_string_equal(c.secret_key, "hushDEF");
	assert_null(c.session_token);
	assert_string_equal(c.region, "eu-north-1");
	assert_non_null(strstr(c.credentials_from, "profile 'default' in"));
	assert_non_null(strstr(c.credentials_from, "/.aws/credentials"));
	assert_null(c.endpoint);
	s3_config_free(&c);
	find(&c, NULL, false, "AWS_PROFILE=work", NULL);
	assert_string_equal(c.access_key, "WORKKEY");
	assert_string_equal(c.secret_key, "hushWORK");
	assert_string_equal(c.session_token, "WORKTOKEN");
	assert_string_equal(c.region, "us-west-2");
	assert_string_equal(c.endpoint, "http://127.0.0.1:9");   /* the s3 block's first */
	s3_config_free(&c);
	/* the environment's keys before any profile's, the environment's region too */
	find(&c, NULL, false, "AWS_PROFILE=work", "AWS_ACCESS_KEY_ID=E", "AWS_SECRET_ACCESS_KEY=hushE",
	     "AWS_REGION=af-south-1", NULL);
	assert_string_equal(c.access_key, "E");
	assert_string_equal(c.region, "af-south-1");
	assert_string_equal(c.endpoint, "http://127.0.0.1:9");
	s3_config_free(&c);
	find(&c, "has aws_access_key_id but not aws_secret_access_key", false, "AWS_PROFILE=half", NULL);
	find(&c, "is in neither", false, "AWS_PROFILE=nosuch", NULL);
	find(&c, "no AWS credentials", false, "AWS_PROFILE=nocreds", NULL);
	/* credentials in the config file: refused while others may read it */
	find(&c, "readable by group or others", false, "AWS_PROFILE=cfgonly", NULL);
	assert_int_equal(chmod(conf, 0600), 0);
	find(&c, NULL, false, "AWS_PROFILE=cfgonly", NULL);
	assert_string_equal(c.access_key, "C");
	s3_config_free(&c);
	/* a credentials file others may read is refused, as token_file is */
	assert_int_equal(chmod(cred, 0640), 0);
	find(&c, "readable by group or others", false, NULL);
	assert_int_equal(chmod(cred, 0600), 0);
	/* the files the variables name, instead of ~/.aws's */
	write_file("other-credentials", "[default]\naws_access_key_id=O\naws_secret_access_key=hushO\n",
	           0400, other, sizeof other);
	static char var[192];
	snprintf(var, sizeof var, "AWS_SHARED_CREDENTIALS_FILE=%s", other);
	find(&c, NULL, false, var, "AWS_CONFIG_FILE=/nonexistent/config", NULL);
	assert_string_equal(c.access_key, "O");
	assert_string_equal(c.region, "us-east-1");
	s3_config_free(&c);
	find(&c, "not a regular file", false, "AWS_SHARED_CREDENTIALS_FILE=/", NULL);
	unlink(other);
}

/* ---- error bodies ---- */

static void test_error_body(void **state)
{
	(void)state;
	struct s3_error e;
	const char *doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
	                  "<Message>The specified key does not exist.</Message><Key>a b</Key></Error>";
	assert_true(s3_error_parse(doc, strlen(doc), &e));
	assert_string_equal(e.code, "NoSuchKey");
	doc = "<Error><Code>PermanentRedirect</Code><Endpoint>b.s3.eu-west-1.amazonaws.com</Endpoint>"
	      "<Bucket>b</Bucket></Error>";
	assert_true(s3_error_parse(doc, strlen(doc), &e));
	assert_string_equal(e.endpoint, "b.s3.eu-west-1.amazonaws.com");
	doc = "<Error><Code>AuthorizationHeaderMalformed</Code><Region>eu-west-1</Region></Error>";
	assert_true(s3_error_parse(doc, strlen(doc), &e));
	assert_string_equal(e.region, "eu-west-1");
	/* hostile or foreign documents: nothing taken */
	static const char *const bad[] = {
		"", "not xml", "<Error><Code>NoSuch", "<Other><Code>X</Code></Other>",
		"<Error><Code>No Such\nKey</Code></Error>",            /* not a plain code */
		"<Error><Code>\x1b[31mX</Code></Error>",
		"<?xml version=\"1.0\"?><!DOCTYPE Error [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b "
		"\"&a;&a;&a;&a;&a;&a;&a;&a;\">]><Error><Code>&b;</Code></Error>",
		"<Error><A><B><C><D><E><F><G><H><I><Code>X</Code></I></H></G></F></E></D></C></B></A></Error>",
		"<Error><Code>AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA</Code></Error>",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_false(s3_error_parse(bad[i], strlen(bad[i]), &e));
		assert_string_equal(e.code, "");
	}
	/* a code too long in one document and the first code of two */
	doc = "<Error><Code>First</Code><Code>Second</Code></Error>";
	assert_true(s3_error_parse(doc, strlen(doc), &e));
	assert_string_equal(e.code, "First");
	/* a body cut short (the reader keeps at most its bound) is not a document */
	doc = "<Error><Code>SlowDown</Code><Message>";
	assert_false(s3_error_parse(doc, strlen(doc), &e));
}

/* One ListObjectsV2 page (s3_list_parse): keys decoded when the page says they are
 * URL-encoded (after the entries, as MinIO places it), raw when it does not; a control
 * byte, a name over 255 bytes, '.', '..' and a key outside the prefix left out one by
 * one; the names' bound. */
static void test_list_page(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX], long_name[300];
	memset(long_name, 'a', 256);
	long_name[256] = 0;
	char *page = malloc(4096);
	snprintf(page, 4096, "<ListBucketResult><IsTruncated>true</IsTruncated>"
	         "<Contents><Key>p/a+b%%2Bc%%25.txt</Key><ETag>\"e\"</ETag><Size>7</Size></Contents>"
	         "<Contents><Key>p/esc%%1Bx</Key></Contents><Contents><Key>p/nl%%0A</Key></Contents>"
	         "<Contents><Key>p/%%2E%%2E</Key></Contents><Contents><Key>q/out</Key></Contents>"
	         "<Contents><Key>p/bad%%zz</Key></Contents><Contents><Key>p/%s</Key></Contents>"
	         "<Contents><Key>p/</Key></Contents>"
	         "<CommonPrefixes><Prefix>p/dir%%20x/</Prefix></CommonPrefixes>"
	         "<EncodingType>url</EncodingType>"
	         "<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>", long_name);
	struct s3_entry *e = NULL;
	size_t n = 0, cap = 0;
	uint64_t budget = 1 << 20;
	struct s3_page pg;
	assert_int_equal(s3_list_parse(page, strlen(page), "p/", &e, &n, &cap, &budget, &pg, err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(e[0].name, "a b+c%.txt");
	/* the ETag hashed without its quotes or a weak W/: as a GET may give it */
	assert_true(e[0].etag == s3_etag_hash("e", 1));
	assert_true(e[0].etag == s3_etag_hash("W/\"e\"", 5));
	assert_true(e[0].etag != s3_etag_hash("f", 1));
	assert_int_equal(e[0].size, 7);
	assert_string_equal(e[1].name, "dir x");
	assert_true(e[1].is_prefix);
	assert_int_equal(pg.refused, 6);   /* ESC, \n, "..", outside, bad %, long; not "p/" */
	assert_true(pg.truncated);
	assert_string_equal(pg.token, "tok");
	assert_int_equal(budget, (1 << 20) - strlen("a b+c%.txt") - 1 - strlen("dir x") - 1);
	/* the same keys raw (no EncodingType): '+' and '%' are themselves */
	const char *raw = "<ListBucketResult><Contents><Key>p/a+b%41</Key></Contents>"
	                  "<Contents><Key>p/t&#9;ab</Key></Contents></ListBucketResult>";
	assert_int_equal(s3_list_parse(raw, strlen(raw), "p/", &e, &n, &cap, &budget, &pg, err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(e[2].name, "a+b%41");
	assert_int_equal(pg.refused, 1);
	/* a long ETag is kept whole up to what a GET keeps (HTTP_ETAG_MAX, 256), none past it */
	char tag[400], etags[1200];
	memset(tag, 'f', sizeof tag - 1);
	tag[sizeof tag - 1] = 0;
	snprintf(etags, sizeof etags, "<ListBucketResult><Contents><Key>p/x200</Key><ETag>%.200s"
	         "</ETag></Contents><Contents><Key>p/x300</Key><ETag>%.300s</ETag></Contents>"
	         "</ListBucketResult>", tag, tag);
	assert_int_equal(s3_list_parse(etags, strlen(etags), "p/", &e, &n, &cap, &budget, &pg, err), 0);
	assert_int_equal(n, 5);
	assert_string_equal(e[3].name, "x200");
	assert_true(e[3].etag == s3_etag_hash(tag, 200) && e[3].etag != 0);
	assert_true(e[4].etag == 0);
	/* past the bound of names: the page refused, nothing of it kept */
	budget = 5;
	assert_int_equal(s3_list_parse(raw, strlen(raw), "p/", &e, &n, &cap, &budget, &pg, err), -1);
	assert_int_equal(n, 5);
	assert_non_null(strstr(err, "MiB"));
	assert_int_equal(s3_list_parse("<x/>", 4, "p/", &e, &n, &cap, &budget, &pg, err), -1);
	s3_entries_free(e, n);
	free(page);
}

UNIT_TESTS(
	cmocka_unit_test(test_split),
	cmocka_unit_test(test_encode),
	cmocka_unit_test(test_query),
	cmocka_unit_test(test_object_url),
	cmocka_unit_test_setup_teardown(test_config_env, make_home, remove_home),
	cmocka_unit_test_setup_teardown(test_config_files, make_home, remove_home),
	cmocka_unit_test(test_error_body),
	cmocka_unit_test(test_list_page))
