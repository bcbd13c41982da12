#include "tiny_model.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model.h"

struct ggufs_model *tiny_model_open(void)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(TEST_DATA "/tinyllama-q4km.gguf", err);
	if (!m)
		fail_msg("%s", err);
	return m;
}
