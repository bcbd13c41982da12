/* The growable buffer: bytes appended at the end, grown by doubling, with a sticky
 * failure flag instead of a return code at every call, so a writer appends freely and
 * checks once at the end. Zero-initialized is empty; free p when done. */
#ifndef GGUFS_VBYTES_H
#define GGUFS_VBYTES_H

#include <stdbool.h>
#include <stdint.h>

/* Growable bytes with sticky failure (out of memory or past GGUF's 64-bit sizes). */
struct vbytes {
	uint8_t *p;
	uint64_t len;
	uint64_t cap;
	bool failed;
};
/* Appends p[0..n) (nothing once failed). */
void vbytes_put(struct vbytes *b, const void *p, uint64_t n);
/* Sets the length to len: cut, or grown with zero bytes (nothing once failed). */
void vbytes_resize(struct vbytes *b, uint64_t len);
/* Appends v as n little-endian bytes. */
void vbytes_le(struct vbytes *b, uint64_t v, int n);
/* Overwrites n little-endian bytes at at (at + n <= len). */
void vbytes_patch(struct vbytes *b, uint64_t at, uint64_t v, int n);

#endif
