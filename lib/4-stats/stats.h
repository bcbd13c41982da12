/* Tensor health: statistics over the float32 values of a tensor's .f32 file, and the
 * count of its blocks whose scale fields ggml's row validation (ggml_validate_row_data)
 * would reject. The values come through the tensor reader (reader.h), which the tree's
 * .f32 files read through too, so they are exactly the bytes that .f32 serves, wherever
 * the model's bytes come from. */
#ifndef GGUFS_STATS_H
#define GGUFS_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "types.h"

struct ggufs_model;

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

/* What is known of a run of values before it is turned into figures: counts, min, max,
 * and the count, mean and sum of squared deviations (m2) of the finite values. Two
 * parts of consecutive runs merge into the part of both (Chan et al.). */
struct stats_part {
	struct tensor_stats s;   /* std and absmax unset; mean of the finite values */
	double m2;
};

/* The figures of a part: std, absmax, and NaN for what needs a finite value when there
 * is none. */
void stats_finish(const struct stats_part *p, struct tensor_stats *out);
/* Merges next, the part of the values right after into's, into into. */
void stats_merge(struct stats_part *into, const struct stats_part *next);

/* A running accumulation over values in order. Blocks of STATS_BLOCK values are summed
 * on their own (about a shift near the running mean, so that squares keep their
 * digits) and merged, so that the float64 results depend only on the values and their
 * order, never on how a caller cuts them into calls, nor on the SIMD level. */
enum { STATS_BLOCK = 4096 };
struct stats_acc {
	struct stats_part p;
	float pending[STATS_BLOCK];  /* a block's values not yet complete */
	uint32_t n_pending;
};

void stats_acc_init(struct stats_acc *a);
/* Adds n values, the next ones in order. */
void stats_acc_add(struct stats_acc *a, const float *x, uint64_t n);
/* Adds the values of nblocks blocks of a type that stats_quant_has() at p, all with
 * finite scale fields, as one block of the accumulation: nothing may be pending and
 * nblocks * block_elems must be at most STATS_BLOCK (less only for a tensor's last).
 * The figures differ from stats_acc_add's of the same values by float64 rounding only. */
void stats_acc_add_blocks(struct stats_acc *a, uint32_t type, const uint8_t *p,
                          uint64_t nblocks);
/* Folds in what is pending: the part of every value added. */
void stats_acc_part(struct stats_acc *a, struct stats_part *out);
/* stats_acc_part, then stats_finish. */
void stats_acc_finish(struct stats_acc *a, struct tensor_stats *out);

/* Whether blocks of this type have scale fields to validate. */
bool stats_type_has_scales(uint32_t type);
/* The number of the n blocks of type type at p (any alignment) whose scale fields are
 * NaN or infinite (fp16 d, m, dmin; the E8M0 exponent 0xff of mxfp4; the fp16 scale
 * spread over iq1_m's scales), as ggml_validate_row_data checks. */
uint64_t stats_bad_blocks(uint32_t type, const uint8_t *p, uint64_t n);

/* A tensor is summed in segments of STATS_SEGMENT values, each on its own, and its
 * figures are those of the segments' parts merged in order: so the same whether one
 * thread computes them (stats/NAME) or several take a segment each (ggufs --check),
 * and a scan of a large tensor by several threads still reads the file in order. */
#define STATS_SEGMENT (UINT64_C(1) << 22)

/* How many segments tensor g has (at least 1). */
uint64_t stats_segments(const struct gguf_tensor *g);

/* The part of segment seg of tensor i of model m (-ENOENT unless it has a .f32 file),
 * its bad_blocks included, read through the tensor reader's raw and float32 ranges in
 * bounded chunks. progress, when not NULL, is advanced by the raw bytes of each chunk
 * done. 0, or -errno from the read (-EIO when the model's bytes are gone). */
int stats_segment(const struct ggufs_model *m, uint64_t i, uint64_t seg,
                  struct stats_part *out, _Atomic uint64_t *progress);

/* What a scan for health alone finds (ggufs --check without --json): the counts that
 * make a tensor unhealthy or worth a warning, without min, max, mean and std. */
struct stats_health {
	uint64_t elements;
	uint64_t nan, pos_inf, neg_inf, subnormals;
	uint64_t bad_blocks;
	bool all_zero;         /* elements > 0, and every value is +0.0 or -0.0 */
};

/* The health of segment seg of tensor i: its counts equal stats_segment's, and all_zero
 * says whether its zeros are all its values. For a type that stats_quant_has, only the
 * scale fields of its blocks are read, and the quants of a block with a bad scale
 * (and of the first ones, until a value is not zero): several times faster. */
int stats_segment_health(const struct ggufs_model *m, uint64_t i, uint64_t seg,
                         struct stats_health *out, _Atomic uint64_t *progress);
/* Merges the health of the next segment into into. */
void stats_health_merge(struct stats_health *into, const struct stats_health *next);

/* The statistics of tensor i: its segments in order, merged and finished. 0 or -errno,
 * with *out unset on failure and a read's why (reader.h; NULL: not wanted). */
int stats_tensor(const struct ggufs_model *m, uint64_t i, struct tensor_stats *out,
                 char why[GGUF_ERR_MAX]);

/* True when the tensor is unhealthy: NaN or infinite values, or bad block scales. */
bool stats_unhealthy(const struct tensor_stats *s);

#endif
