/* File names for tensors and metadata keys (ggufs(1), NAMES): every name maps to exactly
 * one file name, which is never "", "." or "..", has no '/' or NUL, and leaves room for
 * the ".f32"/".npy" suffixes within NAME_MAX. */
#ifndef GGUFS_NAMES_H
#define GGUFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Escaped names longer than this are cut and get a hash suffix. */
#define NAMES_CUT 200
/* Buffer size for any file name, NUL included: the cut, '~', 16 hex digits. */
#define NAMES_BUF (NAMES_CUT + 1 + 16 + 1)

/* Writes the file name of name[0..len) into out as a NUL-terminated string and returns
 * its length (at most NAMES_BUF - 1). tensor selects rule 2's first half (a tensor name
 * ending in ".f32" or ".npy" gets that last '.' as "%2E"); any name ending in ".gguf"
 * gets it too, so that model.gguf is the one name in the tree ending so. The name is
 * untrusted and may hold any bytes, NUL included. */
size_t names_encode(const char *name, uint64_t len, bool tensor, char out[NAMES_BUF]);

/* The metadata key whose file name is file (NUL-terminated): names_encode's escapes
 * undone, into key (NAMES_BUF bytes, not NUL-terminated) and its length into *len.
 * Refuses (-ENAMETOOLONG) a file longer than any key's file name (NAMES_BUF - 1 bytes:
 * decoding never makes a name longer) and (-EINVAL) one that is not what names_encode
 * makes of its key (a cut name with a hash, an escape the names do not use, a byte left
 * that should be escaped); 0 otherwise. The file name comes from a caller (a create or a
 * rename in metadata/) and may hold any bytes. */
int names_decode(const char *file, char key[NAMES_BUF], uint64_t *len);

/* True when name[0..len) is one of vim's probes of a directory (a file it makes and
 * deletes to learn whether it may write there): 4913 + 123 k in decimal, no leading
 * zero. A key's file name is never one (names_encode), and a file made with one in
 * metadata/ is a scratch file (scratch.h). */
bool names_vim_probe(const char *name, uint64_t len);

#endif
