/* model.gguf: the model as one GGUF file, laid out once at mount and read without
 * copying the model anywhere.
 *
 * A single-file model is its file: one span, the whole file, from shard 0 at offset 0.
 * A split model is the file llama-gguf-split --merge writes: a header built here (the
 * first shard's keys less split.no, split.count and split.tensors.count, in order; every
 * tensor of every shard in shard order, its offset recomputed in one data section at the
 * model's alignment), kept in memory, then one span per tensor mapping its bytes onto
 * the shard that holds them, zeros between tensors (the merge tool's padding) and after
 * the last one up to the alignment. Memory is the header plus one span per tensor; the
 * tensor infos and spans are the same for every metadata state of a model, so they are
 * made once (struct modelfile_tensors) and shared, and a state's layout holds only the
 * header's first part, "GGUF" through its last key, as pieces: the keys an edit left
 * alone are read from the file where it has them, and only the others are written.
 *
 * A model seen with edited metadata (model_edited: a view of an overlay state,
 * overlay.h) has its header written from those keys, the model's
 * own key order with new keys last; a single file's data section follows it at the
 * next multiple of the alignment as one span, byte for byte. When that header comes out
 * byte for byte the file's own (no edit yet, or edits undone), model.gguf is the file
 * itself: one span, no header in memory. */
#ifndef GGUFS_MODELFILE_H
#define GGUFS_MODELFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "model.h"

/* Bytes [off, off + len) of model.gguf are bytes [shard_off, shard_off + len) of shard
 * (off counted from the layout's span_base). */
struct modelfile_span {
	uint64_t off;
	uint64_t len;
	uint64_t shard_off;
	uint32_t shard;
};

/* The part of model.gguf's layout that no metadata edit changes, made once and shared
 * by the layouts of every edit state: the tensor infos as the header holds them (their
 * offsets count from the data section, so a header of another length keeps them), and
 * for a split model each tensor's place in the merged data section. */
struct modelfile_tensors {
	uint8_t *infos;
	uint64_t infos_len;
	struct modelfile_span *spans;  /* split: one per tensor with bytes, off from the data
	                                * section's start; NULL for one file */
	uint64_t n_spans;
	uint64_t *tensor_offset;       /* split: each tensor's offset in the data section */
	uint64_t n_tensors;
	uint64_t data_len;             /* split: the merged data section's length */
};

/* [off, off + len) of a written header's head ("GGUF" through the last key): bytes of
 * memory at mem (+ from when mem is the layout's own header buffer), or with mem NULL
 * bytes [from, from + len) of shard 0's file (a run of keys an edit left alone, as the
 * file holds them). */
struct modelfile_piece {
	uint64_t off, len, from;
	const uint8_t *mem;
};

struct modelfile {
	uint64_t size;                 /* st_size of model.gguf */
	uint8_t *header;               /* the bytes written for a header (edited or merged):
	                                * its preamble and the keys not in the file as they
	                                * are; NULL for the file itself */
	uint64_t own_len;
	struct modelfile_piece *head;  /* [0, head_len) in order: the head's pieces */
	uint64_t n_head;
	uint64_t head_len;
	const uint8_t *infos;          /* [head_len, header_len): its tensor infos (the
	                                * shared part's); zeros after, to data_offset */
	uint64_t header_len;
	uint64_t n_spans;
	const struct modelfile_span *spans;  /* by offset, none overlapping; between: zeros;
	                                      * NULL: the one span `one` */
	uint64_t span_base;            /* what the spans' offsets count from */
	struct modelfile_span one;
	uint64_t data_offset;          /* where model.gguf's data section starts */
	const uint64_t *tensor_offset; /* a split model's: each tensor's offset in that data
	                                * section; NULL for one file (its own offsets) */
	struct modelfile_tensors *own; /* the shared part, when this layout made its own */
};

/* Makes the shared part of m's model.gguf layouts (see above). -1 with one line in err
 * (a split model whose shards disagree on the GGUF version or the alignment has no
 * merged file that would load right; out of memory; past 2^63 bytes), else 0. */
int modelfile_tensors_build(const struct ggufs_model *m, struct modelfile_tensors *mt,
                            char err[GGUF_ERR_MAX]);
void modelfile_tensors_free(struct modelfile_tensors *mt);
/* The bytes mt holds, for the accounting of a tree's memory. */
uint64_t modelfile_tensors_bytes(const struct modelfile_tensors *mt);

/* Lays out model.gguf of m (which must outlive mf) with mt, m's shared part (see
 * above; it must outlive mf), or NULL to make one of its own: its memory is then the
 * header written for m's keys only. -1 with one line in err (as above, or a header past
 * 2^63 bytes), else 0. */
int modelfile_build_with(const struct ggufs_model *m, const struct modelfile_tensors *mt,
                         struct modelfile *mf, char err[GGUF_ERR_MAX]);
/* modelfile_build_with(m, NULL, mf, err). */
int modelfile_build(const struct ggufs_model *m, struct modelfile *mf, char err[GGUF_ERR_MAX]);
void modelfile_free(struct modelfile *mf);
/* The bytes mf holds of its own (not the shared part it borrows). */
uint64_t modelfile_bytes(const struct modelfile *mf);

/* True when model.gguf is byte for byte shard 0's file: one span, the whole file from
 * offset 0, no header of its own. */
bool modelfile_is_file(const struct modelfile *mf, const struct ggufs_model *m);

/* Where tensor i's bytes start in model.gguf (which the file's own offsets say only for
 * one file with no edit: an edit moves the data section, a merge every tensor). */
uint64_t modelfile_tensor_offset(const struct modelfile *mf, const struct ggufs_model *m,
                                 uint64_t i);

/* Copies [off, off + len) of model.gguf (inside it) into buf: header and zeros from
 * memory, tensor bytes through the shards' sources (source.h: a local file's mapping
 * under the SIGBUS guard, a remote file's caches). 0 or -EIO (bytes gone from a file
 * that shrank, not fetched, or of a changed file) with why as the source said it
 * (NULL: not wanted). */
int modelfile_read(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                   uint64_t len, void *buf, char why[GGUF_ERR_MAX]);

/* [off, off + len) of model.gguf of a local model (inside it) as at most max iovecs
 * pointing into the header, a static zero page and the shards' mappings, in order, for
 * a reply without a copy, once each file is known to still hold the bytes (should one
 * shrink after, the kernel's copy fails and the reader gets EIO: the daemon never
 * touches the gone pages). The count; 0 when more are needed or a shard is not mapped
 * (read it with modelfile_read); -EIO with why (NULL: not wanted) when a file no
 * longer holds the bytes. */
int modelfile_iov(const struct ggufs_model *m, const struct modelfile *mf, uint64_t off,
                  uint64_t len, struct iovec *iov, int max, char why[GGUF_ERR_MAX]);

#endif
