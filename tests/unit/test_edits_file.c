/* Metadata edits below the tree: the overlay's states (overlay.h) and the edits file
 * (edits_file.h): states are never changed by the edits made from them, ids stay, a
 * patch written and read back makes the same state, and a hostile or foreign patch is
 * refused with one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"
#include "tiny_model.h"

#include "edits_file.h"
#include "model.h"
#include "overlay.h"
#include "parse_value.h"

/* The value of type tname that text parses to (value_buf_free it). */
static struct value_buf text_value(const char *tname, const char *text, size_t len)
{
	struct value_type t;
	assert_int_equal(value_type_parse(tname, strlen(tname), &t), 0);
	struct value_buf b;
	char err[GGUF_ERR_MAX];
	assert_int_equal(parse_value(text, len, &t, &b, err), 0);
	return b;
}

static uint64_t find(const struct ov_state *s, const char *name)
{
	return ov_find_name(s, name, strlen(name));
}

/* Two states hold the same keys: names, ids and values, in order. */
static void assert_same_state(const struct ov_state *a, const struct ov_state *b)
{
	assert_int_equal(a->n, b->n);
	for (uint64_t i = 0; i < a->n; i++) {
		assert_int_equal(a->keys[i].id, b->keys[i].id);
		assert_int_equal(a->keys[i].kv.key.len, b->keys[i].kv.key.len);
		assert_memory_equal(a->keys[i].kv.key.ptr, b->keys[i].kv.key.ptr, a->keys[i].kv.key.len);
		assert_true(ov_value_equal(&a->keys[i].kv.value, &b->keys[i].kv.value));
	}
}

static void test_states(void **state)
{
	(void)state;
	struct ggufs_model *m = tiny_model_open();
	struct ov_state *s0 = ov_initial(m);
	assert_non_null(s0);
	uint64_t n = model_meta(m)->n_kv, name_at = find(s0, "general.name");
	assert_int_equal(s0->n, n);
	assert_true(name_at != UINT64_MAX);

	struct value_buf v = text_value("string", "fixed\n", 6);
	struct ov_state *s1 = ov_set(s0, name_at, &v.v);
	value_buf_free(&v);
	assert_non_null(s1);
	/* the old state is as it was: a reader holding it sees no change */
	assert_true(ov_value_equal(&s0->keys[name_at].kv.value, &model_meta(m)->kv[name_at].value));
	assert_int_equal(s1->keys[name_at].kv.value.size, 8 + 5);
	assert_memory_equal(s1->keys[name_at].kv.value.data + 8, "fixed", 5);
	assert_int_equal(s1->file.n_kv, n);
	assert_ptr_equal(model_meta(s1->view), &s1->file);

	v = text_value("uint32", "7\n", 2);
	struct ov_state *s2, *taken;
	assert_int_equal(ov_create(s1, "my.new.key", 10, &v.v, &s2), 0);
	assert_non_null(s2);
	assert_int_equal(ov_create(s2, "my.new.key", 10, &v.v, &taken), -EEXIST);
	assert_null(taken);
	value_buf_free(&v);
	assert_int_equal(s2->n, n + 1);
	assert_int_equal(s2->keys[n].id, n);   /* a new key's id: after the model's */
	assert_int_equal(ov_find_id(s2, n), n);

	struct ov_state *s3 = ov_delete(s2, 0);
	assert_int_equal(s3->n, n);
	assert_int_equal(ov_find_id(s3, 0), UINT64_MAX);
	assert_int_equal(ov_find_id(s3, n), n - 1);     /* ids stay, positions move */
	assert_int_equal(ov_find_id(s3, 5), 4);

	/* a rename keeps the id and the place, and replaces a key of the new name (key 0,
	 * general.architecture, is gone) */
	uint64_t arch = find(s3, "tokenizer.ggml.model");
	assert_true(arch != UINT64_MAX);
	struct ov_state *s4 = ov_rename(s3, arch, "general.name", 12);
	assert_int_equal(s4->n, n - 1);
	uint64_t at = find(s4, "general.name");
	assert_int_equal(s4->keys[at].id, s3->keys[arch].id);
	assert_int_equal(s4->keys[at].kv.value.type, GGUF_TYPE_STRING);

	const char *why;
	assert_int_equal(ov_refusal("general.alignment", 17, &why), -EPERM);
	assert_non_null(why);
	assert_int_equal(ov_refusal("split.count", 11, &why), -EPERM);
	assert_non_null(why);
	assert_int_equal(ov_refusal("", 0, &why), -EINVAL);
	assert_non_null(why);
	assert_int_equal(ov_refusal("a\0b", 3, &why), -EINVAL);
	assert_non_null(why);
	assert_int_equal(ov_refusal("general.name", 12, &why), 0);
	assert_null(why);

	ov_put(s0);
	ov_put(s2);   /* out of order: each state holds its own blobs */
	ov_put(s1);
	ov_put(s4);
	ov_put(s3);
	model_close(m);
}

/* A state with one edit of every kind, a 64 KiB template, a shortened token array, a
 * value JSON cannot hold and a renamed key: written, read back, the same. */
static struct ov_state *edited(const struct ggufs_model *m)
{
	struct ov_state *s = ov_initial(m), *t;
	struct value_buf v;
	char *tmpl = malloc(65536);
	for (size_t i = 0; i < 65536; i++)
		tmpl[i] = "{% for m in messages %}\n\"\\\t"[i % 27];
	v = text_value("string", tmpl, 65536);
	free(tmpl);
	uint64_t ct = find(s, "tokenizer.chat_template");
	if (ct == UINT64_MAX)
		ov_create(s, "tokenizer.chat_template", 23, &v.v, &t);
	else
		t = ov_set(s, ct, &v.v);
	value_buf_free(&v);
	ov_put(s);
	s = t;
	v = text_value("array[string]", "a\nb\\x01\n\n", 9);
	t = ov_set(s, find(s, "tokenizer.ggml.tokens"), &v.v);
	value_buf_free(&v);
	ov_put(s);
	s = t;
	v = text_value("string", "bad \xff\xfe utf-8\n", 13);
	ov_create(s, "my.bytes", 8, &v.v, &t);
	value_buf_free(&v);
	ov_put(s);
	s = t;
	v = text_value("float32", "0.1", 3);
	ov_create(s, "my.float", 8, &v.v, &t);
	value_buf_free(&v);
	ov_put(s);
	s = t;
	t = ov_delete(s, find(s, "general.file_type"));
	ov_put(s);
	s = t;
	t = ov_rename(s, find(s, "general.name"), "general.title", 13);
	ov_put(s);
	return t;
}

static void test_patch_round_trip(void **state)
{
	(void)state;
	struct ggufs_model *m = tiny_model_open();
	struct edits_identity id = { .size = 12345 };
	assert_int_equal(ov_identity(m, &id.header_hash), 0);
	struct ov_state *s = edited(m);
	char *text;
	uint64_t len;
	assert_int_equal(edits_render(s, &id, &text, &len), 0);
	assert_non_null(strstr(text, "\"my.bytes\": {\"type\": \"string\", \"payload_hex\": "));
	assert_non_null(strstr(text, "\"my.float\": {\"type\": \"float32\", \"value\": 0.1}"));
	assert_non_null(strstr(text, "\"deleted\": [\"general.file_type\"]"));
	assert_non_null(strstr(text, "\"renamed\": {\"general.name\": \"general.title\"}"));
	char err[GGUF_ERR_MAX];
	struct ov_state *back = edits_parse(m, &id, text, len, err);
	if (!back)
		print_error("%s\n", err);
	assert_non_null(back);
	assert_same_state(s, back);

	/* another model's file: refused, saying so */
	struct edits_identity other = id;
	other.header_hash ^= 1;
	assert_null(edits_parse(m, &other, text, len, err));
	assert_non_null(strstr(err, "made for another model"));
	other = id;
	other.size++;
	assert_null(edits_parse(m, &other, text, len, err));

	/* an empty patch: the model's own metadata */
	struct ov_state *s0 = ov_initial(m);
	char *empty;
	uint64_t elen;
	assert_int_equal(edits_render(s0, &id, &empty, &elen), 0);
	struct ov_state *b0 = edits_parse(m, &id, empty, elen, err);
	assert_non_null(b0);
	assert_same_state(s0, b0);
	free(empty);
	ov_put(b0);
	ov_put(s0);

	ov_put(back);
	ov_put(s);
	free(text);
	model_close(m);
}

/* Refusals of the patch: each a NULL and one line. */
static void refused(const struct ggufs_model *m, const struct edits_identity *id,
                    const char *body, const char *want)
{
	char text[2048], err[GGUF_ERR_MAX];
	snprintf(text, sizeof text, "{\"ggufs_edits\": 1, \"model\": {\"size\": %llu, "
	         "\"header_xxh3\": \"%016llx\"}%s}", (unsigned long long)id->size,
	         (unsigned long long)id->header_hash, body);
	struct ov_state *s = edits_parse(m, id, text, strlen(text), err);
	if (s || !strstr(err, want))
		print_error("%s: got '%s', want '%s'\n", body, s ? "accepted" : err, want);
	assert_null(s);
	assert_non_null(strstr(err, want));
	assert_null(strchr(err, '\n'));
}

static void test_patch_refusals(void **state)
{
	(void)state;
	struct ggufs_model *m = tiny_model_open();
	struct edits_identity id = { .size = 1 };
	assert_int_equal(ov_identity(m, &id.header_hash), 0);
	refused(m, &id, ", \"set\": {\"general.alignment\": {\"type\": \"uint32\", \"value\": 64}}",
	        "general.alignment");
	refused(m, &id, ", \"deleted\": [\"split.count\"]", "split.*");
	refused(m, &id, ", \"deleted\": [\"no.such.key\"]", "does not have");
	refused(m, &id, ", \"deleted\": [\"general.name\", \"general.name\"]", "does not have");
	refused(m, &id, ", \"renamed\": {\"no.such\": \"x\"}", "does not have");
	refused(m, &id, ", \"renamed\": {\"general.name\": \"general.architecture\"}", "same name");
	refused(m, &id, ", \"set\": {\"general.name\": {\"type\": \"uint8\", \"value\": 256}}",
	        "out of the range");
	refused(m, &id, ", \"set\": {\"x\": {\"type\": \"uint9\", \"value\": 1}}", "not a GGUF type");
	refused(m, &id, ", \"set\": {\"x\": {\"value\": 1}}", "no \"type\"");
	refused(m, &id, ", \"set\": {\"x\": {\"type\": \"string\", \"payload_hex\": \"0100\"}}",
	        "payload_hex");
	refused(m, &id, ", \"set\": {\"x\": {\"type\": \"array[uint8]\", \"payload_hex\": "
	        "\"00000000ffffffffffffffff\"}}", "payload_hex");
	refused(m, &id, ", \"set\": {\"x\": {\"type\": \"string\", \"value\": \"a\"}, "
	        "\"x\": {\"type\": \"string\", \"value\": \"b\"}}", "same name");
	refused(m, &id, ", \"set\": {}, \"deleted\": []", "comes twice");
	refused(m, &id, ", \"set\": {\"x\": {\"type\": \"array[array[uint8]]\", \"value\": "
	        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}", "");
	refused(m, &id, ", \"comment\": " "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
	        "nested too deep");

	char err[GGUF_ERR_MAX];
	assert_null(edits_parse(m, &id, "", 0, err));
	assert_null(edits_parse(m, &id, "{}", 2, err));
	assert_non_null(strstr(err, "ggufs_edits"));
	assert_null(edits_parse(m, &id, "{\"ggufs_edits\": 2}", 18, err));
	assert_non_null(strstr(err, "later version"));

	/* every prefix of a valid patch, and every byte changed, is refused or accepted, never
	 * read past (ASan watches) */
	struct ov_state *s = edited(m);
	char *text;
	uint64_t len;
	assert_int_equal(edits_render(s, &id, &text, &len), 0);
	ov_put(s);
	/* the start and the end of the text, where the structure is; not the 64 KiB middle */
	for (uint64_t cut = 0; cut < len; cut += cut < 400 || cut > len - 400 ? 1 : 997) {
		char *p = malloc(cut + 1);
		memcpy(p, text, cut);
		struct ov_state *r = edits_parse(m, &id, p, cut, err);
		if (cut < len - 1)   /* all but the final newline: still the whole patch */
			assert_null(r);
		ov_put(r);
		for (uint64_t i = 0; i < cut && i < 300; i += 7) {
			char saved = p[i];
			p[i] = (char)(p[i] ^ 0x5a);
			ov_put(edits_parse(m, &id, p, cut, err));
			p[i] = saved;
		}
		free(p);
	}
	free(text);
	model_close(m);
}

UNIT_TESTS(cmocka_unit_test(test_states),
           cmocka_unit_test(test_patch_round_trip),
           cmocka_unit_test(test_patch_refusals))
