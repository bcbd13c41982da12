/* The progress line of a long scan (--check, --diff) on a terminal's stderr. */
#include <stdio.h>

#include "ggufs.h"
#include "render_size.h"

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
