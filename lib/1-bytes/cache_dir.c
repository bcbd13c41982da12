/* Where the disk cache lives when the command line does not say (cache_dir.h): the XDG
 * cache directory's ggufs/, as llama.cpp's -hf and huggingface_hub keep theirs. */
#include "cache_dir.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes directory path and its missing parents, each mode 0700 (as the XDG spec asks of
 * $XDG_CACHE_HOME): true when it is there after, false when a part could not be made
 * (why does not matter: a cache nobody asked for is then simply not kept). */
static bool cache_dir_make(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		const bool made = mkdir(path, 0700) == 0 || errno == EEXIST;
		*p = '/';
		if (!made)
			return false;
	}
	return mkdir(path, 0700) == 0 || errno == EEXIST;
}

static pthread_once_t cache_dir_once = PTHREAD_ONCE_INIT;
static char *cache_dir_found;   /* the process's default directory, or NULL: none */

/* Sets cache_dir_found, once: $XDG_CACHE_HOME/ggufs (an absolute XDG_CACHE_HOME only,
 * as the XDG spec says), else ~/.cache/ggufs, its parents made (mode 0700) when
 * missing; NULL without a home, or when the parents cannot be made (a cache the user did
 * not ask for never stops a mount). Kept for the process's life: every disk cache
 * shares it. */
static void cache_dir_find(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME");
	char base[PATH_MAX];
	if (xdg && xdg[0] == '/') {
		snprintf(base, sizeof base, "%s", xdg);
	} else {
		const char *home = getenv("HOME");
		const struct passwd *pw = home && home[0] == '/' ? NULL : getpwuid(geteuid());
		if (pw)
			home = pw->pw_dir;
		if (!home || home[0] != '/')
			return;
		snprintf(base, sizeof base, "%s/.cache", home);
	}
	size_t n = strlen(base);
	while (n > 1 && base[n - 1] == '/')
		base[--n] = 0;
	if (n + sizeof "/ggufs" > sizeof base || !cache_dir_make(base))
		return;
	cache_dir_found = malloc(n + sizeof "/ggufs");
	if (cache_dir_found)
		snprintf(cache_dir_found, n + sizeof "/ggufs", "%s/ggufs", base);
}

const char *cache_dir_default(const char *given)
{
	if (given)
		return strcmp(given, "none") == 0 ? NULL : given;
	pthread_once(&cache_dir_once, cache_dir_find);
	return cache_dir_found;
}
