#include "library_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "library.h"
#include "libsource.h"
#include "test_kit.h"

struct library *library_fixture_open(const struct lib_source_ops *ops, void *ctx, bool links)
{
	struct lib_source *src = calloc(1, sizeof *src);
	assert_non_null(src);
	src->ops = ops;
	src->ctx = ctx;
	src->links = links;
	char err[GGUF_ERR_MAX];
	struct library *lib = library_open(src, test_kit(), err);
	if (!lib)
		fail_msg("library_open: %s", err);
	return lib;
}
