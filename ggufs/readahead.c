/* Read-ahead tuning: the kernel's default FUSE read-ahead is too small to keep the
 * worker threads busy, and only a write to the mount's bdi after INIT raises it. */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "ggufs.h"

/* Raises the mount's read-ahead to MOUNT_READAHEAD_KB once INIT is answered. The
 * kernel caps FUSE read-ahead at its default 128 KiB, so a sequential reader gets
 * 128 KiB requests; only root may raise it, through the mount's own bdi. 4 MiB keeps
 * several 1 MiB requests in flight, so worker threads dequantize while the kernel
 * copies the previous reply (measured: cold .f32 3.0 -> 3.9 GB/s over 1 MiB).
 *
 * It must be written after the kernel has taken INIT's reply, which would lower it
 * again. The thread never touches the mount itself (a stat of it, in flight, would make
 * an unmount right after mounting fail with EBUSY): the bdi comes from mountinfo, and
 * the write follows op_init by a moment, then once more in case it was early. Failure
 * (not root) changes nothing.
 *
 * Local mounts only: a remote one keeps the kernel's 128 KiB. The kernel reads a whole
 * read-ahead window around every page fault of a mapping (numpy's mmap_mode,
 * np.memmap), so at 4 MiB one touched page fetched 4-7 MB from the server where a
 * pread fetches one 128 KiB block; the remote file's own read-ahead (remote_ahead.c)
 * keeps a sequential reader's fetches ahead of it without the kernel's window. */
#define MOUNT_READAHEAD_KB 4096

static void write_readahead(const char *bdi)
{
	char path[96], kb[16];
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", bdi);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	int n = snprintf(kb, sizeof kb, "%d\n", MOUNT_READAHEAD_KB);
	if (write(fd, kb, (size_t)n) != n) {
		/* not ours to fix: the default read-ahead still works */
	}
	close(fd);
}

void *readahead_raise(void *arg)
{
	struct ggufs *fs = arg;
	pthread_mutex_lock(&fs->init_lock);
	while (!fs->init_seen)
		pthread_cond_wait(&fs->init_cond, &fs->init_lock);
	pthread_mutex_unlock(&fs->init_lock);
	static const long delays_ms[] = { 20, 250 };
	for (size_t i = 0; i < sizeof delays_ms / sizeof delays_ms[0]; i++) {
		struct timespec ts = { 0, delays_ms[i] * 1000000L };
		nanosleep(&ts, NULL);
		write_readahead(fs->bdi);
	}
	return NULL;
}
