/* A Hugging Face model folder as a model (model_source.h): its small files (config.json,
 * tokenizer.model, tokenizer_config.json, added_tokens.json, chat_template.jinja and
 * .json, model.safetensors.index.json) and its .safetensors parts (st_parts.h: the
 * index's, else every model*.safetensors) opened by the opener (model.h), each header
 * read and checked (a tensor in two parts, or an index that names other tensors than the
 * parts hold, refused), the folder converted as the converter converts it (st_gguf.h): the
 * model is one GGUF file whose header is made at open and whose tensor bytes are
 * converted from model.safetensors on each read, block by block. What the folder holds
 * that ggufs does not convert yet is refused at open in one line naming the file:
 * tokenizer.json, a README.md model card,
 * generation_config.json's sampling values, config.json's _name_or_path, a list of chat
 * templates (additional_chat_templates/). */
#ifndef GGUFS_ST_MODEL_H
#define GGUFS_ST_MODEL_H

#include "errline.h"
#include "model.h"
#include "st_gguf.h"

/* True when folder dir is a model folder rather than a folder of models: it holds a
 * config.json (a regular file, symlinks followed), as every Hugging Face model does and
 * a library's folder does not. The one rule for a folder given to mount and for one in
 * a library. */
bool st_model_is_folder(const char *dir);
/* The same of folder name in the folder of descriptor dirfd (AT_FDCWD: the current
 * one). */
bool st_model_is_folder_at(int dirfd, const char *name);

/* The model of folder dir (its base name names the model, as the converter's output is
 * named), converted to outtype out, its files opened by opener; NULL with one line in
 * err. */
struct ggufs_model *st_model_open(const char *dir, enum st_outtype out,
                                  const struct model_opener *opener, char err[GGUF_ERR_MAX]);

#endif
