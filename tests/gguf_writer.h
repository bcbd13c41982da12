/* A test-only GGUF writer: builds GGUF images in memory, byte by byte, checking
 * nothing, so that tests can write valid files and exactly the lies they need. Every
 * multi-byte value is written little-endian. Allocation failure aborts: a test has no
 * better answer. */
#ifndef GGUFS_TESTS_GGUF_WRITER_H
#define GGUFS_TESTS_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct ggufs_model;

/* Offsets of the header fields, to patch a count into a lie after the fact. */
#define GW_OFF_VERSION 4
#define GW_OFF_N_TENSORS 8
#define GW_OFF_N_KV 16
#define GW_HEADER_BYTES 24

struct gw {
	uint8_t *buf;
	size_t len;
	size_t cap;
};

void gw_init(struct gw *w);
void gw_free(struct gw *w);
/* Hands the image over to the caller (free() it); w is empty afterwards. */
uint8_t *gw_take(struct gw *w, size_t *len);
/* The image written to a new file at path: true when it was, whole (errno says why
 * not). */
bool gw_save(const struct gw *w, const char *path);
/* The image written to a new file made from path_template (mkstemp's, ending in
 * XXXXXX; the name made is written back into it): true when it was, whole. */
bool gw_save_temp(const struct gw *w, char *path_template);
/* The image saved as gw_save_temp saves it, then handed over (gw_take) into *img and
 * *len and the file opened as a model (model.h's model_open): the model, or NULL with a
 * line in err where the file could not be written or opened (*img is then NULL and w
 * as it was, or the image and w empty). */
struct ggufs_model *gw_open_temp(struct gw *w, char *path_template, uint8_t **img,
                                 size_t *len, char err[GGUF_ERR_MAX]);

/* The raw escape hatch: any bytes at all. */
void gw_raw(struct gw *w, const void *p, size_t n);
void gw_fill(struct gw *w, uint8_t byte, size_t n);
void gw_u8(struct gw *w, uint8_t v);
void gw_u16(struct gw *w, uint16_t v);
void gw_u32(struct gw *w, uint32_t v);
void gw_u64(struct gw *w, uint64_t v);
void gw_f32(struct gw *w, float v);
void gw_f64(struct gw *w, double v);
/* Overwrites bytes already written (at + size <= len). */
void gw_put_u32(struct gw *w, size_t at, uint32_t v);
void gw_put_u64(struct gw *w, size_t at, uint64_t v);

/* A GGUF string: u64 length, then the bytes. gw_strn writes n bytes of s (s may hold NULs). */
void gw_str(struct gw *w, const char *s);
void gw_strn(struct gw *w, const void *s, uint64_t n);

/* "GGUF", version, tensor count, key count: any values, lies included. */
void gw_header(struct gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv);

/* A metadata key and its value type; the value itself follows with the calls below. */
void gw_key(struct gw *w, const char *key, uint32_t type);
/* An array's element type and count; count elements follow (for arrays of arrays, each
 * element is itself a gw_array then its elements). */
void gw_array(struct gw *w, uint32_t elem_type, uint64_t count);

/* Whole key/value pairs, for the common cases. */
void gw_kv_u32(struct gw *w, const char *key, uint32_t v);
void gw_kv_u64(struct gw *w, const char *key, uint64_t v);
void gw_kv_str(struct gw *w, const char *key, const char *v);

/* A tensor info: name, n_dims, the first n_dims of ne, type id, offset relative to the
 * data section. n_dims may be a lie larger than GGUF_MAX_DIMS: ne must then hold n_dims
 * values, or be NULL to write n_dims ones. */
void gw_tensor(struct gw *w, const char *name, uint32_t n_dims, const uint64_t *ne,
               uint32_t type, uint64_t offset);

/* Zero padding up to the next multiple of alignment (the data section's start). */
void gw_align(struct gw *w, uint64_t alignment);

/* Tensor k of a model gw_flat_model writes: its name, type and count of values (one
 * dimension) into the out-parameters, its bytes appended to data. */
typedef void (*gw_flat_tensor_fn)(void *ctx, int k, const char **name, uint32_t *type,
                                  uint64_t *n, struct gw *data);

/* Appends to w a whole GGUF v3 file of n_tensors one-dimensional tensors made by
 * tensor(ctx, k) in order, each at the next 32-byte boundary, with general.architecture
 * "test" as its one key. */
void gw_flat_model(struct gw *w, int n_tensors, gw_flat_tensor_fn tensor, void *ctx);

#endif
