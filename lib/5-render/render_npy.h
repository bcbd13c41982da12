/* The NumPy format 1.0 header in front of a tensor's float32 values (NAME.npy). */
#ifndef GGUFS_RENDER_NPY_H
#define GGUFS_RENDER_NPY_H

#include <stddef.h>

#include "gguf.h"

/* Largest header: 10 bytes of preamble, the dict with four 20-digit dims, padding to a
 * multiple of 64. */
#define NPY_HEADER_MAX 256

/* Writes the header for t's values into buf and returns its length, a multiple of 64:
 * "\x93NUMPY\x01\x00", a little-endian u16 dict length, then
 * "{'descr': '<f4', 'fortran_order': False, 'shape': (ne1, ne0), }" padded with spaces
 * and ending in '\n'. The shape is the first n_dims GGUF dims reversed; a 1-D tensor
 * is (ne0,). Depends only on n_dims and ne. */
size_t npy_header(const struct gguf_tensor *t, char buf[NPY_HEADER_MAX]);

#endif
