/* A byte count for people, as ggufs's reports on stderr and stdout word it. */
#ifndef GGUFS_RENDER_SIZE_H
#define GGUFS_RENDER_SIZE_H

/* Room for any text of render_size. */
#define RENDER_SIZE_MAX 24

/* n bytes in the unit that suits them, as ls -h chooses one (but in powers of 1000, as
 * disks and downloads count): "512 bytes", "14.6 KB", "3.92 MB", "638 MB", "1.52 GB",
 * three significant figures. Written into buf, which is returned. */
const char *render_size(double n, char buf[RENDER_SIZE_MAX]);

#endif
