/* ggufs --diff [--json] A B: the error of every tensor of B against its namesake in A,
 * without mounting anything. The report is made whole by the render layer (diff_text.h:
 * the pairing, the scan of both models side by side by the engine --check uses, the
 * text, and the line naming a tensor that could not be read with its cause); this file
 * opens the two models, says progress and prints. */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggufs.h"
#include "model.h"
#include "diff_text.h"
#include "evlog.h"
#include "log_escape.h"

/* Each remote model's memory cache when -o cache_size is not given: a quarter of a
 * mount's 256 MiB, so that two stay well under the 256 MB the scan may use. A scan reads
 * each byte once, so the cache only holds the read-ahead. */
#define DIFF_CACHE_DEFAULT (UINT64_C(64) << 20)

/* The first errors the event log said during the comparison (a fetch that failed for
 * good, a file that changed): held back, since the line that names a tensor which could
 * not be read carries its cause already (diff_text_make); said at the end when no read
 * failed (a read-ahead's). */
enum { KEPT_EVENTS = 16 };
static pthread_mutex_t event_lock = PTHREAD_MUTEX_INITIALIZER;
static char kept[KEPT_EVENTS][EVLOG_LINE_MAX];
static unsigned n_kept;

/* The evlog_sink_fn of --diff: warnings said at once, the first errors kept (lines come
 * escaped already). */
static void keep_event(void *arg, enum evlog_level level, const char *line)
{
	(void)arg;
	if (level == EVLOG_WARNING) {
		fprintf(stderr, "ggufs: warning: %s\n", line);
		return;
	}
	pthread_mutex_lock(&event_lock);
	if (n_kept < KEPT_EVENTS)
		snprintf(kept[n_kept++], sizeof kept[0], "%s", line);
	pthread_mutex_unlock(&event_lock);
}

/* "bytes done / total (rate)" over the last progress line on a terminal. */
static void show_progress(void *ctx, uint64_t done, double elapsed)
{
	print_progress("comparing", done, *(const uint64_t *)ctx, elapsed);
}

/* Opens the model named by path with o's remote options; NULL after one line. */
static struct ggufs_model *open_one(const struct options *o, const char *path)
{
	struct options one = *o;
	one.model = path;
	if (!one.cache_size)
		one.cache_size = DIFF_CACHE_DEFAULT;
	char *shown;
	struct ggufs_model *m = open_model(&one, &shown);
	free(shown);
	return m;
}

/* The report of m[1] against m[0], showing progress on a terminal, printed: 0, or 3
 * after one line on stderr (naming the model and tensor that could not be read). */
static int report(struct ggufs_model *m[2], bool json)
{
	static uint64_t total;   /* show_progress's: set by the scan before it starts */
	const bool progress = isatty(STDERR_FILENO);
	struct diff_text_failure fail;
	char err[GGUF_ERR_MAX], *text;
	size_t len;
	int r = diff_text_make(m[0], m[1], json, progress ? show_progress : NULL, &total, &total,
	                       &text, &len, &fail, err);
	if (progress)   /* the progress line goes */
		print_progress_end();
	if (r < 0) {
		log_errf("%s", err);
		return 3;
	}
	const size_t n = fwrite(text, 1, len, stdout);
	free(text);
	if (n == len && fflush(stdout) == 0)
		return 0;
	log_errf("cannot write the report: %s", strerror(EIO));
	return 3;
}

int diff_models(const struct options *o)
{
	/* before any fetch: a failed one is said in the tensor's line (keep_event) */
	evlog_set_sink(keep_event, NULL);
	struct ggufs_model *m[2] = { open_one(o, o->model), NULL };
	if (!m[0])
		return 3;
	m[1] = open_one(o, o->model_b);
	int ret = m[1] ? report(m, o->json) : 3;
	model_close(m[0]);
	model_close(m[1]);
	/* errors no read failed of (a read-ahead's) are still said */
	evlog_set_sink(NULL, NULL);
	for (unsigned k = 0; ret == 0 && k < n_kept; k++)
		fprintf(stderr, "ggufs: %s\n", kept[k]);
	return ret;
}
