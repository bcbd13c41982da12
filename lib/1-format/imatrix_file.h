/* An importance matrix file, read as llama-quantize reads its --imatrix FILE: the GGUF
 * form (general.type "imatrix": per weight W the F32 tensors W.in_sum2, the sums of the
 * squared activations, [ne0, n_expert], and W.counts, [n_expert]; the keys
 * imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size) and the legacy form
 * (".dat"), as llama.cpp's common_imatrix_load reads them, and the values as
 * llama-quantize's load_imatrix makes them (the per-column weights it hands to
 * llama_model_quantize). The image is held in memory (an mmap of the file); entries point
 * into it and are normalised on demand, so a matrix of any size costs its index only.
 *
 * The legacy layout (little-endian; what llama.cpp accepts, exactly):
 *
 *     int32 n_entries (>= 1)
 *     n_entries times:  int32 len, len bytes name (cut at its first NUL),
 *                       int32 ncall, int32 nval (>= 1), nval float32 sums
 *     optional:         int32 chunk_count (the bytes that remain, if fewer than 4),
 *                       int32 len, len bytes: the dataset (cut at its first NUL)
 *
 * A name given twice is its last entry. A file that starts with "GGUF" is read as GGUF
 * only (llama.cpp reads a GGUF image it cannot parse as legacy, which then fails too). */
#ifndef GGUFS_IMATRIX_FILE_H
#define GGUFS_IMATRIX_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "errline.h"
#include "gguf.h"

struct imatrix_entry {
	struct gguf_str name;       /* into the image, cut at its first NUL */
	const uint8_t *sums;        /* n_values little-endian float32, into the image */
	uint64_t n_values;
	const uint8_t *counts;      /* GGUF: n_counts little-endian float32; legacy: NULL */
	uint64_t n_counts;
	int32_t ncall;              /* legacy: the entry's number of calls; GGUF: 0 */
};

struct imatrix {
	bool legacy;
	uint64_t n_entries;
	struct imatrix_entry *entries;   /* sorted by name (bytes, then length), each once */
	bool has_dataset;
	struct gguf_str dataset;    /* the first dataset, cut at its first NUL (into the image) */
	int32_t chunk_count;        /* as llama-quantize takes it: written when > 0 */
	bool all_finite;            /* every weight finite (llama_model_quantize refuses a
	                             * matrix with one that is not) ... */
	float first_non_finite;     /* ... else the first, in the entries' order */
	struct gguf_file gf;        /* the GGUF form's parse (zeroed for the legacy form) */
};

/* Reads the matrix in [data, data + size) into *out: 0, or -1 with one line in err
 * for a file llama-quantize refuses ("no data", a name without its sums or counts,
 * sums or counts not F32, a GGUF without the imatrix keys, a truncated entry) or would
 * crash on (a count tensor of no values, a key of another type than llama.cpp reads
 * it as, a negative length). Never reads outside the image; allocates at most in
 * proportion to size. Every weight is made once, to tell all_finite. */
int imatrix_parse(const uint8_t *data, uint64_t size, struct imatrix *out,
                  char err[GGUF_ERR_MAX]);
/* Releases what imatrix_parse allocated (not the image); *im zeroed. */
void imatrix_free(struct imatrix *im);

/* The entry named name (len bytes), or NULL. */
const struct imatrix_entry *imatrix_find(const struct imatrix *im, const char *name,
                                         uint64_t len);

/* The entry's n_values weights as llama-quantize gives them to llama_model_quantize:
 * GGUF: each expert's sums divided by its count (rounded to an integer as llama.cpp
 * rounds it; a count below 1 gives weights of 1), values past n_counts * (n_values /
 * n_counts) 0; legacy: the sums divided by ncall when it is positive, else as they are. */
void imatrix_values(const struct imatrix *im, const struct imatrix_entry *e, float *out);
/* Weights [first, first + n) of e only (inside n_values), into out: a tensor's row of
 * one expert. */
void imatrix_values_range(const struct imatrix *im, const struct imatrix_entry *e,
                          uint64_t first, uint64_t n, float *out);

/* Whether every weight of e (as imatrix_values makes them) is finite: llama_model_quantize
 * refuses a matrix with one that is not. On false, *bad is the first such weight. */
bool imatrix_entry_finite(const struct imatrix *im, const struct imatrix_entry *e,
                          float *bad);

#endif
