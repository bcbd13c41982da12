/* The text of stats/NAME and stats.tsv. Every line has a width fixed by the tensor's
 * header alone (its element count), so that the files' sizes are exact before anything
 * is computed: each value is as short as metadata/ writes it, and spaces before the
 * newline fill the line up to the widest text that the value could have. */
#ifndef GGUFS_RENDER_STATS_H
#define GGUFS_RENDER_STATS_H

#include <stdint.h>

#include "gguf.h"
#include "sink.h"
#include "stats.h"

/* Bytes of stats/NAME for tensor g. */
uint64_t render_stats_size(const struct gguf_tensor *g);
/* The content of stats/NAME: one "key value" line per figure, padded. */
void render_stats(struct sink *s, const struct gguf_tensor *g, const struct tensor_stats *st);

/* The header line of stats.tsv: "tensor", then the keys, tab-separated. */
void render_stats_tsv_header(struct sink *s);
/* Bytes of the stats.tsv line of tensor g whose stats/ file is called name. */
uint64_t render_stats_tsv_line_size(const struct gguf_tensor *g, const char *name);
/* That line: name (backslash and control bytes escaped as in metadata arrays), then
 * the values in the order of stats/NAME, tab-separated, padded. */
void render_stats_tsv_line(struct sink *s, const struct gguf_tensor *g, const char *name,
                           const struct tensor_stats *st);

#endif
