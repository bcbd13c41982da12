/* Writing a GGUF header: the inverse of gguf_parse for the part before the data section.
 * Metadata values are written exactly as they were parsed (their bytes come from the
 * image they were parsed from), tensor infos from the parsed fields with offsets the
 * caller chooses. Used to build the header of a split model's merged model.gguf. */
#ifndef GGUFS_GGUF_WRITE_H
#define GGUFS_GGUF_WRITE_H

#include <stdint.h>

#include "gguf.h"

/* Serializes a header: "GGUF", version, tensor count, key count, the n_kv keys of kv
 * (each a parsed key with its value, as it lay in its image), the n_t tensor infos of
 * tensors with offsets[i] (relative to the data section) in place of their own, then
 * zeros up to a multiple of alignment (a power of two), where the data section starts.
 * The whole length goes to *len. out may be NULL (only the length is wanted); else the
 * bytes go to out, which must hold cap >= *len of them (-1 when it does not). -1 also
 * when the length does not fit in 64 bits, or a tensor has more than GGUF_MAX_DIMS
 * dimensions; err then says why. 0 on success. */
int gguf_header_write(uint32_t version, const struct gguf_kv *const *kv, uint64_t n_kv,
                      const struct gguf_tensor *const *tensors, const uint64_t *offsets,
                      uint64_t n_t, uint64_t alignment, uint8_t *out, uint64_t cap,
                      uint64_t *len, char err[GGUF_ERR_MAX]);

/* That header in two pieces, for one assembled from them (modelfile.h: every metadata
 * state of a model shares its tensor infos): gguf_header_head_write writes "GGUF"
 * through the last key (a header of n_t tensors), gguf_tensor_infos_write the tensor
 * infos; neither pads. The two, then zeros to the alignment, are gguf_header_write's
 * bytes. out, cap, *len and the returns as above. */
int gguf_header_head_write(uint32_t version, uint64_t n_t, const struct gguf_kv *const *kv,
                           uint64_t n_kv, uint8_t *out, uint64_t cap, uint64_t *len,
                           char err[GGUF_ERR_MAX]);
/* One key and its value as a header holds them (a piece of the head above), into out as
 * above. */
int gguf_kv_write(const struct gguf_kv *kv, uint8_t *out, uint64_t cap, uint64_t *len,
                  char err[GGUF_ERR_MAX]);
int gguf_tensor_infos_write(const struct gguf_tensor *const *tensors, const uint64_t *offsets,
                            uint64_t n_t, uint8_t *out, uint64_t cap, uint64_t *len,
                            char err[GGUF_ERR_MAX]);

#endif
