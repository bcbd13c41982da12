/* Reports on stdout: what a renderer of lib/5-render writes, printed whole; and the
 * progress line of a long scan on a terminal's stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ggufs.h"
#include "render_size.h"
#include "sink.h"

void print_progress(const char *doing, uint64_t done, uint64_t total, double elapsed)
{
	char a[RENDER_SIZE_MAX], b[RENDER_SIZE_MAX], c[RENDER_SIZE_MAX];
	double rate = elapsed > 0 ? (double)done / elapsed : 0;
	fprintf(stderr, "\rggufs: %s: %s / %s (%3.0f%%), %s/s ", doing,
	        render_size((double)done, a), render_size((double)total, b),
	        total ? 100.0 * (double)done / (double)total : 100.0, render_size(rate, c));
	fflush(stderr);
}

void print_progress_end(void)
{
	fprintf(stderr, "\r%*s\r", 72, "");
}

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
