/* model.gguf: the model as one GGUF file, laid out once at mount and read without
 * copying the model anywhere.
 *
 * A single-file model is its file: one span, the whole file, from shard 0 at offset 0.
 * A split model is the file llama-gguf-split --merge writes: a header built here (the
 * first shard's keys less split.no, split.count and split.tensors.count, in order; every
 * tensor of every shard in shard order, its offset recomputed in one data section at the
 * model's alignment), kept in memory, then one span per tensor mapping its bytes onto
 * the shard that holds them, zeros between tensors (the merge tool's padding) and after
 * the last one up to the alignment. Memory is the header plus one span per tensor.
 *
 * A model seen with edited metadata (m->meta not the first shard's own parse: the view
 * of an overlay state, overlay.h) has its header written from those keys, the model's
 * own key order with new keys last; a single file's data section follows it at the
 * next multiple of the alignment as one span, byte for byte. When that header comes out
 * byte for byte the file's own (no edit yet, or edits undone), model.gguf is the file
 * itself: one span, no header in memory. */
#ifndef GGUFS_MODELFILE_H
#define GGUFS_MODELFILE_H

#include <stdint.h>
#include <sys/uio.h>

#include "model.h"

/* Bytes [off, off + len) of model.gguf are bytes [shard_off, shard_off + len) of shard. */
struct modelfile_span {
	uint64_t off;
	uint64_t len;
	uint64_t shard_off;
	uint32_t shard;
};

struct modelfile {
	uint64_t size;                 /* st_size of model.gguf */
	uint8_t *header;               /* [0, header_len): a split model's merged header,
	                                * padded to its data section; NULL for one file */
	uint64_t header_len;
	uint64_t n_spans;
	struct modelfile_span *spans;  /* by offset, none overlapping; between: zeros */
	uint64_t data_offset;          /* where model.gguf's data section starts */
	uint64_t *tensor_offset;       /* a split model's: each tensor's offset in that data
	                                * section; NULL for one file (its own offsets) */
};

/* Lays out model.gguf of m (which must outlive mf). A split model whose shards disagree
 * on the GGUF version or the alignment has no merged file that would load right: -1
 * with one line in err naming the shard and the difference, as for out of memory or
 * a file past 2^63 bytes (st_size). 0 on success. */
int modelfile_build(const struct ggufs_model *m, struct modelfile *mf, char err[GGUF_ERR_MAX]);
void modelfile_free(struct modelfile *mf);

/* Where tensor i's bytes start in model.gguf (which the file's own offsets say only for
 * one file with no edit: an edit moves the data section, a merge every tensor). */
uint64_t modelfile_tensor_offset(const struct modelfile *mf, const struct ggufs_model *m,
                                 uint64_t i);

/* Copies [off, off + len) of model.gguf (inside it) into buf: header and zeros from
 * memory, tensor bytes through the shards' sources (source.h: a local file's mapping
 * under the SIGBUS guard, a remote file's caches). 0 or -EIO (bytes gone from a file
 * that shrank, not fetched, or of a changed file). */
int modelfile_read(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                   uint64_t len, void *buf);

/* [off, off + len) of model.gguf of a local model (inside it) as at most max iovecs
 * pointing into the header, a static zero page and the shards' mappings, in order, for
 * a reply without a copy, once each file is known to still hold the bytes (should one
 * shrink after, the kernel's copy fails and the reader gets EIO: the daemon never
 * touches the gone pages). The count; 0 when more are needed or a shard is not mapped
 * (read it with modelfile_read); -EIO when a file no longer holds the bytes. */
int modelfile_iov(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                  uint64_t len, struct iovec *iov, int max);

#endif
