#include "llama_archs.h"

#include <string.h>

/* A linear search: about 150 names, looked up once per plan. */
const struct llama_arch *llama_arch_find(const char *name, size_t len)
{
	for (size_t i = 0; i < llama_arch_count; i++)
		if (strlen(llama_arch_table[i].name) == len
		    && memcmp(llama_arch_table[i].name, name, len) == 0)
			return &llama_arch_table[i];
	return NULL;
}
