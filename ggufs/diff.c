/* ggufs --diff [--json] A B: the error of every tensor of B against its namesake in A,
 * without mounting anything. The report is made whole by lib/8-mount (name_report.h:
 * both models opened as a mount opens them, compared by the render layer's diff_text.h,
 * and the line naming a tensor that could not be read with its cause); this file holds
 * the event log's errors back, says progress and prints. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "evlog.h"
#include "log_escape.h"
#include "name_report.h"

/* The first errors the event log said during the comparison (a fetch that failed for
 * good, a file that changed): held back, since the line that names a tensor which could
 * not be read carries its cause already; said at the end when no read failed (a
 * read-ahead's). */
enum { DIFF_KEPT_EVENTS = 16 };
static pthread_mutex_t diff_event_lock = PTHREAD_MUTEX_INITIALIZER;
static char diff_kept[DIFF_KEPT_EVENTS][EVLOG_LINE_MAX];
static unsigned diff_n_kept;

/* The evlog_sink_fn of --diff: warnings said at once, the first errors kept (lines come
 * escaped already). */
static void diff_keep_event(void *arg, enum evlog_level level, const char *line)
{
	(void)arg;
	if (level == EVLOG_WARNING) {
		fprintf(stderr, "ggufs: warning: %s\n", line);
		return;
	}
	pthread_mutex_lock(&diff_event_lock);
	if (diff_n_kept < DIFF_KEPT_EVENTS)
		snprintf(diff_kept[diff_n_kept++], sizeof diff_kept[0], "%s", line);
	pthread_mutex_unlock(&diff_event_lock);
}

int diff_models(const struct cli_opts *o)
{
	/* before any fetch: a failed one is said in the tensor's line (diff_keep_event) */
	evlog_set_sink(diff_keep_event, NULL);
	const struct open_name_opts oo = cli_open_opts(o);
	const struct name_report_opts r = {
		.json = o->json, .progress = isatty(STDERR_FILENO) ? print_progress : NULL };
	char err[GGUF_ERR_MAX], *text;
	size_t len;
	int ret = 0;
	if (!name_report_diff(o->model, o->model_b, &oo, &r, &text, &len, err)) {
		log_errf("%s", err);
		ret = 3;
	} else if (!print_report(text, len)) {
		ret = 3;
	}
	/* errors no read failed of (a read-ahead's) are still said */
	evlog_set_sink(NULL, NULL);
	for (unsigned k = 0; ret == 0 && k < diff_n_kept; k++)
		fprintf(stderr, "ggufs: %s\n", diff_kept[k]);
	return ret;
}
