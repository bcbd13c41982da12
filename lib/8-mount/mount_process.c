#include "mount_process.h"

#include "remote.h"

bool mount_process_start(char err[GGUF_ERR_MAX])
{
	return remote_process_start(err);
}

void mount_process_end(void)
{
	remote_process_end();
}
