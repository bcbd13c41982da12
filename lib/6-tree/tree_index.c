/* The lookup table of a tree's names (struct name_index, tree_impl.h): open addressing
 * over the positions of nodes in one array, hashed by directory and name with the
 * seeded hash (hash.h), so that names a file chooses cannot make it a list. */
#include "tree_impl.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

/* The lookup hash of name in directory dir. */
static uint64_t hash_entry(uint64_t dir, const char *name)
{
	return hash_bytes(name, strlen(name), dir);
}

/* An empty index for n names: false out of memory. */
bool name_index_init(struct name_index *x, uint64_t n)
{
	uint64_t cap = hash_slots(n);
	x->slots = calloc(cap, sizeof *x->slots);
	x->mask = cap - 1;
	return x->slots != NULL;
}

/* Enters nodes[i] in x (linear probing). */
void name_index_add(struct name_index *x, const struct tree_node *nodes, uint64_t i)
{
	uint64_t h = hash_entry(nodes[i].parent, nodes[i].name) & x->mask;
	while (x->slots[h])
		h = (h + 1) & x->mask;
	x->slots[h] = i + 1;
}

/* The node of nodes called name in dir that x holds, or NULL. */
const struct tree_node *name_index_find(const struct name_index *x,
                                        const struct tree_node *nodes, uint64_t dir,
                                        const char *name)
{
	if (!x->slots)
		return NULL;
	for (uint64_t h = hash_entry(dir, name) & x->mask; x->slots[h]; h = (h + 1) & x->mask) {
		const struct tree_node *n = &nodes[x->slots[h] - 1];
		if (n->parent == dir && strcmp(n->name, name) == 0)
			return n;
	}
	return NULL;
}

