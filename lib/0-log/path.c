/* Paths as text (path.h). */
#include "path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *path_absolute(const char *path)
{
	if (path[0] == '/')
		return strdup(path);
	char *cwd = getcwd(NULL, 0);
	if (!cwd)
		return NULL;
	size_t n = strlen(cwd) + strlen(path) + 2;
	char *abs = malloc(n);
	if (abs)
		snprintf(abs, n, "%s/%s", cwd, path);
	free(cwd);
	return abs;
}

bool path_within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 &&
	       (path[n] == 0 || path[n] == '/' || (n && dir[n - 1] == '/'));
}
