/* Which server gets which token, and how a token file is read (lib/1-bytes/token.h):
 * token_file's token for any URL, HF_TOKEN's only for the hub (an hf:// name or a URL
 * on HF_ENDPOINT's origin), and the token file's refusals. */
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

#include "token.h"

/* A token file in a fresh temporary directory holding n bytes of text, with mode;
 * its path is written into path (and the directory's is its dirname). */
static void write_token_file(char path[64], const char *text, size_t n, mode_t mode)
{
	char dir[] = "/tmp/ggufs-token.XXXXXX";
	assert_non_null(mkdtemp(dir));
	snprintf(path, 64, "%s/token", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

/* Removes the file and its directory. */
static void remove_token_file(const char *path)
{
	char dir[64];
	snprintf(dir, sizeof dir, "%s", path);
	*strrchr(dir, '/') = 0;
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void test_read_file(void **state)
{
	(void)state;
	char path[64], err[GGUF_ERR_MAX];
	write_token_file(path, "hf_secret\r\n", 11, 0600);
	char *t = token_read_file(path, err);
	assert_non_null(t);
	assert_string_equal(t, "hf_secret");   /* the line ending is not the token's */
	token_free(t);
	remove_token_file(path);
}

static void test_read_file_refusals(void **state)
{
	(void)state;
	char path[64], err[GGUF_ERR_MAX];
	/* readable by others: refused, and the error names the mode, never the token */
	write_token_file(path, "hf_secret\n", 10, 0644);
	assert_null(token_read_file(path, err));
	assert_non_null(strstr(err, "readable by group or others (mode 0644)"));
	assert_null(strstr(err, "hf_secret"));
	remove_token_file(path);
	write_token_file(path, "hf_secret\n", 10, 0640);
	assert_null(token_read_file(path, err));
	remove_token_file(path);
	/* empty, or only a line ending */
	write_token_file(path, "\n", 1, 0600);
	assert_null(token_read_file(path, err));
	assert_non_null(strstr(err, "the token file is empty"));
	remove_token_file(path);
	/* a NUL would cut the token short */
	write_token_file(path, "hf_a\0b\n", 7, 0600);
	assert_null(token_read_file(path, err));
	assert_non_null(strstr(err, "NUL byte"));
	remove_token_file(path);
	/* missing */
	assert_null(token_read_file("/nonexistent/ggufs-token", err));
	assert_non_null(strstr(err, "/nonexistent/ggufs-token: cannot read the token file"));
}

/* token_choose for url with HF_TOKEN set to env, no token file. */
static char *choose_env(const char *url, bool hf, const char *endpoint, const char *env,
                        struct remote_opts *ro)
{
	char err[GGUF_ERR_MAX], *token = (char *)"unset";
	*ro = (struct remote_opts){ .timeout = 0 };
	assert_int_equal(token_choose(url, hf, endpoint, NULL, env, ro, &token, err), 0);
	return token;
}

static void test_hf_token_only_to_the_hub(void **state)
{
	(void)state;
	struct remote_opts ro;
	/* an hf:// name, and a URL on the default endpoint: the hub */
	char *t = choose_env("https://huggingface.co/o/r/resolve/main/m.gguf", true, NULL,
	                     "hf_env", &ro);
	assert_string_equal(t, "hf_env");
	assert_true(ro.hub && ro.token_from_env && !ro.token_withheld);
	token_free(t);
	t = choose_env("https://huggingface.co/o/r/resolve/main/m.gguf", false, "", "hf_env", &ro);
	assert_string_equal(t, "hf_env");
	assert_true(ro.hub);
	token_free(t);
	/* another server: withheld, and said so for the 401/403 hint */
	t = choose_env("http://127.0.0.1:8080/m.gguf", false, NULL, "hf_env", &ro);
	assert_null(t);
	assert_true(!ro.hub && ro.token_withheld && !ro.token_from_env);
	/* HF_ENDPOINT names the hub: scheme, host and port all count */
	t = choose_env("http://127.0.0.1:8080/o/r/resolve/main/m.gguf", false,
	               "http://127.0.0.1:8080", "hf_env", &ro);
	assert_string_equal(t, "hf_env");
	assert_true(ro.hub);
	token_free(t);
	t = choose_env("http://127.0.0.1:8081/m.gguf", false, "http://127.0.0.1:8080", "hf_env", &ro);
	assert_null(t);
	assert_true(ro.token_withheld);
	t = choose_env("https://127.0.0.1:8080/m.gguf", false, "http://127.0.0.1:8080", "hf_env", &ro);
	assert_null(t);
	/* no HF_TOKEN, or an empty one: none, nothing withheld */
	t = choose_env("http://127.0.0.1:8080/m.gguf", false, NULL, NULL, &ro);
	assert_null(t);
	assert_false(ro.token_withheld);
	t = choose_env("https://huggingface.co/m.gguf", false, NULL, "", &ro);
	assert_null(t);
	assert_true(ro.hub && !ro.token_from_env);
}

static void test_token_file_for_any_server(void **state)
{
	(void)state;
	char path[64], err[GGUF_ERR_MAX], *token;
	write_token_file(path, "tok_file\n", 9, 0600);
	struct remote_opts ro = { .timeout = 0 };
	/* the token file wins over HF_TOKEN, for the hub and for any other server */
	assert_int_equal(token_choose("http://127.0.0.1:8080/m.gguf", false, NULL, path, "hf_env",
	                              &ro, &token, err), 0);
	assert_string_equal(token, "tok_file");
	assert_false(ro.token_from_env || ro.token_withheld || ro.hub);
	token_free(token);
	ro = (struct remote_opts){ .timeout = 0 };
	assert_int_equal(token_choose("https://huggingface.co/m.gguf", true, NULL, path, "hf_env",
	                              &ro, &token, err), 0);
	assert_string_equal(token, "tok_file");
	assert_true(ro.hub && !ro.token_from_env);
	token_free(token);
	remove_token_file(path);
	/* an unreadable token file fails the choice */
	assert_int_equal(token_choose("https://huggingface.co/m.gguf", true, NULL,
	                              "/nonexistent/ggufs-token", "hf_env", &ro, &token, err), -1);
	assert_null(token);
	assert_non_null(strstr(err, "cannot read the token file"));
}

static void test_token_ok(void **state)
{
	(void)state;
	assert_true(token_ok("hf_AbC-1.2_3~4+5/6="));
	static const char *const bad[] = { "hf_abc\r\nX-Injected: yes", "hf_abc\n", "hf abc",
	                                   "hf_\x7f", "hf_\xc3\xa9", "" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_false(token_ok(bad[i]));
}

UNIT_TESTS(cmocka_unit_test(test_read_file),
           cmocka_unit_test(test_read_file_refusals),
           cmocka_unit_test(test_hf_token_only_to_the_hub),
           cmocka_unit_test(test_token_file_for_any_server),
           cmocka_unit_test(test_token_ok))
