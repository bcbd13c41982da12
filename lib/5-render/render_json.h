/* gguf.json: the whole header of the model as one JSON document (see ggufs(1)). */
#ifndef GGUFS_RENDER_JSON_H
#define GGUFS_RENDER_JSON_H

#include <stdint.h>

#include "json_string.h"   /* render_json_string, for its callers */
#include "model.h"
#include "modelfile.h"
#include "sink.h"

/* The whole gguf.json of m, ending in a newline. Metadata comes from m->meta, tensors
 * from m->tensors in order, each with its absolute offset; with more than one shard
 * each tensor also names its shard file. With mf, m's model.gguf (modelfile.h), the
 * offsets in model.gguf too: "model_data_offset", and per tensor "model_offset". Every key names its file ("file":
 * "metadata/KEY"), every tensor its three ("file", "f32", "npy": "tensors/NAME...", the
 * last two null without a dequantizer), escaped as the tree's names. Stops early once the sink's window is full,
 * so a read near the start costs little whatever the model's size. */
void render_json(struct sink *s, const struct ggufs_model *m, const struct modelfile *mf);

/* render_json from a mark that a sizing pass of the same model recorded (the sink's pos
 * already set to the mark's): the rest of the document after it. NULL: all of it. */
struct render_mark;
void render_json_from(struct sink *s, const struct ggufs_model *m, const struct modelfile *mf,
                      const struct render_mark *from);

#endif
