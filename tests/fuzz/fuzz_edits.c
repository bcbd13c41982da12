/* libFuzzer target: one input, one edits file for the bundled model (edits_file.h), and
 * the same bytes as the text of a metadata file of each value type (parse_value.h). A
 * refused patch must leave one non-empty line; an accepted one must write back (edits_
 * render) to a patch that reads into the same state. Any broken promise aborts. Also
 * built without libFuzzer into a regression runner (replay.c) over corpus_edits/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edits_file.h"
#include "model.h"
#include "overlay.h"
#include "parse_value.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_edits: %s\n", why);
	abort();
}

static struct ggufs_model *model;
static struct edits_identity id;

/* The bundled model, opened once (GGUFS_TEST_DATA, else the source tree's). */
static void open_model(void)
{
	if (model)
		return;
	const char *dir = getenv("GGUFS_TEST_DATA");
	char path[4096], err[GGUF_ERR_MAX];
	snprintf(path, sizeof path, "%s/tinyllama-q4km.gguf", dir ? dir : TEST_DATA);
	model = model_open(path, err);
	if (!model || ov_identity(model, &id.header_hash) < 0)
		broken(err);
	id.size = 3915712;
}

static bool same_state(const struct ov_state *a, const struct ov_state *b)
{
	if (a->n != b->n)
		return false;
	for (uint64_t i = 0; i < a->n; i++)
		if (a->keys[i].id != b->keys[i].id || a->keys[i].kv.key.len != b->keys[i].kv.key.len ||
		    memcmp(a->keys[i].kv.key.ptr, b->keys[i].kv.key.ptr, a->keys[i].kv.key.len) ||
		    !ov_value_equal(&a->keys[i].kv.value, &b->keys[i].kv.value))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	open_model();
	char err[GGUF_ERR_MAX];
	struct ov_state *s = edits_parse(model, &id, (const char *)data, size, err);
	if (!s) {
		if (!err[0] || strchr(err, '\n'))
			broken("a refused patch without its one line");
	} else {
		char *text;
		uint64_t len;
		if (edits_render(s, &id, &text, &len) < 0)
			broken("out of memory");
		struct ov_state *back = edits_parse(model, &id, text, len, err);
		if (!back || !same_state(s, back))
			broken("a patch written back reads into another state");
		ov_put(back);
		free(text);
		ov_put(s);
	}
	static const char *const types[] = { "uint8", "int64", "float32", "float64", "bool",
	                                     "string", "array[string]", "array[int32]",
	                                     "array[array[float32]]" };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		struct value_type t;
		struct value_buf b;
		if (value_type_parse(types[i], strlen(types[i]), &t) < 0)
			broken("a type name");
		if (parse_value((const char *)data, size, &t, &b, err) == 0)
			value_buf_free(&b);
		else if (!err[0])
			broken("a refused value without its line");
	}
	return 0;
}
