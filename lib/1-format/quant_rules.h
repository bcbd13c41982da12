/* llama.cpp's quantizer's choice of tensor types (src/llama-quant.cpp, read and written
 * again here in C): for a file type NAME (Q4_K_M ...), which ggml type each tensor of a
 * model becomes, in the order llama_model_quantize() takes the tensors, with its tensor
 * categories, the layer counters of use_more_bits, the GQA and MoE cases, the output
 * and token embedding rules (tied embeddings), the fallbacks for rows that are not a
 * multiple of the block, and the cases where it refuses to make the file at all
 * (requantizing without allow_requantize, a type it cannot convert, a name it cannot
 * place in a layer). Nothing here reads tensor data: only names, shapes, types and a few
 * metadata keys. The parameters are shaped as llama_model_quantize_params so that an
 * importance matrix and per-tensor overrides (--tensor-type, --output-tensor-type,
 * --token-embedding-type, --pure) can be passed later. */
#ifndef GGUFS_QUANT_RULES_H
#define GGUFS_QUANT_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "gguf.h"
#include "imatrix_file.h"

/* The version of what quants/ makes: the rules here and the quantizers of lib/2-quant
 * (and quant_plan.h's layout). The disk cache keeps quantized blocks under it, so bump
 * it with any change that could change a byte of a quant file: the blocks made before
 * are then never served again. */
#define QUANT_RULES_VERSION 1

/* llama.cpp's enum llama_ftype, by number (include/llama.h) */
enum quant_ftype {
	QUANT_FTYPE_F32 = 0, QUANT_FTYPE_F16 = 1, QUANT_FTYPE_Q4_0 = 2, QUANT_FTYPE_Q4_1 = 3,
	QUANT_FTYPE_Q8_0 = 7, QUANT_FTYPE_Q5_0 = 8, QUANT_FTYPE_Q5_1 = 9, QUANT_FTYPE_Q2_K = 10,
	QUANT_FTYPE_Q3_K_S = 11, QUANT_FTYPE_Q3_K_M = 12, QUANT_FTYPE_Q3_K_L = 13,
	QUANT_FTYPE_Q4_K_S = 14, QUANT_FTYPE_Q4_K_M = 15, QUANT_FTYPE_Q5_K_S = 16,
	QUANT_FTYPE_Q5_K_M = 17, QUANT_FTYPE_Q6_K = 18, QUANT_FTYPE_IQ2_XXS = 19,
	QUANT_FTYPE_IQ2_XS = 20, QUANT_FTYPE_Q2_K_S = 21, QUANT_FTYPE_IQ3_XS = 22,
	QUANT_FTYPE_IQ3_XXS = 23, QUANT_FTYPE_IQ1_S = 24, QUANT_FTYPE_IQ4_NL = 25,
	QUANT_FTYPE_IQ3_S = 26, QUANT_FTYPE_IQ3_M = 27, QUANT_FTYPE_IQ2_S = 28,
	QUANT_FTYPE_IQ2_M = 29, QUANT_FTYPE_IQ4_XS = 30, QUANT_FTYPE_IQ1_M = 31,
	QUANT_FTYPE_BF16 = 32, QUANT_FTYPE_TQ1_0 = 36, QUANT_FTYPE_TQ2_0 = 37,
	QUANT_FTYPE_MXFP4_MOE = 38, QUANT_FTYPE_NVFP4 = 39, QUANT_FTYPE_Q1_0 = 40,
	QUANT_FTYPE_Q2_0 = 41,
};

/* A file type ggufs serves: the name llama-quantize prints, its ftype number, and the
 * type most tensors get (llama_ftype_get_default_type). */
struct quant_name {
	const char *name;
	uint32_t ftype;
	uint32_t default_type;
};

/* The names quants/ holds, in llama-quantize's help order less the ones that need an
 * importance matrix and the aliases: F32 F16 BF16 Q8_0 ... Q1_0 (issue 36's list). The
 * count goes to *n; the table is static. */
const struct quant_name *quant_names(size_t *n);
/* The names that need an importance matrix: IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ1_S IQ1_M
 * Q2_K_S IQ3_XS IQ3_XXS. The count goes to *n; the table is static. */
const struct quant_name *quant_imatrix_names(size_t *n);
/* The entry called name (exactly as printed), of either table, or NULL. */
const struct quant_name *quant_name_find(const char *name);
/* The entry of ftype number ftype, or NULL. */
const struct quant_name *quant_name_of_ftype(uint32_t ftype);

/* No type: llama.cpp's GGML_TYPE_COUNT in the parameters. */
#define QUANT_TYPE_NONE UINT32_MAX
/* What a --tensor-type lookup answers when its search gave up (ecma_regex.h's bound):
 * quant_rules_types refuses the file. */
#define QUANT_TYPE_TOO_COMPLEX (UINT32_MAX - 1)

/* llama_model_quantize_params, the fields that decide types. quant_params_default
 * fills it as llama_model_quantize_default_params() does, with ftype. */
struct quant_params {
	uint32_t ftype;
	uint32_t output_tensor_type;     /* --output-tensor-type, or QUANT_TYPE_NONE */
	uint32_t token_embedding_type;   /* --token-embedding-type, or QUANT_TYPE_NONE */
	bool allow_requantize;           /* --allow-requantize (-o requantize) */
	bool quantize_output_tensor;     /* true; --leave-output-tensor clears it */
	bool pure;                       /* --pure: no per-tensor rules */
	/* the importance matrix (NULL: none, as llama.cpp's has_imatrix says): its entries
	 * are the converted tensors' weights, looked up by name, as llama_model_quantize's
	 * main loop does */
	const struct imatrix *imatrix;
	const char *imatrix_file;        /* its name as given (quantize.imatrix.file) */
	/* --tensor-type: the type the first matching pattern gives tensor name (len bytes),
	 * QUANT_TYPE_NONE when none matches, QUANT_TYPE_TOO_COMPLEX when a search gave up;
	 * NULL for no overrides (recipe_file.h's recipe_params sets it). Applied only where
	 * llama.cpp applies it: to a tensor it converts, when the file type's default type
	 * is quantized (an F16, BF16 or F32 base ignores it), before the mixture's rules,
	 * which then neither run for it nor move their layer counters */
	uint32_t (*tensor_type)(void *ctx, const char *name, size_t len);
	void *tensor_type_ctx;
};
void quant_params_default(struct quant_params *p, uint32_t ftype);
/* Gives p the importance matrix im, named file (as given: quantize.imatrix.file), as
 * llama-quantize gives one: only when it has an entry (an empty one is no matrix at
 * all: imatrix stays NULL). im NULL: none. Both must outlive p's use. */
void quant_params_imatrix(struct quant_params *p, const struct imatrix *im, const char *file);

/* What the quantizer's rules use of the model's hyperparameters (llama_model_base::
 * load_hparams), from the keys "ARCH.block_count", "ARCH.nextn_predict_layers",
 * "ARCH.expert_count", "ARCH.attention.head_count" and "ARCH.attention.head_count_kv"
 * (a uint32, or an array of int32/uint32/bool per layer, whose first element counts) of
 * the architecture general.architecture names. quant_hparams.c reads them. */
struct quant_hparams {
	uint32_t n_layer_all;    /* block_count (1..512) */
	uint32_t n_layer_nextn;
	uint32_t n_expert;
	uint32_t n_head;         /* of layer 0; 0 when absent */
	uint32_t n_head_kv;      /* of layer 0; n_head when absent */
	bool falcon;             /* the architecture is "falcon" */
	bool bailingmoe3;        /* "bailingmoe3" */
	bool type_70b;           /* llama.cpp takes the model for a 70B (LLM_TYPE_70B) */
};

/* Reads them from the metadata meta, checking every key load_hparams reads as it does.
 * -1 with one line in err when llama.cpp would not load them, in its words where it
 * has any, else 0: an architecture llama.cpp does not know or makes no model of
 * (llama_archs.h: "unknown model architecture: 'NAME'"), a required key missing ("key
 * not found in model: llama.context_length"), a key of another type, an array of
 * another length or element type, a value llama.cpp asserts against, a key the
 * architecture's own load_arch_hparams requires ("key not found in model:
 * llama.attention.layer_norm_rms_epsilon"; llama_archs.h says which are known). */
int quant_hparams_read(const struct gguf_file *meta, struct quant_hparams *hp,
                       char err[GGUF_ERR_MAX]);

/* The order in which llama.cpp takes (and writes) tensors: its weights map's, by the
 * layer number "blk.%d." gives (-1 for a name without one), then by name bytes. order
 * gets the indices 0..n-1 of tensors sorted so. 0, or -1 with err when a name cannot be
 * a ggml tensor name (64 bytes or more, or a NUL in it). */
int quant_rules_order(const struct gguf_tensor *const *tensors, uint64_t n, uint64_t *order,
                      char err[GGUF_ERR_MAX]);

/* The type of every tensor, tensors given in the order above: types[i] for tensors[i],
 * and (weights not NULL) the importance matrix's entry it is quantized with, weights[i]
 * (NULL: none). -1 with one line in err when llama_model_quantize() fails for this model
 * and these parameters (the line says why, as llama.cpp does: "requantizing from type
 * q4_K is disabled", ...; its preliminary pass's refusals first, then the main loop's,
 * in the tensors' order), else 0. */
int quant_rules_types(const struct quant_hparams *hp, const struct quant_params *p,
                      const struct gguf_tensor *const *tensors, uint64_t n, uint32_t *types,
                      const struct imatrix_entry **weights, char err[GGUF_ERR_MAX]);

/* ggml_n_dims: the dimensions of a tensor of t's shape less trailing ones (at least 1),
 * which is what a file llama.cpp writes says. */
uint32_t quant_n_dims(const struct gguf_tensor *t);

/* Bytes of t stored as type (known block layout, t->ne[0] a multiple of its block):
 * rows x row size. false when it does not fit in 64 bits. */
bool quant_tensor_bytes(const struct gguf_tensor *t, uint32_t type, uint64_t *bytes);

#endif
