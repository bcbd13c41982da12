/* The header of one .safetensors file, read as hostile input: an 8-byte little-endian
 * length, then that many bytes of JSON (libjansson) naming each tensor's dtype, shape
 * and byte range in the data that follows. Every count, length and offset is checked
 * with overflow-safe arithmetic against the file's size, and a header is refused (in
 * one line naming the file) where the converter would trust it: a range past the end,
 * two ranges that overlap, a shape whose bytes are not its range's, a dtype ggufs does
 * not convert, a name given twice. */
#ifndef GGUFS_ST_HEADER_H
#define GGUFS_ST_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errline.h"

/* The most bytes of JSON a header may hold (a checkpoint of 100,000 tensors needs about
 * 10 MiB): more is refused, unread. */
#define ST_HEADER_MAX (16u << 20)
/* The most dimensions a tensor may have: GGUF's four. */
#define ST_MAX_DIMS 4

/* The dtypes ggufs converts: the converter's floats. */
enum st_dtype {
	ST_F16,
	ST_BF16,
	ST_F32,
	ST_F64,
};

/* Bytes of one element of dtype d. */
unsigned st_dtype_size(enum st_dtype d);
/* Its name in a header: "F16" ... */
const char *st_dtype_name(enum st_dtype d);

/* One tensor of the file. */
struct st_tensor {
	char *name;                  /* as the header names it, NUL-terminated (the JSON
	                              * parser refuses a NUL in a name) */
	enum st_dtype dtype;
	uint32_t n_dims;             /* 0 for a scalar */
	uint64_t shape[ST_MAX_DIMS]; /* outermost first, as numpy and torch give it */
	uint64_t n_elements;
	uint64_t offset;             /* of its first byte in the file */
	uint64_t size;               /* its bytes: n_elements * st_dtype_size(dtype) */
};

struct st_header {
	uint64_t data_offset;        /* 8 + the JSON's length: where offsets count from */
	size_t n;
	struct st_tensor *t;         /* sorted by name, byte by byte (Python's order of
	                              * str, in UTF-8) */
};

/* How many bytes the header of a file of file_size bytes holds, from its first 8 bytes
 * at p (8 of them are needed): 8 + the JSON's length into *need, true; false with "SHOWN:
 * why" in err when the file is shorter than that, or than 8 bytes, or the JSON is longer
 * than ST_HEADER_MAX. */
bool st_header_size(const uint8_t *p, uint64_t file_size, const char *shown,
                    uint64_t *need, char err[GGUF_ERR_MAX]);

/* Parses the header whose first need bytes (as st_header_size gave need) are at p, of a
 * file of file_size bytes, into *h: 0, or -1 with "SHOWN: why" in err (h then holds
 * nothing to free). The tensors' names are copied: nothing of p is kept. */
int st_header_parse(const uint8_t *p, uint64_t need, uint64_t file_size, const char *shown,
                    struct st_header *h, char err[GGUF_ERR_MAX]);

/* Frees what st_header_parse made. */
void st_header_free(struct st_header *h);

/* The tensor named name in h (sorted), or NULL. */
const struct st_tensor *st_header_find(const struct st_header *h, const char *name);

#endif
