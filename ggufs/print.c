/* The reports of --check and --diff on stdout, and their progress on a terminal's
 * stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggufs.h"
#include "log_escape.h"

void print_progress(void *arg, const char *line)
{
	(void)arg;
	if (line)
		fprintf(stderr, "\rggufs: %s ", line);
	else
		fprintf(stderr, "\r%*s\r", 72, "");
	fflush(stderr);
}

bool print_report(char *text, size_t len)
{
	const bool ok = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
	if (!ok)
		log_errf("cannot write the report: %s", strerror(errno));
	free(text);
	return ok;
}
