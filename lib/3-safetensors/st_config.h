/* A Hugging Face model folder's config.json read as the converter reads it: the
 * architecture (its first "architectures" entry) picks the converter's model class and
 * GGUF architecture; the hyperparameters are what transformers' config class makes of
 * the file (the class's defaults under the file's keys, a null num_key_value_heads,
 * and LlamaConfig's null head_dim, filled in as its constructor fills them), looked up
 * by the
 * converter's lists of key names (find_hparam: the first name present wins, a null
 * value counts as absent). Read as hostile input: a value of the wrong kind or out of
 * GGUF's range is refused in one line naming the file; so is an architecture ggufs does
 * not convert, or a feature of one it does not convert yet. */
#ifndef GGUFS_ST_CONFIG_H
#define GGUFS_ST_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "st_kv.h"
#include "st_names.h"

/* The most bytes of config.json ggufs reads (real ones hold a few KiB). */
#define ST_CONFIG_MAX (1u << 20)
/* The most blocks (layers) a model may have: the name map expands each. */
#define ST_MAX_BLOCKS 4096u

/* GGUF's general.file_type of each outtype the converter writes. */
enum st_ftype {
	ST_FTYPE_F32 = 0,
	ST_FTYPE_F16 = 1,
	ST_FTYPE_Q8_0 = 7,
	ST_FTYPE_BF16 = 32,
};

struct st_config {
	char hf_arch[64];                   /* "LlamaForCausalLM" */
	const struct st_names_arch *names;  /* the GGUF architecture's name map */
	uint32_t block_count;
	uint32_t n_head, n_head_kv;         /* attention heads, key/value heads */
	uint32_t n_embd;
	uint32_t vocab_size;
	uint32_t rope_dim;                  /* head_dim, else n_embd / n_head */
	void *hparams;                      /* the merged hyperparameters (a json_t *) */
};

/* Reads config.json's len bytes at json (shown names the file in err) into *c: 0, or -1
 * with one line in err (c then holds nothing to free). */
int st_config_parse(const char *json, size_t len, const char *shown, struct st_config *c,
                    char err[GGUF_ERR_MAX]);

/* Frees what st_config_parse made. */
void st_config_free(struct st_config *c);

/* Appends the keys the converter's set_gguf_parameters writes for c's model class, in
 * its order, with general.file_type ftype among them. */
void st_config_write_hparams(const struct st_config *c, enum st_ftype ftype,
                             struct st_kv *kv);

#endif
