/* quants/ as a provider (provider.h): every quantization llama.cpp makes of the model
 * (under the mount's importance matrix, if it has one), as NAME.gguf (quant_plan.h: byte for byte
 * llama_model_quantize()'s file), and quants.tsv (render_quants.h). A mount registers
 * it once in its kit (tree_kit_add(kit, &quants_provider, qm, err)) with its per-mount
 * state, made from the mount's options: the trees of the mount (its model's, its edit
 * states', a library's models') each get an instance from it.
 *
 * Each NAME.gguf is a computed file (computed.h), opened at its first read, its blocks
 * made by the mount's pool of workers ahead of a sequential reader and assembled from
 * its header, the model's own bytes (tensors whose type stays) and its converted
 * tensors' pieces, kept in the disk cache (piece_store.h) by what each is made from: its
 * source bytes' content hash, type and shape, its new type, QUANT_RULES_VERSION and its
 * importance matrix entry; one copy per (tensor, type) whatever NAME, path or model
 * holds it. Its numbers are a
 * state's own (tree_ino.h's zone P): one per candidate NAME and quants.tsv, whether the
 * model makes it or not, so that the numbers stay the model's file's alone. */
#ifndef GGUFS_QUANTS_PROVIDER_H
#define GGUFS_QUANTS_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include "errline.h"
#include "provider.h"

struct leaving;
struct computed_pool;
struct imatrix;

/* A mount's options for quants/. */
/* The most workers a mount's quants/ runs, whatever it is told or the cores. */
#define QUANTS_THREADS_MAX 256u

struct quants_opts {
	bool requantize;         /* -o requantize (llama-quantize's --allow-requantize): the
	                          * quantizations llama.cpp makes only when allowed to
	                          * requantize a tensor already quantized (dequantized as ggml
	                          * does, then quantized) */
	unsigned threads;        /* the pool's workers at most: 0 for the online cores; more
	                          * than QUANTS_THREADS_MAX is that many */
	const char *cache_dir;   /* the disk cache's directory (copied), NULL: none */
	uint64_t cache_max;      /* its bound in bytes, 0: the default (diskcache.h) */
	/* -o imatrix=FILE (llama-quantize's --imatrix FILE): the matrix, parsed once for the
	 * mount (outliving it), or NULL; file, FILE as given (quantize.imatrix.file;
	 * copied). Every NAME is then planned and made under it, and the nine NAMEs that
	 * need one are made where llama-quantize makes them. */
	const struct imatrix *imatrix;
	const char *imatrix_file;
};

/* The per-mount state of quants/: the options, and the pool of workers and memory that
 * every quants/ file of the mount shares. */
struct quants_mount;

/* The state for a mount of options o: its pool and piece store made (computed_pool_new,
 * piece_store_new: when leaving, the mount's hand-over, or NULL, runs at the unmount,
 * nothing more is stored on disk; a quick remount shares the entries; a cache_dir that
 * cannot be used is said in the event log, and the quants computed without it). NULL
 * with one line in err. */
struct quants_mount *quants_mount_new(const struct quants_opts *o, struct leaving *leaving,
                                      char err[GGUF_ERR_MAX]);
/* Frees qm and its pool, after every tree whose quants/ it served (NULL: nothing). */
void quants_mount_free(struct quants_mount *qm);
/* qm's pool (for tests: its threads). */
struct computed_pool *quants_mount_pool(const struct quants_mount *qm);

/* The provider, its ctx a struct quants_mount. */
extern const struct tree_provider quants_provider;

#endif
