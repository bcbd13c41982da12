/* Remote model names: which arguments are URLs, hf:// expansion, what of a URL may be
 * shown, where a redirect leads, the token's same-origin rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "url.h"

static void test_is_remote(void **state)
{
	(void)state;
	assert_true(url_is_remote("http://h/m.gguf"));
	assert_true(url_is_remote("HTTPS://h/m.gguf"));
	assert_true(url_is_remote("hf://o/r/m.gguf"));
	assert_false(url_is_remote("/models/m.gguf"));
	assert_false(url_is_remote("m.gguf"));
	assert_false(url_is_remote("ftp://h/m.gguf"));
	assert_false(url_is_remote("http:/h/m.gguf"));
}

/* url_expand(given, endpoint) equals want. */
static void expect_expand(const char *given, const char *endpoint, const char *want)
{
	char err[256];
	struct url_rev rev = { 99, 99 };
	char *u = url_expand(given, endpoint, &rev, err, sizeof err);
	assert_non_null(u);
	assert_string_equal(u, want);
	if (strncmp(given, "hf://", 5) == 0) {
		/* the revision is where it says, and pinning replaces just it */
		const char *at = strchr(given, '@');
		const char *r = at ? at + 1 : "main";
		size_t len = at ? strcspn(r, "/") : 4;
		assert_int_equal(rev.len, len);
		assert_memory_equal(u + rev.at, r, len);
		char *pinned = url_with_revision(u, rev, "0123456789abcdef0123456789abcdef01234567");
		assert_non_null(pinned);
		assert_int_equal(strlen(pinned), strlen(u) - len + 40);
		assert_memory_equal(pinned, u, rev.at);
		assert_string_equal(pinned + rev.at + 40, u + rev.at + len);
		free(pinned);
	} else {
		assert_int_equal(rev.len, 0);
	}
	free(u);
}

static void expect_refused(const char *given)
{
	char err[256] = "";
	char *u = url_expand(given, NULL, NULL, err, sizeof err);
	assert_null(u);
	assert_true(err[0] != 0);
}

static void test_hf_forms(void **state)
{
	(void)state;
	expect_expand("hf://bartowski/Qwen-GGUF/Qwen-Q4_K_M.gguf", NULL,
	              "https://huggingface.co/bartowski/Qwen-GGUF/resolve/main/Qwen-Q4_K_M.gguf");
	expect_expand("hf://o/r@v1.0/sub/dir/f.gguf", "",
	              "https://huggingface.co/o/r/resolve/v1.0/sub/dir/f.gguf");
	expect_expand("hf://o/r/f.gguf", "http://127.0.0.1:8080/",
	              "http://127.0.0.1:8080/o/r/resolve/main/f.gguf");
	expect_expand("hf://o/r@abc123/f.gguf", "https://hub.local:8443/mirror",
	              "https://hub.local:8443/mirror/o/r/resolve/abc123/f.gguf");
	expect_expand("http://h:1/a/b.gguf?x=1", NULL, "http://h:1/a/b.gguf?x=1");
	expect_refused("hf://o");
	expect_refused("hf://o/r");
	expect_refused("hf://o/r/");
	expect_refused("hf:///r/f.gguf");
	expect_refused("hf://o//f.gguf");
	expect_refused("hf://o/@v/f.gguf");
	expect_refused("hf://o/r@/f.gguf");
	expect_refused("hf://o/r/../../x.gguf");
	expect_refused("hf://o/r/f.gguf?token=x");
	expect_refused("http://");
	char err[256];
	assert_null(url_expand("hf://o/r/f.gguf", "ftp://x", NULL, err, sizeof err));
	struct url_rev outside = { 10, 50 };
	assert_null(url_with_revision("http://h/x", outside, "abc"));
	assert_non_null(strstr(err, "HF_ENDPOINT"));
}

static void expect_display(const char *url, const char *want)
{
	char *d = url_display(url);
	assert_non_null(d);
	assert_string_equal(d, want);
	free(d);
}

static void test_display_strips_credentials_and_query(void **state)
{
	(void)state;
	expect_display("http://user:secret@h:8080/m/x.gguf?X-Amz-Signature=abc#frag",
	               "http://h:8080/m/x.gguf");
	expect_display("https://token@h/x.gguf", "https://h/x.gguf");
	expect_display("https://h/dir/x.gguf", "https://h/dir/x.gguf");
	assert_null(url_display("not a url"));
}

/* The disk cache's key: no credentials, no fragment, the query as a hash that tells
 * queries apart and never shows them. */
static void test_cache_key_keeps_the_query(void **state)
{
	(void)state;
	char *plain = url_cache_key("http://user:secret@h:8080/m.gguf#frag");
	char *a = url_cache_key("http://user:secret@h:8080/m.gguf?f=a&sig=SECRET");
	char *a2 = url_cache_key("http://h:8080/m.gguf?f=a&sig=SECRET");
	char *b = url_cache_key("http://h:8080/m.gguf?f=b&sig=SECRET");
	assert_non_null(plain), assert_non_null(a), assert_non_null(a2), assert_non_null(b);
	assert_string_equal(plain, "http://h:8080/m.gguf");
	assert_string_equal(a, a2);
	assert_string_not_equal(a, b);
	assert_int_equal(strncmp(a, "http://h:8080/m.gguf?xxh3:", 26), 0);
	assert_int_equal(strlen(a), 26 + 32);
	assert_null(strstr(a, "SECRET"));
	assert_null(strstr(a, "secret"));
	assert_null(url_cache_key("not a url"));
	free(plain), free(a), free(a2), free(b);
}

static void expect_resolve(const char *base, const char *loc, const char *want)
{
	char *r = url_resolve(base, loc);
	if (!want) {
		assert_null(r);
		return;
	}
	assert_non_null(r);
	assert_string_equal(r, want);
	free(r);
}

static void test_redirects_resolve(void **state)
{
	(void)state;
	const char *base = "http://127.0.0.1:8080/o/r/resolve/main/m.gguf";
	expect_resolve(base, "http://127.0.0.2:9090/cdn/m.gguf?sig=1",
	               "http://127.0.0.2:9090/cdn/m.gguf?sig=1");
	expect_resolve(base, "/cdn/m.gguf", "http://127.0.0.1:8080/cdn/m.gguf");
	expect_resolve(base, "../x.gguf", "http://127.0.0.1:8080/o/r/resolve/x.gguf");
	expect_resolve(base, "other.gguf", "http://127.0.0.1:8080/o/r/resolve/main/other.gguf");
	expect_resolve(base, "//127.0.0.2/y", "http://127.0.0.2/y");
	expect_resolve(base, "ftp://127.0.0.1/m.gguf", NULL);
	expect_resolve(base, "file:///etc/passwd", NULL);
}

static void test_same_origin(void **state)
{
	(void)state;
	assert_true(url_same_origin("http://h/a", "http://h:80/b?x"));
	assert_true(url_same_origin("https://H.example/a", "https://h.EXAMPLE:443/b"));
	assert_true(url_same_origin("http://u:p@h:81/a", "http://h:81/z"));
	assert_false(url_same_origin("http://h/a", "https://h/a"));
	assert_false(url_same_origin("http://h:80/a", "http://h:81/a"));
	assert_false(url_same_origin("http://127.0.0.1:80/a", "http://127.0.0.2:80/a"));
	assert_false(url_same_origin("http://h.example/a", "http://h.example.evil/a"));
	assert_false(url_same_origin("http://h/a", "not a url"));
}

UNIT_TESTS(cmocka_unit_test(test_is_remote),
           cmocka_unit_test(test_hf_forms),
           cmocka_unit_test(test_display_strips_credentials_and_query),
           cmocka_unit_test(test_cache_key_keeps_the_query),
           cmocka_unit_test(test_redirects_resolve),
           cmocka_unit_test(test_same_origin))
