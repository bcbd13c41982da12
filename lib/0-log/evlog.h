/* The event log: the events that change what a reader gets (a remote file that changed,
 * a fetch that failed after its retries, a disk cache that refused or trimmed or held a
 * damaged block, a local file that shrank), each said once, in plain words, with its
 * cause. The lowest layer of lib/: any part may report, none knows where it goes; the
 * daemon points the sink at syslog, a file or stderr. FUSE-free.
 *
 * Rate limit: an event names its cause with a key; the same key again is counted, not
 * said again, and a summary line ("... 41 more times in 60 s") comes at most once per
 * EVLOG_SUMMARY_S per key, or at evlog_flush, so that a storm of failing reads cannot
 * fill a disk. At most EVLOG_KEYS keys are remembered (the least recently seen goes).
 *
 * Every line is escaped as a whole (log_escape.h) before a sink sees it: what the model
 * or a server named in it cannot end the line or reach a terminal as a control byte.
 *
 * Thread-safe. */
#ifndef GGUFS_EVLOG_H
#define GGUFS_EVLOG_H

#include <stdarg.h>
#include <stddef.h>

#define EVLOG_SUMMARY_S 60
#define EVLOG_KEYS 64
#define EVLOG_LINE_MAX 1024

enum evlog_level {
	EVLOG_ERR,      /* reads fail because of it */
	EVLOG_WARNING,  /* reads go on, slower or differently (no disk cache, a trim) */
};

/* Where lines go: sink(arg, level, line) with the line (no newline, no "ggufs: "
 * prefix), called with the log's lock held, one call at a time. NULL: stderr, as
 * "ggufs: LINE" ("ggufs: warning: LINE" for a warning). */
typedef void evlog_sink_fn(void *arg, enum evlog_level level, const char *line);
void evlog_set_sink(evlog_sink_fn *sink, void *arg);

/* Says the event once per key (NULL: the line itself is the key); a repeat is counted
 * for the summary. */
void evlog(enum evlog_level level, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends cause to the NUL-terminated key in key[0..size), its digits left out: the
 * key of a cause whose lines differ only in numbers (byte ranges, counts, sizes), so
 * that its repeats count as one. */
void evlog_key_cause(char *key, size_t size, const char *cause);

/* Says the summary of every key with repeats not yet summed up (at unmount). */
void evlog_flush(void);

/* For tests: the clock in seconds (NULL: CLOCK_MONOTONIC), and a fresh log. */
void evlog_set_clock(double (*now)(void));
void evlog_reset(void);

#endif
