/* File names from tensor names and metadata keys: ggufs(1)'s five rules, the 200-byte cut,
 * and that distinct names stay distinct. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "hash.h"
#include "names.h"

static void expect_name(const char *name, size_t len, bool tensor, const char *want)
{
	char out[NAMES_BUF];
	memset(out, 0x55, sizeof out);
	size_t n = names_encode(name, len, tensor, out);
	if (strcmp(out, want) != 0)
		print_error("name \"%.*s\": got \"%s\", want \"%s\"\n", (int)len, name, out, want);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
}
#define NAME(lit, tensor, want) expect_name((lit), sizeof(lit) - 1, (tensor), (want))

static void test_fnv(void **state)
{
	(void)state;
	/* the published FNV-1a 64 test vectors */
	assert_true(hash_fnv1a("", 0, HASH_FNV1A_BASIS) == 0xcbf29ce484222325u);
	assert_true(hash_fnv1a("a", 1, HASH_FNV1A_BASIS) == 0xaf63dc4c8601ec8cu);
	assert_true(hash_fnv1a("foobar", 6, HASH_FNV1A_BASIS) == 0x85944171f73967e8u);
}

static void test_plain(void **state)
{
	(void)state;
	NAME("blk.0.attn_q.weight", true, "blk.0.attn_q.weight");
	NAME("general.architecture", false, "general.architecture");
	NAME("caf\xc3\xa9 \xe2\x82\xac~!", false, "caf\xc3\xa9 \xe2\x82\xac~!");
}

static void test_rule1_escapes(void **state)
{
	(void)state;
	NAME("a/b", false, "a%2Fb");
	NAME("100%", false, "100%25");
	NAME("a\0b", false, "a%00b");
	NAME("/%\0", true, "%2F%25%00");
	NAME("%2F", false, "%252F");
	/* other bytes, including invalid UTF-8 and control bytes, are left alone */
	NAME("x\xff\x01y", false, "x\xff\x01y");
}

static void test_rule2_suffix(void **state)
{
	(void)state;
	NAME("x.f32", true, "x%2Ef32");
	NAME("x.npy", true, "x%2Enpy");
	NAME("x.f32.f32", true, "x.f32%2Ef32");   /* only the last dot */
	NAME(".npy", true, "%2Enpy");
	NAME("x.F32", true, "x.F32");
	NAME("xf32", true, "xf32");
	NAME("x.f16", true, "x.f16");
	NAME("x.f32 ", true, "x.f32 ");
	/* metadata keys get no .f32/.npy files beside them */
	NAME("x.f32", false, "x.f32");
	/* nothing but the root's model.gguf ends in .gguf, keys and tensors alike */
	NAME("model.gguf", true, "model%2Egguf");
	NAME("general.gguf", false, "general%2Egguf");
	NAME(".gguf", false, "%2Egguf");
	NAME("x.gguf.f32", true, "x.gguf%2Ef32");
	NAME("x.gguf ", true, "x.gguf ");
}

/* Rule 5: a key's file name never looks like an editor's scratch file (a leading '.',
 * a trailing '~', "#...#", vim's probe 4913 + 123 k); tensors keep theirs. */
static void test_rule5_scratch(void **state)
{
	(void)state;
	NAME(".hidden", false, "%2Ehidden");
	NAME("key~", false, "key%7E");
	NAME("~", false, "%7E");
	NAME(".both~", false, "%2Eboth%7E");
	NAME("#auto#", false, "%23auto#");
	NAME("#", false, "#");
	NAME("#x", false, "#x");
	NAME("4913", false, "%34913");
	NAME("5036", false, "%35036");
	NAME("4914", false, "4914");
	NAME("04913", false, "04913");
	NAME("a~b", false, "a~b");
	NAME(".hidden", true, ".hidden");
	NAME("key~", true, "key~");
}

static void test_rule3_dots_empty(void **state)
{
	(void)state;
	NAME(".", false, "%2E");
	NAME("..", true, "%2E%2E");
	NAME("...", true, "...");
	NAME(".a", true, ".a");
	NAME("...", false, "%2E..");   /* rule 5: a key's leading '.' */
	NAME(".a", false, "%2Ea");
	NAME("", false, "%");
	NAME("", true, "%");
	NAME("%", false, "%25");
}

/* name = prefix_len copies of 'a' followed by tail; checks the encoding is the first
 * keep bytes of the escaped form then "~" and the hash of the whole original name. */
static void expect_cut(size_t prefix_len, const char *tail, size_t tail_len, bool tensor,
                       const char *kept_tail)
{
	char name[512];
	memset(name, 'a', prefix_len);
	memcpy(name + prefix_len, tail, tail_len);
	size_t len = prefix_len + tail_len;
	char want[NAMES_BUF + 8];
	memset(want, 'a', prefix_len);
	size_t w = prefix_len;
	w += (size_t)sprintf(want + w, "%s", kept_tail);
	assert_true(w <= NAMES_CUT);
	sprintf(want + w, "~%016llx", (unsigned long long)hash_fnv1a(name, len, HASH_FNV1A_BASIS));
	expect_name(name, len, tensor, want);
}

static void test_rule4_cut(void **state)
{
	(void)state;
	char name[300];
	memset(name, 'a', sizeof name);
	/* exactly 200 bytes: kept whole */
	/* a 3-byte character ending exactly at 200: kept whole */
	char n197[201], w197[201];
	memset(n197, 'a', 197);
	memcpy(n197 + 197, "\xe2\x82\xac", 3);
	memcpy(w197, n197, 200);
	w197[200] = '\0';
	expect_name(n197, 200, false, w197);
	char want200[201];
	memset(want200, 'a', 200);
	want200[200] = '\0';
	expect_name(name, 200, false, want200);
	/* 201 bytes: cut at 200 */
	expect_cut(200, "a", 1, false, "");
	/* 200 bytes that escaping makes 202: cut before the escape, not inside it */
	expect_cut(199, "/", 1, false, "");
	expect_cut(198, "%", 1, false, "");
	expect_cut(197, "%x", 2, false, "%25");       /* the escape ends exactly at 200 */
	expect_cut(196, "/\0", 2, false, "%2F");
	/* UTF-8 characters are not split: 2, 3 and 4 bytes straddling byte 200 */
	expect_cut(199, "\xc3\xa9", 2, false, "");
	expect_cut(198, "\xc3\xa9\xc3\xa9", 4, false, "\xc3\xa9");
	expect_cut(198, "\xe2\x82\xac", 3, false, "");
	expect_cut(197, "\xe2\x82\xac" "b", 4, false, "\xe2\x82\xac");
	expect_cut(197, "\xf0\x9f\x98\x80", 4, false, "");
	expect_cut(199, "\xf0\x9f\x98\x80", 4, false, "");
	/* bytes that are not UTF-8 are cut anywhere: they stand alone */
	expect_cut(199, "\xff\xff", 2, false, "\xff");
	expect_cut(199, "\xe2\x82x", 3, false, "\xe2");
	/* a tensor's .f32 dot escape past the cut is dropped with the rest */
	expect_cut(200, ".f32", 4, true, "");
}

static void test_cut_with_suffix_dot(void **state)
{
	(void)state;
	/* 196 + ".f32" is 200 bytes, but rule 2 makes it 202: "%2E" ends at byte 199, so
	 * "f" still fits and "32" does not */
	char name[210];
	memset(name, 'a', 196);
	memcpy(name + 196, ".f32", 4);
	char want[NAMES_BUF];
	memset(want, 'a', 196);
	sprintf(want + 196, "%%2Ef~%016llx", (unsigned long long)hash_fnv1a(name, 200, HASH_FNV1A_BASIS));
	expect_name(name, 200, true, want);
}

static void test_distinct(void **state)
{
	(void)state;
	static struct {
		char s[260];
		size_t len;
	} names[64];
	size_t n = 0;
	static const char *const lits[] = {
		"", "%", ".", "..", "...", "%2E", "%2E%2E", "%252E", "a/b", "a%2Fb", "a%252Fb",
		"x", "x.f32", "x%2Ef32", "x.npy", "x%2Enpy", "x.f32.f32", "~", "a~0",
		"blk.0.attn_q.weight", "blk.0.attn_q.weight.f32", "x.gguf", "x%2Egguf", "model.gguf",
	};
	for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
		names[n].len = strlen(lits[i]);
		memcpy(names[n].s, lits[i], names[n].len);
		n++;
	}
	memcpy(names[n].s, "a\0b", 3), names[n++].len = 3;
	memcpy(names[n].s, "a%00b", 5), names[n++].len = 5;
	memcpy(names[n].s, "\0", 1), names[n++].len = 1;
	/* long names: same first 200 bytes, different after; cut next to an escape */
	for (int k = 0; k < 6; k++) {
		memset(names[n].s, 'q', 250);
		names[n].s[230] = (char)('0' + k);
		names[n].len = k < 5 ? 250 : 240;
		n++;
	}
	memset(names[n].s, 'q', 199), memcpy(names[n].s + 199, "/", 1), names[n++].len = 200;
	memset(names[n].s, 'q', 199), memcpy(names[n].s + 199, "%", 1), names[n++].len = 200;
	memset(names[n].s, 'q', 200), names[n++].len = 200;
	memset(names[n].s, 'q', 201), names[n++].len = 201;

	for (int tensor = 0; tensor < 2; tensor++) {
		char enc[64][NAMES_BUF];
		for (size_t i = 0; i < n; i++) {
			size_t len = names_encode(names[i].s, names[i].len, tensor, enc[i]);
			assert_true(len >= 1 && len <= NAMES_BUF - 1);
			assert_int_equal(strlen(enc[i]), len);   /* no NUL inside */
			assert_null(strchr(enc[i], '/'));
			assert_true(strcmp(enc[i], ".") != 0 && strcmp(enc[i], "..") != 0);
			/* the root's model.gguf is the only name that ends so */
			assert_false(len >= 5 && strcmp(enc[i] + len - 5, ".gguf") == 0);
			if (tensor) {
				/* room for the .f32/.npy siblings within NAME_MAX */
				assert_true(len + 4 <= 255);
				assert_false(len >= 4 && (strcmp(enc[i] + len - 4, ".f32") == 0 ||
				                          strcmp(enc[i] + len - 4, ".npy") == 0));
			}
		}
		for (size_t i = 0; i < n; i++) {
			for (size_t j = 0; j < n; j++) {
				if (i == j)
					continue;
				if (strcmp(enc[i], enc[j]) == 0)
					print_error("names %zu and %zu both map to \"%s\"\n", i, j, enc[i]);
				assert_string_not_equal(enc[i], enc[j]);
				if (tensor) {
					/* no tensor's NAME is another tensor's NAME.f32 or NAME.npy */
					size_t li = strlen(enc[i]), lj = strlen(enc[j]);
					bool sibling = li == lj + 4 && memcmp(enc[i], enc[j], lj) == 0 &&
					               (strcmp(enc[i] + lj, ".f32") == 0 ||
					                strcmp(enc[i] + lj, ".npy") == 0);
					assert_false(sibling);
				}
			}
		}
	}
}

/* names_decode gives back the key of every file name names_encode makes of a key. */
static void expect_decode(const char *key, size_t len)
{
	char file[NAMES_BUF], back[NAMES_BUF];
	uint64_t back_len = UINT64_MAX;
	names_encode(key, len, false, file);
	assert_int_equal(names_decode(file, back, &back_len), 0);
	assert_int_equal(back_len, len);
	assert_memory_equal(back, key, len);
}
#define DECODE(lit) expect_decode((lit), sizeof(lit) - 1)

static void test_decode_round_trip(void **state)
{
	(void)state;
	DECODE("general.architecture");
	DECODE("");
	DECODE("%");
	DECODE("a/b%c\0d");
	DECODE(".");
	DECODE("..");
	DECODE(".hidden~");
	DECODE("#auto#");
	DECODE("4913");
	DECODE("x.gguf");
	DECODE("%2F");
	DECODE("caf\xc3\xa9 \xff");
	char lit[NAMES_CUT];
	memset(lit, '/', sizeof lit);   /* 200 bytes escaped: cut, not decodable */
	char file[NAMES_BUF], key[NAMES_BUF];
	uint64_t len = 7;
	names_encode(lit, 66, false, file);
	assert_int_equal(names_decode(file, key, &len), 0);
	assert_int_equal(len, 66);
	names_encode(lit, sizeof lit, false, file);
	assert_int_equal(names_decode(file, key, &len), -EINVAL);
}

/* What no key's file name is: refused, *len untouched. */
static void test_decode_refusals(void **state)
{
	(void)state;
	static const char *const not_files[] = {
		"%2f",     /* a lower-case escape */
		"%41",     /* an escape names_encode does not write ('A') */
		"%2",      /* an escape cut short */
		"100%",    /* a '%' that should be "%25" */
		".hidden", /* a leading '.' a key's file name escapes */
		"key~",
		"#auto#",
		"4913",
		".",
		"x%2Ef32", /* a key's ".f32" is not escaped (only a tensor's) */
		"a%2Fb%",
	};
	char key[NAMES_BUF];
	for (size_t i = 0; i < sizeof not_files / sizeof not_files[0]; i++) {
		uint64_t len = 7;
		if (names_decode(not_files[i], key, &len) != -EINVAL)
			print_error("\"%s\" decoded\n", not_files[i]);
		assert_int_equal(names_decode(not_files[i], key, &len), -EINVAL);
		assert_int_equal(len, 7);
	}
	char longer[NAMES_BUF + 1];
	memset(longer, 'a', NAMES_BUF);
	longer[NAMES_BUF] = '\0';
	uint64_t len = 7;
	assert_int_equal(names_decode(longer, key, &len), -ENAMETOOLONG);
	longer[NAMES_BUF - 1] = '\0';   /* NAMES_BUF - 1 bytes: as long as a cut name */
	assert_int_equal(names_decode(longer, key, &len), -EINVAL);
	assert_int_equal(len, 7);
}

UNIT_TESTS(cmocka_unit_test(test_fnv),
           cmocka_unit_test(test_plain),
           cmocka_unit_test(test_rule1_escapes),
           cmocka_unit_test(test_rule2_suffix),
           cmocka_unit_test(test_rule3_dots_empty),
           cmocka_unit_test(test_rule5_scratch),
           cmocka_unit_test(test_rule4_cut),
           cmocka_unit_test(test_cut_with_suffix_dot),
           cmocka_unit_test(test_distinct),
           cmocka_unit_test(test_decode_round_trip),
           cmocka_unit_test(test_decode_refusals))
