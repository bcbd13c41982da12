/* llama.cpp's check of a tensor's bytes (ggml_validate_row_data): the fields ggml
 * refuses when they are not finite, a block at a time. Its quantizer runs the check on
 * every tensor it reads and on every block it writes, and writes no file when one
 * fails; --check and the statistics count the blocks it would refuse. */
#ifndef GGUFS_BLOCK_CHECK_H
#define GGUFS_BLOCK_CHECK_H

#include <stdbool.h>
#include <stdint.h>

/* Whether blocks of type carry scale fields that the check looks at (false for the
 * float types, whose values it looks at, and for a type it does not know). */
bool block_check_has_scales(uint32_t type);

/* Whether the check looks at anything in blocks of type: the float types' values, the
 * quantized types' scales. */
bool block_check_looks(uint32_t type);

/* How many of the n consecutive blocks of type at p (any alignment) hold a scale field
 * the check refuses: an fp16 that is NaN or infinite, an e8m0 of 0xff. 0 for a type
 * without scales. */
uint64_t block_check_bad_scales(uint32_t type, const uint8_t *p, uint64_t n);

/* The check over the n consecutive blocks of type at p: the index of the first block it
 * refuses, or n when it accepts them all. A block of f32, f16, bf16 or f64 is one value,
 * refused when NaN or infinite; a quantized block when a scale field is (above); the
 * integer types are always accepted. */
uint64_t block_check_first_bad(uint32_t type, const uint8_t *p, uint64_t n);

#endif
