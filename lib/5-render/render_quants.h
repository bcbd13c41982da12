/* quants/quants.tsv: one line per quantization a model's quants/ holds, from the plans
 * alone (no tensor data is read). */
#ifndef GGUFS_RENDER_QUANTS_H
#define GGUFS_RENDER_QUANTS_H

#include "quant_plan.h"
#include "sink.h"

/* The table of qs into s: a header line "name ftype bytes bits_per_weight
 * tensor_types" (tab-separated, as every line), then one line per NAME made, in
 * quant_set's order: its name, llama.cpp's ftype number, the file's size, the bits per
 * weight (the tensors' bytes x 8 / their values, four decimals), and the types of its
 * tensors with their counts, "f32:65,q4_K:138,q6_K:24", by increasing ggml type id. Then
 * one comment line per NAME not made, "# NAME: not made: WHY", WHY as llama.cpp would
 * say it; a source already quantized adds, without -o requantize, one line saying
 * that -o requantize (llama-quantize --allow-requantize) makes them, and NAMEs refused
 * for want of a matrix, without one, a line saying that -o imatrix=FILE (llama-quantize
 * --imatrix FILE) makes them. */
void render_quants_tsv(struct sink *s, const struct quant_set *qs);

#endif
