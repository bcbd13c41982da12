#include "evlog.h"
#include "clock.h"
#include "log_escape.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* One cause seen: its key, its first line, and the repeats not yet summed up. */
struct cause {
	bool used;
	char key[EVLOG_LINE_MAX];
	char line[EVLOG_LINE_MAX];
	enum evlog_level level;
	unsigned long repeats;      /* since the last line about it */
	double said_at;             /* when that line was said */
	double seen_at;             /* the last time it happened (which key goes first) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cause causes[EVLOG_KEYS];
static evlog_sink_fn *sink_fn;
static void *sink_arg;
static double (*clock_fn)(void);

/* Seconds on the monotonic clock (or the test's). */
static double log_now_s(void)
{
	return clock_fn ? clock_fn() : clock_now_s();
}

/* One line to the sink. Called with the lock held. */
static void say(enum evlog_level level, const char *line)
{
	if (sink_fn)
		sink_fn(sink_arg, level, line);
	else
		fprintf(stderr, "ggufs: %s%s\n", level == EVLOG_WARNING ? "warning: " : "", line);
}

/* The summary of c's repeats, which are then zero. Called with the lock held. */
static void say_repeats(struct cause *c, double now)
{
	char line[EVLOG_LINE_MAX + 64];
	snprintf(line, sizeof line, "%s (again %lu time%s in %.0f s)", c->line, c->repeats,
	         c->repeats == 1 ? "" : "s", now - c->said_at);
	say(c->level, line);
	c->repeats = 0;
	c->said_at = now;
}

void evlog_set_sink(evlog_sink_fn *sink, void *arg)
{
	pthread_mutex_lock(&lock);
	sink_fn = sink;
	sink_arg = arg;
	pthread_mutex_unlock(&lock);
}

void evlog(enum evlog_level level, const char *key, const char *fmt, ...)
{
	/* escaped as a whole: names, keys and URLs in it came from the model or a server */
	char raw[EVLOG_LINE_MAX], line[EVLOG_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	log_escape(line, sizeof line, raw, (size_t)n < sizeof raw ? (size_t)n : sizeof raw - 1);
	if (!key)
		key = line;
	pthread_mutex_lock(&lock);
	double now = log_now_s();
	struct cause *c = NULL, *oldest = &causes[0];
	for (size_t i = 0; i < EVLOG_KEYS && !c; i++) {
		if (causes[i].used && strncmp(causes[i].key, key, sizeof causes[i].key - 1) == 0)
			c = &causes[i];
		else if (!causes[i].used || (oldest->used && causes[i].seen_at < oldest->seen_at))
			oldest = &causes[i];
	}
	if (c) {   /* a repeat: counted, and summed up at most once per EVLOG_SUMMARY_S */
		c->repeats++;
		c->seen_at = now;
		if (now - c->said_at >= EVLOG_SUMMARY_S)
			say_repeats(c, now);
	} else {   /* a new cause: said (the one it replaces summed up first) */
		c = oldest;
		if (c->used && c->repeats)
			say_repeats(c, now);
		c->used = true;
		snprintf(c->key, sizeof c->key, "%s", key);
		snprintf(c->line, sizeof c->line, "%s", line);
		c->level = level;
		c->repeats = 0;
		c->said_at = c->seen_at = now;
		say(level, line);
	}
	pthread_mutex_unlock(&lock);
}

void evlog_flush(void)
{
	pthread_mutex_lock(&lock);
	double now = log_now_s();
	for (size_t i = 0; i < EVLOG_KEYS; i++)
		if (causes[i].used && causes[i].repeats)
			say_repeats(&causes[i], now);
	pthread_mutex_unlock(&lock);
}

void evlog_set_clock(double (*now)(void))
{
	pthread_mutex_lock(&lock);
	clock_fn = now;
	pthread_mutex_unlock(&lock);
}

void evlog_reset(void)
{
	pthread_mutex_lock(&lock);
	memset(causes, 0, sizeof causes);
	pthread_mutex_unlock(&lock);
}

void evlog_key_cause(char *key, size_t size, const char *cause)
{
	size_t k = strnlen(key, size - 1);
	for (const char *p = cause; *p && k + 1 < size; p++)
		if (*p < '0' || *p > '9')
			key[k++] = *p;
	key[k] = 0;
}
