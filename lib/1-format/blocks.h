/* The block layouts of every quantized ggml type ggufs decodes: one struct per type,
 * with a diagram of its bits above it and a _Static_assert on its size, shared by the
 * scalar dequantizers (dequant_*.c), the SIMD ones (dequant_x86.c) and the type table
 * (types.c), so that a block's geometry is written down once.
 *
 * The structs describe bytes, not memory to point into: multi-byte fields are
 * little-endian and blocks sit at any alignment in a mapped file, so code reads a field
 * at its offsetof (FIELD) or from a memcpy'd copy, never through a struct pointer. */
#ifndef GGUFS_BLOCKS_H
#define GGUFS_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "half.h"

/* Values per block. ggml names them QK4_0 .. QK8_0 (all 32), QK_K and so on. */
#define QK 32           /* the legacy types q4_0 q4_1 q5_0 q5_1 q8_0 */
#define QK_K 256        /* the k-quants' super-block, also most i-quants' and tq1_0/tq2_0 */
#define QK4_NL 32
#define QK_MXFP4 32
#define QK_NVFP4 64
#define QK1_0 128
#define QK2_0 64

/* The legacy quantizations (dequant_legacy.c): 32 weights, an fp16 scale d and, for
 * the _1 types, an fp16 offset m. */

/* q4_0: 32 weights in 18 bytes.
 *
 *   byte 0      2                                      18
 *        +------+--------------------------------------+
 *        |  d   |               qs[16]                 |
 *        +------+--------------------------------------+
 *         fp16   qs[j] = hhhh llll
 *                        |    +--- weight j       (j = 0..15)
 *                        +-------- weight j + 16
 *
 *   w = (q - 8) * d         q = 0..15, so w ranges over -8d .. 7d
 */
struct block_q4_0 {
	uint16_t d;
	uint8_t qs[QK / 2];
};
_Static_assert(sizeof(struct block_q4_0) == 18, "q4_0 block is 18 bytes");

/* q4_1: 32 weights in 20 bytes; like q4_0 but unsigned with an offset.
 *
 *   byte 0      2      4                                      20
 *        +------+------+--------------------------------------+
 *        |  d   |  m   |               qs[16]                 |
 *        +------+------+--------------------------------------+
 *         fp16   fp16   qs[j] = hhhh llll: weights j+16 and j
 *
 *   w = q * d + m           q = 0..15
 */
struct block_q4_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qs[QK / 2];
};
_Static_assert(sizeof(struct block_q4_1) == 20, "q4_1 block is 20 bytes");

/* q5_0: 32 weights in 22 bytes; the nibbles of q4_0 plus a fifth bit each.
 *
 *   byte 0      2              6                                      22
 *        +------+--------------+--------------------------------------+
 *        |  d   |    qh[4]     |               qs[16]                 |
 *        +------+--------------+--------------------------------------+
 *         fp16   32 bits, LE:   qs[j] = hhhh llll: low 4 bits of
 *                bit i = bit 4          weights j+16 and j
 *                of weight i
 *
 *   q = (qh bit i) << 4 | nibble       w = (q - 16) * d,  q = 0..31
 */
struct block_q5_0 {
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[QK / 2];
};
_Static_assert(sizeof(struct block_q5_0) == 22, "q5_0 block is 22 bytes");

/* q5_1: 32 weights in 24 bytes; q5_0's quants, unsigned with an offset.
 *
 *   byte 0      2      4              8                                      24
 *        +------+------+--------------+--------------------------------------+
 *        |  d   |  m   |    qh[4]     |               qs[16]                 |
 *        +------+------+--------------+--------------------------------------+
 *         fp16   fp16   bit 4 of each  low nibbles, as in q5_0
 *
 *   w = q * d + m           q = 0..31
 */
struct block_q5_1 {
	uint16_t d;
	uint16_t m;
	uint8_t qh[4];
	uint8_t qs[QK / 2];
};
_Static_assert(sizeof(struct block_q5_1) == 24, "q5_1 block is 24 bytes");

/* q8_0: 32 weights in 34 bytes, one signed byte each.
 *
 *   byte 0      2                                                      34
 *        +------+------------------------------------------------------+
 *        |  d   |          qs[32]: int8, weight i in qs[i]             |
 *        +------+------------------------------------------------------+
 *
 *   w = q * d               q = -128..127
 */
struct block_q8_0 {
	uint16_t d;
	int8_t qs[QK];
};
_Static_assert(sizeof(struct block_q8_0) == 34, "q8_0 block is 34 bytes");

/* The k-quants (dequant_k.c): super-blocks of QK_K weights in sub-blocks of 16 or 32. */

/* q2_K: 256 weights in 84 bytes, 16 sub-blocks of 16, 2 bits per quant.
 *
 *   byte 0              16                                  80     82     84
 *        +--------------+-----------------------------------+------+------+
 *        |  scales[16]  |              qs[64]               |  d   | dmin |
 *        +--------------+-----------------------------------+------+------+
 *         scales[s] = mmmm ssss: 4-bit scale and min of sub-block s
 *
 *   qs holds four 2-bit planes per 128 weights; in half h (0, 1), with l = 0..31:
 *
 *     qs[32h + l] = 76 54 32 10
 *                   |  |  |  +-- weight 128h + l
 *                   |  |  +----- weight 128h + l + 32
 *                   |  +-------- weight 128h + l + 64
 *                   +----------- weight 128h + l + 96
 *
 *   w = (d * ssss) * q - (dmin * mmmm)        q = 0..3
 */
struct block_q2_K {
	uint8_t scales[QK_K / 16];
	uint8_t qs[QK_K / 4];
	uint16_t d;
	uint16_t dmin;
};
_Static_assert(sizeof(struct block_q2_K) == 84, "q2_K block is 84 bytes");

/* q3_K: 256 weights in 110 bytes, 16 sub-blocks of 16, 3 bits per quant.
 *
 *   byte 0           32                            96             108    110
 *        +-----------+-----------------------------+--------------+------+
 *        | hmask[32] |           qs[64]            |  scales[12]  |  d   |
 *        +-----------+-----------------------------+--------------+------+
 *
 *   qs:     the low 2 bits of each quant, in q2_K's four planes.
 *   hmask:  bit 2 of each quant; hmask[l] bit b belongs to weight 32b + l.
 *   scales: sixteen 6-bit signed scales sc0..sc15, one per sub-block, stored + 32:
 *
 *     byte j     (0..7)  = hhhh llll   llll = bits 0-3 of sc j, hhhh = of sc j+8
 *     byte 8 + i (0..3)  = dd cc bb aa  bits 4-5 of sc i (aa), i+4, i+8, i+12 (dd)
 *
 *   w = (d * (sc - 32)) * (q - 4)        q = hmask bit << 2 | 2 qs bits = 0..7
 */
struct block_q3_K {
	uint8_t hmask[QK_K / 8];
	uint8_t qs[QK_K / 4];
	uint8_t scales[12];
	uint16_t d;
};
_Static_assert(sizeof(struct block_q3_K) == 110, "q3_K block is 110 bytes");

/* q4_K: 256 weights in 144 bytes, 8 sub-blocks of 32, 4 bits per quant.
 *
 *   byte 0      2      4              16                                  144
 *        +------+------+--------------+-----------------------------------+
 *        |  d   | dmin |  scales[12]  |              qs[128]              |
 *        +------+------+--------------+-----------------------------------+
 *
 *   scales: a 6-bit scale sc0..sc7 and a 6-bit min m0..m7 per sub-block; with j = 0..3:
 *
 *     byte j      = SS ssssss   ssssss = sc j,  SS = bits 4-5 of sc j+4
 *     byte j + 4  = MM mmmmmm   mmmmmm = m j,   MM = bits 4-5 of m j+4
 *     byte j + 8  = mmmm ssss   bits 0-3 of m j+4 and of sc j+4
 *
 *   qs: 64 weights per 32 bytes; in chunk c (0..3), with l = 0..31:
 *
 *     qs[32c + l] = hhhh llll   llll = weight 64c + l       (sub-block 2c)
 *                               hhhh = weight 64c + 32 + l  (sub-block 2c + 1)
 *
 *   w = (d * sc) * q - (dmin * m)        q = 0..15
 */
struct block_q4_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[12];
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_q4_K) == 144, "q4_K block is 144 bytes");

/* Sub-block j's (0..7) 6-bit scale *sc and min *m (0..63 each) from the 12 scale bytes
 * of q4_K and q5_K, as ggml's get_scale_min_k4 reads them: the one unpack of these
 * bytes, for the dequantizers, the quantizers' second pass and the statistics. Any
 * bytes are a valid input (every 6-bit value is a scale); j outside 0..7 is the
 * caller's error.
 *
 *                    bit 7 6 5 4 3 2 1 0
 *   bytes 0..3  (j):     S S s s s s s s    ssssss: sc j    SS: bits 4-5 of sc j+4
 *   bytes 4..7  (j+4):   M M m m m m m m    mmmmmm: m j     MM: bits 4-5 of m j+4
 *   bytes 8..11 (j+8):   m m m m s s s s    bits 0-3 of m j+4 and of sc j+4
 *
 *   j < 4:   sc = byte[j] & 63                          m = byte[j+4] & 63
 *   j >= 4:  sc = byte[j+4] & 15 | (byte[j-4] >> 6) << 4
 *            m  = byte[j+4] >> 4 | (byte[j]   >> 6) << 4
 */
static inline void k4_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m)
{
	if (j < 4) {
		*sc = scales[j] & 0x3f;
		*m = scales[j + 4] & 0x3f;
	} else {
		*sc = (uint8_t)((scales[j + 4] & 0x0f) | (scales[j - 4] >> 6) << 4);
		*m = (uint8_t)((scales[j + 4] >> 4) | (scales[j] >> 6) << 4);
	}
}

/* q5_K: 256 weights in 176 bytes; q4_K plus a fifth bit per quant.
 *
 *   byte 0      2      4              16           48                      176
 *        +------+------+--------------+------------+-----------------------+
 *        |  d   | dmin |  scales[12]  |   qh[32]   |        qs[128]        |
 *        +------+------+--------------+------------+-----------------------+
 *
 *   scales, qs: as in q4_K (qs are the low 4 bits).
 *   qh:     bit 4 of each quant; qh[l] bit s belongs to weight 32s + l.
 *
 *   w = (d * sc) * q - (dmin * m)        q = qh bit << 4 | nibble = 0..31
 */
struct block_q5_K {
	uint16_t d;
	uint16_t dmin;
	uint8_t scales[12];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_q5_K) == 176, "q5_K block is 176 bytes");

/* q6_K: 256 weights in 210 bytes, 16 sub-blocks of 16, 6 bits per quant.
 *
 *   byte 0                    128              192          208    210
 *        +--------------------+----------------+------------+------+
 *        |      ql[128]       |     qh[64]     | scales[16] |  d   |
 *        +--------------------+----------------+------------+------+
 *                                               int8, one per sub-block
 *
 *   Two halves of 128 weights; in half h (0, 1), with l = 0..31 and n = 128h + l:
 *
 *     ql[64h + l]      = hhhh llll   bits 0-3 of weight n + 64 (hhhh) and n (llll)
 *     ql[64h + 32 + l] = hhhh llll   bits 0-3 of weight n + 96 and n + 32
 *     qh[32h + l]      = 76 54 32 10 bits 4-5 of weight n + 96, n + 64, n + 32, n
 *
 *   w = (d * scales[i / 16]) * (q - 32)    for weight i, q = 0..63
 */
struct block_q6_K {
	uint8_t ql[QK_K / 2];
	uint8_t qh[QK_K / 4];
	int8_t scales[QK_K / 16];
	uint16_t d;
};
_Static_assert(sizeof(struct block_q6_K) == 210, "q6_K block is 210 bytes");

/* The i-quants (dequant_iq.c): indices into fixed grids, sign patterns, block scales. */

/* iq2_xxs: 66 bytes, 256 values, 2.06 bits a value.
 *
 *   d       fp16 super-block scale
 *   qs[64]  8 groups of 8 bytes, one group per 32 values:
 *             bytes 0..3  four 8-bit indices into iq2xxs_grid (256 rows of 8)
 *             bytes 4..7  a little-endian u32:
 *                           31..28   27..21  20..14  13..7   6..0
 *                           scale s  sign3   sign2   sign1   sign0
 *
 *   signK is a 7-bit index into ksigns_iq2xs, which adds an 8th bit for even parity;
 *   value = d * (0.5 + s) * 0.25 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq2_xxs {
	uint16_t d;
	uint8_t qs[QK_K / 4];
};
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "iq2_xxs block size");

/* iq2_xs: 74 bytes, 256 values, 2.31 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[32]      little-endian u16, one per 8 values:
 *                 15..9        8..0
 *                 sign index   index into iq2xs_grid (512 rows of 8)
 *   scales[8]   one byte per 32 values: low nibble for its first 16, high for the rest
 *
 *   value = d * (0.5 + nibble) * 0.25 * grid[index][j] * (ksigns_iq2xs[sign] bit j ? -1 : 1) */
struct block_iq2_xs {
	uint16_t d;
	uint16_t qs[QK_K / 8];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq2_xs) == 74, "iq2_xs block size");

/* iq2_s: 82 bytes, 256 values, 2.56 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[0..31]   low 8 bits of a 10-bit index into iq2s_grid (1024 rows of 8), one per 8 values
 *   qs[32..63]  sign bytes, one per 8 values: bit j set = value j negative (no parity trick)
 *   qh[8]       one byte per 32 values, 2 bits per row:  7..6  5..4  3..2  1..0
 *                                                        row3  row2  row1  row0
 *               giving index bits 9..8
 *   scales[8]   as iq2_xs: low nibble for the first 16 of 32 values, high for the rest
 *
 *   value = d * (0.5 + nibble) * 0.25 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq2_s {
	uint16_t d;
	uint8_t qs[QK_K / 4];
	uint8_t qh[QK_K / 32];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq2_s) == 82, "iq2_s block size");

/* iq3_xxs: 98 bytes, 256 values, 3.06 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[0..63]   8-bit indices into iq3xxs_grid (256 rows of 4), two per 8 values
 *   qs[64..95]  8 little-endian u32, one per 32 values, laid out as in iq2_xxs:
 *                 31..28   27..21  20..14  13..7   6..0
 *                 scale s  sign3   sign2   sign1   sign0     (ksigns_iq2xs indices)
 *
 *   value = d * (0.5 + s) * 0.5 * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq3_xxs {
	uint16_t d;
	uint8_t qs[3 * QK_K / 8];
};
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "iq3_xxs block size");

/* iq3_s: 110 bytes, 256 values, 3.44 bits a value.
 *
 *   d           fp16 super-block scale
 *   qs[64]      low 8 bits of 9-bit indices into iq3s_grid (512 rows of 4), 8 per 32 values
 *   qh[8]       one byte per 32 values: bit k is bit 8 of that group's k-th index
 *   signs[32]   one byte per 8 values: bit j set = value j negative
 *   scales[4]   one byte per 64 values: low nibble for the first 32, high for the rest
 *
 *   value = d * (1 + 2 * nibble) * grid[index][j] * (sign bit j ? -1 : 1) */
struct block_iq3_s {
	uint16_t d;
	uint8_t qs[QK_K / 4];
	uint8_t qh[QK_K / 32];
	uint8_t signs[QK_K / 8];
	uint8_t scales[QK_K / 64];
};
_Static_assert(sizeof(struct block_iq3_s) == 110, "iq3_s block size");

/* iq1_s: 50 bytes, 256 values, 1.56 bits a value.
 *
 *   d        fp16 super-block scale
 *   qs[32]   low 8 bits of 11-bit indices into iq1s_grid (2048 rows of 8 values in
 *            {-1, 0, 1}), one per 8 values
 *   qh[8]    little-endian u16, one per 32 values:
 *              15      14..12   11..9  8..6   5..3   2..0
 *              dsign   scale s  hi3    hi2    hi1    hi0     (index bits 10..8 of row k)
 *
 *   value = d * (2 * s + 1) * (grid[index][j] + (dsign ? -IQ1S_DELTA : IQ1S_DELTA)) */
struct block_iq1_s {
	uint16_t d;
	uint8_t qs[QK_K / 8];
	uint16_t qh[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq1_s) == 50, "iq1_s block size");

/* iq1_m: 56 bytes, 256 values, 1.75 bits a value. No fp16 field: the super-block scale
 * is spread over the top nibbles of the scales.
 *
 *   qs[32]     low 8 bits of 11-bit indices into iq1s_grid, one per 8 values
 *   qh[16]     one byte per 16 values (two rows):
 *                7       6..4             3       2..0
 *                dsign1  index1 bits 10..8  dsign0  index0 bits 10..8
 *   scales[8]  four little-endian u16 sc[0..3], sc[k] covering 64 values:
 *                15..12      11..9  8..6   5..3   2..0
 *                d nibble k  s3     s2     s1     s0      (one 3-bit scale per 16 values)
 *              d = fp16 whose bits are  sc[3]>>12 : sc[2]>>12 : sc[1]>>12 : sc[0]>>12
 *
 *   value = d * (2 * s + 1) * (grid[index][j] + (dsign ? -IQ1M_DELTA : IQ1M_DELTA)) */
struct block_iq1_m {
	uint8_t qs[QK_K / 8];
	uint8_t qh[QK_K / 16];
	uint8_t scales[QK_K / 32];
};
_Static_assert(sizeof(struct block_iq1_m) == 56, "iq1_m block size");

/* iq4_nl: 18 bytes, 32 values, 4.5 bits a value; a non-linear q4_0.
 *
 *   d       fp16 block scale
 *   qs[16]  byte j: low nibble = value j, high nibble = value j + 16,
 *           each an index into kvalues_iq4nl (16 int8 levels from -127 to 113)
 *
 *   value = d * kvalues_iq4nl[nibble] */
struct block_iq4_nl {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_iq4_nl) == 18, "iq4_nl block size");

/* iq4_xs: 136 bytes, 256 values, 4.25 bits a value; iq4_nl with 6-bit sub-block scales.
 *
 *   d            fp16 super-block scale
 *   scales_h     little-endian u16: bits 2k+1..2k are the high 2 bits of scale k
 *   scales_l[4]  byte k/2: low nibble = low 4 bits of scale k (k even), high nibble (k odd)
 *   qs[128]      8 runs of 16 bytes, one per 32 values, nibbles as in iq4_nl
 *
 *   value = d * (scale_k - 32) * kvalues_iq4nl[nibble] */
struct block_iq4_xs {
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[QK_K / 64];
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_iq4_xs) == 136, "iq4_xs block size");

/* The ternary, FP4 and plain 1- and 2-bit types (dequant_misc.c). */

/* tq1_0: 54 bytes, 256 values, 1.69 bits a value (BitNet b1.58 / TriLM ternary).
 *
 *   qs[0..31]   byte m: 5 trits, of values m, m+32, m+64, m+96, m+128
 *   qs[32..47]  byte m: 5 trits, of values 160+m, 176+m, 192+m, 208+m, 224+m
 *   qh[4]       byte m: 4 trits, of values 240+m, 244+m, 248+m, 252+m
 *   d           fp16 scale
 *
 *   A byte is the trits t0 t1 t2 t3 t4 read as a base-3 fraction, rounded up to 8 bits:
 *   byte = ceil((81 t0 + 27 t1 + 9 t2 + 3 t3 + t4) * 256 / 243), with t4 = 0 in qh. So
 *   (byte * 3^n) mod 256 drops the first n trits and (that * 3) >> 8 is trit n.
 *
 *   value = (trit - 1) * d */
struct block_tq1_0 {
	uint8_t qs[48];
	uint8_t qh[4];
	uint16_t d;
};
_Static_assert(sizeof(struct block_tq1_0) == 54, "tq1_0 block size");

/* tq2_0: 66 bytes, 256 values, 2.06 bits a value.
 *
 *   qs[64]  two runs of 32 bytes, one per 128 values; in run r, byte m:
 *             7..6          5..4          3..2          1..0
 *             q(128r+96+m)  q(128r+64+m)  q(128r+32+m)  q(128r+m)
 *   d       fp16 scale
 *
 *   value = (q - 1) * d        (q = 3 is never written, decodes to 2d) */
struct block_tq2_0 {
	uint8_t qs[QK_K / 4];
	uint16_t d;
};
_Static_assert(sizeof(struct block_tq2_0) == 66, "tq2_0 block size");

/* mxfp4: 17 bytes, 32 values, 4.25 bits a value (OCP microscaling MXFP4).
 *
 *   e       E8M0 scale: 2^(e - 127), a bare exponent (e = 255 is not treated as NaN)
 *   qs[16]  byte j: low nibble = value j, high nibble = value j + 16;
 *           nibble = s e e m, an E2M1 float
 *
 *   value = kvalues_fp4[nibble] * 2^(e - 128) */
struct block_mxfp4 {
	uint8_t e;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_mxfp4) == 17, "mxfp4 block size");

/* nvfp4: 36 bytes, 64 values, 4.5 bits a value (NVIDIA NVFP4, without the per-tensor
 * fp32 scale, which ggml does not store).
 *
 *   d[4]    one UE4M3 scale per 16 values:  7  6..3  2..0
 *                                           -  exp   man     (bias 7, bit 7 ignored)
 *   qs[32]  8 bytes per 16 values; in sub-block s, byte j: low nibble = value 16s + j,
 *           high nibble = value 16s + j + 8; nibbles are E2M1 as in mxfp4
 *
 *   value = kvalues_fp4[nibble] * ue4m3(d[s]) / 2 */
struct block_nvfp4 {
	uint8_t d[4];
	uint8_t qs[32];
};
_Static_assert(sizeof(struct block_nvfp4) == 36, "nvfp4 block size");

/* Half a UE4M3 scale of nvfp4. 0x7f, the format's NaN, reads as 0 as in ggml (and 0xff,
 * bit 7 being ignored, as the largest value); exp = 0 is subnormal, man * 2^-9. Built
 * from bits: (8 + man) * 2^(exp - 11) is a normal float with biased exponent
 * exp + 119 for every exp of 1..15, so every result is exact. */
static inline float ue4m3_half(uint8_t x)
{
	if (x == 0 || x == 0x7f)
		return 0.0f;
	const uint32_t exp = (x >> 3) & 0xf, man = x & 7;
	if (exp == 0)
		return (float)man * 0x1p-10f;
	const uint32_t bits = (exp + 119) << 23 | man << 20;
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

/* q1_0: 18 bytes, 128 values, 1.125 bits a value.
 *
 *   d       fp16 scale
 *   qs[16]  bit j % 8 of byte j / 8 is value j (least significant bit first)
 *
 *   value = bit ? d : -d */
struct block_q1_0 {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_q1_0) == 18, "q1_0 block size");

/* q2_0: 18 bytes, 64 values, 2.25 bits a value.
 *
 *   d       fp16 scale
 *   qs[16]  byte j / 4, bits 2(j % 4)+1 .. 2(j % 4): q of value j (low bits first)
 *             7..6    5..4    3..2    1..0
 *             q(4k+3) q(4k+2) q(4k+1) q(4k)
 *
 *   value = (q - 1) * d        (q = 0 1 2 3: -d 0 d 2d) */
struct block_q2_0 {
	uint16_t d;
	uint8_t qs[16];
};
_Static_assert(sizeof(struct block_q2_0) == 18, "q2_0 block size");

/* The bytes of a field of the block at blk. */
#define FIELD(blk, type, field) ((blk) + offsetof(struct type, field))

/* The little-endian 16 or 32 bits at p, a field of any type at any alignment, whatever
 * the host's byte order. */
static inline uint16_t rd16(const void *p)
{
	return gguf_le16(p);
}

static inline uint32_t rd32(const void *p)
{
	return gguf_le32(p);
}

/* The bits of iq1_m's fp16 super-block scale, made of the top nibbles of the four
 * little-endian u16 words of its scales[8] (see struct block_iq1_m). */
static inline uint16_t iq1_m_scale_bits(const uint8_t *scales)
{
	return (uint16_t)((rd16(scales) >> 12) | ((rd16(scales + 2) >> 8) & 0x00f0) |
	                  ((rd16(scales + 4) >> 4) & 0x0f00) | (rd16(scales + 6) & 0xf000));
}

/* The fp16 at p (little-endian, any alignment) as a float, exact for every pattern. */
static inline float half_at(const void *p)
{
	return fp16_to_f32(gguf_le16(p));
}

#endif
