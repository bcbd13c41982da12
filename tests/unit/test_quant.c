/* lib/2-quant on crafted blocks whose bytes follow by hand from ggml's rules: the
 * float conversions at their rounding ties, limits and NaNs; the legacy and k-quant
 * blocks of zeros, of one huge value, of negatives only, of exact ties, of NaN, inf
 * and denormals; and the API's refusals. tests/quant_ref.py compares the same code
 * with llama.cpp itself on millions of values; this says why the bytes are right. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "blocks.h"
#include "dequant.h"
#include "half.h"
#include "quant.h"
#include "types.h"

/* A float from its bits (a NaN with a payload, a signalling one, a denormal). */
static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* The one block quant_row makes of 32 values x as type (a legacy type), in out. */
static void quant32(enum ggml_type_id type, const float x[QK], uint8_t *out)
{
	assert_int_equal(quant_row(type, x, out, QK), 0);
}

static void test_can_make(void **state)
{
	(void)state;
	const enum ggml_type_id made[] = {
		GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,
		GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
		GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
	};
	for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
		assert_true(quant_can_make(made[i]));
	/* q8_1 and q8_K are ggml's dot-product intermediates, never a file's type; i32 has no
	 * quantizer; 4 was removed; the others are out of range. */
	assert_false(quant_can_make(GGML_TYPE_Q8_1));
	assert_false(quant_can_make(GGML_TYPE_Q8_K));
	assert_false(quant_can_make(GGML_TYPE_I32));
	assert_false(quant_can_make((enum ggml_type_id)4));
	assert_false(quant_can_make(GGML_TYPE_COUNT));
	assert_false(quant_can_make((enum ggml_type_id)-1));
}

/* Refusals write nothing. */
static void test_refusals(void **state)
{
	(void)state;
	float x[64] = { 1.0f };
	uint8_t y[128];
	memset(y, 0xa5, sizeof y);
	assert_int_equal(quant_row(GGML_TYPE_Q8_0, x, y, 31), -EINVAL);
	assert_int_equal(quant_row(GGML_TYPE_Q8_0, x, y, 33), -EINVAL);
	assert_int_equal(quant_row(GGML_TYPE_Q8_0, x, y, -32), -EINVAL);
	assert_int_equal(quant_row(GGML_TYPE_Q8_1, x, y, 32), -EINVAL);
	assert_int_equal(quant_row(GGML_TYPE_COUNT, x, y, 32), -EINVAL);
	for (size_t i = 0; i < sizeof y; i++)
		assert_int_equal(y[i], 0xa5);
	/* zero values: nothing to write, and fine */
	assert_int_equal(quant_row(GGML_TYPE_Q8_0, x, y, 0), 0);
	assert_int_equal(y[0], 0xa5);
}

/* A float's bits and the 16-bit value (f16 or bf16) it is to become. */
struct half_case {
	uint32_t in;
	uint16_t out;
};

/* Each case's float quantized alone to type (GGML_TYPE_F16 or _BF16): the case's value,
 * little-endian. */
static void expect_halves(uint32_t type, const struct half_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = bits_f32(cases[i].in);
		uint8_t y[2];
		assert_int_equal(quant_row(type, &x, y, 1), 0);
		if (gguf_le16(y) != cases[i].out)
			fail_msg("%s of %08x: %04x, not %04x", ggml_type_get(type)->name, cases[i].in,
			         gguf_le16(y), cases[i].out);
	}
}

static void test_fp16(void **state)
{
	(void)state;
	const struct half_case cases[] = {
		{ 0x3f800000, 0x3c00 },   /* 1 */
		{ 0xbf800000, 0xbc00 },   /* -1 */
		{ 0x00000000, 0x0000 },
		{ 0x80000000, 0x8000 },   /* -0 keeps its sign */
		{ 0x3f801000, 0x3c00 },   /* 1 + 2^-11: a tie, to the even 1 */
		{ 0x3f803000, 0x3c02 },   /* 1 + 3 * 2^-11: a tie, to the even 1 + 2^-9 */
		{ 0x3f801001, 0x3c01 },   /* just past the tie: up */
		{ 0x477fe000, 0x7bff },   /* 65504, the largest half */
		{ 0x477fefff, 0x7bff },   /* below 65520: still 65504 */
		{ 0x477ff000, 0x7c00 },   /* 65520: the tie above it rounds to inf */
		{ 0x7f7fffff, 0x7c00 },   /* FLT_MAX: inf */
		{ 0x7f800000, 0x7c00 },   /* inf */
		{ 0xff800000, 0xfc00 },
		{ 0x33800000, 0x0001 },   /* 2^-24, the smallest subnormal half */
		{ 0x33000000, 0x0000 },   /* 2^-25: a tie between 0 and it, to 0 */
		{ 0x33400000, 0x0001 },   /* 1.5 * 2^-25: up */
		{ 0x33c00000, 0x0002 },   /* 3 * 2^-25: a tie, to the even 2 * 2^-24 */
		{ 0x34400000, 0x0003 },   /* 3 * 2^-24, exact */
		{ 0x387fc000, 0x03ff },   /* the largest subnormal half */
		{ 0x38800000, 0x0400 },   /* 2^-14, the smallest normal half */
		{ 0x00000001, 0x0000 },   /* a float denormal: 0 */
		{ 0x80000001, 0x8000 },
		{ 0x7fc00000, 0x7e00 },   /* every NaN is 0x7e00 with its sign: quiet, */
		{ 0x7f800001, 0x7e00 },   /* signalling, */
		{ 0xffc12345, 0xfe00 },   /* with a payload */
		{ 0xff800001, 0xfe00 },
	};
	expect_halves(GGML_TYPE_F16, cases, sizeof cases / sizeof cases[0]);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)   /* half.h's alike */
		assert_int_equal(f32_to_fp16(bits_f32(cases[i].in)), cases[i].out);
}

static void test_bf16(void **state)
{
	(void)state;
	const struct half_case cases[] = {
		{ 0x3f800000, 0x3f80 },
		{ 0x3f808000, 0x3f80 },   /* a tie, to even */
		{ 0x3f818000, 0x3f82 },   /* a tie, to even (up) */
		{ 0x3f808001, 0x3f81 },
		{ 0x7f7fffff, 0x7f80 },   /* FLT_MAX rounds to inf */
		{ 0x7f7f7fff, 0x7f7f },
		{ 0x00008000, 0x0000 },   /* denormal ties: kept, to even */
		{ 0x00018000, 0x0002 },
		{ 0x80010000, 0x8001 },
		{ 0xff800000, 0xff80 },
		{ 0x7f800001, 0x7fc0 },   /* a signalling NaN is quieted */
		{ 0xff800001, 0xffc0 },
		{ 0x7fa12345, 0x7fe1 },   /* its top bits kept */
		{ 0xffc0ffff, 0xffc0 },   /* a NaN is never rounded (up into the sign) */
		{ 0x7fffffff, 0x7fff },
	};
	expect_halves(GGML_TYPE_BF16, cases, sizeof cases / sizeof cases[0]);
}

/* f32 is a copy, NaN payloads included, little-endian. */
static void test_f32(void **state)
{
	(void)state;
	float x[3] = { bits_f32(0x7f800001), -0.0f, 1.5f };
	uint8_t y[12];
	assert_int_equal(quant_row(GGML_TYPE_F32, x, y, 3), 0);
	assert_int_equal(gguf_le32(y), 0x7f800001);
	assert_int_equal(gguf_le32(y + 4), 0x80000000);
	assert_int_equal(gguf_le32(y + 8), 0x3fc00000);
}

/* q8_0: d = max|x| / 127, q = roundf(x / d), half away from zero. */
static void test_q8_0(void **state)
{
	(void)state;
	float x[QK];
	uint8_t y[sizeof(struct block_q8_0)];
	const int8_t *qs = (const int8_t *)(y + offsetof(struct block_q8_0, qs));

	/* zeros: d = 0 and every q 0 */
	memset(x, 0, sizeof x);
	quant32(GGML_TYPE_Q8_0, x, y);
	for (size_t i = 0; i < sizeof y; i++)
		assert_int_equal(y[i], 0);

	/* max 127: d = 1, so x / d is x, and the halves are ties */
	for (int j = 0; j < QK; j++)
		x[j] = (float)(j - 16) + 0.5f;       /* -15.5 .. 15.5 */
	x[0] = -127.0f;
	quant32(GGML_TYPE_Q8_0, x, y);
	assert_int_equal(gguf_le16(y), 0x3c00);
	assert_int_equal(qs[0], -127);
	assert_int_equal(qs[1], -15);                /* -14.5: away from zero */
	assert_int_equal(qs[15], -1);                /* -0.5 */
	assert_int_equal(qs[16], 1);                 /* 0.5 */
	assert_int_equal(qs[17], 2);                 /* 1.5 */
	assert_int_equal(qs[18], 3);                 /* 2.5: away from zero, not to even */

	/* one huge value among small ones: they round to 0 */
	memset(x, 0, sizeof x);
	x[7] = 1e6f;
	x[8] = 1000.0f;
	x[9] = -3000.0f;
	quant32(GGML_TYPE_Q8_0, x, y);
	assert_int_equal(gguf_le16(y), f32_to_fp16(1e6f / 127));
	assert_int_equal(qs[7], 127);
	assert_int_equal(qs[8], 0);                  /* 0.127 */
	assert_int_equal(qs[9], 0);                  /* -0.381 */

	/* NaN: ggml's MAX(amax, |x|) is NaN after a NaN, then the next value's |x|; so a NaN
	 * first is forgotten (d = 1 / 127, and the NaN's q is the x86 conversion of NaN, 0),
	 * and a NaN last makes d a NaN (0x7e00) and every q 0. */
	memset(x, 0, sizeof x);
	x[0] = NAN;
	x[1] = 1.0f;
	quant32(GGML_TYPE_Q8_0, x, y);
	assert_int_equal(gguf_le16(y), f32_to_fp16(1.0f / 127));
	assert_int_equal(qs[0], 0);
	assert_int_equal(qs[1], 127);
	x[QK - 1] = NAN;
	quant32(GGML_TYPE_Q8_0, x, y);
	assert_int_equal(gguf_le16(y), 0x7e00);
	for (int j = 0; j < QK; j++)
		assert_int_equal(qs[j], 0);

	/* denormals: d = 1e-40 / 127 is so small that 1 / d is inf, every x / d is inf or
	 * NaN, which converts to 0; and d itself is below the smallest half */
	for (int j = 0; j < QK; j++)
		x[j] = (j % 2 ? 1e-40f : -1e-40f);
	quant32(GGML_TYPE_Q8_0, x, y);
	for (size_t i = 0; i < sizeof y; i++)
		assert_int_equal(y[i], 0);
}

/* q4_0: d = the largest-magnitude value / -8, q = min(15, (int)(x / d + 8.5)). */
static void test_q4_0(void **state)
{
	(void)state;
	float x[QK];
	uint8_t y[sizeof(struct block_q4_0)];
	const uint8_t *qs = y + offsetof(struct block_q4_0, qs);

	/* zeros: d = 0 / -8, which is -0 (0x8000), every q 8 */
	memset(x, 0, sizeof x);
	quant32(GGML_TYPE_Q4_0, x, y);
	assert_int_equal(gguf_le16(y), 0x8000);
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(qs[j], 0x88);

	/* max -8: d = 1; -8 is q 0, 7 is q 15, and +8 would be 16.5, clamped to 15 */
	for (int j = 0; j < QK; j++)
		x[j] = (float)(j % 16) - 8.0f;      /* -8 .. 7 twice */
	quant32(GGML_TYPE_Q4_0, x, y);
	assert_int_equal(gguf_le16(y), 0x3c00);
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(qs[j], (j << 4) | j);
	x[5] = 8.0f;                                  /* |8| is not > |-8|: -8 stays max */
	quant32(GGML_TYPE_Q4_0, x, y);
	assert_int_equal(gguf_le16(y), 0x3c00);
	assert_int_equal(qs[5] & 0xf, 15);

	/* negatives only, largest magnitude -2: d = 0.25, x / d = -8 + j / 4 exactly */
	for (int j = 0; j < QK; j++)
		x[j] = -2.0f + (float)j / 16.0f;      /* -2 .. -0.0625 */
	quant32(GGML_TYPE_Q4_0, x, y);
	assert_int_equal(gguf_le16(y), f32_to_fp16(0.25f));
	/* x / d = -8 + j / 4, plus 8.5, truncated: j / 4 + 0.5 -> floor */
	for (int j = 0; j < QK / 2; j++) {
		int lo = (int)((float)j / 4.0f + 0.5f), hi = (int)((float)(j + 16) / 4.0f + 0.5f);
		assert_int_equal(qs[j], (hi << 4) | lo);
	}

	/* inf: d = -inf, 1 / d = -0; finite values give q 8, inf * -0 is NaN, which the x86
	 * conversion makes 0x80000000: its low byte 0 */
	memset(x, 0, sizeof x);
	x[3] = INFINITY;
	quant32(GGML_TYPE_Q4_0, x, y);
	assert_int_equal(gguf_le16(y), 0xfc00);
	assert_int_equal(qs[3], 0x80);
	assert_int_equal(qs[4], 0x88);
}

/* q4_1: m = min, d = (max - min) / 15, q = min(15, (int)((x - m) / d + 0.5)). */
static void test_q4_1(void **state)
{
	(void)state;
	float x[QK];
	uint8_t y[sizeof(struct block_q4_1)];
	const uint8_t *qs = y + offsetof(struct block_q4_1, qs);

	/* negatives only, -15 .. 0 twice: d = 1, m = -15, q = x + 15 */
	for (int j = 0; j < QK; j++)
		x[j] = (float)(j % 16) - 15.0f;
	quant32(GGML_TYPE_Q4_1, x, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q4_1, d)), 0x3c00);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q4_1, m)), 0xcb80);   /* -15 */
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(qs[j], (j << 4) | j);

	/* a constant block: d = 0, m = the constant, every q 0 */
	for (int j = 0; j < QK; j++)
		x[j] = 3.0f;
	quant32(GGML_TYPE_Q4_1, x, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q4_1, d)), 0);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q4_1, m)), 0x4200);    /* 3 */
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(qs[j], 0);
}

/* q5_0 and q5_1: the fifth bits land in qh, bit j for value j. */
static void test_q5(void **state)
{
	(void)state;
	float x[QK];
	uint8_t y[sizeof(struct block_q5_1)];

	/* q5_0 with max -16: d = 1, q = x + 16 (x + 16.5 truncated) */
	for (int j = 0; j < QK; j++)
		x[j] = (float)(j % 32) - 16.0f;       /* -16 .. 15: q = j */
	quant32(GGML_TYPE_Q5_0, x, y);
	assert_int_equal(gguf_le16(y), 0x3c00);
	assert_int_equal(gguf_le32(y + offsetof(struct block_q5_0, qh)), 0xffff0000u);
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(y[offsetof(struct block_q5_0, qs) + j], (j << 4) | j);

	/* q5_1 with 31 .. 0: m = 0, d = 1, q = 31 - j, whose bit 4 is set for j <= 15 */
	for (int j = 0; j < QK; j++)
		x[j] = (float)(31 - j);
	quant32(GGML_TYPE_Q5_1, x, y);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q5_1, d)), 0x3c00);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q5_1, m)), 0);
	assert_int_equal(gguf_le32(y + offsetof(struct block_q5_1, qh)), 0x0000ffffu);
	for (int j = 0; j < QK / 2; j++)
		assert_int_equal(y[offsetof(struct block_q5_1, qs) + j],
		                 (((31 - j - 16) & 0xf) << 4) | ((31 - j) & 0xf));
}

/* Blocks are independent: a row quantized whole equals its blocks quantized one by
 * one, and the output is written at any alignment. */
static void test_blocks_independent(void **state)
{
	(void)state;
	enum { N = 8 * QK };
	float x[N];
	uint8_t whole[8 * sizeof(struct block_q8_0)], part[8 * sizeof(struct block_q8_0) + 1];
	for (int i = 0; i < N; i++)
		x[i] = sinf((float)i * 0.7f) * (float)(i % 13);
	const enum ggml_type_id types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
	                                    GGML_TYPE_Q5_1, GGML_TYPE_Q8_0 };
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		uint32_t bytes = ggml_type_get(types[t])->block_bytes;
		assert_int_equal(quant_row(types[t], x, whole, N), 0);
		for (int b = 0; b < 8; b++)
			assert_int_equal(quant_row(types[t], x + b * QK, part + 1 + b * bytes, QK), 0);
		assert_memory_equal(whole, part + 1, 8 * bytes);
	}
}

/* The k-quants of all zeros are all zero bytes: no scale, no minimum, and quants 0, not
 * the offset quant (q3_K's 4, q6_K's 32) that would decode to 0 as well, because ggml's
 * searches give up on an all-zero group before they offset anything, and a zero scale
 * leaves the search's quants in place. */
static void test_k_zeros(void **state)
{
	(void)state;
	static float x[QK_K];
	uint8_t y[256];
	const enum ggml_type_id types[] = { GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
	                                    GGML_TYPE_Q5_K, GGML_TYPE_Q6_K };
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		uint32_t bytes = ggml_type_get(types[t])->block_bytes;
		memset(y, 0xa5, sizeof y);
		assert_int_equal(quant_row(types[t], x, y, QK_K), 0);
		for (uint32_t i = 0; i < bytes; i++)
			if (y[i] != 0)
				fail_msg("%s of zeros: byte %u is %02x", ggml_type_get(types[t])->name, i, y[i]);
		assert_int_equal(y[bytes], 0xa5);     /* and not one byte more */
	}
}

/* The 6-bit quant of value i in a q6_K block (0..63, q - 32 being the signed quant). */
static int q6_quant(const uint8_t *y, int i)
{
	const uint8_t *ql = y + offsetof(struct block_q6_K, ql) + 64 * (i / 128);
	const uint8_t *qh = y + offsetof(struct block_q6_K, qh) + 32 * (i / 128);
	int l = i % 32, part = (i % 128) / 32;
	int low = (ql[l + 32 * (part & 1)] >> (4 * (part >> 1))) & 0xf;
	return low | ((qh[l] >> (2 * part)) & 3) << 4;
}

/* q6_K with one value 2^20 in zeros, at 37 (sub-block 2). Everything is exact in floats:
 * the sub-block's search starts from -32 / 2^20, quant -32 (weighted fit scale -2^15);
 * its trials at -(32 + 0.1 is) / 2^20 give -32 again or -31, whose fit ties exactly
 * (961 * 2^120 both sides) and so does not replace it. The super-block scale is
 * -2^15 / -128 = 256 (fp16 0x5c00), the sub-block's int8 scale -128; then 2^20 / -32768
 * is quant -32 (stored 0), the zeros beside it quant 0 (stored 32), and the other
 * sub-blocks, scale 0, keep the quants 0 their search left. */
static void test_q6_K_one_value(void **state)
{
	(void)state;
	static float x[QK_K];
	uint8_t y[sizeof(struct block_q6_K)];
	x[37] = 1048576.0f;
	assert_int_equal(quant_row(GGML_TYPE_Q6_K, x, y, QK_K), 0);
	assert_int_equal(gguf_le16(y + offsetof(struct block_q6_K, d)), 0x5c00);
	for (int s = 0; s < QK_K / 16; s++)
		assert_int_equal((int8_t)y[offsetof(struct block_q6_K, scales) + s], s == 2 ? -128 : 0);
	for (int i = 0; i < QK_K; i++) {
		int want = i == 37 ? 0 : i / 16 == 2 ? 32 : 0;
		if (q6_quant(y, i) != want)
			fail_msg("value %d: quant %d, not %d", i, q6_quant(y, i), want);
	}
}

/* deterministic values for the round trips: a sum of sines, every sub-block at its own
 * scale and offset, some all above zero, some all below */
static void wavy(float *x, int n, int seed)
{
	for (int i = 0; i < n; i++) {
		float scale = (float)(1 + (i / 16 + seed) % 7) * 0.01f;
		float offset = (i / 32) % 3 == 1 ? 3.0f * scale : (i / 32) % 3 == 2 ? -3.0f * scale : 0;
		x[i] = offset + scale * (sinf((float)i * 0.37f + (float)seed) +
		                         0.5f * sinf((float)i * 1.91f));
	}
}

/* Every k-quant decodes (lib/2-dequant, ggml's decoders) to within its type's error of
 * the values it was made from: the bits are where the decoder looks for them, and the
 * scales describe the values. The root-mean-square error relative to that of the values
 * falls with the bits: about 0.11, 0.10, 0.028, 0.014, 0.011 from q2_K to q6_K on these
 * values (q6_K's scales have no minimum for the offset sub-blocks), bounded a third
 * above that. */
static void test_k_round_trip(void **state)
{
	(void)state;
	enum { N = 8 * QK_K };
	static float x[N], back[N];
	static uint8_t y[8 * sizeof(struct block_q6_K)];
	const struct { enum ggml_type_id type; double bound; } cases[] = {
		{ GGML_TYPE_Q2_K, 0.15 }, { GGML_TYPE_Q3_K, 0.13 }, { GGML_TYPE_Q4_K, 0.04 },
		{ GGML_TYPE_Q5_K, 0.02 }, { GGML_TYPE_Q6_K, 0.015 },
	};
	for (int seed = 0; seed < 3; seed++) {
		wavy(x, N, seed);
		double energy = 0;
		for (int i = 0; i < N; i++)
			energy += (double)x[i] * x[i];
		for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			assert_int_equal(quant_row(cases[c].type, x, y, N), 0);
			dequant_get(cases[c].type)->to_float_ref(y, back, N / QK_K);
			double err = 0;
			for (int i = 0; i < N; i++)
				err += ((double)back[i] - x[i]) * ((double)back[i] - x[i]);
			double rel = sqrt(err / energy);
			if (!(rel < cases[c].bound))
				fail_msg("%s seed %d: relative error %g, not under %g",
				         ggml_type_get(cases[c].type)->name, seed, rel, cases[c].bound);
		}
	}
}

/* blocks.h's k4_scale_min, the one unpack of q4_K's and q5_K's 12 scale bytes: every
 * sub-block's 6-bit scale and min back from bytes packed by the diagram, each field
 * with bits set that no other field's have (so a bit taken from the wrong byte or place
 * shows), and all 64 values of each field at each place. */
static void test_k4_scale_min(void **state)
{
	(void)state;
	for (int base = 0; base < 64; base++) {
		uint8_t sc[8], m[8], b[12] = { 0 };
		for (int j = 0; j < 8; j++) {
			sc[j] = (uint8_t)((base + 11 * j) & 63);
			m[j] = (uint8_t)((base * 5 + 23 * j + 7) & 63);
		}
		for (int j = 0; j < 4; j++) {
			b[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
			b[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
			b[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
		}
		for (int j = 0; j < 8; j++) {
			uint8_t got_sc = 0xff, got_m = 0xff;
			k4_scale_min(b, j, &got_sc, &got_m);
			if (got_sc != sc[j] || got_m != m[j])
				fail_msg("base %d sub-block %d: sc %u m %u, want %u %u", base, j,
				         got_sc, got_m, sc[j], m[j]);
		}
	}
}

UNIT_TESTS(
	cmocka_unit_test(test_can_make),
	cmocka_unit_test(test_refusals),
	cmocka_unit_test(test_fp16),
	cmocka_unit_test(test_bf16),
	cmocka_unit_test(test_f32),
	cmocka_unit_test(test_q8_0),
	cmocka_unit_test(test_q4_0),
	cmocka_unit_test(test_q4_1),
	cmocka_unit_test(test_q5),
	cmocka_unit_test(test_blocks_independent),
	cmocka_unit_test(test_k_zeros),
	cmocka_unit_test(test_q6_K_one_value),
	cmocka_unit_test(test_k_round_trip),
	cmocka_unit_test(test_k4_scale_min),
)
