/* A set of byte strings that live elsewhere (in the image), to reject duplicate names
 * in O(n). Open addressing, sized once for the most names it will hold. */
#ifndef GGUFS_NAMESET_H
#define GGUFS_NAMESET_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"

struct nameset {
	const struct gguf_str **slots;
	uint64_t mask;
};

/* Room for n names; false when out of memory. */
bool nameset_init(struct nameset *s, uint64_t n);
void nameset_free(struct nameset *s);
/* Adds name (kept by pointer); false if an equal name was already there. */
bool nameset_add(struct nameset *s, const struct gguf_str *name);

#endif
