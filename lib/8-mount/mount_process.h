/* What the process that mounts does once, at its start and at its end, for everything
 * below the mount: the remote layer's libcurl set up before any thread exists and torn
 * down after the last mount is closed. The front end calls these two and nothing of
 * the libraries below. */
#ifndef GGUFS_MOUNT_PROCESS_H
#define GGUFS_MOUNT_PROCESS_H

#include <stdbool.h>

#include "errline.h"

/* First thing in main, before any thread and before a name is opened (open_name.h,
 * mount_source.h, name_report.h): true, or false with a line in err (the process can
 * open no remote name and should exit). */
bool mount_process_start(char err[GGUF_ERR_MAX]);

/* Last thing before the process exits, once every mount, model and library is closed
 * and no thread of them runs: ends what mount_process_start set up. */
void mount_process_end(void);

#endif
