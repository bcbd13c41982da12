/* open.c's options for lib/8-mount's opening by name (open_name.h), for the files of the
 * front end that still see all of lib/ (main.c, check.c, diff.c, open.c). */
#ifndef GGUFS_OPEN_H
#define GGUFS_OPEN_H

#include "ggufs.h"
#include "open_name.h"

/* o's remote options, and stderr for the notes (and, on a terminal, what a remote open
 * waits for): what the mount, --check and --diff open names with. */
struct open_name_opts open_opts(const struct options *o);

#endif
