/* The numbers of a mount's trees, said once, as zones: each provider of a kit
 * (provider.h) is handed its numbers when a model's tree is first built
 * (tree_kit.c), from its widths for that model's own file and the mount's options only,
 * so that the numbers are stable for one model, across its metadata edits, and for a
 * library's model built again. A kit's core providers, in registration order, make
 * today's numbers:
 *   1 /            2 /metadata      3 /tensors      4 /gguf.json     5 /summary.txt
 *   6 /stats       7 /stats.tsv     then the features' root entries (8 /quants)
 *   TREE_FIRST_META + k                    metadata key k of the file (file order)
 *   TREE_FIRST_META + n_kv + 3 t + j       tensor t: j = 0 raw, 1 .f32, 2 .npy
 *   TREE_FIRST_META + n_kv + 3 n_t + t     stats/NAME of tensor t
 *   TREE_FIRST_META + n_kv + 4 n_t + j     the j-th key created by edits (overlay.h ids;
 *                                          the open-ended range, to zone P)
 * where n_kv counts the keys of the file. A tensor without a dequantizer has no
 * .f32/.npy and no stats/NAME, a deleted key no file: those numbers stay unused. A
 * renamed key keeps its number, as rename(2) keeps an inode.
 *
 * model.gguf and the files of quants/ are new files in each edit state, numbered in the
 * state's own range of zone P (model.gguf its first number): the kernel keeps one page
 * cache per inode, and a reader that still maps an older state refills its pages with
 * that state's bytes; with one number for every state, a new reader got them. The
 * scratch files of metadata/ (editors' temporaries, scratch.h) are zone X's. */
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
#define TREE_FIRST_META 16

/* ---- The zones. A tree's numbers, and a namespace's:
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
