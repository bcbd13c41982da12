#include "scratch_dir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char scratch_dir[64];

int scratch_dir_make(void **state)
{
	(void)state;
	strcpy(scratch_dir, "/tmp/ggufs-test-XXXXXX");
	return mkdtemp(scratch_dir) ? 0 : -1;
}

int scratch_dir_remove(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", scratch_dir);
	return system(cmd);
}
