/* The inode numbers of a mount's tree, said once: every file and directory has a
 * number derived from position in the model's file, so they are stable for
 * one model and across its metadata edits:
 *   1 /            2 /metadata      3 /tensors      4 /gguf.json     5 /summary.txt
 *   6 /stats       7 /stats.tsv     8 /model.gguf
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
#define TREE_FIRST_META 16
#define TREE_MODEL_STATE_INO (UINT64_C(1) << 40)
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

#endif
