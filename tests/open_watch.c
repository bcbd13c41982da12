#include "open_watch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <cmocka.h>

int open_watch(const char *path)
{
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	assert_true(in >= 0);
	assert_true(inotify_add_watch(in, path, IN_OPEN) >= 0);
	return in;
}

int open_watch_count(int watch)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int n = 0;
	ssize_t len;
	while ((len = read(watch, buf, sizeof buf)) > 0) {
		for (ssize_t at = 0; at < len;) {
			const struct inotify_event *ev = (const struct inotify_event *)(buf + at);
			n += (ev->mask & IN_OPEN) != 0;
			at += (ssize_t)(sizeof *ev + ev->len);
		}
	}
	close(watch);
	return n;
}
