/* llama.cpp's architectures: the names general.architecture may hold for llama.cpp to
 * load a model (or quantize it), as the pinned llama.cpp of tests/llama knows them, and
 * the keys each one requires beyond those every architecture reads.
 * The table (llama_archs.c) is generated from that source by gen_llama_archs.py and
 * checked against it by tests/quant/test_quant_refuse.py. */
#ifndef GGUFS_LLAMA_ARCHS_H
#define GGUFS_LLAMA_ARCHS_H

#include <stdbool.h>
#include <stddef.h>

/* A key the architecture's load_arch_hparams requires, as it reads it: how 'k' (get_key:
 * present, of GGUF type type unless type is LLAMA_ARCH_ANY_TYPE), 'o' (get_key_or_arr:
 * present), 'a' (get_arr: present and an array), 'n' (get_arr_n: present and an
 * array). */
struct llama_arch_key {
	char how;
	unsigned char type;
	const char *key;      /* the whole key, the architecture's name in it */
};
#define LLAMA_ARCH_ANY_TYPE 255

struct llama_arch {
	const char *name;     /* as general.architecture holds it */
	bool has_model;       /* llama.cpp makes a model of it (else: "unsupported") */
	/* the keys its load_arch_hparams requires whatever the model says, in the order it
	 * reads them, ended by a NULL key; NULL for none. Not every key it may require:
	 * those read under a condition are left out (gen_llama_archs.py). */
	const struct llama_arch_key *keys;
};

extern const struct llama_arch llama_arch_table[];
extern const size_t llama_arch_count;

/* The architecture whose name is the len bytes at name (not NUL-terminated, any bytes),
 * or NULL when llama.cpp knows no such architecture. */
const struct llama_arch *llama_arch_find(const char *name, size_t len);

#endif
