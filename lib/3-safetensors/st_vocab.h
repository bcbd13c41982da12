/* A sentencepiece vocabulary as the converter writes it (_create_vocab_sentencepiece,
 * then _set_vocab_sentencepiece's keys): config.json's vocab_size entries ([PADi], score
 * -10000, unused, where no piece is), the model's pieces by id (unknown, control,
 * unused and byte pieces typed so, every other normal), then added_tokens.json's tokens
 * (user-defined, score -1000), then tokenizer_config.json's added_tokens_decoder (control
 * when special or looking special, else user-defined with U+2581 made a space; score
 * -1000). An id past the vocabulary is skipped as the converter skips it; a negative
 * or malformed one is refused (the converter would index from the end). */
#ifndef GGUFS_ST_VOCAB_H
#define GGUFS_ST_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "st_kv.h"
#include "st_spm.h"

/* The most tokens a vocabulary may have (real ones: up to a few hundred thousand). */
#define ST_VOCAB_MAX (1u << 24)

struct st_vocab {
	uint64_t n;
	uint64_t *off;        /* each token's text: bytes [off, off + len) of text */
	uint32_t *len;
	float *score;
	int32_t *type;        /* enum st_spm_type */
	struct vbytes text;
};

/* The vocabulary of spm for a model of vocab_size tokens (0: the model's count),
 * with added_tokens.json's n_added bytes at added (NULL: no such file) and
 * tokenizer_config.json's n_config bytes at config (NULL: none), into *v: 0, or -1 with
 * one line naming the file at fault in err. */
int st_vocab_spm(const struct st_spm *spm, uint64_t vocab_size, const char *added,
                 size_t n_added, const char *config, size_t n_config, struct st_vocab *v,
                 char err[GGUF_ERR_MAX]);

/* Frees what st_vocab_spm made. */
void st_vocab_free(struct st_vocab *v);

/* Appends the converter's keys of a sentencepiece vocabulary: tokenizer.ggml.model
 * "llama", .pre "default", .tokens, .scores, .token_type. */
void st_vocab_write_spm(const struct st_vocab *v, struct st_kv *kv);

#endif
