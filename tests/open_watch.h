/* Whether a file was opened, seen by inotify: the tests that a FIFO, a device or a file
 * refused is never opened (a reader's open of a FIFO, even O_NONBLOCK, would wake a
 * writer waiting in it). */
#ifndef GGUFS_TEST_OPEN_WATCH_H
#define GGUFS_TEST_OPEN_WATCH_H

/* An inotify descriptor watching path for opens (IN_OPEN; an O_PATH descriptor opens
 * nothing and is not one). Fails the test (cmocka) where inotify refuses. */
int open_watch(const char *path);

/* How many opens watch (open_watch's) saw so far; it is closed. */
int open_watch_count(int watch);

#endif
