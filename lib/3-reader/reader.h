/* The tensor reader: a tensor's stored bytes and its float32 values, any range of them,
 * read through its shard's byte source (source.h) whatever kind that is. Everything
 * that serves or scans tensor values (the tree's tensors/ files, the statistics, the
 * --check scan) reads through here, so that they all see the same bytes and the same
 * failures: a local file that shrank gives -EIO (its mapping is touched only under the
 * SIGBUS guard, which must be installed: guard_install), a remote file whose bytes
 * cannot be fetched or changed gives -EIO; each with why, as the source said it
 * (source.h: one line naming the file; NULL when not wanted). Thread-safe; the memory
 * of a read does not grow with the tensor. */
#ifndef GGUFS_READER_H
#define GGUFS_READER_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "source.h"

/* Copies bytes [off, off + len) of tensor i's stored bytes (its raw file), all of them
 * inside the tensor, into buf: 0 or -EIO with why. */
int reader_raw(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
               void *buf, char why[GGUF_ERR_MAX]);

/* Writes bytes [off, off + len) of tensor i's float32 values (its .f32 file: n_elements
 * floats, little-endian, row-major), all of them inside, into buf (any alignment):
 * only the blocks the range touches are read and dequantized, whole blocks straight
 * into buf where it is float-aligned. The tensor must have a dequantizer (has_f32).
 * 0 or -EIO with why. */
int reader_f32(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
               void *buf, char why[GGUF_ERR_MAX]);

/* Calls fn(ctx, p, len) once on bytes [off, off + len) of tensor i's stored bytes: on
 * the mapping itself where the model is mapped (see source_visit_fn for what fn may
 * do), else on buf (len bytes) once they are read into it. For a scan that needs no
 * copy of a local model's bytes. 0, or -errno (-EIO when bytes are gone, with why;
 * -EINVAL for a range outside the tensor) with fn perhaps part way through. */
int reader_visit_raw(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                     void *buf, source_visit_fn fn, void *ctx, char why[GGUF_ERR_MAX]);

/* Where bytes [off, off + len) of tensor i's stored bytes lie in its shard's file, for
 * a zero-copy reply: the fd and absolute offset of byte off, and how many of the len
 * asked for exist, clipped to the tensor and to the file as it is now (fewer when it
 * shrank: then why, when not NULL, says so as a read would). False for a remote tensor
 * (read it with reader_raw). */
bool reader_raw_span(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                     int *fd, uint64_t *file_off, uint64_t *count, char why[GGUF_ERR_MAX]);

#endif
