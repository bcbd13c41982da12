/* Preloaded (LD_PRELOAD) into a ggufs daemon by test_edits_closes.py: a daemon whose
 * saves of the edits file are slow. Its renameat() of a file to the name of the file at
 * $GGUFS_SLOW_SAVE_FILE (the last step of a save, edits_store.c) first sleeps
 * $GGUFS_SLOW_SAVE_MS, so that an edit made after close(2) returned (at the release,
 * which the kernel sends without waiting) is seen late every time, not only when the
 * file system's fsync happens to be slower than the test's next read (on tmpfs it never
 * is). Every other renameat is the real one, at once. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The last part of path (path itself when it has no '/'). */
static const char *slow_save_base(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
	static int (*real_renameat)(int, const char *, int, const char *);
	if (!real_renameat) {
		void *sym = dlsym(RTLD_NEXT, "renameat");
		memcpy(&real_renameat, &sym, sizeof sym);   /* (POSIX's way from object to function) */
	}
	const char *file = getenv("GGUFS_SLOW_SAVE_FILE");
	const char *ms = getenv("GGUFS_SLOW_SAVE_MS");
	if (file && ms && newpath && strcmp(slow_save_base(newpath), slow_save_base(file)) == 0) {
		const long wait = strtol(ms, NULL, 10);
		struct timespec t = { wait / 1000, (wait % 1000) * 1000000L };
		while (nanosleep(&t, &t) != 0)
			;
	}
	return real_renameat(olddirfd, oldpath, newdirfd, newpath);
}
