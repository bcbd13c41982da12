/* The unit tests of lib/8-mount's model and read (mount_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gguf_writer.h"
#include "mount_fixture.h"
#include "types.h"

bool mount_fixture_model(const char *path, int n, float scale)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 1, 1);
	gw_kv_str(&w, "general.architecture", "test");
	const uint64_t ne[1] = { (uint64_t)n };
	gw_tensor(&w, "w", 1, ne, GGML_TYPE_F32, 0);
	gw_align(&w, 32);
	for (int i = 0; i < n; i++)
		gw_f32(&w, (float)i * scale);
	bool saved = gw_save(&w, path);
	gw_free(&w);
	return saved;
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
