/* The virtual tree and its read entry point, without a mount: names, sizes, lookups,
 * slices of every tensor file of every type, xattrs, and a model that shrinks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "guard.h"
#include "names.h"
#include "reader.h"
#include "test_kit.h"
#include "tree.h"
#include "vectors.h"

struct fixture {
	struct ggufs_model *m;
	struct tree *t;
};

static int open_model(void **state, const char *path)
{
	struct fixture *f = calloc(1, sizeof *f);
	char err[GGUF_ERR_MAX];
	f->m = model_open(path, err);
	if (!f->m) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	f->t = tree_build(f->m, test_kit(), err);
	if (!f->t)
		return -1;
	*state = f;
	return 0;
}

static int setup_llama(void **state)
{
	return open_model(state, TEST_DATA "/tinyllama-q4km.gguf");
}

static int setup_alltypes(void **state)
{
	return open_model(state, TEST_DATA "/vectors/alltypes.gguf");
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	tree_free(f->t);
	model_close(f->m);
	free(f);
	return 0;
}

/* Reads a whole file of the tree into malloc'ed memory. */
static char *read_all(const struct tree *t, const struct tree_node *n)
{
	char *buf = malloc(n->size + 1);
	assert_non_null(buf);
	int64_t got = tree_read(t, n, buf, n->size + 100, 0, NULL);
	assert_int_equal(got, n->size);
	buf[n->size] = 0;
	return buf;
}

static void test_shape(void **state)
{
	struct fixture *f = *state;
	const struct tree *t = f->t;
	assert_int_equal(tree_dir_count(t, TREE_ROOT_INO), 8);
	assert_int_equal(tree_dir_count(t, 2), 23);
	assert_int_equal(tree_dir_count(t, 3), 21 * 3);
	assert_int_equal(tree_dir_count(t, TREE_STATS_DIR_INO), 21);
	const char *top[] = { "metadata", "tensors", "gguf.json", "summary.txt", "stats",
	                      "stats.tsv", "model.gguf", "quants" };
	for (int i = 0; i < 8; i++) {
		const struct tree_node *n = tree_lookup(t, TREE_ROOT_INO, top[i]);
		assert_non_null(n);
		assert_ptr_equal(n, tree_dir_child(t, TREE_ROOT_INO, (uint64_t)i));
		assert_ptr_equal(tree_node(t, n->ino), n);
	}
	assert_null(tree_lookup(t, TREE_ROOT_INO, "nothing"));
	assert_null(tree_lookup(t, 2, "tensors"));
	assert_null(tree_node(t, 0));
	assert_null(tree_node(t, TREE_ZONE_P - 1));   /* past every key and tensor */
	assert_null(tree_node(t, TREE_ZONE_X));
	assert_true(tree_is_dir(tree_node(t, TREE_ROOT_INO)));

	/* every child is found again by its name, in its own directory only */
	for (uint64_t dir = 2; dir <= 3; dir++) {
		for (uint64_t i = 0; i < tree_dir_count(t, dir); i++) {
			const struct tree_node *n = tree_dir_child(t, dir, i);
			assert_ptr_equal(tree_lookup(t, dir, n->name), n);
			assert_null(tree_lookup(t, 5 - dir, n->name));
		}
	}
	const struct tree_node *raw = tree_lookup(t, 3, "output.weight");
	const struct tree_node *f32 = tree_lookup(t, 3, "output.weight.f32");
	const struct tree_node *npy = tree_lookup(t, 3, "output.weight.npy");
	assert_non_null(raw);
	assert_non_null(f32);
	assert_non_null(npy);
	assert_int_equal(raw->size, 1680000);
	assert_int_equal(f32->size, 256 * 8000 * 4);
	assert_int_equal(npy->size % 64, 0); /* 64-byte header, data a multiple of 4*256 */
	assert_true(npy->size > f32->size);

	assert_int_equal(tree_mode(raw, 0644) & 07777, 0444);
	assert_int_equal(tree_mode(raw, 0640) & 07777, 0440);
	assert_int_equal(tree_mode(tree_node(t, 2), 0640) & 07777, 0550);
	assert_int_equal(tree_mode(tree_node(t, 2), 0755) & 07777, 0555);
}

/* quants/ of the Q4_K_M model: only the NAMEs llama.cpp makes without requantizing, here
 * Q4_K_M alone, whose every tensor keeps its type: the file itself, byte for byte
 * (llama.cpp's order and keys are the file's), in any window; quants.tsv says the rest
 * are not made and why. */
static void test_quants(void **state)
{
	struct fixture *f = *state;
	const struct tree *t = f->t;
	const struct tree_node *d = tree_lookup(t, TREE_ROOT_INO, "quants");
	assert_non_null(d);
	assert_true(tree_is_dir(d));
	assert_int_equal(tree_dir_count(t, d->ino), 2);
	const struct tree_node *q = tree_dir_child(t, d->ino, 0);
	const struct tree_node *tsv = tree_dir_child(t, d->ino, 1);
	assert_string_equal(q->name, "Q4_K_M.gguf");
	assert_string_equal(tsv->name, "quants.tsv");
	assert_ptr_equal(tree_lookup(t, d->ino, "Q4_K_M.gguf"), q);
	assert_ptr_equal(tree_node(t, q->ino), q);
	assert_ptr_equal(tree_node(t, tsv->ino), tsv);
	assert_null(tree_lookup(t, d->ino, "Q8_0.gguf"));
	assert_int_equal(tree_read(t, d, NULL, 1, 0, NULL), -EISDIR);

	FILE *fp = fopen(TEST_DATA "/tinyllama-q4km.gguf", "rb");
	assert_non_null(fp);
	char *want = malloc(q->size);
	assert_int_equal(fread(want, 1, q->size, fp), q->size);
	assert_int_equal(fgetc(fp), EOF);
	fclose(fp);
	char *got = read_all(t, q);
	assert_memory_equal(got, want, q->size);
	char piece[5000];
	for (uint64_t off = 0; off < q->size; off += q->size / 7 + 1) {
		assert_int_equal(tree_read(t, q, piece, sizeof piece, off, NULL),
		                 q->size - off < sizeof piece ? q->size - off : sizeof piece);
		assert_memory_equal(piece, want + off, q->size - off < sizeof piece ? q->size - off
		                                                                     : sizeof piece);
	}
	free(got);
	free(want);
	char *text = read_all(t, tsv);
	assert_non_null(strstr(text, "\nQ4_K_M\t15\t3915712\t"));
	assert_non_null(strstr(text, "\n# Q8_0: not made: requantizing from type q6_K is disabled\n"));
	assert_non_null(strstr(text, "-o requantize"));
	free(text);
}

static void test_metadata(void **state)
{
	struct fixture *f = *state;
	const struct tree_node *n = tree_lookup(f->t, 2, "general.architecture");
	assert_non_null(n);
	char *s = read_all(f->t, n);
	assert_string_equal(s, "llama\n");
	free(s);
	n = tree_lookup(f->t, 2, "llama.context_length");
	s = read_all(f->t, n);
	assert_string_equal(s, "2048\n");
	free(s);
	n = tree_lookup(f->t, 2, "tokenizer.ggml.tokens");
	s = read_all(f->t, n);
	size_t lines = 0;
	for (char *p = s; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 8000);
	assert_memory_equal(s, "<unk>\n<s>\n</s>\n", 15);
	free(s);

	char buf[8];
	assert_int_equal(tree_read(f->t, tree_node(f->t, 2), buf, 8, 0, NULL), -EISDIR);
	n = tree_lookup(f->t, 2, "general.architecture");
	assert_int_equal(tree_read(f->t, n, buf, 8, 6, NULL), 0);
	assert_int_equal(tree_read(f->t, n, buf, 8, 1000, NULL), 0);
	assert_int_equal(tree_read(f->t, n, buf, 3, 2, NULL), 3);
	assert_memory_equal(buf, "ama", 3);
}

static void test_xattrs(void **state)
{
	struct fixture *f = *state;
	char buf[256];
	const struct tree_node *n = tree_lookup(f->t, 3, "token_embd.weight.f32");
	int64_t need = tree_listxattr(f->t, n, NULL, 0);
	assert_true(need > 0);
	assert_int_equal(tree_listxattr(f->t, n, buf, (uint64_t)need - 1), -ERANGE);
	assert_int_equal(tree_listxattr(f->t, n, buf, sizeof buf), need);
	assert_string_equal(buf, "user.gguf.name");

	int64_t len = tree_getxattr(f->t, n, "user.gguf.dims", buf, sizeof buf);
	assert_int_equal(len, 8);
	assert_memory_equal(buf, "256,8000", 8);
	len = tree_getxattr(f->t, n, "user.gguf.type", buf, sizeof buf);
	assert_memory_equal(buf, "q4_K", 4);
	assert_int_equal(len, 4);
	len = tree_getxattr(f->t, n, "user.gguf.offset", buf, sizeof buf);
	assert_int_equal(len, 7);
	assert_memory_equal(buf, "1856832", 7);
	assert_int_equal(tree_getxattr(f->t, n, "user.gguf.name", NULL, 0), 17);
	assert_int_equal(tree_getxattr(f->t, n, "user.gguf.name", buf, 3), -ERANGE);
	assert_int_equal(tree_getxattr(f->t, n, "user.other", buf, sizeof buf), -ENODATA);

	n = tree_lookup(f->t, 2, "tokenizer.ggml.scores");
	len = tree_getxattr(f->t, n, "user.gguf.type", buf, sizeof buf);
	assert_int_equal(len, 14);
	assert_memory_equal(buf, "array[float32]", 14);
	len = tree_getxattr(f->t, n, "user.gguf.count", buf, sizeof buf);
	assert_memory_equal(buf, "8000", 4);
	assert_int_equal(tree_listxattr(f->t, tree_node(f->t, 4), NULL, 0), 0);
}

/* Every tensor of every type: the whole .f32 and .npy against ggml's output, then 50
 * random unaligned slices, most of them starting and ending inside blocks. */
static void test_slices(void **state)
{
	struct fixture *f = *state;
	struct vector_row *rows;
	size_t nrows = vectors_manifest(&rows);
	srand(12345);
	for (size_t r = 0; r < nrows; r++) {
		char name[NAMES_BUF + 8], file[NAMES_BUF];
		size_t count;
		float *want = vectors_f32(rows[r].tensor, &count);
		/* "quant.f32" is a tensor name ending in .f32: its file is "quant%2Ef32" */
		names_encode(rows[r].tensor, strlen(rows[r].tensor), true, file);
		snprintf(name, sizeof name, "%s.f32", file);
		const struct tree_node *n = tree_lookup(f->t, 3, name);
		assert_non_null(n);
		assert_int_equal(n->size, count * 4);
		float *got = (float *)(void *)read_all(f->t, n);
		size_t bad = vectors_compare(got, want, count);
		if (bad)
			print_error("%s: element %zu\n", name, bad - 1);
		assert_int_equal(bad, 0);

		/* a slice is byte-identical to the same bytes of the whole read */
		char *slice = malloc(n->size + 1);
		for (int k = 0; k < 50; k++) {
			uint64_t off = (uint64_t)rand() % n->size;
			uint64_t len = 1 + (uint64_t)rand() % (n->size - off);
			if (k % 3 == 0 && len > 700)
				len = 1 + (uint64_t)rand() % 700;
			/* an odd destination address exercises the bounce path too */
			char *dst = slice + (k & 1);
			assert_int_equal(tree_read(f->t, n, dst, len, off, NULL), len);
			assert_memory_equal(dst, (char *)got + off, len);
		}

		snprintf(name, sizeof name, "%s.npy", file);
		const struct tree_node *npy = tree_lookup(f->t, 3, name);
		assert_non_null(npy);
		char *all = read_all(f->t, npy);
		uint64_t h = npy->size - n->size;
		assert_memory_equal(all, "\x93NUMPY\x01\x00", 8);
		assert_memory_equal(all + h, got, n->size);
		/* across the header/data boundary */
		assert_int_equal(tree_read(f->t, npy, slice, 13, h - 5, NULL), 13);
		assert_memory_equal(slice, all + h - 5, 13);
		free(all);

		/* the raw file is the stored bytes */
		size_t raw_size;
		char *raw = vectors_raw(rows[r].tensor, &raw_size);
		const struct tree_node *rn = tree_lookup(f->t, 3, file);
		assert_int_equal(rn->size, raw_size);
		char *rawgot = read_all(f->t, rn);
		assert_memory_equal(rawgot, raw, raw_size);
		free(rawgot);
		free(raw);
		free(slice);
		free(got);
		free(want);
	}
	free(rows);
}

/* A model whose gguf.json and metadata files are megabytes long: strings that need
 * escaping (quotes, control bytes, invalid UTF-8), floats of every kind, an array of
 * arrays, and 3000 tensors. Written to path. */
static void write_big_metadata_model(const char *path)
{
	enum { TOKENS = 60000, NESTED = 60000, TENSORS = 3000 };
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, TENSORS, 4);
	gw_kv_str(&w, "general.name", "resume \"test\"");
	gw_key(&w, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_STRING, TOKENS);
	for (int i = 0; i < TOKENS; i++) {
		char tok[64];
		int n = snprintf(tok, sizeof tok, "tok%d", i);
		if (i % 7 == 0)
			n += snprintf(tok + n, sizeof tok - (size_t)n, "\"q\\b\n");
		if (i % 11 == 0) {
			tok[n++] = (char)0xff;   /* invalid UTF-8 */
			tok[n++] = (char)0xe2;
		}
		if (i % 13 == 0)
			tok[n++] = 0x01;
		gw_strn(&w, tok, (uint64_t)n);
	}
	gw_key(&w, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_FLOAT32, TOKENS);
	static const float odd[] = { 0.0f, -0.0f, 1e-45f, 3.4e38f, 1e30f, 0.1f };
	for (int i = 0; i < TOKENS; i++) {
		float v = -(float)i / 7.0f;
		if (i % 1000 == 1)
			v = i % 3 ? INFINITY : -INFINITY;
		else if (i % 1000 == 2)
			v = NAN;
		else if (i % 97 == 3)
			v = odd[(i / 97) % 6];
		gw_f32(&w, v);
	}
	gw_key(&w, "nested", GGUF_TYPE_ARRAY);
	gw_array(&w, GGUF_TYPE_ARRAY, NESTED);
	for (int i = 0; i < NESTED; i++) {
		gw_array(&w, GGUF_TYPE_UINT32, (uint64_t)(i % 4));
		for (int k = 0; k < i % 4; k++)
			gw_u32(&w, (uint32_t)(i * 4 + k));
	}
	for (int i = 0; i < TENSORS; i++) {
		char name[64];
		snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
		uint64_t ne[1] = { 4 };
		gw_tensor(&w, name, 1, ne, 0 /* f32 */, (uint64_t)i * 32);
	}
	gw_align(&w, 32);
	gw_fill(&w, 0, (size_t)TENSORS * 32);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* Reads of gguf.json and metadata/KEY that start at the marks the sizing pass left:
 * every window, and the whole file read through in chunks of several sizes, is the
 * same bytes as the file rendered from its first byte. */
static void test_resume(void **state)
{
	(void)state;
	char path[] = "/tmp/ggufs-resume-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_big_metadata_model(path);
	void *fx = NULL;
	assert_int_equal(open_model(&fx, path), 0);
	const struct tree *t = ((struct fixture *)fx)->t;

	const struct tree_node *files[] = {
		tree_lookup(t, TREE_ROOT_INO, "gguf.json"),
		tree_lookup(t, 2, "tokenizer.ggml.tokens"),
		tree_lookup(t, 2, "tokenizer.ggml.scores"),
		tree_lookup(t, 2, "nested"),
	};
	srand(777);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		const struct tree_node *n = files[i];
		assert_non_null(n);
		/* from byte 0 nothing is skipped: no mark sits at 0 */
		char *full = read_all(t, n);
		assert_true(n->size > 2 * 256 * 1024);
		assert_true(tree_render_marks(t, n) >= n->size / (256 * 1024) - 1);

		char *buf = malloc(n->size + 1);
		static const uint64_t chunks[] = { 1 << 20, 131072 + 1, 4096, 262144 };
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
			memset(buf, 0x55, n->size);
			for (uint64_t off = 0; off < n->size; off += chunks[c]) {
				uint64_t want = n->size - off < chunks[c] ? n->size - off : chunks[c];
				assert_int_equal(tree_read(t, n, buf + off, chunks[c], off, NULL), want);
			}
			assert_memory_equal(buf, full, n->size);
		}
		for (int k = 0; k < 300; k++) {
			uint64_t off = (uint64_t)rand() % n->size;
			uint64_t len = 1 + (uint64_t)rand() % (k % 2 ? 300 : 3 << 20);
			uint64_t want = n->size - off < len ? n->size - off : len;
			assert_int_equal(tree_read(t, n, buf, len, off, NULL), want);
			assert_memory_equal(buf, full + off, want);
		}
		free(buf);
		free(full);
	}
	teardown(&fx);
	unlink(path);
}

/* A model file that shrinks under the tree: reads of bytes that are gone fail with
 * EIO, everything else still reads. */
static void test_shrink(void **state)
{
	(void)state;
	char path[] = "/tmp/ggufs-shrink-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t size;
	char *data = vectors_slurp(TEST_DATA "/tinyllama-q4km.gguf", &size);
	assert_int_equal(write(fd, data, size), (ssize_t)size);

	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(path, err);
	assert_non_null(m);
	struct tree *t = tree_build(m, test_kit(), err);
	assert_non_null(t);
	const struct tree_node *first = tree_lookup(t, 3, "output.weight.f32");
	const struct tree_node *last = tree_lookup(t, 3, "token_embd.weight.f32");
	const struct tree_node *last_raw = tree_lookup(t, 3, "token_embd.weight");
	char *buf = malloc(1 << 20);
	assert_int_equal(tree_read(t, last, buf, 1 << 20, 0, NULL), 1 << 20);
	/* model.gguf is the file, through tree_read and through iovecs */
	const struct tree_node *model = tree_node(t, tree_model_ino(t));
	assert_string_equal(model->name, "model.gguf");
	assert_int_equal(model->size, size);
	char *whole = malloc(size);
	assert_int_equal(tree_read(t, model, whole, size + 10, 0, NULL), size);
	assert_memory_equal(whole, data, size);
	free(whole);
	struct iovec iov[4];
	/* the file's mapping: where its first tensor's bytes are, less their offset */
	const uint8_t *map = model_tensor_mapped(m, 0) - model_tensor(m, 0)->offset;
	/* the one zero-copy entry point: model.gguf as its pieces in the mapping, a raw
	 * tensor as one iovec into it, a rendered or dequantized file not at all */
	assert_int_equal(tree_read_iov(t, model, 2000000, 4096, iov, 4, NULL), 1);
	assert_ptr_equal(iov[0].iov_base, map + 2000000);
	assert_int_equal(tree_read_iov(t, last_raw, 1000, 4096, iov, 4, NULL), 1);
	assert_ptr_equal(iov[0].iov_base, map + 1856832 + 1000);
	assert_int_equal(iov[0].iov_len, 4096);
	assert_int_equal(tree_read_iov(t, last, 0, 4096, iov, 4, NULL), 0);
	assert_int_equal(tree_read_iov(t, tree_node(t, TREE_JSON_INO), 0, 16, iov, 4, NULL), 0);

	/* cut the file inside token_embd.weight, well past a page boundary */
	assert_int_equal(ftruncate(fd, 1856832 + 300000), 0);
	assert_int_equal(tree_read(t, last, buf, 4096, 8000000, NULL), -EIO);
	assert_int_equal(tree_read(t, last_raw, buf, 4096, 1100000, NULL), -EIO);
	assert_int_equal(tree_read(t, model, buf, 4096, 1856832 + 300000 - 100, NULL), -EIO);
	assert_int_equal(tree_read_iov(t, model, 1856832 + 300000 - 100, 4096, iov, 4, NULL), -EIO);
	assert_int_equal(tree_read_iov(t, last_raw, 1100000, 4096, iov, 4, NULL), -EIO);
	assert_int_equal(tree_read_iov(t, last_raw, 299000, 4096, iov, 4, NULL), -EIO);   /* a part */
	assert_int_equal(tree_read(t, model, buf, 4096, 1856832 + 200000, NULL), 4096);
	assert_int_equal(tree_read_iov(t, model, 1856832 + 200000, 4096, iov, 4, NULL), 1);
	/* the zero-copy span says how much is left: none past the cut, a part across it */
	int span_fd;
	uint64_t span_off, span_count;
	assert_true(reader_raw_span(m, last_raw->index, 1100000, 4096, &span_fd, &span_off,
	                            &span_count, NULL));
	assert_int_equal(span_count, 0);
	assert_true(reader_raw_span(m, last_raw->index, 299000, 4096, &span_fd, &span_off,
	                            &span_count, NULL));
	assert_int_equal(span_off, 1856832 + 299000);
	assert_int_equal(span_count, 1000);
	assert_int_equal(tree_read(t, last, buf, 4096, 0, NULL), 4096);
	assert_int_equal(tree_read(t, first, buf, 1 << 20, 0, NULL), 1 << 20);
	const struct tree_node *arch = tree_lookup(t, 2, "general.architecture");
	assert_int_equal(tree_read(t, arch, buf, 100, 0, NULL), 6);

	/* cut into the header: metadata goes too, without a crash */
	assert_int_equal(ftruncate(fd, 1000), 0);
	assert_int_equal(tree_read(t, arch, buf, 100, 0, NULL), -EIO);
	assert_int_equal(tree_read(t, first, buf, 4096, 0, NULL), -EIO);

	free(buf);
	tree_free(t);
	model_close(m);
	close(fd);
	unlink(path);
	free(data);
}

/* The SIGBUS guard itself: a touch of a mapped page the file no longer has comes back
 * through the jump buffer instead of killing the process. */
static void test_guard(void **state)
{
	(void)state;
	char path[] = "/tmp/ggufs-guard-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 16), 0);
	volatile const char *map = mmap(NULL, 1 << 16, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(ftruncate(fd, 4096), 0);
	guard_install(); /* cmocka put its own SIGBUS handler in place */
	volatile int jumped = 0;
	sigjmp_buf jb;
	if (sigsetjmp(jb, 0)) {
		guard_disarm();
		jumped = 1;
	} else {
		guard_arm(&jb);
		(void)map[8192];
		guard_disarm();
	}
	assert_int_equal(jumped, 1);
	/* and again: the handler stays installed and unblocked */
	jumped = 0;
	if (sigsetjmp(jb, 0)) {
		guard_disarm();
		jumped = 1;
	} else {
		guard_arm(&jb);
		(void)map[12288];
		guard_disarm();
	}
	assert_int_equal(jumped, 1);
	assert_int_equal(map[0], 0);
	munmap((void *)map, 1 << 16);
	close(fd);
	unlink(path);
}

int unit_main(UNIT_ARGS)
{
	const struct CMUnitTest llama[] = {
		cmocka_unit_test(test_shape),
		cmocka_unit_test(test_quants),
		cmocka_unit_test(test_metadata),
		cmocka_unit_test(test_xattrs),
	};
	const struct CMUnitTest alltypes[] = {
		cmocka_unit_test(test_slices),
	};
	const struct CMUnitTest shrink[] = {
		cmocka_unit_test(test_resume),
		cmocka_unit_test(test_shrink),
		cmocka_unit_test(test_guard),
	};
	int failed = cmocka_run_group_tests_name("tree-llama", llama, setup_llama, teardown);
	failed += cmocka_run_group_tests_name("tree-alltypes", alltypes, setup_alltypes, teardown);
	failed += cmocka_run_group_tests_name("tree-shrink", shrink, NULL, NULL);
	return failed;
}
