/* The tokenizer keys around a sentencepiece vocabulary, as the converter writes them
 * for a folder without tokenizer.json: before the vocabulary, LlamaModel.set_vocab's
 * tokenizer.ggml.add_space_prefix (tokenizer_config.json's add_prefix_space); after it,
 * gguf-py's SpecialVocab: the special token ids config.json names (bos, eos, unk, sep,
 * pad, mask: each an integer id below the vocabulary's size, the first of a type
 * kept), tokenizer_config.json's add_bos/eos/sep_token, and the chat template
 * (tokenizer_config.json's, else chat_template.jinja's read as Python reads text, else
 * chat_template.json's). Without tokenizer_config.json the converter writes neither the
 * add_* keys nor the template. What ggufs does not convert yet (several templates, a
 * template list) is refused in one line naming the file. */
#ifndef GGUFS_ST_SPECIAL_H
#define GGUFS_ST_SPECIAL_H

#include <stddef.h>
#include <stdint.h>

#include "errline.h"
#include "st_kv.h"

/* A file of the folder as read: its bytes and length; p NULL when the folder lacks it. */
struct st_text {
	const char *p;
	size_t n;
};

/* The files the tokenizer keys come from. */
struct st_special_files {
	struct st_text config;           /* config.json */
	struct st_text tokenizer_config; /* tokenizer_config.json */
	struct st_text jinja;            /* chat_template.jinja */
	struct st_text template_json;    /* chat_template.json */
};

/* Appends tokenizer.ggml.add_space_prefix when tokenizer_config.json sets
 * add_prefix_space: 0, or -1 with err. */
int st_special_write_prefix(const struct st_special_files *f, struct st_kv *kv,
                            char err[GGUF_ERR_MAX]);

/* Appends SpecialVocab's keys for a vocabulary of n_vocab tokens: 0, or -1 with err. */
int st_special_write(const struct st_special_files *f, uint64_t n_vocab, struct st_kv *kv,
                     char err[GGUF_ERR_MAX]);

#endif
