/* libFuzzer target: one input, one GGUF image. A failed parse must leave one non-empty
 * line; a successful one must describe only bytes inside the image: every metadata value
 * is walked, the first and last byte of every tensor touched, and the first and last
 * block of every tensor with a dequantizer decoded, and no two tensors may share a byte.
 * Then the image is mounted in memory (tree_build) and every file of the tree is looked
 * up by its name, read at its start, middle and end, and its xattrs listed. Any broken
 * promise aborts. Also built without libFuzzer into the regression runner (replay.c). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "gguf.h"
#include "gguf_write.h"
#include "model.h"
#include "model_source.h"
#include "test_kit.h"
#include "tree.h"
#include "types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_parse: %s\n", why);
	abort();
}

/* The walk reads every byte the callbacks are shown; a volatile sink keeps the reads. */
static volatile uint8_t sink;

static bool on_scalar(void *ctx, uint32_t type, const uint8_t *b)
{
	(void)ctx;
	size_t n = gguf_vtype_size(type);
	if (!n)
		broken("walk: a scalar of a non-scalar type");
	sink ^= b[0] ^ b[n - 1];
	return true;
}

static bool on_string(void *ctx, const char *s, uint64_t len)
{
	(void)ctx;
	if (len)
		sink ^= (uint8_t)(s[0] ^ s[len - 1]);
	return true;
}

static bool on_begin(void *ctx, uint32_t elem_type, uint64_t count)
{
	int *depth = ctx;
	if (!gguf_vtype_name(elem_type) || ++*depth > GGUF_MAX_ARRAY_DEPTH)
		broken("walk: a bad nested array");
	(void)count;
	return true;
}

static bool on_end(void *ctx)
{
	int *depth = ctx;
	if (--*depth < 1)
		broken("walk: unbalanced array end");
	return true;
}

/* Decodes one block of t at p, which must lie inside the image. */
static void decode_block(const struct gguf_tensor *t, const uint8_t *p)
{
	float *out = malloc(t->ti->block_elems * sizeof *out);
	if (!out)
		return;
	dequant_get(t->ti->id)->to_float(p, out, 1);
	uint32_t bits;
	memcpy(&bits, &out[t->ti->block_elems - 1], 4);
	sink ^= (uint8_t)bits;
	free(out);
}

static int by_start(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* No byte belongs to two tensors (empty ones own no bytes). */
static void check_disjoint(const struct gguf_file *f)
{
	const struct gguf_tensor **v = malloc((f->n_tensors + 1) * sizeof *v);
	uint64_t n = 0;
	if (!v)
		return;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].size)
			v[n++] = &f->tensors[i];
	qsort(v, n, sizeof *v, by_start);
	for (uint64_t i = 1; i < n; i++)
		if (v[i - 1]->offset + v[i - 1]->size > v[i]->offset)
			broken("two tensors overlap");
	free(v);
}

/* Reads [off, off + len) of n and checks it got exactly what st_size promises. */
static void read_at(const struct tree *t, const struct tree_node *n, uint64_t off, uint64_t len)
{
	static char buf[4096];
	if (len > sizeof buf)
		len = sizeof buf;
	uint64_t want = off >= n->size ? 0 : n->size - off < len ? n->size - off : len;
	int64_t got = tree_read(t, n, buf, len, off, NULL);
	if (got < 0 || (uint64_t)got != want)
		broken("tree_read returned other than st_size promises");
	if (got)
		sink ^= (uint8_t)(buf[0] ^ buf[got - 1]);
}

/* A rendered file up to WHOLE_MAX bytes is also read whole from byte 0, where no mark
 * applies, and every window of it read at the marks (this build records one every
 * RENDER_MARK_STRIDE = 512 bytes, see meson.build) must be the same bytes. */
#define WHOLE_MAX (256u << 10)

static void check_windows(const struct tree *t, const struct tree_node *n)
{
	static char whole[WHOLE_MAX], part[1500];
	if (n->size > WHOLE_MAX || n->kind == TREE_RAW || n->kind == TREE_F32 ||
	    n->kind == TREE_NPY)
		return;
	if (tree_read(t, n, whole, n->size, 0, NULL) != (int64_t)n->size)
		broken("a rendered file read whole is short");
	for (uint64_t off = 0; off < n->size; off += 997) {
		uint64_t len = n->size - off < sizeof part ? n->size - off : sizeof part;
		if (tree_read(t, n, part, len, off, NULL) != (int64_t)len || memcmp(part, whole + off, len))
			broken("a window of a rendered file differs from the whole");
	}
}

static void check_file(const struct tree *t, const struct tree_node *n)
{
	char buf[512];
	read_at(t, n, 0, 4096);
	read_at(t, n, n->size / 2, 4096);
	read_at(t, n, n->size > 4096 ? n->size - 4096 : 0, 4096);
	read_at(t, n, n->size ? n->size - 1 : 0, 4096);
	read_at(t, n, n->size, 1);
	check_windows(t, n);
	int64_t len = tree_listxattr(t, n, NULL, 0);
	if (len < 0 || (uint64_t)len > sizeof buf)
		return;
	if (tree_listxattr(t, n, buf, sizeof buf) != len)
		broken("listxattr changed its mind");
	for (const char *name = buf; name < buf + len; name += strlen(name) + 1) {
		int64_t vlen = tree_getxattr(t, n, name, NULL, 0);
		if (vlen < 0)
			broken("a listed xattr is missing");
	}
}

/* The in-memory image as the shard's byte source (source.h): read in place, as a local
 * file's mapping is; it never shrinks. */
struct image_source {
	struct source src;
	const uint8_t *data;
};

static int image_visit(struct source *src, uint64_t off, uint64_t len, source_visit_fn fn,
                       void *ctx, char why[GGUF_ERR_MAX])
{
	(void)why;
	fn(ctx, ((struct image_source *)src)->data + off, len);
	return 0;
}

static void image_copy(void *ctx, const uint8_t *p, uint64_t len)
{
	memcpy(ctx, p, len);
}

static int image_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                      char why[GGUF_ERR_MAX])
{
	return image_visit(src, off, len, image_copy, buf, why);
}

static void image_close(struct source *src)
{
	(void)src;
}

static const struct source_ops image_ops = {
	.read = image_read, .close = image_close, .visit = image_visit,
};

/* Mounts the parsed image f in memory (as model_open would, without a file) and walks
 * every directory and file of its tree. */
static void check_tree(const uint8_t *data, size_t size, const struct gguf_file *f)
{
	static char path[] = "fuzz.gguf";
	struct image_source image = { .src.ops = &image_ops, .data = data };
	const struct model_file file = { .path = path, .size = size, .src = &image.src,
	                                 .head = data, .gguf = f };
	struct model_tensor *ts = calloc(f->n_tensors + 1, sizeof *ts);
	if (!ts)
		return;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		ts[i] = (struct model_tensor){ .t = &f->tensors[i], .file = 0 };
	struct model_desc desc = { .path = path, .meta = f, .tensors = ts,
	                           .n_tensors = f->n_tensors, .files = &file, .n_files = 1 };
	desc.st.st_mode = S_IFREG | 0644;
	struct ggufs_model *m = model_new(&desc);
	if (!m) {
		free(ts);
		return;
	}
	char err[GGUF_ERR_MAX];
	struct tree *t = tree_build(m, test_kit(), err);
	if (!t)
		broken("tree_build failed on a valid file");
	static const uint64_t dirs[] = { TREE_ROOT_INO, 2, 3, TREE_STATS_DIR_INO };
	uint64_t files = 0;
	for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
		const struct tree_node *dir = tree_node(t, dirs[d]);
		if (!dir || !tree_is_dir(dir) || tree_read(t, dir, err, 1, 0, NULL) != -EISDIR)
			broken("a directory is missing or readable");
		uint64_t count = tree_dir_count(t, dirs[d]);
		for (uint64_t i = 0; i < count; i++) {
			const struct tree_node *n = tree_dir_child(t, dirs[d], i);
			if (!n || tree_node(t, n->ino) != n || n->parent != dirs[d])
				broken("a child without its inode");
			/* names map to one file each: a collision would hide a file */
			if (tree_lookup(t, dirs[d], n->name) != n)
				broken("two files of one directory share a name");
			if (!n->name[0] || strchr(n->name, '/') || !strcmp(n->name, ".") ||
			    !strcmp(n->name, "..") || strlen(n->name) > 255)
				broken("a file name the kernel cannot show");
			if (!tree_is_dir(n)) {
				check_file(t, n);
				files++;
			}
		}
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_parse: %zu bytes parsed, %llu files in the tree\n", size,
		        (unsigned long long)files);
	tree_free(t);
	model_close(m);
	free(ts);
}

/* The header written back from what was parsed (as model.gguf's merged header is
 * written) is the image's own bytes up to the end of its tensor infos, and padded to
 * the alignment it starts the data section where the parse said. */
static void check_header_write(const uint8_t *data, const struct gguf_file *f)
{
	const struct gguf_kv **kv = calloc(f->n_kv + 1, sizeof *kv);
	const struct gguf_tensor **ts = calloc(f->n_tensors + 1, sizeof *ts);
	uint64_t *offs = calloc(f->n_tensors + 1, sizeof *offs);
	uint64_t end, len;
	char err[GGUF_ERR_MAX];
	uint8_t *out = NULL;
	if (!kv || !ts || !offs)
		goto out;
	for (uint64_t i = 0; i < f->n_kv; i++)
		kv[i] = &f->kv[i];
	for (uint64_t i = 0; i < f->n_tensors; i++) {
		ts[i] = &f->tensors[i];
		offs[i] = f->tensors[i].offset - f->data_offset;
	}
	if (gguf_header_write(f->version, kv, f->n_kv, ts, offs, f->n_tensors, 1, NULL, 0, &end,
	                      err) < 0 ||
	    gguf_header_write(f->version, kv, f->n_kv, ts, offs, f->n_tensors, f->alignment, NULL,
	                      0, &len, err) < 0)
		broken("a parsed header cannot be written back");
	if (f->n_tensors && len != f->data_offset)
		broken("a header written back starts its data elsewhere");
	out = malloc(end ? end : 1);
	if (!out)
		goto out;
	if (gguf_header_write(f->version, kv, f->n_kv, ts, offs, f->n_tensors, 1, out, end, &end,
	                      err) < 0 || memcmp(out, data, end) != 0)
		broken("a header written back differs from the image");
out:
	free(out);
	free(kv);
	free(ts);
	free(offs);
}

/* The image's first half parsed as a remote header is (a copy of exactly those bytes,
 * so a read past them is caught): it asks for more bytes, past the half and inside the
 * image, or ends exactly as the whole image did (rc, and the message when it failed). */
static void check_prefix(const uint8_t *data, size_t size, int whole_rc, const char *whole_err)
{
	size_t avail = size / 2;
	uint8_t *copy = malloc(avail ? avail : 1);
	if (!copy)
		return;
	memcpy(copy, data, avail);
	struct gguf_file p;
	char err[GGUF_ERR_MAX];
	uint64_t need = 0;
	int rc = gguf_parse_prefix(copy, avail, size, &p, err, &need);
	if (rc == 1) {
		if (need <= avail || need > size)
			broken("a prefix asked for bytes it had, or past the file");
	} else if (rc != whole_rc || (rc != 0 && strcmp(err, whole_err) != 0)) {
		broken("a prefix ended otherwise than the whole image");
	}
	if (rc == 0)
		gguf_file_free(&p);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf_file f;
	char err[GGUF_ERR_MAX];
	memset(err, 'x', sizeof err);
	int rc = gguf_parse(data, size, &f, err);
	check_prefix(data, size, rc, err);
	if (rc != 0) {
		size_t n = strnlen(err, sizeof err);
		if (n == 0 || n == sizeof err || memchr(err, '\n', n))
			broken("a failed parse without a one-line message");
		if (f.kv || f.tensors)
			broken("a failed parse left memory behind");
		return 0;
	}
	if (f.data_offset > size || !f.alignment || (f.alignment & (f.alignment - 1)))
		broken("bad data offset or alignment");
	for (uint64_t i = 0; i < f.n_kv; i++) {
		const struct gguf_value *v = &f.kv[i].value;
		if (v->data < data || v->size > size || v->data + v->size > data + size)
			broken("a value outside the image");
		int depth = 1;
		struct gguf_walk w = { .scalar = on_scalar, .string = on_string, .array_begin = on_begin,
		                       .array_end = on_end, .ctx = &depth };
		if (!gguf_value_walk(v, &w) || depth != 1)
			broken("walk failed");
	}
	uint64_t unknown = 0;
	for (uint64_t i = 0; i < f.n_tensors; i++) {
		const struct gguf_tensor *t = &f.tensors[i];
		if (t->offset < f.data_offset || t->offset > size || t->size > size - t->offset)
			broken("a tensor outside the image");
		if ((t->offset - f.data_offset) % f.alignment)
			broken("a misaligned tensor");
		if (t->n_dims > GGUF_MAX_DIMS)
			broken("too many dims");
		if (t->size) {
			sink ^= data[t->offset];
			sink ^= data[t->offset + t->size - 1];
		}
		if (t->has_f32) {
			uint64_t bb = t->ti->block_bytes;
			if (!t->ti->block_elems || !bb || t->size != t->n_elements / t->ti->block_elems * bb)
				broken("a dequantizable tensor of the wrong size");
			if (t->size >= bb) {
				decode_block(t, data + t->offset);
				decode_block(t, data + t->offset + t->size - bb);
			}
		} else {
			unknown++;
		}
	}
	check_disjoint(&f);
	if (f.n_unknown > unknown)
		broken("n_unknown counts more tensors than lack a dequantizer");
	check_header_write(data, &f);
	check_tree(data, size, &f);
	gguf_file_free(&f);
	return 0;
}
