/* A lock held for a mount's life, handed over at its end (flock_handover.h). */
#include "flock_handover.h"

#include <errno.h>
#include <sys/file.h>

int flock_retry(int fd, int op)
{
	int r;
	while ((r = flock(fd, op)) != 0 && errno == EINTR)
		;
	return r;
}

void flock_leave(int fd)
{
	flock_retry(fd, LOCK_SH | LOCK_NB);
}

bool flock_holder_leaving(int fd)
{
	if (flock_retry(fd, LOCK_SH | LOCK_NB) != 0)
		return false;
	flock_retry(fd, LOCK_UN);
	return true;
}
