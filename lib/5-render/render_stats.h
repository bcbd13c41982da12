/* The text of stats/NAME and stats.tsv, of sizes fixed by the tensors' headers alone
 * (their element counts), so that the files' sizes are exact before anything is
 * computed: each value is as short as metadata/ writes it, and padding makes up the
 * widest text that the values could have. In stats/NAME spaces before each newline
 * pad its line; stats.tsv's lines are exact (TSV tools read every field as it is) and
 * its padding is empty lines at the end, which csv readers and awk's field tests skip. */
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
/* Bytes that the stats.tsv line of tensor g whose stats/ file is called name takes at
 * most (its figures at their widest). */
uint64_t render_stats_tsv_line_size(const struct gguf_tensor *g, const char *name);
/* That line: name (backslash and control bytes escaped as in metadata arrays), then
 * the values in the order of stats/NAME, tab-separated, and the newline; no padding. */
void render_stats_tsv_line(struct sink *s, const struct gguf_tensor *g, const char *name,
                           const struct tensor_stats *st);
/* stats.tsv's padding: n newlines (empty lines). */
void render_stats_tsv_fill(struct sink *s, uint64_t n);

#endif
