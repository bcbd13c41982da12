/* For a remote model: what tells a stalled transfer that the mount is ending. The
 * fetcher polls watch_ending() (about once a second per transfer); a watcher thread sets
 * it once the session has exited (SIGTERM, an unmount) or the mount has left the mount
 * table while the daemon still serves: a lazy unmount (fusermount3 -u -z, umount -l),
 * whose last open file may be a read waiting on a stalled server. The fetcher never
 * touches the FUSE session itself, which is freed before the model is closed. */
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "ggufs.h"

#define WATCH_MS 250

/* Polls the session and the mount table until watch_stop. */
static void *watch_main(void *arg)
{
	struct ggufs *fs = arg;
	char what[PATH_MAX + 64], dev[MOUNT_POINT_DEV_MAX];
	pthread_mutex_lock(&fs->watch_lock);
	while (!fs->watch_stop) {
		struct timespec until = ggufs_realtime_in_ms(WATCH_MS);
		pthread_cond_timedwait(&fs->watch_cond, &fs->watch_lock, &until);
		if (fs->watch_stop)
			break;
		if (fuse_session_exited(fs->se) ||
		    (fs->bdi[0] && (!mount_point_mounted_at(fs->mountpoint, what, sizeof what, dev) ||
		                    strcmp(dev, fs->bdi) != 0))) {
			atomic_store(&fs->ending, true);
			break;
		}
	}
	pthread_mutex_unlock(&fs->watch_lock);
	return NULL;
}

bool watch_start(struct ggufs *fs)
{
	pthread_mutex_init(&fs->watch_lock, NULL);
	pthread_cond_init(&fs->watch_cond, NULL);
	fs->watch_stop = false;
	fs->watching = pthread_create(&fs->watch_thread, NULL, watch_main, fs) == 0;
	return fs->watching;
}

void watch_stop(struct ggufs *fs)
{
	atomic_store(&fs->ending, true);
	if (!fs->watching)
		return;
	pthread_mutex_lock(&fs->watch_lock);
	fs->watch_stop = true;
	pthread_cond_signal(&fs->watch_cond);
	pthread_mutex_unlock(&fs->watch_lock);
	pthread_join(fs->watch_thread, NULL);
	fs->watching = false;
	pthread_mutex_destroy(&fs->watch_lock);
	pthread_cond_destroy(&fs->watch_cond);
}

bool watch_ending(void *fs)
{
	return atomic_load(&((struct ggufs *)fs)->ending);
}
