/* Preloaded (LD_PRELOAD) into a ggufs daemon by test_quant_cache.py (and
 * tests/remote/test_library_hub.py): an old daemon that takes long to exit. Its first
 * close() of a disk cache entry's map file (a file called "map" under the directory
 * $GGUFS_SLOW_CLOSE_DIR) after its loop returned first sleeps $GGUFS_SLOW_CLOSE_MS (once:
 * a quant's pieces are many entries, closed one after another), so the
 * daemon, once unmounted, goes on holding its entries' locks (flock, ended by the close)
 * while a new mount of the same model starts: what the new one does with an entry held
 * by a mount that is ending is then seen every time, not only when the old daemon
 * happens to be slower than the new one's start. The same for the file whose path is
 * $GGUFS_SLOW_CLOSE_FILE (an edits file, -o edits=FILE: its lock too ends with its
 * close), for tests/mount/test_edits.py. Every other close is the real one.
 *
 * With $GGUFS_SLOW_SERVE_MS, the daemon's loop (libfuse's fuse_session_loop_mt, as the
 * daemon calls it without -s) returns that much later than libfuse's does: a daemon
 * whose last requests take long after the unmount (the loop returns once every request
 * under way is answered), so that only what the daemon does before the loop returns is
 * seen by a quick remount. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* fd's path, from /proc/self/fd, into path (4096 bytes): false when it has none. A file
 * renamed over or removed reads "PATH (deleted)". */
static int slow_close_path(int fd, char path[4096])
{
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	const ssize_t n = readlink(link, path, 4095);
	if (n <= 0)
		return 0;
	path[n] = '\0';
	return 1;
}

/* Whether fd is the file at path exactly (not one renamed over it). */
static int slow_close_is_file(int fd, const char *path)
{
	char name[4096];
	return slow_close_path(fd, name) && strcmp(name, path) == 0;
}

/* Whether fd is a map file under dir. */
static int slow_close_is_map(int fd, const char *dir)
{
	char path[4096];
	if (!slow_close_path(fd, path))
		return 0;
	const size_t d = strlen(dir), p = strlen(path);
	return d && p > d + 4 && strncmp(path, dir, d) == 0 && path[d] == '/' &&
	       strcmp(path + p - 4, "/map") == 0;
}

/* Set once the daemon's loop returned (the unmount); the one map close that sleeps. */
static atomic_bool slow_close_loop_ended, slept_map;

int close(int fd)
{
	static int (*real_close)(int);
	if (!real_close) {
		void *sym = dlsym(RTLD_NEXT, "close");
		memcpy(&real_close, &sym, sizeof sym);   /* (POSIX's way from object to function) */
	}
	const char *dir = getenv("GGUFS_SLOW_CLOSE_DIR");
	const char *file = getenv("GGUFS_SLOW_CLOSE_FILE");
	const char *ms = getenv("GGUFS_SLOW_CLOSE_MS");
	const bool map = dir && atomic_load(&slow_close_loop_ended) && slow_close_is_map(fd, dir);
	if (ms && ((map && !atomic_exchange(&slept_map, true)) ||
	           (file && slow_close_is_file(fd, file)))) {
		const long wait = strtol(ms, NULL, 10);
		struct timespec t = { wait / 1000, (wait % 1000) * 1000000L };
		while (nanosleep(&t, &t) != 0)
			;
	}
	return real_close(fd);
}

/* Sleeps the milliseconds the environment variable name gives, if any. */
static void slow_close_sleep_ms(const char *name)
{
	const char *ms = getenv(name);
	const long wait = ms ? strtol(ms, NULL, 10) : 0;
	struct timespec t = { wait / 1000, (wait % 1000) * 1000000L };
	while (wait > 0 && nanosleep(&t, &t) != 0)
		;
}

struct fuse_session;
struct fuse_loop_config;
int fuse_session_loop_mt(struct fuse_session *se, struct fuse_loop_config *config);

int fuse_session_loop_mt(struct fuse_session *se, struct fuse_loop_config *config)
{
	int (*real_loop)(struct fuse_session *, struct fuse_loop_config *);
	void *sym = dlvsym(RTLD_NEXT, "fuse_session_loop_mt", "FUSE_3.12");
	if (!sym)
		sym = dlsym(RTLD_NEXT, "fuse_session_loop_mt");
	memcpy(&real_loop, &sym, sizeof sym);
	const int r = real_loop(se, config);
	atomic_store(&slow_close_loop_ended, true);
	slow_close_sleep_ms("GGUFS_SLOW_SERVE_MS");
	return r;
}
