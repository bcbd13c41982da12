/* The parser against the real model corrupted at random and cut short everywhere in its
 * header. Whatever happens, gguf_parse either fails with one non-empty line or describes
 * a file whose every tensor lies inside it; it never reads outside the image (under ASan
 * the bytes past a truncation point are poisoned, so a read there is caught). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf.h"
#include "test_data.h"

#ifndef TEST_DATA
#error "TEST_DATA must name tests/data"
#endif
#define MODEL TEST_DATA "/tinyllama-q4km.gguf"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define N_CORRUPTIONS 2000
#define SEED 0x9e3779b97f4a7c15ull

struct model {
	uint8_t *img;          /* exactly size bytes, so ASan sees any read past the end */
	size_t size;
	uint64_t data_offset;  /* end of the header, as parsed from the intact file */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int setup(void **state)
{
	struct model *m = calloc(1, sizeof *m);
	FILE *f = fopen(MODEL, "rb");
	if (!m || !f)
		return -1;
	fseek(f, 0, SEEK_END);
	m->size = (size_t)ftell(f);
	rewind(f);
	m->img = malloc(m->size);
	if (!m->img || fread(m->img, 1, m->size, f) != m->size) {
		fclose(f);
		return -1;
	}
	fclose(f);
	struct gguf_file gf;
	char err[GGUF_ERR_MAX];
	if (gguf_parse(m->img, m->size, &gf, err) != 0) {
		fprintf(stderr, "%s: %s\n", MODEL, err);
		return -1;
	}
	m->data_offset = gf.data_offset;
	gguf_file_free(&gf);
	*state = m;
	return 0;
}

static int teardown(void **state)
{
	struct model *m = *state;
	free(m->img);
	free(m);
	return 0;
}

static bool touch_scalar(void *ctx, uint32_t type, const uint8_t *b)
{
	*(uint64_t *)ctx += b[0] + b[gguf_vtype_size(type) - 1];
	return true;
}

static bool touch_string(void *ctx, const char *s, uint64_t len)
{
	if (len)
		*(uint64_t *)ctx += (unsigned char)s[0] + (unsigned char)s[len - 1];
	return true;
}

/* Parses [img, img + size) and checks the outcome: a one-line error, or a description
 * that stays inside the image (every value walked, every tensor in bounds). Returns the
 * parse result. */
static int parse_and_check(const uint8_t *img, uint64_t size, const char *what)
{
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	memset(err, 'x', sizeof err);
	if (gguf_parse(img, size, &f, err) != 0) {
		size_t n = strnlen(err, sizeof err);
		if (n == 0 || n == sizeof err || strchr(err, '\n'))
			fail_msg("%s: bad error message '%.*s'", what, (int)n, err);
		return -1;
	}
	uint64_t sum = 0;
	struct gguf_walk w = { .scalar = touch_scalar, .string = touch_string, .ctx = &sum };
	for (uint64_t i = 0; i < f.n_kv; i++)
		assert_true(gguf_value_walk(&f.kv[i].value, &w));
	assert_true(f.data_offset <= size);
	assert_true(f.alignment && (f.alignment & (f.alignment - 1)) == 0);
	for (uint64_t i = 0; i < f.n_tensors; i++) {
		const struct gguf_tensor *t = &f.tensors[i];
		if (t->offset < f.data_offset || t->offset > size || t->size > size - t->offset)
			fail_msg("%s: tensor %llu at %llu+%llu is outside the file (%llu bytes)", what,
			         (unsigned long long)i, (unsigned long long)t->offset,
			         (unsigned long long)t->size, (unsigned long long)size);
		assert_int_equal((t->offset - f.data_offset) % f.alignment, 0);
		if (t->size)
			sum += img[t->offset] + img[t->offset + t->size - 1];
	}
	gguf_file_free(&f);
	return 0;
}

/* A byte position in the header: uniform, or in the first 2 KB (counts, the first keys)
 * or the last 4 KB (the tensor infos), where every byte is structure. */
static size_t pick_pos(uint64_t *rng, uint64_t header)
{
	uint64_t r = xorshift64(rng);
	switch (r % 3) {
	case 0: return (size_t)((r >> 8) % header);
	case 1: return (size_t)((r >> 8) % (header < 2048 ? header : 2048));
	default: return (size_t)(header - 1 - (r >> 8) % (header < 4096 ? header : 4096));
	}
}

static void test_random_corruption(void **state)
{
	struct model *m = *state;
	static const uint64_t interesting[] = {
		0, 1, 2, 3, 4, 5, 8, 13, 31, 32, 33, 63, 64, 255, 256, 4096, 65535, 1u << 31,
		UINT32_MAX, 1ull << 32, 1ull << 40, 1ull << 60, 1ull << 62, INT64_MAX, 1ull << 63,
		UINT64_MAX - 31, UINT64_MAX,
	};
	const size_t n_interesting = sizeof interesting / sizeof interesting[0];
	uint64_t rng = SEED;
	uint64_t header = m->data_offset;
	int ok = 0, failed = 0;
	double t0 = now();

	for (int iter = 0; iter < N_CORRUPTIONS; iter++) {
		/* remember what is overwritten, to put it back */
		size_t pos[16];
		uint8_t old[16][8];
		size_t len[16];
		int n_edits = 1 + (int)(xorshift64(&rng) % 4 == 0 ? xorshift64(&rng) % 16 : 0);
		for (int e = 0; e < n_edits; e++) {
			uint64_t kind = xorshift64(&rng) % 4;
			pos[e] = pick_pos(&rng, header);
			len[e] = kind >= 2 ? 8 : 1;
			if (pos[e] + len[e] > header)
				len[e] = header - pos[e];
			memcpy(old[e], m->img + pos[e], len[e]);
			uint64_t r = xorshift64(&rng);
			switch (kind) {
			case 0:   /* one random byte */
				m->img[pos[e]] = (uint8_t)r;
				break;
			case 1:   /* one bit flipped */
				m->img[pos[e]] ^= (uint8_t)(1u << (r % 8));
				break;
			default: { /* a value that breaks counts, lengths, types or offsets */
				uint64_t v = interesting[r % n_interesting];
				if (kind == 3)
					v = (v + (r >> 32) % 3 - 1);
				for (size_t b = 0; b < len[e]; b++)
					m->img[pos[e] + b] = (uint8_t)(v >> (8 * b));
			}
			}
		}
		char what[64];
		snprintf(what, sizeof what, "corruption %d", iter);
		if (parse_and_check(m->img, m->size, what) == 0)
			ok++;
		else
			failed++;
		for (int e = n_edits - 1; e >= 0; e--)
			memcpy(m->img + pos[e], old[e], len[e]);
	}
	print_message("%d corruptions: %d parsed, %d refused, %.2f s\n", N_CORRUPTIONS, ok,
	              failed, now() - t0);
	/* both outcomes must occur, or the corruptions are not exercising anything */
	assert_true(ok > 0);
	assert_true(failed > N_CORRUPTIONS / 10);
	/* and the file is intact again */
	assert_int_equal(parse_and_check(m->img, m->size, "restored"), 0);
}

static void test_truncation(void **state)
{
	struct model *m = *state;
	uint64_t header = m->data_offset;
	/* Every offset is a quadratic amount of parsing (~176,000 parses of up to the whole
	 * header): every offset of the first 4 KB and of the last 8 KB (the tensor infos),
	 * every 97th in between. GGUFS_FULL_TRUNCATION=1 does every one. */
	bool full = getenv("GGUFS_FULL_TRUNCATION") != NULL;
	size_t n = 0;
	double t0 = now();
	for (uint64_t cut = 0; cut <= header; cut++) {
		if (!full && cut > 4096 && cut + 8192 < header && cut % 97)
			continue;
		POISON(m->img + cut, m->size - cut);
		struct gguf_file f;
		char err[GGUF_ERR_MAX];
		memset(err, 'x', sizeof err);
		int rc = gguf_parse(m->img, cut, &f, err);
		UNPOISON(m->img + cut, m->size - cut);
		if (rc == 0)
			fail_msg("the first %llu bytes parsed", (unsigned long long)cut);
		size_t len = strnlen(err, sizeof err);
		if (len == 0 || len == sizeof err || strchr(err, '\n'))
			fail_msg("cut at %llu: bad error message", (unsigned long long)cut);
		n++;
	}
	print_message("%zu truncation points of %llu, %.2f s%s\n", n,
	              (unsigned long long)header + 1, now() - t0,
#ifdef HAVE_ASAN
	              " (ASan, tails poisoned)"
#else
	              ""
#endif
	);
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_random_corruption),
	cmocka_unit_test(test_truncation))
