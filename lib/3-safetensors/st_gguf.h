/* A model folder converted as the converter converts it, as one GGUF file: its header
 * (every key in the converter's order: general.architecture and type, the name keys,
 * the hyperparameters, the quantization version, the tokenizer's; the tensor infos;
 * padding to 32) made once, in memory, and its data section made on demand by the plan
 * (st_plan.h). Today: a llama/mistral folder with a sentencepiece tokenizer and no
 * tokenizer.json, outtype auto (the first BF16 or F16 matrix's type, else F16), f32, f16,
 * bf16 or q8_0. */
#ifndef GGUFS_ST_GGUF_H
#define GGUFS_ST_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "errline.h"
#include "st_config.h"
#include "st_header.h"
#include "st_plan.h"
#include "st_special.h"
#include "vbytes.h"

/* The small files of a folder as read (st_text.p NULL: the folder lacks it), and the
 * name the converter takes the model's name from (the folder's base name). */
struct st_folder {
	const char *name;
	struct st_text config;           /* config.json (needed) */
	struct st_text tokenizer_model;  /* tokenizer.model (needed) */
	struct st_text tokenizer_config; /* tokenizer_config.json */
	struct st_text added_tokens;     /* added_tokens.json */
	struct st_text jinja;            /* chat_template.jinja */
	struct st_text template_json;    /* chat_template.json */
};

/* The outtypes: auto decides by the checkpoint's first matrix. */
enum st_outtype {
	ST_OUT_AUTO,
	ST_OUT_F32,
	ST_OUT_F16,
	ST_OUT_BF16,
	ST_OUT_Q8_0,
};

/* The version of the conversion: raised whenever the bytes ggufs converts a folder to
 * change, so that what was made from an older conversion and kept (the disk cache's
 * quantizations) is not taken for the new one's. */
#define ST_CONVERT_VERSION 1

/* The outtype named name ("auto", "f32", "f16", "bf16", "q8_0", as the converter's
 * --outtype) into *out: true, or false for another name. */
bool st_outtype_parse(const char *name, enum st_outtype *out);
/* The name of out. */
const char *st_outtype_name(enum st_outtype out);

struct st_gguf {
	struct vbytes header;        /* the file's first data_offset bytes */
	uint64_t data_offset;
	uint64_t size;               /* the whole file's */
	struct st_config config;
	struct st_plan plan;
};

/* The GGUF file folder f converts to with its n shards' headers (in file-name order),
 * for outtype out: 0, or -1 with one line in err naming the file (or tensor) at fault. */
int st_gguf_make(const struct st_folder *f, const struct st_header *const *shards,
                 uint32_t n, enum st_outtype out, struct st_gguf *g, char err[GGUF_ERR_MAX]);

/* Frees what st_gguf_make made. */
void st_gguf_free(struct st_gguf *g);

/* Bytes [off, off + len) of the file (inside size) into buf: the header's from memory,
 * the data's converted from the checkpoint read by fn: 0, or -errno with why. */
int st_gguf_read(const struct st_gguf *g, uint64_t off, uint64_t len, void *buf,
                 st_read_fn fn, void *ctx, char why[GGUF_ERR_MAX]);

#endif
