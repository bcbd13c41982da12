/* Tensor health: statistics over the float32 values of a tensor's .f32 file, and the
 * count of its blocks whose scale fields ggml's row validation (ggml_validate_row_data)
 * would reject. The values come through the tree's own read path, so they are exactly
 * the bytes that .f32 serves, wherever the model's bytes come from. */
#ifndef GGUFS_STATS_H
#define GGUFS_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "types.h"

struct tree;

struct tensor_stats {
	uint64_t elements;
	uint64_t finite;       /* elements - nan - pos_inf - neg_inf */
	float min, max;        /* over the finite values; NaN when there are none; a zero
	                        * min or max is +0.0 whatever the sign of the zeros */
	float absmax;          /* largest |x| over the finite values; NaN when none */
	double mean, std;      /* float64, population std (ddof 0), over the finite values */
	uint64_t nan, pos_inf, neg_inf;
	uint64_t zeros;        /* +0.0 and -0.0 */
	uint64_t subnormals;   /* float32 subnormals, of either sign */
	bool has_scales;       /* the type has block scale fields that ggml validates */
	uint64_t bad_blocks;   /* blocks with a NaN or infinite scale field (has_scales) */
};

/* A running accumulation over values in tensor order. Blocks of STATS_BLOCK values are
 * summed on their own and merged (Chan et al.), so the float64 results depend only on
 * the values and their order, never on how a caller cuts them into calls, nor on the
 * SIMD level. */
enum { STATS_BLOCK = 4096 };
struct stats_acc {
	struct tensor_stats s;
	double m2;             /* sum of squared deviations from the mean, merged */
	float pending[STATS_BLOCK];  /* a block's values not yet complete */
	uint32_t n_pending;
};

void stats_acc_init(struct stats_acc *a);
/* Adds n values, the next ones of the tensor in order. */
void stats_acc_add(struct stats_acc *a, const float *x, uint64_t n);
/* Folds in what is pending and writes the results (elements, min ... subnormals);
 * has_scales and bad_blocks are left as stats_acc_init set them (false, 0). */
void stats_acc_finish(struct stats_acc *a, struct tensor_stats *out);

/* Whether blocks of this type have scale fields to validate. */
bool stats_type_has_scales(uint32_t type);
/* The number of the n blocks of type type at p (any alignment) whose scale fields are
 * NaN or infinite (fp16 d, m, dmin; the E8M0 exponent 0xff of mxfp4; the fp16 scale
 * spread over iq1_m's scales), as ggml_validate_row_data checks. */
uint64_t stats_bad_blocks(uint32_t type, const uint8_t *p, uint64_t n);

/* The statistics of tensor i of the model of tree t (which must have a .f32 file),
 * read through tree_read of its raw and .f32 files in bounded chunks. progress, when
 * not NULL, is advanced by the raw bytes of each chunk done. 0, or -errno from the
 * read (-EIO when the model's bytes are gone), with *out unset. */
int stats_tensor(const struct tree *t, uint64_t i, struct tensor_stats *out,
                 _Atomic uint64_t *progress);

/* True when the tensor is unhealthy: NaN or infinite values, or bad block scales. */
bool stats_unhealthy(const struct tensor_stats *s);

#endif
