/* IEEE half and bfloat16 values as the GGUF file stores them (block scales, f16 and
 * bf16 tensors): what such a field is, read as a float. */
#ifndef GGUFS_HALF_H
#define GGUFS_HALF_H

#include <stdint.h>

/* IEEE half and bfloat16 to float, exact for every bit pattern (NaN and inf kept). */
float fp16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

#endif
