#include "tool_model.h"

#include <stdio.h>

#include "guard.h"
#include "model.h"

struct ggufs_model *tool_model_open(const char *tool, const char *path)
{
	char err[GGUF_ERR_MAX];
	guard_install();
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		fprintf(stderr, "%s: %s\n", tool, err);
	return m;
}
