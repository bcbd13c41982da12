/* The hub's listing read as hostile input (hub_listing.h): entries kept and refused,
 * the folder's prefix, LFS hashes, pages that are not arrays; the Link header's next
 * page; and hf:// names (libsource_hub.h): libraries, files and :QUANT tags. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "hub_listing.h"
#include "libsource_hub.h"

#define SHA "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"

/* The listing of the root's page (no folder prefix), which must parse and hold n
 * entries. */
static struct hub_listing parsed(const char *page, size_t n)
{
	struct hub_listing l = { 0 };
	char err[GGUF_ERR_MAX];
	if (hub_parse_page(page, strlen(page), "", &l, err) != 0)
		fail_msg("%s", err);
	assert_int_equal(l.n, n);
	return l;
}

static void test_page(void **state)
{
	(void)state;
	const char *page =
		"[{\"type\":\"file\",\"path\":\"a.gguf\",\"size\":10,\"lfs\":{\"oid\":\"" SHA "\"}},"
		" {\"type\":\"directory\",\"path\":\"d\",\"size\":0},"
		" {\"type\":\"file\",\"path\":\"d/b.txt\",\"size\":3},"
		" {\"type\":\"file\",\"path\":\"../escape\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"/abs\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"d//x\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"d/./x\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"nul\\u0000x\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"ctl\\nx\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"nosize\"},"
		" {\"type\":\"file\",\"path\":\"neg\",\"size\":-1},"
		" {\"type\":\"link\",\"path\":\"l\",\"size\":1},"
		" {\"path\":\"notype\",\"size\":1}, 7, null]";
	struct hub_listing l = parsed(page, 3);
	char err[GGUF_ERR_MAX];
	assert_string_equal(l.files[0].path, "a.gguf");
	assert_false(l.files[0].dir);
	assert_int_equal(l.files[0].size, 10);
	/* the hash in lower case, whatever case the hub gave it in */
	assert_string_equal(l.files[0].sha256,
	                    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_true(l.files[1].dir);
	assert_string_equal(l.files[2].path, "d/b.txt");
	assert_null(l.files[2].sha256);
	hub_listing_free(&l);

	/* a folder's listing: its prefix taken off, paths outside it refused */
	const char *sub = "[{\"type\":\"file\",\"path\":\"d/b.txt\",\"size\":3},"
	                  " {\"type\":\"file\",\"path\":\"db.txt\",\"size\":3},"
	                  " {\"type\":\"file\",\"path\":\"d\",\"size\":3},"
	                  " {\"type\":\"file\",\"path\":\"e/b.txt\",\"size\":3}]";
	assert_int_equal(hub_parse_page(sub, strlen(sub), "d", &l, err), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.files[0].path, "b.txt");
	hub_listing_free(&l);

	/* the last two: jansson quotes the page's bytes near the fault, a newline and an
	 * ESC among them; the error line stays one line with them escaped */
	const char *bad[] = { "{\"type\":\"file\"}", "not json", "", "[",
	                      "[\"\\u12\n\"]", "[\"\\u1\x1b[2J\"]" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(hub_parse_page(bad[i], strlen(bad[i]), "", &l, err), -EPROTO);
		assert_non_null(strstr(err, "listing"));
		assert_null(strchr(err, '\n'));
		assert_null(strchr(err, '\x1b'));
		hub_listing_free(&l);
	}
}

/* An entry's last commit date, when the tree page gives it ("lastCommit": {"date"}, as
 * the hub's expand=true listing does); none, or one that is no date, is 0: the
 * library then dates it by the revision's lastModified. */
static void test_dates(void **state)
{
	(void)state;
	const char *page =
		"[{\"type\":\"file\",\"path\":\"a\",\"size\":1,"
		"  \"lastCommit\":{\"id\":\"x\",\"date\":\"2024-04-18T09:54:19.000Z\"}},"
		" {\"type\":\"file\",\"path\":\"b\",\"size\":1},"
		" {\"type\":\"file\",\"path\":\"c\",\"size\":1,\"lastCommit\":{\"date\":7}},"
		" {\"type\":\"file\",\"path\":\"d\",\"size\":1,"
		"  \"lastCommit\":{\"date\":\"2024-13-18T09:54:19Z\"}},"
		" {\"type\":\"file\",\"path\":\"e\",\"size\":1,\"lastCommit\":{\"date\":\"2024-04\"}},"
		" {\"type\":\"directory\",\"path\":\"f\",\"size\":0,"
		"  \"lastCommit\":{\"date\":\"2023-01-02T03:04:05+00:00\"}}]";
	struct hub_listing l = parsed(page, 6);
	assert_int_equal(l.files[0].date, 1713434059);
	for (size_t i = 1; i < 5; i++)
		assert_int_equal(l.files[i].date, 0);
	assert_int_equal(l.files[5].date, 1672628645);
	hub_listing_free(&l);
}

/* A listing finished as hub_list finishes it: sorted, a path given twice kept once, and
 * every folder on the way to a file named, those the hub named kept as it gave them
 * (a folder named by the hub is not added again), so that a folder's listing is its
 * entries alone. The bytes of paths count the folders added. */
static void test_finish(void **state)
{
	(void)state;
	const char *page = "[{\"type\":\"file\",\"path\":\"a/b/c/x.gguf\",\"size\":1},"
	                   " {\"type\":\"file\",\"path\":\"a/b/y.gguf\",\"size\":2},"
	                   " {\"type\":\"file\",\"path\":\"a-z.txt\",\"size\":3},"
	                   " {\"type\":\"directory\",\"path\":\"a\"},"
	                   " {\"type\":\"file\",\"path\":\"a/b/y.gguf\",\"size\":2},"
	                   " {\"type\":\"file\",\"path\":\"q/r.txt\",\"size\":4}]";
	struct hub_listing l = parsed(page, 6);
	assert_int_equal(hub_listing_finish(&l), 0);
	const char *want[] = { "a", "a-z.txt", "a/b", "a/b/c", "a/b/c/x.gguf", "a/b/y.gguf", "q",
	                       "q/r.txt" };
	const bool dir[] = { true, false, true, true, false, false, true, false };
	assert_int_equal(l.n, 8);
	uint64_t bytes = 0;
	for (size_t i = 0; i < l.n; i++) {
		assert_string_equal(l.files[i].path, want[i]);
		assert_int_equal(l.files[i].dir, dir[i]);
		assert_ptr_equal(hub_listing_find(&l, want[i]), &l.files[i]);
		bytes += strlen(want[i]) + 1;
	}
	assert_int_equal(l.path_bytes, bytes);
	assert_null(hub_listing_find(&l, "a/b/c/"));
	assert_null(hub_listing_find(&l, "b"));
	hub_listing_free(&l);
}

static void test_link(void **state)
{
	(void)state;
	char next[256];
	assert_true(hub_link_next(" <https://h/api?cursor=2>; rel=\"next\"\r\n", next, sizeof next));
	assert_string_equal(next, "https://h/api?cursor=2");
	assert_true(hub_link_next("<https://h/p>; rel=\"prev\", <https://h/n>; rel=\"next\"", next,
	                          sizeof next));
	assert_string_equal(next, "https://h/n");
	assert_false(hub_link_next("<https://h/p>; rel=\"prev\"", next, sizeof next));
	assert_false(hub_link_next("", next, sizeof next));
	assert_false(hub_link_next("<https://h/unterminated; rel=\"next\"", next, sizeof next));
	assert_false(hub_link_next("<https://a-very-long-url>; rel=\"next\"", next, 8));
}

static void test_names(void **state)
{
	(void)state;
	struct hub_name n;
	char err[GGUF_ERR_MAX];
	assert_true(hub_name_parse("hf://o/r", &n, err));
	assert_string_equal(n.repo, "o/r");
	assert_string_equal(n.rev, "main");
	assert_string_equal(n.path, "");
	assert_null(n.quant);
	assert_true(hub_name_is_library(&n));
	hub_name_free(&n);
	assert_true(hub_name_parse("hf://o/r@v1.0/sub/folder/", &n, err));
	assert_string_equal(n.rev, "v1.0");
	assert_string_equal(n.path, "sub/folder");
	assert_true(hub_name_is_library(&n));
	hub_name_free(&n);
	assert_true(hub_name_parse("hf://o/r/x/M-Q4_K_M.gguf", &n, err));
	assert_false(hub_name_is_library(&n));
	hub_name_free(&n);
	assert_true(hub_name_parse("hf://o/r:q4_k_m", &n, err));
	assert_string_equal(n.quant, "q4_k_m");
	assert_false(hub_name_is_library(&n));
	hub_name_free(&n);
	assert_true(hub_name_parse("hf://o/r@abc:Q8_0", &n, err));
	assert_string_equal(n.rev, "abc");
	assert_string_equal(n.quant, "Q8_0");
	hub_name_free(&n);
	const char *bad[] = { "hf://", "hf://o", "hf://o/", "hf:///r", "hf://o/r@", "hf://o/r:",
	                      "hf://o/r/../x", "hf://o/r/a//b", "hf://o/r:Q/x", "http://o/r" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_false(hub_name_parse(bad[i], &n, err));
}

static void test_escape(void **state)
{
	(void)state;
	char *e = hub_escape("a b/c%d~e", true);
	assert_string_equal(e, "a%20b/c%25d~e");
	free(e);
	e = hub_escape("refs/pr/1", false);
	assert_string_equal(e, "refs%2Fpr%2F1");
	free(e);
}

UNIT_TESTS(cmocka_unit_test(test_page),
           cmocka_unit_test(test_dates),
           cmocka_unit_test(test_finish),
           cmocka_unit_test(test_link),
           cmocka_unit_test(test_names),
           cmocka_unit_test(test_escape))
