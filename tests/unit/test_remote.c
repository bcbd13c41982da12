/* The remote layer without a server: what it refuses before any request, and a
 * refused connection at open. (Everything with a server is in tests/remote/.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "remote.h"

static void test_tokens(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	static const char *const bad[] = { "hf_abc\r\nX-Injected: yes", "hf_abc\n", "hf abc",
	                                   "hf_\x7f", "hf_\xc3\xa9", "" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct remote_opts o = { .token = bad[i], .token_from_env = true };
		err[0] = 0;
		assert_null(remote_new(&o, err));
		assert_non_null(strstr(err, "HF_TOKEN"));
		assert_null(strstr(err, "hf_"));   /* never the token itself */
	}
	struct remote_opts good = { .token = "hf_AbC-1.2_3~4+5/6=" };
	struct remote *r = remote_new(&good, err);
	assert_non_null(r);
	remote_free(r);
}

static void test_refused_connection(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct remote_opts o = { .timeout = 2 };
	struct remote *r = remote_new(&o, err);
	assert_non_null(r);
	long status = -1;
	/* port 1 on loopback: nothing listens there */
	struct remote_file *f = remote_open(r, "http://127.0.0.1:1/m.gguf", NULL, 1 << 20, err,
	                                    &status);
	assert_null(f);
	assert_int_equal(status, 0);
	assert_non_null(strstr(err, "connect"));
	remote_free(r);
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_refused_connection),
	};
	char err[GGUF_ERR_MAX];
	if (!remote_process_start(err))
		return 1;
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	remote_process_end();
	return failed;
}
