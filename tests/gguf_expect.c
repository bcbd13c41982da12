#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gguf_expect.h"

/* err is one line: not empty, within its bound, no newline. */
static void check_err_line(const char *err)
{
	size_t n = strnlen(err, GGUF_ERR_MAX);
	assert_true(n > 0);
	assert_true(n < GGUF_ERR_MAX);
	assert_null(strchr(err, '\n'));
}

void parse_n(const struct gw *w, size_t len, struct parsed *p)
{
	p->len = len;
	p->img = malloc(len ? len : 1);
	assert_non_null(p->img);
	if (len)
		memcpy(p->img, w->buf, len);
	memset(p->err, 'x', sizeof p->err);
	p->rc = gguf_parse(p->img, len, &p->f, p->err);
	if (p->rc == 0)
		assert_int_equal(p->err[0], 0);
	else
		check_err_line(p->err);
}

void parsed_free(struct parsed *p)
{
	gguf_file_free(&p->f);
	free(p->img);
}

void expect_ok(const struct gw *w, struct parsed *p)
{
	parse_n(w, w->len, p);
	if (p->rc != 0)
		fail_msg("parse failed: %s", p->err);
}

void expect_fail(const struct gw *w, ...)
{
	struct parsed p;
	parse_n(w, w->len, &p);
	if (p.rc == 0)
		fail_msg("parse succeeded, expected a failure");
	va_list ap;
	va_start(ap, w);
	for (const char *s; (s = va_arg(ap, const char *));)
		assert_contains(p.err, s);
	va_end(ap);
	/* a failed parse leaves nothing to free, and freeing twice is harmless */
	assert_null(p.f.kv);
	assert_null(p.f.tensors);
	parsed_free(&p);
}

void one_key(struct gw *w, const char *key, uint32_t type)
{
	gw_init(w);
	gw_header(w, 3, 0, 1);
	gw_key(w, key, type);
}

void one_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
                uint32_t type, uint64_t offset, size_t data_bytes)
{
	gw_init(w);
	gw_header(w, 3, 1, 0);
	gw_tensor(w, name, n_dims, ne, type, offset);
	gw_align(w, GGUF_DEFAULT_ALIGNMENT);
	gw_fill(w, 0, data_bytes);
}
