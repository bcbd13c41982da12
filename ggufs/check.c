/* ggufs --check MODEL...: the health of every tensor without mounting anything, one line
 * per tensor that is not healthy, or with --json one report of every figure. The
 * operands are listed by lib/8-mount (name_list.h: a library's models as its mount opens
 * them) and each report made whole there (name_report.h); this file prints them, text
 * blocks apart by an empty line, JSON reports in an array. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"
#include "name_report.h"

int check_models(const struct cli_opts *o)
{
	char err[GGUF_ERR_MAX];
	const struct open_name_opts oo = cli_open_opts(o);
	struct name_list l;
	if (!name_list_make(&l, o->operands, (size_t)o->n_operands, &oo, err)) {
		log_errf("%s", err);
		return 3;
	}
	const struct name_report_opts r = {
		.json = o->json, .progress = isatty(STDERR_FILENO) ? print_progress : NULL };
	const bool array = o->json && (o->n_operands > 1 || l.n_libs);
	bool printed = false;
	int worst = 0;
	for (size_t k = 0; k < l.n; k++) {
		char *text;
		size_t len;
		uint64_t unhealthy;
		int status = 3;   /* this model's: 0 healthy, 1 unhealthy, 3 not read */
		if (!name_report_check(&l, k, &oo, &r, &text, &len, &unhealthy, err)) {
			log_errf("%s", err);
		} else {
			fputs(!printed ? (array ? "[\n" : "") : (array ? ",\n" : "\n"), stdout);
			printed = true;
			print_report(text, len);   /* (said if not: the status is the model's) */
			status = unhealthy ? 1 : 0;
		}
		if (status > worst)
			worst = status;
	}
	name_list_free(&l);
	if (array)
		fputs(printed ? "]\n" : "[]\n", stdout);
	if (fflush(stdout) != 0 && worst < 3) {
		log_errf("cannot write the report: %s", strerror(errno));
		worst = 3;
	}
	return worst;
}
