/* The tensors of a converted model, in the converter's order and types, and the bytes
 * of its data section made on demand: each read converts only the elements it covers,
 * row by row (a q/k row from its permuted checkpoint row), from the checkpoint's bytes
 * read through the caller's function, never a whole tensor. The converter's rules
 * (prepare_tensors): names mapped by its map (a name it cannot map refuses the model);
 * tensors it drops dropped; 1-D tensors, norms, names not ending in ".weight" and its
 * list of always-F32 tensors stored as F32, the rest as the outtype (Q8_0 as gguf-py's
 * quantizer writes it, which is ggml's reference quantizer: 2-quant's; a row not a
 * multiple of its block as F16, gguf-py's fallback); each tensor's
 * bytes padded to 32, as gguf-py pads them. */
#ifndef GGUFS_ST_PLAN_H
#define GGUFS_ST_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "st_config.h"
#include "st_header.h"
#include "vbytes.h"

/* Q8_0's block: 32 elements in 34 bytes (an f16 scale, 32 int8). */
#define ST_Q8_BLOCK 32u
#define ST_Q8_BYTES 34u

/* gguf-py's alignment of tensor data (general.alignment unset). */
#define ST_ALIGN 32u

/* One converted tensor. */
struct st_out {
	char *name;                 /* its GGUF name */
	uint32_t n_dims;
	uint64_t ne[4];             /* GGUF's order: the checkpoint's shape reversed */
	uint32_t type;              /* GGML_TYPE_F32, _F16, _BF16 or _Q8_0 */
	uint64_t offset;            /* in the data section */
	uint64_t size;              /* its bytes, before the padding */
	uint32_t shard;             /* the checkpoint file its bytes come from */
	const struct st_tensor *src;
	uint64_t rows, row_len;     /* the checkpoint's first dimension, elements a row */
	uint32_t permute_heads;     /* 0, or the heads of the q/k permute */
};

struct st_plan {
	struct st_out *t;
	size_t n;
	uint64_t data_size;         /* the data section's bytes, padding included */
};

/* Reads bytes [off, off + len) of checkpoint file shard into buf: 0, or -errno with
 * why (source.h's contract). */
typedef int (*st_read_fn)(void *ctx, uint32_t shard, uint64_t off, uint64_t len,
                          void *buf, char why[GGUF_ERR_MAX]);

/* The plan of the model c describes, from its n shards' headers (in the converter's
 * order: shards by file name), for general.file_type ftype (F32, F16, BF16, Q8_0): 0, or
 * -1 with one line in err naming the tensor at fault. */
int st_plan_make(const struct st_config *c, const struct st_header *const *shards,
                 uint32_t n, enum st_ftype ftype, struct st_plan *p,
                 char err[GGUF_ERR_MAX]);

/* Frees what st_plan_make made. */
void st_plan_free(struct st_plan *p);

/* Appends the tensor infos of p as gguf-py writes them (name, dimensions, type, offset). */
void st_plan_write_infos(const struct st_plan *p, struct vbytes *b);

/* Bytes [off, off + len) of p's data section (inside data_size) into buf, converted
 * from the checkpoint's bytes read by fn: 0, or -errno with why (fn's). */
int st_plan_read(const struct st_plan *p, uint64_t off, uint64_t len, void *buf,
                 st_read_fn fn, void *ctx, char why[GGUF_ERR_MAX]);

#endif
