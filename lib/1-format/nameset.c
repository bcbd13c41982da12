#include "nameset.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

bool nameset_init(struct nameset *s, uint64_t n)
{
	uint64_t cap = hash_slots(n);
	s->slots = calloc(cap, sizeof *s->slots);
	s->mask = cap - 1;
	return s->slots != NULL;
}

void nameset_free(struct nameset *s)
{
	free(s->slots);
	s->slots = NULL;
}

bool nameset_add(struct nameset *s, const struct gguf_str *name)
{
	for (uint64_t i = hash_bytes(name->ptr, name->len, 0) & s->mask;; i = (i + 1) & s->mask) {
		const struct gguf_str *o = s->slots[i];
		if (!o) {
			s->slots[i] = name;
			return true;
		}
		if (o->len == name->len && memcmp(o->ptr, name->ptr, name->len) == 0)
			return false;
	}
}
