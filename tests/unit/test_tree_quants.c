/* The quants/ file table of a tree (lib/6-tree/quants_provider.c) from many threads at
 * once, for ThreadSanitizer (.ci/run's TSan list) and ASan: more NAMEs read at once than
 * the table keeps open (QUANTS_OPEN_MAX), so that idle files are closed and opened again
 * while others read. What must hold: every byte is the one a lone reader of a tree
 * without a disk cache reads; the pool of the mount (two workers here) never has more
 * threads, however many files; and every block goes to the disk cache once, under the
 * file's own entry (a file opened again while its close is under way waits for the close,
 * rather than finding its own entry taken and running without it): a second tree of the
 * same model, with a pool of its own, reads every NAME with no block computed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "unit.h"

#include "computed.h"
#include "gguf_writer.h"
#include "model.h"
#include "quants_provider.h"
#include "scratch_dir.h"
#include "tree.h"
#include "types.h"

/* Twelve NAMEs (more than QUANTS_OPEN_MAX), each a file of a few blocks. */
static const char *const names[] = { "F16", "BF16", "Q8_0", "Q6_K", "Q5_0", "Q5_1", "Q4_0",
                                     "Q4_1", "Q5_K_S", "Q4_K_S", "Q3_K_S", "Q2_K" };
#define N_NAMES (sizeof names / sizeof *names)
#define POOL_THREADS 2
#define PIECE (40u << 10)   /* a reader's read: blocks are read in several pieces */

/* scratch_dir/model.gguf: two 512 x 640 F32 weights of a llama model, values of a hash. */
static void write_model(void)
{
	struct gw w;
	gw_init(&w);
	gw_header(&w, 3, 2, 5);
	gw_kv_str(&w, "general.architecture", "llama");
	gw_kv_u32(&w, "llama.block_count", 1);
	/* the keys llama.cpp requires of a llama before it quantizes one */
	gw_kv_u32(&w, "llama.context_length", 64);
	gw_kv_u32(&w, "llama.embedding_length", 512);
	gw_key(&w, "llama.attention.layer_norm_rms_epsilon", GGUF_TYPE_FLOAT32);
	gw_f32(&w, 1e-5f);
	const uint64_t ne[2] = { 512, 640 }, bytes = 512 * 640 * 4;
	gw_tensor(&w, "blk.0.ffn_down.weight", 2, ne, GGML_TYPE_F32, 0);
	gw_tensor(&w, "blk.0.ffn_up.weight", 2, ne, GGML_TYPE_F32, bytes);
	gw_align(&w, 32);
	uint64_t x = 1;
	for (uint64_t i = 0; i < 2 * 512 * 640; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		gw_f32(&w, (float)((int64_t)(x >> 40) - (1 << 23)) / (float)(1 << 22));
	}
	char path[128];
	snprintf(path, sizeof path, "%s/model.gguf", scratch_dir);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

/* A tree of the model and what it is built with: quants/'s per-mount state (its pool)
 * and the kit. */
struct quants_fixture {
	struct ggufs_model *m;
	struct quants_mount *qm;
	struct tree_kit *kit;
	struct tree *t;
};

/* The model's tree, with the disk cache scratch_dir/cache or none, and a pool of at most
 * threads workers (0: the online cores), as a mount of its own. */
static struct tree *open_tree(struct quants_fixture *f, bool disk, unsigned threads)
{
	char path[128], cache[128], err[GGUF_ERR_MAX];
	snprintf(path, sizeof path, "%s/model.gguf", scratch_dir);
	snprintf(cache, sizeof cache, "%s/cache", scratch_dir);
	f->m = model_open(path, err);
	if (!f->m)
		fail_msg("%s", err);
	const struct quants_opts o = { .threads = threads, .cache_dir = disk ? cache : NULL };
	f->qm = quants_mount_new(&o, NULL, err);
	f->kit = f->qm ? tree_kit_new(err) : NULL;
	if (!f->kit || !tree_kit_add(f->kit, &quants_provider, f->qm, err) ||
	    !(f->t = tree_build(f->m, f->kit, err)))
		fail_msg("%s", err);
	return f->t;
}

/* Frees what open_tree made, the pool last. */
static void close_tree(struct quants_fixture *f)
{
	tree_free(f->t);
	model_close(f->m);
	quants_mount_free(f->qm);
	tree_kit_free(f->kit);
}

static const struct tree_node *quant_node(const struct tree *t, const char *name)
{
	char file[32];
	snprintf(file, sizeof file, "%s.gguf", name);
	const struct tree_node *dir = tree_lookup(t, TREE_ROOT_INO, "quants");
	const struct tree_node *n = dir ? tree_lookup(t, dir->ino, file) : NULL;
	if (!n)
		fail_msg("no quants/%s", file);
	return n;
}

/* The whole of quants/NAME.gguf of t, read by one reader. */
static char *read_whole(const struct tree *t, const struct tree_node *n)
{
	char *buf = malloc(n->size);
	assert_non_null(buf);
	for (uint64_t off = 0; off < n->size; off += PIECE) {
		const uint64_t len = n->size - off < PIECE ? n->size - off : PIECE;
		assert_int_equal(tree_read(t, n, buf + off, len, off, NULL), (int64_t)len);
	}
	return buf;
}

static uint64_t counter(const struct tree *t, const struct tree_node *n, const char *what)
{
	char name[64], value[32];
	snprintf(name, sizeof name, "user.ggufs.blocks_%s", what);
	const int64_t len = tree_getxattr(t, n, name, value, sizeof value - 1);
	assert_true(len > 0);
	value[len] = 0;
	return strtoull(value, NULL, 10);
}

static char *want[N_NAMES];   /* each NAME's bytes, from a lone reader */

/* Readers: fewer than the NAMEs, each reads two whole, a piece of one then of the
 * other, and a piece of any NAME in between: every file has idle moments, in which
 * another's open may close it, while its reader comes back at once. */
#define N_READERS (N_NAMES / 2)

struct reader {
	const struct tree *t;
	size_t name;           /* reads NAMEs name and name + N_READERS whole, in order */
	unsigned seed;         /* and pieces of others here and there */
	atomic_int *bad;
};

/* Reads len bytes of NAME j at off and compares them: false when they differ. */
static bool read_right(const struct tree *t, size_t j, uint64_t off, uint64_t len, char *buf)
{
	const struct tree_node *n = quant_node(t, names[j]);
	if (off >= n->size)
		return true;
	if (len > n->size - off)
		len = n->size - off;
	return tree_read(t, n, buf, len, off, NULL) == (int64_t)len &&
	       memcmp(buf, want[j] + off, len) == 0;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char *buf = malloc(PIECE);
	const uint64_t end = quant_node(r->t, names[0])->size;   /* F16: the largest */
	for (uint64_t off = 0; buf && off < end; off += PIECE) {
		bool ok = read_right(r->t, r->name, off, PIECE, buf) &&
		          read_right(r->t, r->name + N_READERS, off, PIECE, buf);
		r->seed = r->seed * 1103515245u + 12345u;
		const size_t j = (r->seed >> 8) % N_NAMES;
		ok = ok && read_right(r->t, j, (r->seed >> 4) % quant_node(r->t, names[j])->size, 100, buf);
		if (!ok)
			atomic_fetch_add(r->bad, 1);
	}
	free(buf);
	return NULL;
}

struct watch {
	struct computed_pool *pool;
	atomic_bool done;
	atomic_uint most;
};

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	while (!atomic_load(&w->done)) {
		const unsigned n = computed_pool_threads(w->pool);
		if (n > atomic_load(&w->most))
			atomic_store(&w->most, n);
		nanosleep(&(struct timespec){ 0, 500000 }, NULL);
	}
	return NULL;
}

static void test_table_threads(void **state)
{
	(void)state;
	write_model();
	struct quants_fixture fx;
	struct tree *ref = open_tree(&fx, false, 0);
	uint64_t blocks = 0;
	for (size_t i = 0; i < N_NAMES; i++) {
		const struct tree_node *n = quant_node(ref, names[i]);
		want[i] = read_whole(ref, n);
		blocks += (n->size + COMPUTED_BLOCK_SIZE - 1) / COMPUTED_BLOCK_SIZE;
	}
	close_tree(&fx);

	struct tree *t = open_tree(&fx, true, POOL_THREADS);
	struct watch w = { .pool = quants_mount_pool(fx.qm) };
	pthread_t watcher, th[N_READERS];
	assert_int_equal(pthread_create(&watcher, NULL, watch_main, &w), 0);
	atomic_int bad = 0;
	struct reader r[N_READERS];
	for (size_t i = 0; i < N_READERS; i++) {
		r[i] = (struct reader){ .t = t, .name = i, .seed = (unsigned)i * 2654435761u + 1,
		                        .bad = &bad };
		assert_int_equal(pthread_create(&th[i], NULL, reader_main, &r[i]), 0);
	}
	for (size_t i = 0; i < N_READERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&w.done, true);
	pthread_join(watcher, NULL);
	assert_int_equal(atomic_load(&bad), 0);
	assert_true(atomic_load(&w.most) <= POOL_THREADS);
	/* every block had, made or assembled from the pieces another NAME's block made
	 * (F16 of the F16 model: from the model alone) */
	uint64_t made = 0, kept = 0;
	for (size_t i = 0; i < N_NAMES; i++) {
		made += counter(t, quant_node(t, names[i]), "computed");
		kept += counter(t, quant_node(t, names[i]), "from_disk");
	}
	assert_true(made > 0);
	assert_true(made + kept >= blocks);
	close_tree(&fx);

	/* a second tree, as a second mount: every block from the disk cache */
	t = open_tree(&fx, true, POOL_THREADS);
	uint64_t computed = 0, from_disk = 0;
	for (size_t i = 0; i < N_NAMES; i++) {
		const struct tree_node *n = quant_node(t, names[i]);
		char *got = read_whole(t, n);
		assert_memory_equal(got, want[i], n->size);
		free(got);
		computed += counter(t, n, "computed");
		from_disk += counter(t, n, "from_disk");
		assert_int_equal(counter(t, n, "total"),
		                 (n->size + COMPUTED_BLOCK_SIZE - 1) / COMPUTED_BLOCK_SIZE);
	}
	assert_int_equal(computed, 0);
	assert_true(from_disk >= blocks);
	close_tree(&fx);
	for (size_t i = 0; i < N_NAMES; i++)
		free(want[i]);
}

UNIT_TESTS_IN_SCRATCH(cmocka_unit_test(test_table_threads))
