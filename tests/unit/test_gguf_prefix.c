/* The parser on a prefix of a file of known size (a remote header): it gives exactly
 * what the whole image gives, or asks for more bytes, never anything else, and it
 * allocates nothing a claim alone could make large. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf.h"
#include "gguf_writer.h"

static uint8_t *tiny;
static size_t tiny_size;

static int load_tiny(void **state)
{
	(void)state;
	FILE *f = fopen(TEST_DATA "/tinyllama-q4km.gguf", "rb");
	if (!f)
		return -1;
	fseek(f, 0, SEEK_END);
	tiny_size = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	tiny = malloc(tiny_size);
	size_t got = fread(tiny, 1, tiny_size, f);
	fclose(f);
	return got == tiny_size ? 0 : -1;
}

static int free_tiny(void **state)
{
	(void)state;
	free(tiny);
	return 0;
}

/* Asserts that two parses describe the same header. */
static void assert_same_file(const struct gguf_file *a, const struct gguf_file *b,
                             const uint8_t *abase, const uint8_t *bbase)
{
	assert_int_equal(a->version, b->version);
	assert_int_equal(a->alignment, b->alignment);
	assert_int_equal(a->data_offset, b->data_offset);
	assert_int_equal(a->n_kv, b->n_kv);
	assert_int_equal(a->n_tensors, b->n_tensors);
	for (uint64_t i = 0; i < a->n_kv; i++) {
		assert_int_equal(a->kv[i].value.type, b->kv[i].value.type);
		assert_int_equal(a->kv[i].value.size, b->kv[i].value.size);
		assert_int_equal(a->kv[i].value.data - abase, b->kv[i].value.data - bbase);
	}
	for (uint64_t i = 0; i < a->n_tensors; i++) {
		assert_int_equal(a->tensors[i].offset, b->tensors[i].offset);
		assert_int_equal(a->tensors[i].size, b->tensors[i].size);
		assert_int_equal(a->tensors[i].type, b->tensors[i].type);
	}
}

/* Parses image as a mount does: from a first prefix of first bytes, grown to what the
 * parser asks for or x4, whichever is more. Returns the result and the requests made;
 * each prefix is a fresh copy, so nothing past it can be read unnoticed (ASan). */
static int grown_parse(const uint8_t *image, uint64_t size, uint64_t first,
                       struct gguf_file *f, char err[GGUF_ERR_MAX], unsigned *requests,
                       uint8_t **kept)
{
	uint64_t have = first < size ? first : size;
	*requests = 1;
	for (;;) {
		uint8_t *copy = malloc(have ? have : 1);
		memcpy(copy, image, have);
		uint64_t need = 0;
		int r = gguf_parse_prefix(copy, have, size, f, err, &need);
		if (r != 1) {
			*kept = copy;   /* the parse points into it */
			return r;
		}
		free(copy);
		assert_true(need > have);
		assert_true(need <= size);
		uint64_t next = have * 4 > need ? have * 4 : need;
		have = next < size ? next : size;
		(*requests)++;
	}
}

/* Every prefix of the header of the bundled model: either "more" with a need past what
 * is at hand and inside the file, or the whole image's result. */
static void test_every_prefix_of_tinyllama(void **state)
{
	(void)state;
	struct gguf_file whole, part;
	char err[GGUF_ERR_MAX];
	assert_int_equal(gguf_parse(tiny, tiny_size, &whole, err), 0);
	uint64_t header = whole.data_offset;
	unsigned more = 0, done = 0;
	for (uint64_t have = 0;; have += have < 64 ? 1 : 997) {
		if (have > header)   /* the last one: exactly the header, data_offset included */
			have = header;
		uint64_t need = 0;
		int r = gguf_parse_prefix(tiny, have, tiny_size, &part, err, &need);
		if (r == 1) {
			assert_true(need > have);
			assert_true(need <= header);
			more++;
			continue;
		}
		assert_int_equal(r, 0);
		assert_same_file(&whole, &part, tiny, tiny);
		gguf_file_free(&part);
		done++;
		if (have == header)
			break;
	}
	assert_true(more > 100);
	assert_true(done > 0);
	/* with the whole file at hand it is gguf_parse, and never asks */
	uint64_t need = 1;
	assert_int_equal(gguf_parse_prefix(tiny, tiny_size, tiny_size, &part, err, &need), 0);
	assert_int_equal(need, 0);
	gguf_file_free(&part);
	gguf_file_free(&whole);
}

/* Mutants of the header (a byte changed, or the file cut short): grown from a small
 * first prefix, each ends exactly as the whole image does, same message included. */
static void test_mutants_end_as_whole(void **state)
{
	(void)state;
	struct gguf_file whole;
	char err[GGUF_ERR_MAX], err_whole[GGUF_ERR_MAX];
	assert_int_equal(gguf_parse(tiny, tiny_size, &whole, err), 0);
	uint64_t header = whole.data_offset;
	gguf_file_free(&whole);
	uint8_t *m = malloc(tiny_size);
	uint64_t seed = 12345;
	unsigned failures = 0;
	for (int k = 0; k < 400; k++) {
		memcpy(m, tiny, tiny_size);
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t at = (seed >> 20) % header;
		uint64_t size = tiny_size;
		if (k % 4 == 3)
			size = at;   /* cut short */
		else
			m[at] ^= (uint8_t)(1u << (seed >> 60) % 8) | (k % 4 == 2 ? 0x80 : 0);
		int rw = gguf_parse(m, size, &whole, err_whole);
		struct gguf_file part;
		unsigned requests;
		uint8_t *kept;
		int rp = grown_parse(m, size, 4096, &part, err, &requests, &kept);
		assert_int_equal(rp, rw);
		if (rw == 0) {
			assert_same_file(&whole, &part, m, kept);
			gguf_file_free(&whole);
			gguf_file_free(&part);
		} else {
			assert_string_equal(err, err_whole);
			failures++;
		}
		free(kept);
	}
	assert_true(failures > 50);
	free(m);
}

/* The bundled model's header fits the first request of a mount (1 MiB): one request. */
static void test_tinyllama_one_request(void **state)
{
	(void)state;
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	unsigned requests;
	uint8_t *kept;
	assert_int_equal(grown_parse(tiny, tiny_size, 1 << 20, &f, err, &requests, &kept), 0);
	assert_int_equal(requests, 1);
	gguf_file_free(&f);
	free(kept);
}

/* A claim of a billion keys in a file of a terabyte: the parser asks for the bytes the
 * keys take at the least before it allocates anything for them. */
static void test_claims_ask_before_allocating(void **state)
{
	(void)state;
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 1000000000ull);
	gw_kv_u32(&w, "a", 1);
	size_t len;
	uint8_t *img = gw_take(&w, &len);
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	uint64_t need = 0;
	assert_int_equal(gguf_parse_prefix(img, len, 1ull << 40, &f, err, &need), 1);
	assert_int_equal(need, GW_HEADER_BYTES + 13ull * 1000000000ull);
	assert_null(f.kv);
	/* the same claim in a file too small for it fails as a whole image would */
	assert_int_equal(gguf_parse_prefix(img, len, len, &f, err, &need), -1);
	assert_non_null(strstr(err, "metadata keys, more than the file"));
	free(img);
}

/* A string array asks for all of its minimum at once, not string by string: a large
 * vocabulary costs one more request, not thousands. */
static void test_string_array_asks_at_once(void **state)
{
	(void)state;
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 0, 1);
	gw_key(&w, "tokens", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_STRING, 100000);
	size_t at = w.len;
	for (int i = 0; i < 100000; i++)
		gw_str(&w, "tok");
	size_t len;
	uint8_t *img = gw_take(&w, &len);
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	uint64_t need = 0;
	assert_int_equal(gguf_parse_prefix(img, at + 100, len, &f, err, &need), 1);
	assert_int_equal(need, at + 8 * 100000ull);
	assert_int_equal(gguf_parse_prefix(img, len, len, &f, err, &need), 0);
	gguf_file_free(&f);
	free(img);
}

UNIT_TESTS_IN_GROUP(load_tiny, free_tiny,
	cmocka_unit_test(test_every_prefix_of_tinyllama),
	cmocka_unit_test(test_mutants_end_as_whole),
	cmocka_unit_test(test_tinyllama_one_request),
	cmocka_unit_test(test_claims_ask_before_allocating),
	cmocka_unit_test(test_string_array_asks_at_once))
