/* IEEE half and bfloat16 values as the GGUF file stores them (block scales, f16 and
 * bf16 tensors): what such a field is, read as a float, and the field a float becomes
 * when ggml writes it. */
#ifndef GGUFS_HALF_H
#define GGUFS_HALF_H

#include <stdint.h>

/* IEEE half and bfloat16 to float, exact for every bit pattern (NaN and inf kept). */
float fp16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

/* Float to IEEE half as ggml converts it (GGML_FP32_TO_FP16, its portable code, which
 * the quantizers of ggml-base use on every CPU): rounded to nearest, ties to even;
 * subnormal halves kept; too large gives inf; every NaN gives 0x7e00 with f's sign. */
uint16_t f32_to_fp16(float f);

/* Float to bfloat16 as ggml converts it (ggml_compute_fp32_to_bf16): rounded to
 * nearest, ties to even (so a value past the largest bf16 becomes inf); subnormals
 * kept; a NaN keeps its top 16 bits with the quiet bit (0x0040) set. */
uint16_t f32_to_bf16(float f);

#endif
