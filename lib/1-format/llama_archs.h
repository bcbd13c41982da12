/* llama.cpp's architectures: the names general.architecture may hold for llama.cpp to
 * load a model (or quantize it), as the pinned llama.cpp of tests/llama knows them.
 * The table (llama_archs.c) is generated from that source by gen_llama_archs.py and
 * checked against it by tests/quant/test_quant_refuse.py. */
#ifndef GGUFS_LLAMA_ARCHS_H
#define GGUFS_LLAMA_ARCHS_H

#include <stdbool.h>
#include <stddef.h>

struct llama_arch {
	const char *name;     /* as general.architecture holds it */
	bool has_model;       /* llama.cpp makes a model of it (else: "unsupported") */
};

extern const struct llama_arch llama_arch_table[];
extern const size_t llama_arch_count;

/* The architecture whose name is the len bytes at name (not NUL-terminated, any bytes),
 * or NULL when llama.cpp knows no such architecture. */
const struct llama_arch *llama_arch_find(const char *name, size_t len);

#endif
