/* The converter's names for a checkpoint's tensors (llama.cpp's gguf-py TensorNameMap,
 * as gen_names.py took it into st_names_table.c): for each architecture, which names
 * of a Hugging Face checkpoint become which GGUF tensor name, and which GGUF names the
 * converter always stores as F32. */
#ifndef GGUFS_ST_NAMES_H
#define GGUFS_ST_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A checkpoint's name and the GGUF name it becomes; "{bid}" in either stands for a
 * block number (written in decimal, as Python's format writes it). */
struct st_name_pair {
	const char *key;
	const char *name;
};

/* One architecture's map (key order as the converter builds its map: a name matched by
 * two keys takes the later one's) and its names kept in F32, each list ending with a
 * NULL. */
struct st_names_arch {
	const char *arch;                       /* GGUF's name: "llama", "gemma2" ... */
	const struct st_name_pair *pairs;
	const char *const *f32;
};

/* Every architecture of the table, ending with one whose arch is NULL. */
extern const struct st_names_arch st_names_archs[];

/* The table of GGUF architecture arch, or NULL. */
const struct st_names_arch *st_names_find(const char *arch);

/* What the converter's map_tensor_name makes of name (len bytes, no NUL needed) in a
 * model of n_blocks blocks: the key itself, else the key less ".weight" or ".bias" then
 * that suffix again; the GGUF name into out (size bytes, NUL-terminated): true, or false
 * when no key matches (the converter then stops: "Can not map tensor") or out is too
 * small. A block number must be one below n_blocks, written as Python writes it (no
 * leading zero). */
bool st_names_map(const struct st_names_arch *a, const char *name, size_t len,
                  uint64_t n_blocks, char *out, size_t size);

/* Whether GGUF name (NUL-terminated) is name_template + suffix with its {bid}, if any,
 * a block number: the converter's match_model_tensor_name. The block number, or
 * UINT64_MAX for a template without one, into *bid when it matches. */
bool st_names_match(const char *name_template, const char *suffix, const char *name,
                    uint64_t *bid);

/* Whether GGUF tensor name is one the converter keeps in F32 for a (its list of
 * always-F32 tensors, with ".weight"), as its match_model_tensor_name matches it: a
 * template with a block number is matched with block bid (the first number in the
 * checkpoint's name), one without only when bid is UINT64_MAX (no number there). */
bool st_names_always_f32(const struct st_names_arch *a, const char *name, uint64_t bid);

#endif
