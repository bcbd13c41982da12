/* What tells the mount that it is ending. A watcher thread, for every mount, polls the
 * FUSE session's fd: the kernel aborts the connection when the file system is unmounted
 * (umount, fusermount3 -u) and the fd then polls POLLERR at once, while the loop still
 * finishes the requests under way (serve() returns only after the last). From that
 * moment the mount hands its disk cache entries and edits file over to a quick remount
 * (watch_leave: the source's leaving run, once) and fs->ending is set; the same when the
 * loop exits on a signal.
 *
 * For a remote model, fs->ending is also what a stalled transfer polls (watch_ending,
 * about once a second per transfer), and it is set too once the mount has left the
 * mount table while the daemon still serves: a lazy unmount (fusermount3 -u -z,
 * umount -l), whose last open file may be a read waiting on a stalled server (nothing is
 * handed over then: open files still read, until the session ends). The fetcher never
 * touches the FUSE session itself, which is freed before the model is closed. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ggufs.h"
#include "leaving.h"

#define WATCH_MS 250

/* Whether a remote mount has left the mount table while its session goes on. */
static bool watch_lazily_unmounted(const struct ggufs *fs)
{
	char what[PATH_MAX + 64], dev[MOUNT_POINT_DEV_MAX];
	return fs->src.remote && fs->bdi[0] &&
	       (!mount_point_mounted_at(fs->mountpoint, what, sizeof what, dev) ||
	        strcmp(dev, fs->bdi) != 0);
}

/* Polls the session's fd (and, for a remote mount, the mount table every WATCH_MS)
 * until the session ends or watch_stop. */
static void *watch_main(void *arg)
{
	struct ggufs *fs = arg;
	struct pollfd p[2] = { { .fd = fuse_session_fd(fs->se) },   /* POLLERR: aborted */
	                       { .fd = fs->watch_wake, .events = POLLIN } };
	bool lazy = false;
	for (;;) {
		if (poll(p, 2, WATCH_MS) < 0 && errno != EINTR)
			p[0].revents = p[1].revents = 0;   /* (a timeout then) */
		if (p[1].revents)
			break;
		if ((p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) || fuse_session_exited(fs->se)) {
			atomic_store(&fs->ending, true);
			watch_leave(fs);
			break;
		}
		if (!lazy && watch_lazily_unmounted(fs)) {
			lazy = true;
			atomic_store(&fs->ending, true);
		}
	}
	return NULL;
}

bool watch_start(struct ggufs *fs)
{
	fs->watch_wake = eventfd(0, EFD_CLOEXEC);
	fs->watching = fs->watch_wake >= 0 &&
	               pthread_create(&fs->watch_thread, NULL, watch_main, fs) == 0;
	if (!fs->watching && fs->watch_wake >= 0) {
		close(fs->watch_wake);
		fs->watch_wake = -1;
	}
	return fs->watching;
}

void watch_stop(struct ggufs *fs)
{
	atomic_store(&fs->ending, true);
	if (!fs->watching)
		return;
	const uint64_t one = 1;
	while (write(fs->watch_wake, &one, sizeof one) < 0 && errno == EINTR)
		;
	pthread_join(fs->watch_thread, NULL);
	fs->watching = false;
	close(fs->watch_wake);
	fs->watch_wake = -1;
}

void watch_leave(struct ggufs *fs)
{
	leaving_run(fs->src.leaving);
}

bool watch_ending(void *fs)
{
	return atomic_load(&((struct ggufs *)fs)->ending);
}
