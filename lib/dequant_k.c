/* The k-quants: super-blocks of QK_K = 256 weights cut into sub-blocks of 16 or 32,
 * each sub-block with its own small integer scale (and min), which one or two fp16
 * super-block scales bring back to floats. Multi-byte fields are little-endian and
 * blocks sit at any alignment, so fields are read from bytes at their offsetof, never
 * through a struct pointer. The float operations are ggml's, in ggml's order (scale
 * times sub-block scale first, then times the quant), so that NaN, inf and subnormal
 * super-block scales come out as ggml's dequantize_row_* makes them. */
#include "dequant.h"

#include "gguf.h"

#define QK_K 256

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

/* The bytes of a field of the block at blk. */
#define FIELD(blk, type, field) ((blk) + offsetof(struct type, field))

/* The fp16 at p, which is little-endian and may be unaligned. */
static float half_at(const uint8_t *p)
{
	return fp16_to_f32(gguf_le16(p));
}

/* The 256 2-bit planes of q2_K and q3_K, in weight order. */
static void unpack_2bit(const uint8_t *qs, int q[QK_K])
{
	for (int h = 0; h < 2; h++)
		for (int plane = 0; plane < 4; plane++)
			for (int l = 0; l < 32; l++)
				*q++ = qs[32 * h + l] >> (2 * plane) & 3;
}

/* The 256 quants of q4_K, or of q5_K when qh supplies their fifth bits. */
static void unpack_4bit(const uint8_t *qs, const uint8_t *qh, int q[QK_K])
{
	for (int s = 0; s < 8; s++)
		for (int l = 0; l < 32; l++) {
			int low = qs[32 * (s / 2) + l] >> (4 * (s % 2)) & 0x0f;
			int high = qh ? (qh[l] >> s & 1) << 4 : 0;
			*q++ = low | high;
		}
}

/* q3_K's 16 sub-block scales, unbiased to -32..31. */
static void unpack_q3_scales(const uint8_t *s, int sc[16])
{
	for (int j = 0; j < 16; j++) {
		int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
		int high = s[8 + j % 4] >> (2 * (j / 4)) & 3;
		sc[j] = (low | high << 4) - 32;
	}
}

/* Sub-block j's 6-bit scale and min from the 12 scale bytes of q4_K and q5_K. */
static void scale_min_k4(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 0x3f;
		*m = s[j + 4] & 0x3f;
	} else {
		*sc = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
		*m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

/* q4_K and q5_K share everything past the quants: w = (d * sc) * q - (dmin * m). */
static void scale_k4(const uint8_t *scales, float d, float dmin, const int q[QK_K], float *dst)
{
	for (int s = 0; s < 8; s++) {
		int sc, m;
		scale_min_k4(scales, s, &sc, &m);
		float ds = d * (float)sc;
		float ms = dmin * (float)m;
		for (int l = 0; l < 32; l++)
			dst[32 * s + l] = ds * (float)q[32 * s + l] - ms;
	}
}

/* q2_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 16. */
static void dequant_q2_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q2_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q2_K, d));
		float dmin = half_at(FIELD(blk, block_q2_K, dmin));
		const uint8_t *scales = FIELD(blk, block_q2_K, scales);

		unpack_2bit(FIELD(blk, block_q2_K, qs), q);
		for (int s = 0; s < 16; s++) {
			float ds = d * (float)(scales[s] & 0x0f);
			float ms = dmin * (float)(scales[s] >> 4);
			for (int l = 0; l < 16; l++)
				dst[16 * s + l] = ds * (float)q[16 * s + l] - ms;
		}
	}
}

/* q3_K super-blocks to floats: (d * (scale - 32)) * (q - 4) per sub-block of 16. */
static void dequant_q3_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K], sc[16];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q3_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q3_K, d));
		const uint8_t *hmask = FIELD(blk, block_q3_K, hmask);

		unpack_2bit(FIELD(blk, block_q3_K, qs), q);
		for (int n = 0; n < QK_K; n++)
			q[n] |= (hmask[n % 32] >> (n / 32) & 1) << 2;
		unpack_q3_scales(FIELD(blk, block_q3_K, scales), sc);
		for (int s = 0; s < 16; s++) {
			float ds = d * (float)sc[s];
			for (int l = 0; l < 16; l++)
				dst[16 * s + l] = ds * (float)(q[16 * s + l] - 4);
		}
	}
}

/* q4_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 32. */
static void dequant_q4_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q4_K), dst += QK_K) {
		unpack_4bit(FIELD(blk, block_q4_K, qs), NULL, q);
		scale_k4(FIELD(blk, block_q4_K, scales), half_at(FIELD(blk, block_q4_K, d)),
		         half_at(FIELD(blk, block_q4_K, dmin)), q, dst);
	}
}

/* q5_K super-blocks to floats: (d * scale) * q - (dmin * min) per sub-block of 32. */
static void dequant_q5_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;
	int q[QK_K];

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q5_K), dst += QK_K) {
		unpack_4bit(FIELD(blk, block_q5_K, qs), FIELD(blk, block_q5_K, qh), q);
		scale_k4(FIELD(blk, block_q5_K, scales), half_at(FIELD(blk, block_q5_K, d)),
		         half_at(FIELD(blk, block_q5_K, dmin)), q, dst);
	}
}

/* q6_K super-blocks to floats: (d * scale) * (q - 32) per sub-block of 16. */
static void dequant_q6_K(const void *src, float *dst, uint64_t nblocks)
{
	const uint8_t *blk = src;

	for (uint64_t i = 0; i < nblocks; i++, blk += sizeof(struct block_q6_K), dst += QK_K) {
		float d = half_at(FIELD(blk, block_q6_K, d));
		const uint8_t *ql = FIELD(blk, block_q6_K, ql);
		const uint8_t *qh = FIELD(blk, block_q6_K, qh);
		const int8_t *scales = (const int8_t *)FIELD(blk, block_q6_K, scales);

		for (int h = 0; h < 2; h++)
			for (int k = 0; k < 4; k++)
				for (int l = 0; l < 32; l++) {
					int n = 128 * h + 32 * k + l;
					int low = ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2)) & 0x0f;
					int high = qh[32 * h + l] >> (2 * k) & 3;
					int q = (low | high << 4) - 32;
					dst[n] = d * (float)scales[n / 16] * (float)q;
				}
	}
}

const struct dequant_impl dequant_k_impls[] = {
	{ GGML_TYPE_Q2_K, QK_K, sizeof(struct block_q2_K), dequant_q2_K },
	{ GGML_TYPE_Q3_K, QK_K, sizeof(struct block_q3_K), dequant_q3_K },
	{ GGML_TYPE_Q4_K, QK_K, sizeof(struct block_q4_K), dequant_q4_K },
	{ GGML_TYPE_Q5_K, QK_K, sizeof(struct block_q5_K), dequant_q5_K },
	{ GGML_TYPE_Q6_K, QK_K, sizeof(struct block_q6_K), dequant_q6_K },
	{ 0, 0, 0, NULL },
};
