/* The inode numbers of a mount's tree, said once: every file and directory has a
 * number derived from position in the model's file, so they are stable for
 * one model and across its metadata edits:
 *   1 /            2 /metadata      3 /tensors      4 /gguf.json     5 /summary.txt
 *   6 /stats       7 /stats.tsv     8 /model.gguf    9 /quants
 *   TREE_FIRST_META + k                    metadata key k of the file (file order)
 *   TREE_FIRST_META + n_kv + 3 t + j       tensor t: j = 0 raw, 1 .f32, 2 .npy
 *   TREE_FIRST_META + n_kv + 3 n_t + t     stats/NAME of tensor t
 *   TREE_FIRST_META + n_kv + 4 n_t + j     the j-th key created by edits (overlay.h ids)
 * where n_kv counts the keys of the file. A tensor without a dequantizer has no
 * .f32/.npy and no stats/NAME, a deleted key no file: those inode numbers stay unused.
 * A renamed key keeps its number, as rename(2) keeps an inode.
 *
 * model.gguf alone is a new file in each edit state: TREE_MODEL_INO for the model's own
 * metadata (state generation 0), TREE_MODEL_STATE_INO + gen for the state of generation
 * gen. The kernel keeps one page cache per inode, and a reader that still maps an older
 * state refills its pages with that state's bytes: with one number for every state, a
 * new reader got them (the old layout, shifted).
 *
 * The files of quants/ too: TREE_QUANT_INO + TREE_QUANT_SLOTS gen + j in the state of
 * generation gen (0: the model's own metadata), j the NAME's place in quant_names(), or
 * TREE_QUANT_TSV_SLOT for quants.tsv: above the numbers of keys and tensors of a model
 * (a library refuses a model whose numbers reach TREE_QUANT_INO), below a library's
 * compare/ numbers (library.h) for the one state a library has, and below
 * TREE_MODEL_STATE_INO for 2^35 states.
 *
 * The scratch files of metadata/ (editors' temporaries, scratch.h) are numbered from
 * TREE_SCRATCH_INO, above every state's model.gguf. */
#ifndef GGUFS_TREE_INO_H
#define GGUFS_TREE_INO_H

#include <stdbool.h>
#include <stdint.h>

#define TREE_ROOT_INO 1
#define TREE_METADATA_DIR_INO 2
#define TREE_TENSORS_DIR_INO 3
#define TREE_JSON_INO 4
#define TREE_SUMMARY_INO 5
#define TREE_STATS_DIR_INO 6
#define TREE_STATS_TSV_INO 7
#define TREE_MODEL_INO 8
#define TREE_QUANTS_DIR_INO 9
#define TREE_FIRST_META 16
#define TREE_MODEL_STATE_INO (UINT64_C(1) << 40)
#define TREE_QUANT_INO (UINT64_C(1) << 30)
#define TREE_QUANT_SLOTS 32
#define TREE_QUANT_TSV_SLOT 26    /* quants.tsv's j; NAME.gguf's are below it */
/* metadata/'s scratch files (scratch.h): TREE_SCRATCH_INO + n for the n-th made */
#define TREE_SCRATCH_INO (UINT64_C(1) << 41)

/* True when ino is model.gguf's in some edit state (the model's own, or a state's). */
static inline bool tree_ino_is_model(uint64_t ino)
{
	return ino == TREE_MODEL_INO || (ino >= TREE_MODEL_STATE_INO && ino < TREE_SCRATCH_INO);
}

/* The number of metadata key id (overlay.h ids: below n_orig, the file's own keys in
 * file order; from n_orig on, keys created by edits) in a model of n_orig keys and n_t
 * tensors. */
static inline uint64_t tree_ino_key(uint64_t n_orig, uint64_t n_t, uint64_t id)
{
	return id < n_orig ? TREE_FIRST_META + id : TREE_FIRST_META + n_orig + 4 * n_t + (id - n_orig);
}

/* The number of tensor i's file j (0 raw, 1 .f32, 2 .npy). */
static inline uint64_t tree_ino_tensor(uint64_t n_orig, uint64_t i, unsigned j)
{
	return TREE_FIRST_META + n_orig + 3 * i + j;
}

/* The number of stats/NAME of tensor i of n_t. */
static inline uint64_t tree_ino_stats(uint64_t n_orig, uint64_t n_t, uint64_t i)
{
	return TREE_FIRST_META + n_orig + 3 * n_t + i;
}

/* The number of quants/'s file j in the state of generation gen. */
static inline uint64_t tree_ino_quant(uint64_t gen, unsigned j)
{
	return TREE_QUANT_INO + TREE_QUANT_SLOTS * gen + j;
}

/* ---- The zones (lib/6-tree/provider.h), which replace the numbers above once every
 * subtree is a provider; nothing uses them yet. A tree's numbers, and a namespace's:
 *   1                  the root
 *   [2, 16)            the stable root entries, in the kit's root-table order
 *   zone S [16, 2^30)  each provider's stable range (the same in every edit state), in
 *                      registration order, then the one open-ended range to 2^30
 *   zone P [2^30, 2^62) per edit state gen, [2^30 + gen W, 2^30 + (gen + 1) W), W the
 *                      sum of the providers' per-state widths (W < 2^30)
 *   zone X [2^62, 2^63) a namespace's own numbers (the edits' scratch files)
 * State 0's last number, 2^30 + W - 1, stays below 2^31 - 1 (a library's
 * LIB_COMPARE_LOW: a model's tree nests below its compare/ numbers). */
#define TREE_ZONE_ROOT 2
#define TREE_ZONE_S 16
#define TREE_ZONE_P (UINT64_C(1) << 30)
#define TREE_ZONE_X (UINT64_C(1) << 62)
#define TREE_ZONE_END (UINT64_C(1) << 63)
/* The most stable root entries, and the largest W. */
#define TREE_ROOT_ENTRIES_MAX (TREE_ZONE_S - TREE_ZONE_ROOT)
#define TREE_STATE_WIDTH_MAX (TREE_ZONE_P - 1)

/* True when ino is an edit state's own (zone P): a new number in each state. */
static inline bool tree_ino_per_state(uint64_t ino)
{
	return ino >= TREE_ZONE_P && ino < TREE_ZONE_X;
}

/* True when ino is a namespace's own (zone X), no tree's. */
static inline bool tree_ino_ns_own(uint64_t ino)
{
	return ino >= TREE_ZONE_X && ino < TREE_ZONE_END;
}

/* Places a range of width numbers at *next in a zone that ends at end: its first
 * into *first, *next moved past it. False, nothing moved, when it would pass end (a
 * width of 0 always fits, at *next). */
static inline bool tree_zone_place(uint64_t *next, uint64_t width, uint64_t end,
                                   uint64_t *first)
{
	if (*next > end || width > end - *next)
		return false;
	*first = *next;
	*next += width;
	return true;
}

/* The first number of edit state gen's range, for W numbers a state (0 < W <=
 * TREE_STATE_WIDTH_MAX): false when W is out of bounds or the state's range would
 * leave zone P (an edit past the last state that fits, about 2^62 / W of them). */
static inline bool tree_zone_state_first(uint64_t gen, uint64_t w, uint64_t *first)
{
	if (w == 0 || w > TREE_STATE_WIDTH_MAX || gen >= (TREE_ZONE_X - TREE_ZONE_P) / w)
		return false;
	*first = TREE_ZONE_P + gen * w;
	return true;
}

/* Which state's range per-state number ino is in (W numbers a state) and its place in
 * it: false for a number outside zone P, or W out of bounds. */
static inline bool tree_zone_state_of(uint64_t ino, uint64_t w, uint64_t *gen,
                                      uint64_t *offset)
{
	if (!tree_ino_per_state(ino) || w == 0 || w > TREE_STATE_WIDTH_MAX)
		return false;
	*gen = (ino - TREE_ZONE_P) / w;
	*offset = (ino - TREE_ZONE_P) % w;
	return true;
}

#endif
