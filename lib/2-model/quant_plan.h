/* quants/NAME.gguf's layout: the file llama_model_quantize() (llama.cpp, default
 * parameters, ftype NAME) writes from a model's model.gguf, every byte of it except the
 * quantized blocks themselves, known without reading any tensor data.
 *
 * What llama.cpp writes (src/llama-quant.cpp, ggml/src/gguf.cpp):
 * - GGUF version 3, whatever the source's; the tensor and key counts;
 * - the model's keys in order, less general.quantization_version, general.file_type
 *   and split.no, split.count, split.tensors.count, then general.quantization_version
 *   (uint32 2) and general.file_type (uint32 ftype), then, under an importance matrix,
 *   quantize.imatrix.file (its name as given, cut to 127 bytes), .dataset (the first,
 *   cut so; when it names one), .entries_count and .chunks_count (when positive), each
 *   uint32 (llama-quantize's overrides: a model's own keys of these names go, as set
 *   keys move last); every other value as it was (booleans
 *   written as 0 or 1), general.alignment included, though the file is laid out at 32;
 * - the tensor infos in llama.cpp's order (quant_rules_order: by layer, then name), each
 *   with its dimensions less trailing ones (ggml_n_dims), its new type, and its offset:
 *   the sizes before it, each padded to 32;
 * - zeros to a multiple of 32, then each tensor's bytes (converted, or copied when its
 *   type stays) followed by zeros to a multiple of 32, the last one's too.
 * Header bytes are not kept: the keys are the model's (the plan points at them), written
 * when read, so that 26 plans of a model with a 10 MB vocabulary cost kilobytes. */
#ifndef GGUFS_QUANT_PLAN_H
#define GGUFS_QUANT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "quant_rules.h"

#define QUANT_ALIGNMENT 32      /* GGUF_DEFAULT_ALIGNMENT: llama.cpp's, whatever the model says */
#define QUANT_VERSION 2         /* GGML_QNT_VERSION: general.quantization_version */
#define QUANT_KV_STR_MAX 127    /* llama_model_kv_override's val_str, less its NUL */
#define QUANT_OWN_KEYS 6
#define QUANT_OWN_BYTES (4 * 4 + 2 * (8 + QUANT_KV_STR_MAX))

/* One tensor of the quant file, in file order. */
struct quant_tensor {
	uint64_t src;          /* its index in the model (model_tensor) */
	uint32_t type;         /* its type in the quant file */
	uint64_t offset;       /* from the data section's start */
	uint64_t size;         /* its bytes, without the padding after them */
	const struct imatrix_entry *weights;   /* the matrix's entry it is quantized with */
};

/* A piece of the header's head ("GGUF" through the last key): key i of the plan. */
struct quant_plan_key {
	const struct gguf_kv *kv;   /* the model's, or the plan's own two */
	uint64_t off;               /* where it starts in the file */
};

struct quant_plan {
	uint32_t ftype;
	const struct quant_name *name;
	uint64_t n_keys;
	struct quant_plan_key *keys;
	/* the keys llama.cpp sets: general.quantization_version, general.file_type, and
	 * under a matrix its four quantize.imatrix.* (n_own of them) */
	struct gguf_kv own[QUANT_OWN_KEYS];
	uint32_t n_own;
	uint8_t own_bytes[QUANT_OWN_BYTES];   /* their values */
	uint64_t head_len;           /* the preamble and keys */
	uint8_t *infos;              /* the tensor infos, as written */
	uint64_t infos_len;
	uint64_t data_offset;        /* where the data section starts (header_len padded) */
	uint64_t n_tensors;
	struct quant_tensor *tensors;
	uint64_t size;               /* st_size of NAME.gguf */
	uint64_t data_bytes;         /* the tensors' bytes, without padding */
	uint64_t n_elements;         /* values of all tensors */
};

/* Plans the quant file of m (whose metadata, model_meta, and tensors must outlive it) with
 * parameters p. 0 on success. -1 with one line in err when llama.cpp makes no such file
 * from this model (it says why: "requantizing from type q4_K is disabled", a key it
 * needs, ...) or out of memory; qp is then empty (quant_plan_free is still allowed). */
int quant_plan_build(const struct ggufs_model *m, const struct quant_params *p,
                     struct quant_plan *qp, char err[GGUF_ERR_MAX]);
void quant_plan_free(struct quant_plan *qp);

/* Copies [off, off + len) of the header (inside [0, data_offset)) into buf. */
void quant_plan_header_read(const struct quant_plan *qp, uint64_t off, uint64_t len,
                            uint8_t *buf);

/* The tensor whose bytes or padding hold file offset off (at or past data_offset and
 * before size): its index in qp->tensors. */
uint64_t quant_plan_tensor_at(const struct quant_plan *qp, uint64_t off);

/* The types and their tensor counts, for quants.tsv: into types[] (ggml ids, in
 * increasing order) and counts[], at most cap of them; the number of distinct types. */
uint32_t quant_plan_type_counts(const struct quant_plan *qp, uint32_t *types, uint64_t *counts,
                                uint32_t cap);

/* Every NAME of quant_names() and quant_imatrix_names() planned for one model (a tree's
 * quants/): plans[i] for names[i], made when why[i] is empty, else why[i] says why
 * llama.cpp makes no such file (that NAME is not shown). */
struct quant_set {
	size_t n;
	const struct quant_name *names;   /* the 26, then the nine that need a matrix */
	struct quant_plan *plans;
	char (*why)[GGUF_ERR_MAX];
	bool requantize;
	bool imatrix;                     /* planned under an importance matrix */
};

/* What a set is planned with: llama-quantize's defaults but for these. */
struct quant_set_opts {
	bool requantize;                  /* allow_requantize */
	const struct imatrix *imatrix;    /* --imatrix (NULL: none), outliving the set */
	const char *imatrix_file;         /* its name as given (quantize.imatrix.file) */
	/* which types the quantizers at hand make, with a matrix's weights or without
	 * (NULL: every type); a NAME that needs another is not made, its why saying so */
	bool (*can_make)(uint32_t type, bool weighted);
};

/* Plans every NAME for m (which must outlive the set) as o says. 0, or -1 out of memory
 * for the set (a plan that runs out of memory says so in its why). */
int quant_set_build(const struct ggufs_model *m, const struct quant_set_opts *o,
                    struct quant_set *qs);
void quant_set_free(struct quant_set *qs);
/* The bytes the set holds. */
uint64_t quant_set_bytes(const struct quant_set *qs);

#endif
