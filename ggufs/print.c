/* Reports on stdout: what a renderer of lib/5-render writes, printed whole. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggufs.h"
#include "sink.h"

int print_rendered(void (*render)(struct sink *, const void *), const void *ctx)
{
	struct sink s = sink_counter();
	render(&s, ctx);
	char *buf = malloc(s.pos ? s.pos : 1);
	if (!buf)
		return -ENOMEM;
	s = sink_window(buf, 0, s.pos);
	render(&s, ctx);
	const size_t n = fwrite(buf, 1, s.pos, stdout);
	free(buf);
	return n == s.pos && fflush(stdout) == 0 ? 0 : -EIO;
}
