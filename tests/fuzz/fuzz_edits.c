/* libFuzzer target: one input, one edits file for the bundled model (edits_file.h), the
 * same bytes as the text of a metadata file of each value type (parse_value.h), and
 * (its first 1,024 bytes, up to a NUL) as a file name created in and renamed into
 * metadata/ (tree_edit.h, on the small type-vectors model). A refused patch, value or
 * name must leave one non-empty line; an accepted patch must write back (edits_render)
 * to a patch that reads into the same state, an accepted name must be found again, an
 * array's text read in two parts (parse_value_lines) must read as it does whole. Any
 * broken promise aborts. Also built without libFuzzer into a regression runner
 * (replay.c) over corpus_edits/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "edits_file.h"
#include "model.h"
#include "overlay.h"
#include "parse_value.h"
#include "test_kit.h"
#include "tree.h"
#include "tree_edit.h"

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

static struct ggufs_model *small;
static struct tree *small_base;
static struct tree_edits *edits;
static char edits_dir[4096], edits_path[4200];

/* Removes the edits file of the name path at exit. */
static void remove_edits(void)
{
	tree_edits_close(edits);
	unlink(edits_path);
	rmdir(edits_dir);
	tree_free(small_base);
	model_close(small);
}

/* The edits of the type vectors' model in a scratch FILE, opened once, holding the one
 * key "fuzz.key" that names are given by rename. */
static void open_edits(void)
{
	if (edits)
		return;
	const char *dir = getenv("GGUFS_TEST_DATA"), *tmp = getenv("TMPDIR");
	char path[4096], err[GGUF_ERR_MAX];
	uint64_t ino;
	snprintf(path, sizeof path, "%s/vectors/alltypes.gguf", dir ? dir : TEST_DATA);
	snprintf(edits_dir, sizeof edits_dir, "%s/ggufs-fuzz-edits-XXXXXX", tmp ? tmp : "/tmp");
	if (!mkdtemp(edits_dir))
		broken("mkdtemp");
	snprintf(edits_path, sizeof edits_path, "%s/fix.json", edits_dir);
	small = model_open(path, err);
	small_base = small ? tree_build(small, test_kit(), err) : NULL;
	edits = small_base ? tree_edits_open(small_base, edits_path, NULL, err) : NULL;
	if (!edits || tree_edits_create(edits, "fuzz.key", &ino, err) < 0)
		broken(err);
	atexit(remove_edits);
}

/* True when metadata/name is there now: a listed key's file, or a scratch file (an
 * editor's name: .x, x~, #x#, 4913; a key renamed to one is moved aside into it). */
static bool listed(const char *name)
{
	return tree_edits_taken(edits, name);
}

/* The input's first 1,024 bytes up to a NUL as a name: created (then removed) and
 * renamed to (then back). */
static void fuzz_name(const uint8_t *data, size_t size)
{
	open_edits();
	char name[1025], err[GGUF_ERR_MAX];
	size_t len = size < 1024 ? size : 1024;
	memcpy(name, data, len);
	name[len] = 0;
	uint64_t ino;
	err[0] = 0;
	int r = tree_edits_create(edits, name, &ino, err);
	if (r >= 0) {   /* 1: a key deleted before (by an earlier input) made again */
		if (!listed(name) || tree_edits_unlink(edits, name, &ino, err) < 0)
			broken("a created name is not found again");
	} else if (!err[0] || strchr(err, '\n')) {
		broken("a refused name without its one line");
	}
	err[0] = 0;
	r = tree_edits_rename(edits, "fuzz.key", name, err);
	if (r == 0) {
		if (strcmp(name, "fuzz.key") != 0 &&
		    (!listed(name) || tree_edits_rename(edits, name, "fuzz.key", err) < 0))
			broken("a renamed key is not found again");
	} else if (!err[0] || strchr(err, '\n')) {
		broken("a refused rename without its one line");
	}
	if (!listed("fuzz.key"))
		broken("the key renamed back is gone");
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
		int whole = parse_value((const char *)data, size, &t, &b, err);
		if (whole == 0)
			value_buf_free(&b);
		else if (!err[0])
			broken("a refused value without its line");
		/* an array read line by line as it is written (the check at write(2)) says
		 * what the whole text's parse says, in two parts cut after a newline */
		if (t.depth > 0) {
			const char *p = (const char *)data, *nl = memchr(p, '\n', size);
			uint64_t cut = nl ? (uint64_t)(nl - p) + 1 : 0, n1 = 0, n2 = 0;
			char err2[GGUF_ERR_MAX];
			int parts = parse_value_lines(p, cut, &t, 1, &n1, err2);
			if (parts == 0)
				parts = parse_value_lines(p + cut, size - cut, &t, 1 + n1, &n2, err2);
			if (parts != whole || (whole < 0 && strcmp(err, err2) != 0))
				broken("an array read in parts reads otherwise than whole");
		}
	}
	fuzz_name(data, size);
	return 0;
}
