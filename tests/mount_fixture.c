/* The unit tests of lib/8-mount's model and read (mount_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gguf_writer.h"
#include "model.h"
#include "mount_fixture.h"
#include "scratch_dir.h"
#include "test_kit.h"
#include "tree.h"
#include "types.h"

bool mount_fixture_model(const char *path, int n, float scale)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 1, 3);
	gw_kv_str(&w, "general.architecture", "test");
	gw_kv_str(&w, "general.name", "old");
	gw_kv_u32(&w, "test.context_length", 2048);
	const uint64_t ne[1] = { (uint64_t)n };
	gw_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 0);
	gw_align(&w, 32);
	for (int i = 0; i < n; i++)
		gw_f32(&w, (float)i * scale);
	bool saved = gw_save(&w, path);
	gw_free(&w);
	return saved;
}

int mount_fixture_open(void **state, int n, float scale, struct ggufs_model **model,
                       struct tree **tree)
{
	*model = NULL;
	*tree = NULL;
	if (scratch_dir_make(state) != 0)
		return -1;
	char path[512], err[GGUF_ERR_MAX];
	snprintf(path, sizeof path, "%s/m.gguf", scratch_dir);
	*model = mount_fixture_model(path, n, scale) ? model_open(path, err) : NULL;
	*tree = *model ? tree_build(*model, test_kit(), err) : NULL;
	return *tree ? 0 : -1;
}

int mount_fixture_close(void **state, struct ggufs_model *model, struct tree *tree)
{
	tree_free(tree);
	model_close(model);
	return scratch_dir_remove(state);
}

void mount_got_take(void *ctx, const struct iovec *iov, int count)
{
	struct mount_got *g = ctx;
	g->calls++;
	for (int i = 0; i < count; i++) {
		assert_true(g->len + iov[i].iov_len <= sizeof g->buf);
		memcpy(g->buf + g->len, iov[i].iov_base, iov[i].iov_len);
		g->len += iov[i].iov_len;
	}
}
