/* Paths as text: one made absolute against the working directory, and whether one lies
 * in another. Nothing here resolves a symlink: the caller resolves (realpath) what needs
 * resolving first. */
#ifndef GGUFS_PATH_H
#define GGUFS_PATH_H

#include <stdbool.h>

/* path itself when absolute, else the working directory, '/' and path (malloc'ed): what
 * a daemon that moves to "/" still finds. NULL out of memory, or when the working
 * directory cannot be had (deleted, unreadable). */
char *path_absolute(const char *path);

/* True when path is dir or lies below it ("/a/b" is in "/a" and in "/", "/ab" is not
 * in "/a"); both absolute and resolved alike. */
bool path_within(const char *path, const char *dir);

#endif
