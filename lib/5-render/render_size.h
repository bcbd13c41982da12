/* A byte count for people, as ggufs's reports on stderr and stdout word it, and the
 * progress of a long scan in such counts. */
#ifndef GGUFS_RENDER_SIZE_H
#define GGUFS_RENDER_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Room for any text of render_size. */
#define RENDER_SIZE_MAX 24

/* n bytes in the unit that suits them, as ls -h chooses one (but in powers of 1000, as
 * disks and downloads count): "512 bytes", "14.6 KB", "3.92 MB", "638 MB", "1.52 GB",
 * three significant figures. Written into buf, which is returned. */
const char *render_size(double n, char buf[RENDER_SIZE_MAX]);

/* Room for a line of render_progress whose doing is a word. */
#define RENDER_PROGRESS_MAX 128

/* The progress of a scan (--check, --diff) that has done done bytes of total in elapsed
 * seconds: "DOING: 1.52 GB / 3.04 GB ( 50%), 638 MB/s" (100% of nothing), into buf
 * (size bytes, cut to fit), which is returned. */
const char *render_progress(const char *doing, uint64_t done, uint64_t total, double elapsed,
                           char *buf, size_t size);

#endif
