/* The FUSE device: can /dev/fuse be opened for a mount? Asked before mounting, so that
 * what is missing is said in ggufs's words rather than libfuse's. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggufs.h"
#include "log_escape.h"

bool device_check(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	int e = errno;
	struct stat st;
	if (e == ENOENT || e == ENODEV || e == ENXIO) {
		log_errf("/dev/fuse: %s: the kernel's FUSE is missing (modprobe fuse; "
		        "in a container: --device /dev/fuse)", strerror(e));
		return false;
	}
	if ((e != EACCES && e != EPERM) || stat("/dev/fuse", &st) != 0) {
		log_errf("/dev/fuse: %s", strerror(e));
		return false;
	}
	struct group *g = getgrgid(st.st_gid);
	struct passwd *u = getpwuid(st.st_uid);
	log_errf("/dev/fuse: %s (mode %04o, %s:%s): mounting needs read and write "
	        "access to it: run ggufs as root, or give /dev/fuse mode 0666 as most systems do, "
	        "or a group (such as fuse) that you are in", strerror(e),
	        (unsigned)(st.st_mode & 07777), u ? u->pw_name : "?", g ? g->gr_name : "?");
	return false;
}
