/* Tensor statistics (lib/4-stats/stats.h) and their files in the tree: exact figures against a
 * reference computed apart, the same bits at every SIMD level and however the values
 * are cut into calls, ggml's block scale checks, planted faults found with the right
 * counts and a clean model found clean, fixed file sizes, and nothing computed before
 * a read, once per tensor however many threads read it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "blocks.h"
#include "dequant.h"
#include "gguf_writer.h"
#include "render_stats.h"
#include "stats.h"
#include "test_data.h"
#include "test_kit.h"
#include "tree.h"

/* ---- values ---- */

static uint64_t rng = 88172645463325252u;

/* The sequence of this test (test_data.h). */
static uint64_t next_u64(void)
{
	return xorshift64(&rng);
}

/* Roughly normal values around mean with spread sd (sum of four uniforms). */
static float next_value(float mean, float sd)
{
	double u = 0;
	for (int k = 0; k < 4; k++)
		u += (double)(next_u64() >> 11) * 0x1p-53 - 0.5;
	return (float)(mean + sd * u * 1.7);
}

/* The reference: two passes in long double over the finite values, counts by
 * fpclassify, written apart from the kernels. */
static void reference(const float *x, uint64_t n, struct tensor_stats *r)
{
	long double sum = 0, m2 = 0;
	memset(r, 0, sizeof *r);
	r->min = INFINITY;
	r->max = -INFINITY;
	for (uint64_t i = 0; i < n; i++) {
		switch (fpclassify(x[i])) {
		case FP_NAN: r->nan++; continue;
		case FP_INFINITE: x[i] > 0 ? r->pos_inf++ : r->neg_inf++; continue;
		case FP_ZERO: r->zeros++; break;
		case FP_SUBNORMAL: r->subnormals++; break;
		default: break;
		}
		r->finite++;
		sum += x[i];
		r->min = fminf(r->min, x[i]);
		r->max = fmaxf(r->max, x[i]);
	}
	r->elements = n;
	long double mean = r->finite ? sum / r->finite : 0;
	for (uint64_t i = 0; i < n; i++)
		if (isfinite(x[i]))
			m2 += (x[i] - mean) * (x[i] - mean);
	r->mean = (double)mean;
	r->std = r->finite ? (double)sqrtl(m2 / r->finite) : NAN;
	r->absmax = fmaxf(fabsf(r->min), fabsf(r->max));
}

static void stats_of(const float *x, uint64_t n, uint64_t step, struct tensor_stats *out)
{
	static struct stats_acc a;
	stats_acc_init(&a);
	for (uint64_t i = 0; i < n; i += step)
		stats_acc_add(&a, x + i, n - i < step ? n - i : step);
	stats_acc_finish(&a, out);
}

/* 100003 values around 3 (so that the shift matters) with planted specials. */
static float *planted_values(uint64_t *n)
{
	*n = 100003;
	float *x = malloc(*n * sizeof *x);
	for (uint64_t i = 0; i < *n; i++)
		x[i] = next_value(3.0f, 0.01f);
	x[0] = NAN;                      /* before any finite value */
	x[17] = float_of_bits(0xffc00001);   /* a negative NaN with a payload */
	x[5000] = INFINITY;
	x[5001] = -INFINITY;
	x[5002] = -INFINITY;
	x[7] = 0.0f;
	x[99999] = -0.0f;
	x[123] = float_of_bits(0x00000001);  /* the smallest subnormal */
	x[124] = float_of_bits(0x807fffff);  /* the largest negative one */
	x[100001] = float_of_bits(0x007fffff);  /* in the scalar tail of the last block */
	x[50000] = -7.5f;                /* the min */
	x[60000] = 11.25f;               /* the max and absmax */
	return x;
}

static void test_exact(void **state)
{
	(void)state;
	uint64_t n;
	float *x = planted_values(&n);
	struct tensor_stats s, r;
	stats_of(x, n, n, &s);
	reference(x, n, &r);
	assert_int_equal(s.elements, n);
	assert_int_equal(s.nan, 2);
	assert_int_equal(s.pos_inf, 1);
	assert_int_equal(s.neg_inf, 2);
	assert_int_equal(s.zeros, 2);
	assert_int_equal(s.subnormals, 3);
	assert_int_equal(s.finite, r.finite);
	assert_true(s.min == -7.5f && s.max == 11.25f && s.absmax == 11.25f);
	assert_true(fabs(s.mean - r.mean) <= 1e-14 * fabs(r.mean));
	assert_true(fabs(s.std - r.std) <= 1e-12 * r.std);
	free(x);
}

/* The same bits whatever the SIMD level and however the values come in. */
static void test_same_bits(void **state)
{
	(void)state;
	uint64_t n;
	float *x = planted_values(&n);
	struct tensor_stats first;
	bool have = false;
	static const uint64_t steps[] = { 1, 15, 4096, 4097, 65536, 100003 };
	for (int l = DEQUANT_SCALAR; l <= (int)dequant_best(); l++) {
		dequant_select((enum dequant_level)l);
		for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
			struct tensor_stats s;
			stats_of(x, n, steps[k], &s);
			if (!have) {
				first = s;
				have = true;
			}
			assert_memory_equal(&s, &first, sizeof s);
		}
	}
	dequant_select(dequant_best());
	free(x);
}

/* Parts of consecutive runs merge into the figures of the whole (Chan et al.): counts,
 * min and max exactly, mean and std to float64 rounding; a part without finite values
 * changes neither. */
static void test_merge(void **state)
{
	(void)state;
	uint64_t n;
	float *x = planted_values(&n);
	struct tensor_stats whole, merged, r;
	stats_of(x, n, n, &whole);
	reference(x, n, &r);
	static struct stats_acc a;
	struct stats_part parts[3];
	const uint64_t cut[4] = { 0, 12288, 12288 + 20, n };
	for (int k = 0; k < 3; k++) {
		stats_acc_init(&a);
		stats_acc_add(&a, x + cut[k], cut[k + 1] - cut[k]);
		stats_acc_part(&a, &parts[k]);
	}
	for (int k = 1; k < 3; k++)
		stats_merge(&parts[0], &parts[k]);
	stats_finish(&parts[0], &merged);
	assert_int_equal(merged.elements, n);
	assert_int_equal(merged.finite, whole.finite);
	assert_int_equal(merged.nan, whole.nan);
	assert_int_equal(merged.neg_inf, whole.neg_inf);
	assert_int_equal(merged.zeros, whole.zeros);
	assert_int_equal(merged.subnormals, whole.subnormals);
	assert_true(merged.min == whole.min && merged.max == whole.max);
	assert_true(fabs(merged.mean - r.mean) <= 1e-14 * fabs(r.mean));
	assert_true(fabs(merged.std - r.std) <= 1e-12 * r.std);

	float nan_only[3] = { NAN, NAN, INFINITY };
	struct stats_part p = parts[0];
	stats_acc_init(&a);
	stats_acc_add(&a, nan_only, 3);
	stats_acc_part(&a, &parts[1]);
	stats_merge(&p, &parts[1]);
	assert_int_equal(p.s.finite, parts[0].s.finite);
	assert_true(p.s.mean == parts[0].s.mean && p.m2 == parts[0].m2);
	assert_int_equal(p.s.nan, parts[0].s.nan + 2);
	free(x);
}

/* No finite value: the figures over finite values are NaN, the counts still right. */
static void test_no_finite(void **state)
{
	(void)state;
	float x[40];
	for (int i = 0; i < 40; i++)
		x[i] = i % 2 ? NAN : -INFINITY;
	struct tensor_stats s;
	stats_of(x, 40, 40, &s);
	assert_int_equal(s.nan, 20);
	assert_int_equal(s.neg_inf, 20);
	assert_int_equal(s.finite, 0);
	assert_true(isnan(s.min) && isnan(s.max) && isnan(s.absmax));
	assert_true(isnan(s.mean) && isnan(s.std));
	stats_of(x, 0, 1, &s);
	assert_int_equal(s.elements, 0);
	assert_true(isnan(s.mean));
}

/* ---- block scales ---- */

static void test_bad_blocks(void **state)
{
	(void)state;
	uint8_t b[8 * 256];
	/* q4_K: d and dmin are checked; a subnormal or negative scale is not bad */
	memset(b, 0x11, sizeof b);
	const size_t q4 = sizeof(struct block_q4_K);
	for (int k = 0; k < 8; k++) {
		put16(b + k * q4 + offsetof(struct block_q4_K, d), 0x2000);
		put16(b + k * q4 + offsetof(struct block_q4_K, dmin), 0x2000);
	}
	put16(b + 1 * q4 + offsetof(struct block_q4_K, dmin), 0x0001);   /* subnormal */
	put16(b + 2 * q4 + offsetof(struct block_q4_K, d), 0xa000);      /* negative */
	/* two finite fields whose exponent bits together are all ones: neither is bad */
	put16(b + 4 * q4 + offsetof(struct block_q4_K, d), 0x4000);
	put16(b + 4 * q4 + offsetof(struct block_q4_K, dmin), 0x3c00);
	assert_int_equal(stats_bad_blocks(GGML_TYPE_Q4_K, b, 8), 0);
	put16(b + 3 * q4 + offsetof(struct block_q4_K, d), 0x7e00);      /* NaN */
	put16(b + 5 * q4 + offsetof(struct block_q4_K, dmin), 0xfc00);   /* -inf */
	put16(b + 7 * q4 + offsetof(struct block_q4_K, d), 0x7c00);      /* +inf, and */
	put16(b + 7 * q4 + offsetof(struct block_q4_K, dmin), 0x7c01);   /* NaN: one block */
	assert_int_equal(stats_bad_blocks(GGML_TYPE_Q4_K, b, 8), 3);

	/* q6_K's d is at its end */
	memset(b, 0, sizeof b);
	const size_t q6 = sizeof(struct block_q6_K);
	put16(b + 4 * q6 + offsetof(struct block_q6_K, d), 0xfe00);
	assert_int_equal(stats_bad_blocks(GGML_TYPE_Q6_K, b, 8), 1);

	/* mxfp4: E8M0 0xff is the one bad exponent */
	memset(b, 0xfe, sizeof b);
	assert_int_equal(stats_bad_blocks(GGML_TYPE_MXFP4, b, 8), 0);
	b[3 * sizeof(struct block_mxfp4)] = 0xff;
	assert_int_equal(stats_bad_blocks(GGML_TYPE_MXFP4, b, 8), 1);

	/* iq1_m: the fp16 made of the top nibbles of its four scale words */
	memset(b, 0, sizeof b);
	uint8_t *sc = b + 2 * sizeof(struct block_iq1_m) + offsetof(struct block_iq1_m, scales);
	put16(sc + 0, 0x0000);   /* nibbles 0, 0xc, 0x7, 0x0: 0x07c0 is not all exponent */
	put16(sc + 2, 0xc000);
	put16(sc + 4, 0x7000);
	assert_int_equal(stats_bad_blocks(GGML_TYPE_IQ1_M, b, 8), 0);
	put16(sc + 4, 0xc000);   /* bits 0x7c00: +inf */
	put16(sc + 6, 0x7000);
	assert_int_equal(stats_bad_blocks(GGML_TYPE_IQ1_M, b, 8), 1);

	/* nvfp4: every byte is a valid scale; float types have no blocks */
	memset(b, 0xff, sizeof b);
	assert_true(stats_type_has_scales(GGML_TYPE_NVFP4));
	assert_int_equal(stats_bad_blocks(GGML_TYPE_NVFP4, b, 8), 0);
	assert_false(stats_type_has_scales(GGML_TYPE_F32));
	assert_false(stats_type_has_scales(GGML_TYPE_BF16));
	assert_int_equal(stats_bad_blocks(GGML_TYPE_F16, b, 8), 0);
}

/* ---- the files ---- */

/* Every file's size is its rendered length, for the widest figures there are. */
static void test_widths(void **state)
{
	(void)state;
	struct gguf_tensor g = { .n_elements = 9223372036854775807u };
	struct tensor_stats s = {
		.elements = g.n_elements, .nan = g.n_elements, .pos_inf = g.n_elements,
		.neg_inf = g.n_elements, .zeros = g.n_elements, .subnormals = g.n_elements,
		.has_scales = true, .bad_blocks = g.n_elements,
		.min = -1.17549435e-38f, .max = -9999999800000000.0f, .absmax = -3.4028235e38f,
		.mean = -2.2250738585072014e-308, .std = -1.2345678901234567e-4,
	};
	char name[] = "a\tname\\with\nbytes";
	for (int k = 0; k < 2; k++) {
		struct sink c = sink_counter();
		render_stats(&c, &g, &s);
		assert_int_equal(c.pos, render_stats_size(&g));
		c = sink_counter();
		render_stats_tsv_line(&c, &g, name, &s);
		/* a stats.tsv line is exact: never past the size laid out for it */
		assert_true(c.pos <= render_stats_tsv_line_size(&g, name));
		if (k == 1)
			assert_true(c.pos < render_stats_tsv_line_size(&g, name));
		/* and the narrowest: padding makes up the difference */
		s = (struct tensor_stats){ .elements = 1 };
		g.n_elements = 1;
	}
}

/* ---- models ---- */

enum { N_PLANTED = 8 };

struct planted {
	const char *name;
	uint64_t nan, pos_inf, neg_inf, zeros, subnormals, bad_blocks;
	bool unhealthy;
};

/* What build_model(path, true) plants, tensor by tensor (zeros only where known). */
static const struct planted planted[N_PLANTED] = {
	{ "f32.nan", .nan = 3, .unhealthy = true },
	{ "f16.inf", .pos_inf = 2, .unhealthy = true },
	{ "bf16.inf", .pos_inf = 3, .unhealthy = true },
	{ "q4_K.nan_scale", .nan = 256, .bad_blocks = 1, .unhealthy = true },
	{ "q6_K.nan_scale", .nan = 256, .bad_blocks = 1, .unhealthy = true },
	{ "q8_0.nan_scale", .nan = 32, .bad_blocks = 1, .unhealthy = true },
	{ "f32.zero", .zeros = 512 },
	{ "f32.subnormal", .subnormals = 7 },
};

static uint16_t f16_bits(float f)
{
	/* normal values in the test's range only: exponent and 10 bits of mantissa */
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return (uint16_t)(((u >> 16) & 0x8000) | ((((u >> 23) & 0xff) - 112) << 10) |
	                  ((u >> 13) & 0x3ff));
}

/* Data of tensor k of the model: healthy values, with the faults when faults is set. */
static void tensor_data(int k, bool faults, struct gw *w, uint64_t *ne0, uint32_t *type)
{
	switch (k) {
	case 0: case 6: case 7: {   /* f32 */
		*ne0 = 512;
		*type = GGML_TYPE_F32;
		for (int i = 0; i < 512; i++) {
			float v = next_value(0.0f, 0.5f);
			if (v == 0.0f)
				v = 0.25f;
			if (faults && k == 0 && (i == 1 || i == 200 || i == 511))
				v = NAN;
			if (faults && k == 6)
				v = i % 3 ? 0.0f : -0.0f;
			if (faults && k == 7 && i % 70 == 0 && i < 490)
				v = float_of_bits(0x00000100u + (uint32_t)i);
			gw_f32(w, v);
		}
		return;
	}
	case 1: case 2:   /* f16, bf16 */
		*ne0 = 512;
		*type = k == 1 ? GGML_TYPE_F16 : GGML_TYPE_BF16;
		for (int i = 0; i < 512; i++) {
			float v = next_value(0.0f, 0.5f);
			uint32_t u;
			memcpy(&u, &v, sizeof u);
			uint16_t h = k == 1 ? f16_bits(v) : (uint16_t)(u >> 16);
			if (fabsf(v) < 0.001f)
				h = 0;
			if (faults && k == 1 && (i == 10 || i == 11))
				h = 0x7c00;
			if (faults && k == 2 && (i == 0 || i == 300 || i == 511))
				h = 0x7f80;
			gw_u16(w, h);
		}
		return;
	default:
		break;
	}
	/* q4_K, q6_K (4 blocks of 256), q8_0 (16 blocks of 32): random quants, the scale
	 * 2^-8, and in the faulty model one block's scale NaN */
	static const uint32_t types[] = { GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_0 };
	*type = types[k - 3];
	const struct ggml_type *ty = ggml_type_get(*type);
	uint32_t blocks = *type == GGML_TYPE_Q8_0 ? 16 : 4;
	*ne0 = (uint64_t)blocks * ty->block_elems;
	size_t at = *type == GGML_TYPE_Q4_K ? offsetof(struct block_q4_K, d)
	          : *type == GGML_TYPE_Q6_K ? offsetof(struct block_q6_K, d)
	                                    : offsetof(struct block_q8_0, d);
	uint8_t b[256];
	for (uint32_t j = 0; j < blocks; j++) {
		for (uint32_t i = 0; i < ty->block_bytes; i++)
			b[i] = (uint8_t)next_u64();
		put16(b + at, faults && j == 2 ? 0x7e00 : 0x1c00);
		if (*type == GGML_TYPE_Q4_K)
			put16(b + offsetof(struct block_q4_K, dmin), 0x1c00);
		gw_raw(w, b, ty->block_bytes);
	}
}

/* Writes the planted model (faults) or the clean one to path. */
static void build_model(const char *path, bool faults)
{
	struct gw w, data;
	gw_init(&w);
	gw_init(&data);
	gw_header(&w, 3, N_PLANTED, 1);
	gw_kv_str(&w, "general.architecture", "test");
	uint64_t off = 0;
	for (int k = 0; k < N_PLANTED; k++) {
		uint64_t ne0;
		uint32_t type;
		size_t before = data.len;
		tensor_data(k, faults, &data, &ne0, &type);
		uint64_t ne[1] = { ne0 };
		gw_tensor(&w, planted[k].name, 1, ne, type, off);
		gw_fill(&data, 0, (32 - (data.len - before) % 32) % 32);
		off = data.len;
	}
	gw_align(&w, 32);
	gw_raw(&w, data.buf, data.len);
	assert_true(gw_save(&w, path));
	gw_free(&w);
	gw_free(&data);
}

struct fixture {
	char path[64];
	struct ggufs_model *m;
	struct tree *t;
};

static struct fixture *open_built(bool faults)
{
	struct fixture *f = calloc(1, sizeof *f);
	strcpy(f->path, "/tmp/ggufs-stats-XXXXXX");
	int fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
	build_model(f->path, faults);
	char err[GGUF_ERR_MAX];
	f->m = model_open(f->path, err);
	if (!f->m)
		fail_msg("%s", err);
	f->t = tree_build(f->m, test_kit(), err);
	assert_non_null(f->t);
	return f;
}

static void close_built(struct fixture *f)
{
	tree_free(f->t);
	model_close(f->m);
	unlink(f->path);
	free(f);
}

/* The figures of one stats/NAME file, parsed back from its text. */
struct parsed {
	uint64_t elements, nan, pos_inf, neg_inf, zeros, subnormals, bad_blocks;
	bool has_bad_blocks;
	double min, max, mean, std, absmax;
};

static void parse(const char *text, struct parsed *p)
{
	memset(p, 0, sizeof *p);
	int lines = 0;
	for (const char *line = text; *line; lines++) {
		char key[32], value[64];
		assert_int_equal(sscanf(line, "%31s %63s", key, value), 2);
		const struct { const char *key; uint64_t *count; double *f; } map[] = {
			{ "elements", &p->elements, NULL }, { "nan", &p->nan, NULL },
			{ "pos_inf", &p->pos_inf, NULL }, { "neg_inf", &p->neg_inf, NULL },
			{ "zeros", &p->zeros, NULL }, { "subnormals", &p->subnormals, NULL },
			{ "bad_blocks", &p->bad_blocks, NULL }, { "min", NULL, &p->min },
			{ "max", NULL, &p->max }, { "mean", NULL, &p->mean }, { "std", NULL, &p->std },
			{ "absmax", NULL, &p->absmax },
		};
		bool known = false;
		for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
			if (strcmp(key, map[k].key) != 0)
				continue;
			known = true;
			if (map[k].f)
				*map[k].f = strtod(value, NULL);
			else if (strcmp(value, "-") != 0)
				*map[k].count = strtoull(value, NULL, 10);
			if (map[k].count == &p->bad_blocks)
				p->has_bad_blocks = strcmp(value, "-") != 0;
		}
		assert_true(known);
		line = strchr(line, '\n');
		assert_non_null(line);
		line++;
	}
	assert_int_equal(lines, 12);
}

static char *read_node(const struct tree *t, const struct tree_node *n)
{
	char *buf = malloc(n->size + 1);
	assert_int_equal(tree_read(t, n, buf, n->size + 10, 0, NULL), (int64_t)n->size);
	buf[n->size] = 0;
	return buf;
}

static void check_model(bool faults)
{
	struct fixture *f = open_built(faults);
	assert_int_equal(tree_dir_count(f->t, TREE_STATS_DIR_INO), N_PLANTED);
	for (int k = 0; k < N_PLANTED; k++) {
		const struct planted *want = &planted[k];
		const struct tree_node *n = tree_lookup(f->t, TREE_STATS_DIR_INO, want->name);
		assert_non_null(n);
		char *text = read_node(f->t, n);
		struct parsed p;
		parse(text, &p);
		assert_int_equal(p.nan, faults ? want->nan : 0);
		assert_int_equal(p.pos_inf, faults ? want->pos_inf : 0);
		assert_int_equal(p.neg_inf, 0);
		assert_int_equal(p.bad_blocks, faults ? want->bad_blocks : 0);
		assert_int_equal(p.has_bad_blocks, k >= 3 && k <= 5);
		if (k == 6 && faults)
			assert_int_equal(p.zeros, 512);
		assert_int_equal(p.subnormals, faults ? want->subnormals : 0);
		/* the file and --check's verdict agree */
		struct tensor_stats s;
		assert_int_equal(stats_tensor(f->m, n->index, &s, NULL), 0);
		assert_int_equal(stats_unhealthy(&s), faults && want->unhealthy);
		assert_int_equal(s.elements, p.elements);
		free(text);
	}
	close_built(f);
}

static void test_planted(void **state)
{
	(void)state;
	check_model(true);
}

static void test_clean(void **state)
{
	(void)state;
	check_model(false);
}

/* stats_segment_health against stats_segment: the same counts, and all_zero exactly
 * when every value is a zero, for every segment of every tensor of t. */
static void assert_health_agrees(const struct tree *t)
{
	const struct ggufs_model *m = tree_model(t);
	for (uint64_t i = 0; i < model_n_tensors(m); i++) {
		const struct gguf_tensor *g = model_tensor(m, i);
		if (!g->has_f32)
			continue;
		for (uint64_t seg = 0; seg < stats_segments(g); seg++) {
			struct stats_part p;
			struct stats_health h;
			assert_int_equal(stats_segment(m, i, seg, &p, NULL), 0);
			assert_int_equal(stats_segment_health(m, i, seg, &h, NULL), 0);
			assert_int_equal(h.elements, p.s.elements);
			assert_int_equal(h.nan, p.s.nan);
			assert_int_equal(h.pos_inf, p.s.pos_inf);
			assert_int_equal(h.neg_inf, p.s.neg_inf);
			assert_int_equal(h.subnormals, p.s.subnormals);
			assert_int_equal(h.bad_blocks, p.s.bad_blocks);
			assert_int_equal(h.all_zero, p.s.elements && p.s.zeros == p.s.elements);
		}
	}
}

static void test_health_planted(void **state)
{
	(void)state;
	for (int faults = 0; faults < 2; faults++) {
		struct fixture *f = open_built(faults);
		assert_health_agrees(f->t);
		close_built(f);
	}
}

/* Quantized tensors of two groups of STATS_BLOCK values where the health scan cannot
 * stop at its first value: all zero, zero up to a late non-zero value or a late NaN
 * scale. */
static const struct {
	const char *name;
	uint32_t type;
	int kind;     /* 0: all zero, 1: zero then random, 2: zero then a NaN scale */
} health_tensors[] = {
	{ "q4_K.zero", GGML_TYPE_Q4_K, 0 }, { "q4_K.late", GGML_TYPE_Q4_K, 1 },
	{ "q6_K.zero", GGML_TYPE_Q6_K, 0 }, { "q6_K.late", GGML_TYPE_Q6_K, 1 },
	{ "q8_0.zero", GGML_TYPE_Q8_0, 0 }, { "q8_0.nan", GGML_TYPE_Q8_0, 2 },
};

/* gw_flat_model's tensor k: health_tensors[k]. */
static void health_tensor(void *ctx, int k, const char **name, uint32_t *type, uint64_t *n,
                          struct gw *data)
{
	(void)ctx;
	const struct ggml_type *ty = ggml_type_get(health_tensors[k].type);
	const uint64_t blocks = 2 * STATS_BLOCK / ty->block_elems;
	const size_t d_at = health_tensors[k].type == GGML_TYPE_Q6_K ?
	                    offsetof(struct block_q6_K, d) : 0;
	*name = health_tensors[k].name;
	*type = health_tensors[k].type;
	*n = blocks * ty->block_elems;
	for (uint64_t b = 0; b < blocks; b++) {
		uint8_t blk[256] = { 0 };
		if (health_tensors[k].kind && b >= blocks - 3) {
			for (uint32_t i = 0; i < ty->block_bytes; i++)
				blk[i] = (uint8_t)next_u64();
			put16(blk + d_at, health_tensors[k].kind == 2 && b == blocks - 2 ? 0x7e00 : 0x1c00);
			if (health_tensors[k].type == GGML_TYPE_Q4_K)
				put16(blk + offsetof(struct block_q4_K, dmin), 0x1c00);
		}
		gw_raw(data, blk, ty->block_bytes);
	}
}

static void test_health_zeros(void **state)
{
	(void)state;
	enum { N = sizeof health_tensors / sizeof health_tensors[0] };
	struct gw w;
	gw_init(&w);
	gw_flat_model(&w, N, health_tensor, NULL);
	size_t len;
	uint8_t *img = gw_take(&w, &len);
	char path[] = "/tmp/ggufs-health-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img, len), (ssize_t)len);
	close(fd);
	free(img);
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		fail_msg("%s", err);
	struct tree *t = tree_build(m, test_kit(), err);
	assert_non_null(t);
	assert_health_agrees(t);
	/* and the kinds are what they say */
	for (int k = 0; k < N; k++) {
		struct stats_health h;
		assert_int_equal(stats_segment_health(m, (uint64_t)k, 0, &h, NULL), 0);
		assert_int_equal(h.all_zero, health_tensors[k].kind == 0);
		assert_int_equal(h.bad_blocks, health_tensors[k].kind == 2);
	}
	tree_free(t);
	model_close(m);
	unlink(path);
}

/* Lookups, sizes and listings compute nothing; a read computes its tensor once. */
static void test_lazy(void **state)
{
	(void)state;
	struct fixture *f = open_built(true);
	const struct tree *t = f->t;
	for (uint64_t i = 0; i < tree_dir_count(t, TREE_ROOT_INO); i++) {
		const struct tree_node *n = tree_dir_child(t, TREE_ROOT_INO, i);
		assert_ptr_equal(tree_lookup(t, TREE_ROOT_INO, n->name), n);
	}
	uint64_t total = 0;
	for (uint64_t i = 0; i < tree_dir_count(t, TREE_STATS_DIR_INO); i++) {
		const struct tree_node *n = tree_dir_child(t, TREE_STATS_DIR_INO, i);
		assert_ptr_equal(tree_lookup(t, TREE_STATS_DIR_INO, n->name), n);
		assert_ptr_equal(tree_node(t, n->ino), n);
		total += n->size;
	}
	assert_true(total > 0);
	assert_true(tree_node(t, TREE_STATS_TSV_INO)->size > 0);
	assert_int_equal(tree_stats_computed(t), 0);

	const struct tree_node *one = tree_lookup(t, TREE_STATS_DIR_INO, "q6_K.nan_scale");
	char *a = read_node(t, one);
	assert_int_equal(tree_stats_computed(t), 1);
	char *b = read_node(t, one);
	assert_string_equal(a, b);
	char part[8];
	assert_int_equal(tree_read(t, one, part, sizeof part, 20, NULL), (int64_t)sizeof part);
	assert_memory_equal(part, a + 20, sizeof part);
	assert_int_equal(tree_stats_computed(t), 1);

	/* the header of stats.tsv needs no tensor; a slice needs only its lines' */
	const struct tree_node *tsv = tree_node(t, TREE_STATS_TSV_INO);
	char head[7];
	assert_int_equal(tree_read(t, tsv, head, 6, 0, NULL), 6);
	head[6] = 0;
	assert_string_equal(head, "tensor");
	assert_int_equal(tree_stats_computed(t), 1);
	char *all = read_node(t, tsv);
	assert_int_equal(tree_stats_computed(t), N_PLANTED);
	/* each line holds the same figures as the tensor's file, and ends with its last
	 * figure; then only newlines up to the size */
	const char *line = strchr(all, '\n') + 1;
	for (int k = 0; k < N_PLANTED; k++) {
		assert_memory_equal(line, planted[k].name, strlen(planted[k].name));
		const char *end = strchr(line, '\n');
		assert_true(end[-1] != ' ' && end[-1] != '\t');
		line = end + 1;
	}
	const uint64_t size = tree_node(t, TREE_STATS_TSV_INO)->size;
	assert_true(line < all + size);   /* the figures are not all at their widest */
	assert_int_equal(strspn(line, "\n"), (size_t)(all + size - line));
	assert_int_equal(*(all + size), 0);
	/* a slice after the lines, and one across their end, read the same bytes */
	char tail[64];
	const uint64_t at = (uint64_t)(line - all) - 10;
	assert_int_equal(tree_read(t, tsv, tail, sizeof tail, at, NULL), (int64_t)sizeof tail);
	assert_memory_equal(tail, all + at, sizeof tail);
	assert_int_equal(tree_read(t, tsv, tail, 5, size - 5, NULL), 5);
	assert_memory_equal(tail, "\n\n\n\n\n", 5);
	free(all);
	free(a);
	free(b);
	close_built(f);
}

struct reader {
	const struct tree *t;
	const struct tree_node *n;
	char *text;
};

static void *read_thread(void *arg)
{
	struct reader *r = arg;
	r->text = malloc(r->n->size + 1);
	if (tree_read(r->t, r->n, r->text, r->n->size, 0, NULL) == (int64_t)r->n->size)
		r->text[r->n->size] = 0;
	else
		r->text[0] = 0;
	return NULL;
}

/* Readers of one file at once: one computation, one answer. */
static void test_once(void **state)
{
	(void)state;
	struct fixture *f = open_built(true);
	enum { READERS = 6 };
	struct reader r[READERS];
	pthread_t th[READERS];
	const struct tree_node *n = tree_lookup(f->t, TREE_STATS_DIR_INO, "q4_K.nan_scale");
	for (int k = 0; k < READERS; k++) {
		r[k] = (struct reader){ .t = f->t, .n = n };
		assert_int_equal(pthread_create(&th[k], NULL, read_thread, &r[k]), 0);
	}
	for (int k = 0; k < READERS; k++)
		assert_int_equal(pthread_join(th[k], NULL), 0);
	assert_int_equal(tree_stats_computed(f->t), 1);
	for (int k = 0; k < READERS; k++) {
		assert_true(strlen(r[k].text) == n->size);
		assert_string_equal(r[k].text, r[0].text);
	}
	for (int k = 0; k < READERS; k++)
		free(r[k].text);
	close_built(f);
}

/* A model cut short after the tree was built: the read fails with EIO, nothing is kept,
 * and the file is computed again once it is whole. */
static void test_shrunk(void **state)
{
	(void)state;
	struct fixture *f = open_built(true);
	const struct tree_node *n = tree_lookup(f->t, TREE_STATS_DIR_INO, "f32.subnormal");
	FILE *fp = fopen(f->path, "r+b");
	assert_non_null(fp);
	struct model_file_info fi;
	model_file(f->m, 0, &fi);
	size_t size = (size_t)fi.size;
	char *copy = malloc(size);
	assert_int_equal(fread(copy, 1, size, fp), size);
	assert_int_equal(ftruncate(fileno(fp), (off_t)(size - 1000)), 0);
	char buf[512];
	assert_int_equal(tree_read(f->t, n, buf, sizeof buf, 0, NULL), -EIO);
	assert_int_equal(tree_stats_computed(f->t), 0);
	assert_int_equal(fseek(fp, 0, SEEK_SET), 0);
	assert_int_equal(fwrite(copy, 1, size, fp), size);
	assert_int_equal(fflush(fp), 0);
	assert_int_equal(tree_read(f->t, n, buf, sizeof buf, 0, NULL), (int64_t)n->size);
	assert_int_equal(tree_stats_computed(f->t), 1);
	fclose(fp);
	free(copy);
	close_built(f);
}

UNIT_TESTS(cmocka_unit_test(test_exact),
           cmocka_unit_test(test_same_bits),
           cmocka_unit_test(test_merge),
           cmocka_unit_test(test_no_finite),
           cmocka_unit_test(test_bad_blocks),
           cmocka_unit_test(test_widths),
           cmocka_unit_test(test_planted),
           cmocka_unit_test(test_health_planted),
           cmocka_unit_test(test_health_zeros),
           cmocka_unit_test(test_clean),
           cmocka_unit_test(test_lazy),
           cmocka_unit_test(test_once),
           cmocka_unit_test(test_shrunk))
