/* A .safetensors file's header as ggufs reads it (lib/3-safetensors/st_header.h): a good
 * header's tensors (sorted by name, their byte ranges, a scalar, an empty tensor,
 * __metadata__ skipped), and every refusal of a hostile one in one line naming the file:
 * truncated, too long, not JSON, a lying shape or dtype, offsets past the file or
 * overlapping, a name twice or with a NUL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "st_header.h"

/* A file image: the 8-byte length of json, json, then data_bytes bytes of data. */
struct image {
	uint8_t *p;
	uint64_t size;
};

static struct image image_of(const char *json, uint64_t data_bytes)
{
	const uint64_t n = strlen(json);
	struct image im = { calloc(1, 8 + n + data_bytes + 1), 8 + n + data_bytes };
	assert_non_null(im.p);
	for (int i = 0; i < 8; i++)
		im.p[i] = (uint8_t)(n >> (8 * i));
	memcpy(im.p + 8, json, n);
	return im;
}

/* Parses im as a file of file_size bytes: 0 with *h, or -1 with err. */
static int parse(const struct image *im, uint64_t file_size, struct st_header *h,
                 char err[GGUF_ERR_MAX])
{
	uint64_t need;
	err[0] = '\0';
	if (!st_header_size(im->p, file_size, "m.safetensors", &need, err))
		return -1;
	assert_true(need <= file_size);
	return st_header_parse(im->p, need, file_size, "m.safetensors", h, err);
}

/* json with data_bytes of data is refused with a line naming the file and holding why. */
static void refused(const char *json, uint64_t data_bytes, const char *why)
{
	struct image im = image_of(json, data_bytes);
	struct st_header h;
	char err[GGUF_ERR_MAX];
	if (parse(&im, im.size, &h, err) == 0)
		fail_msg("accepted: %s", json);
	if (strncmp(err, "m.safetensors: ", 15) != 0 || !strstr(err, why) || strchr(err, '\n'))
		fail_msg("'%s' for %s, wanted '%s'", err, json, why);
	free(im.p);
}

static void test_good(void **state)
{
	(void)state;
	struct image im = image_of(
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"b.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
		"\"a.weight\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
		"\"c\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[32,40]},"
		"\"A\":{\"dtype\":\"F16\",\"shape\":[0,7],\"data_offsets\":[40,40]},"
		"\"\xc3\xa9\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[40,42]}}   ", 42);
	struct st_header h;
	char err[GGUF_ERR_MAX];
	assert_int_equal(parse(&im, im.size, &h, err), 0);
	assert_int_equal(h.n, 5);
	assert_int_equal(h.data_offset, im.size - 42);
	/* by name, byte by byte: uppercase before lowercase, UTF-8 last */
	assert_string_equal(h.t[0].name, "A");
	assert_string_equal(h.t[1].name, "a.weight");
	assert_string_equal(h.t[2].name, "b.weight");
	assert_string_equal(h.t[3].name, "c");
	assert_string_equal(h.t[4].name, "\xc3\xa9");
	assert_int_equal(h.t[0].n_elements, 0);
	assert_int_equal(h.t[0].size, 0);
	const struct st_tensor *b = st_header_find(&h, "b.weight");
	assert_ptr_equal(b, &h.t[2]);
	assert_int_equal(b->dtype, ST_F32);
	assert_int_equal(b->n_dims, 2);
	assert_int_equal(b->shape[0], 2);
	assert_int_equal(b->shape[1], 3);
	assert_int_equal(b->n_elements, 6);
	assert_int_equal(b->offset, h.data_offset + 8);
	assert_int_equal(b->size, 24);
	const struct st_tensor *c = st_header_find(&h, "c");
	assert_int_equal(c->n_dims, 0);      /* a scalar: one element */
	assert_int_equal(c->n_elements, 1);
	assert_int_equal(c->size, 8);
	assert_int_equal(st_dtype_size(h.t[1].dtype), 2);
	assert_string_equal(st_dtype_name(h.t[1].dtype), "BF16");
	assert_null(st_header_find(&h, "__metadata__"));
	assert_null(st_header_find(&h, "d"));
	assert_null(st_header_find(&h, ""));
	st_header_free(&h);
	assert_int_equal(h.n, 0);
	free(im.p);
}

static void test_empty_header(void **state)
{
	(void)state;
	struct image im = image_of("{}", 0);
	struct st_header h;
	char err[GGUF_ERR_MAX];
	assert_int_equal(parse(&im, im.size, &h, err), 0);
	assert_int_equal(h.n, 0);
	assert_null(st_header_find(&h, "x"));
	st_header_free(&h);
	free(im.p);
}

static void test_truncated(void **state)
{
	(void)state;
	const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	struct image im = image_of(json, 4);
	struct st_header h;
	char err[GGUF_ERR_MAX];
	/* shorter than its length, than the length's own 8 bytes, empty */
	for (uint64_t size = 0; size < 8 + strlen(json); size++) {
		assert_int_equal(parse(&im, size, &h, err), -1);
		assert_true(strstr(err, size < 8 ? "too short" : "but the file holds"));
	}
	/* the header whole but the data cut: the tensor ends past the file */
	for (uint64_t size = 8 + strlen(json); size < im.size; size++) {
		assert_int_equal(parse(&im, size, &h, err), -1);
		assert_non_null(strstr(err, "past the end of the file"));
	}
	assert_int_equal(parse(&im, im.size, &h, err), 0);
	st_header_free(&h);
	free(im.p);
}

static void test_lying_length(void **state)
{
	(void)state;
	uint8_t p[16] = { 0 };
	uint64_t need;
	char err[GGUF_ERR_MAX];
	memset(p, 0xff, 8);        /* 2^64 - 1: no file holds it, and it must not wrap */
	assert_false(st_header_size(p, sizeof p, "m.safetensors", &need, err));
	assert_non_null(strstr(err, "more than the 16 MiB"));
	memset(p, 0, 8);
	p[3] = 1;                  /* 16 MiB, the bound: read; one more byte is not */
	assert_true(st_header_size(p, (uint64_t)1 << 40, "m.safetensors", &need, err));
	assert_int_equal(need, ((uint64_t)1 << 24) + 8);
	assert_true(st_header_size(p, ((uint64_t)1 << 24) + 8, "m.safetensors", &need, err));
	assert_int_equal(need, ((uint64_t)1 << 24) + 8);
	p[0] = 1;
	assert_false(st_header_size(p, (uint64_t)1 << 40, "m.safetensors", &need, err));
	p[0] = 9;
	p[3] = 0;
	assert_false(st_header_size(p, 16, "m.safetensors", &need, err));
	assert_non_null(strstr(err, "says it is 9 bytes long, but the file holds 8"));
}

static void test_not_json(void **state)
{
	(void)state;
	refused("", 0, "the header is not JSON");
	refused("{\"a\":", 0, "the header is not JSON");
	refused("{} {}", 0, "the header is not JSON");
	refused("[]", 0, "no JSON object");
	refused("\"a\"", 0, "not JSON");
	refused("{\"a\":[1,2]}", 0, "described by no object");
	refused("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "lacks a dtype");
	refused("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "lacks a dtype");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "lacks a dtype");
	refused("{\"a\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "lacks a dtype");
	/* invalid UTF-8 in a name; a nesting deep enough to exhaust a naive parser's stack */
	refused("{\"\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	        "not JSON");
	char deep[20002];
	memset(deep, '[', 20000);
	deep[20000] = '\0';
	refused(deep, 0, "not JSON");
}

static void test_dtype(void **state)
{
	(void)state;
	refused("{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
	        "dtype 'I64', which ggufs does not convert");
	refused("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
	        "does not convert");
	refused("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	        "dtype 'f32', not a safetensors dtype");
	refused("{\"a\":{\"dtype\":\"\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	        "not a safetensors dtype");
}

static void test_shape(void **state)
{
	(void)state;
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
	        "5 dimensions, more than GGUF's 4");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
	        "not a count");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
	        "not a count");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4,
	        "not a count");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
	        "\"data_offsets\":[0,4]}}", 4, "more elements than 2^64");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
	        "\"data_offsets\":[0,0]}}", 0, "needs more than 2^64 bytes");
	/* the shape's bytes are not the offsets' span: fewer, more */
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8,
	        "needs 8 bytes, but its data_offsets span 4");
	refused("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
	        "needs 4 bytes, but its data_offsets span 8");
	/* too big for jansson's integers */
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
	        "\"data_offsets\":[0,4]}}", 4, "not JSON");
}

static void test_offsets(void **state)
{
	(void)state;
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
	        "not [begin, end]");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
	        "not [begin, end]");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
	        "not [begin, end]");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
	        "not [begin, end]");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"0\":4}}}", 4,
	        "lacks a dtype");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4,
	        "ends at byte 8 of the data, past the end of the file (4 bytes of data)");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],"
	        "\"data_offsets\":[9223372036854775807,9223372036854775807]}}", 4,
	        "past the end of the file");
	/* overlapping: partly, one inside another, the same range twice */
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
	        "the bytes of tensors 'a' and 'b' overlap");
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
	        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 16, "overlap");
	refused("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "overlap");
	/* touching ranges, gaps and an empty tensor inside another are fine */
	struct image im = image_of(
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		"\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
		"\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
		"\"d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[2,2]}}", 16);
	struct st_header h;
	char err[GGUF_ERR_MAX];
	assert_int_equal(parse(&im, im.size, &h, err), 0);
	assert_int_equal(h.n, 4);
	st_header_free(&h);
	free(im.p);
}

static void test_names(void **state)
{
	(void)state;
	/* a name twice: Python's json keeps the last; ggufs refuses to guess */
	refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
	        "duplicate object key");
	/* a NUL in a name would cut it short */
	refused("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
	        "not JSON");
}

UNIT_TESTS(
	cmocka_unit_test(test_good),
	cmocka_unit_test(test_empty_header),
	cmocka_unit_test(test_truncated),
	cmocka_unit_test(test_lying_length),
	cmocka_unit_test(test_not_json),
	cmocka_unit_test(test_dtype),
	cmocka_unit_test(test_shape),
	cmocka_unit_test(test_offsets),
	cmocka_unit_test(test_names),
)
