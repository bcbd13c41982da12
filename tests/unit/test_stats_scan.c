/* The parallel scan (lib/4-stats/stats_scan.h): every segment of every job visited once
 * with the plan's item numbers, the figures of its parts merged equal to stats_tensor's
 * bit for bit, two models side by side, the first failure in order reported with its
 * job, and a model that shrank under the scan failing its reads, never crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "gguf_writer.h"
#include "guard.h"
#include "model.h"
#include "stats.h"
#include "stats_scan.h"
#include "test_data.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

/* The sequence of this test (test_data.h). */
static uint64_t next_u64(void)
{
	return xorshift64(&rng);
}

/* The model's tensors: q8_0 over three segments (the last short), f32 of one short
 * segment, q4_0 of exactly two, and an f32 of 1000 values. */
static const struct { const char *name; uint32_t type; uint64_t n; } tensors[] = {
	{ "a.q8_0", GGML_TYPE_Q8_0, 2 * STATS_SEGMENT + 4096 * 32 },
	{ "b.f32", GGML_TYPE_F32, 70000 },
	{ "c.q4_0", GGML_TYPE_Q4_0, 2 * STATS_SEGMENT },
	{ "d.f32", GGML_TYPE_F32, 1000 },
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

/* Random blocks with a finite fp16 scale near 2^-6 (or random finite floats). */
static void tensor_bytes(struct gw *w, uint32_t type, uint64_t n)
{
	const struct ggml_type *ty = ggml_type_get(type);
	const uint64_t blocks = n / ty->block_elems;
	uint8_t b[64];
	for (uint64_t j = 0; j < blocks; j++) {
		if (type == GGML_TYPE_F32) {
			gw_f32(w, (float)((double)(next_u64() >> 11) * 0x1p-53 - 0.5));
			continue;
		}
		for (uint32_t i = 0; i < ty->block_bytes; i++)
			b[i] = (uint8_t)next_u64();
		b[0] = 0x00;
		b[1] = 0x24;   /* d = 2^-6, the first field of both block types */
		gw_raw(w, b, ty->block_bytes);
	}
}

/* gw_flat_model's tensor k: tensors[k]. */
static void flat_tensor(void *ctx, int k, const char **name, uint32_t *type, uint64_t *n,
                        struct gw *data)
{
	(void)ctx;
	*name = tensors[k].name;
	*type = tensors[k].type;
	*n = tensors[k].n;
	tensor_bytes(data, tensors[k].type, tensors[k].n);
}

static void write_model(const char *path)
{
	struct gw w;
	gw_init(&w);
	gw_flat_model(&w, N_TENSORS, flat_tensor, NULL);
	assert_true(gw_save(&w, path));
	gw_free(&w);
}

static char path[64];

static int setup(void **state)
{
	(void)state;
	guard_install();
	strcpy(path, "/tmp/ggufs-scan-XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	write_model(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static struct ggufs_model *open_model(void)
{
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(path, err);
	if (!m)
		fail_msg("%s", err);
	return m;
}

/* What a test visitor records per item. */
struct record {
	const struct ggufs_model *m[2];
	uint64_t n_items;
	atomic_uint *visits;          /* per item */
	struct stats_part *parts;     /* per item, of model m[0] */
	uint64_t fail_at[2];          /* items that fail with -EIO (UINT64_MAX: none) */
	bool pair_ok;                 /* every visit of two models saw two like tensors */
};

static int visit(void *ctx, const struct stats_scan_job *job, uint64_t seg, uint64_t item,
                 _Atomic uint64_t *progress)
{
	struct record *r = ctx;
	if (item >= r->n_items || item != job->first_item + seg || seg >= job->segments)
		return -ERANGE;
	atomic_fetch_add(&r->visits[item], 1);
	if (item == r->fail_at[0] || item == r->fail_at[1])
		return -EIO;
	if (r->m[1] && model_tensor(r->m[0], job->tensor[0])->n_elements !=
	               model_tensor(r->m[1], job->tensor[1])->n_elements)
		r->pair_ok = false;
	return stats_segment(r->m[0], job->tensor[0], seg, &r->parts[item], progress);
}

/* A scan of m (and m2 beside it, the same tensors in reverse order, when not NULL). */
static int run_scan(struct ggufs_model *m, struct ggufs_model *m2, struct record *r,
                    struct stats_scan *sc, uint64_t fail0, uint64_t fail1, uint64_t *failed)
{
	static struct stats_scan_job jobs[N_TENSORS];
	memset(jobs, 0, sizeof jobs);
	for (int k = 0; k < N_TENSORS; k++) {
		jobs[k].tensor[0] = (uint64_t)k;
		jobs[k].tensor[1] = (uint64_t)k;
	}
	*sc = (struct stats_scan){ .model = { m, m2 }, .jobs = jobs, .n_jobs = N_TENSORS,
	                           .visit = visit, .ctx = r };
	*r = (struct record){ .m = { m, m2 }, .fail_at = { fail0, fail1 }, .pair_ok = true };
	r->n_items = stats_scan_plan(sc);
	r->visits = calloc(r->n_items, sizeof *r->visits);
	r->parts = calloc(r->n_items, sizeof *r->parts);
	assert_non_null(r->visits);
	assert_non_null(r->parts);
	return stats_scan_run(sc, failed);
}

static void free_record(struct record *r)
{
	free(r->visits);
	free(r->parts);
}

static void test_every_item_once(void **state)
{
	(void)state;
	struct ggufs_model *m = open_model();
	struct record r;
	struct stats_scan sc;
	uint64_t failed = 7;
	assert_int_equal(run_scan(m, NULL, &r, &sc, UINT64_MAX, UINT64_MAX, &failed), 0);
	assert_int_equal(r.n_items, 3 + 1 + 2 + 1);
	for (uint64_t k = 0; k < r.n_items; k++)
		assert_int_equal(atomic_load(&r.visits[k]), 1);
	for (uint64_t j = 0; j < sc.n_jobs; j++) {
		const struct stats_scan_job *job = &sc.jobs[j];
		struct stats_part all = r.parts[job->first_item];
		for (uint64_t e = 1; e < job->segments; e++)
			stats_merge(&all, &r.parts[job->first_item + e]);
		struct tensor_stats got, want;
		memset(&got, 0, sizeof got);
		memset(&want, 0, sizeof want);
		stats_finish(&all, &got);
		assert_int_equal(stats_tensor(m, job->tensor[0], &want, NULL), 0);
		assert_memory_equal(&got, &want, sizeof got);
		assert_int_equal(got.elements, tensors[j].n);
	}
	free_record(&r);
	model_close(m);
}

static void test_two_models(void **state)
{
	(void)state;
	struct ggufs_model *a = open_model(), *b = open_model();
	struct record r;
	struct stats_scan sc;
	uint64_t failed;
	assert_int_equal(run_scan(a, b, &r, &sc, UINT64_MAX, UINT64_MAX, &failed), 0);
	assert_true(r.pair_ok);
	for (uint64_t k = 0; k < r.n_items; k++)
		assert_int_equal(atomic_load(&r.visits[k]), 1);
	free_record(&r);
	model_close(a);
	model_close(b);
}

static void test_first_failure(void **state)
{
	(void)state;
	struct ggufs_model *m = open_model();
	struct record r;
	struct stats_scan sc;
	uint64_t failed = 0;
	/* items 4 (c.q4_0's first) and 6 (d.f32) fail: the first in order is c's */
	assert_int_equal(run_scan(m, NULL, &r, &sc, 6, 4, &failed), -EIO);
	assert_int_equal(failed, 2);
	/* every item before the failed one was visited, once */
	for (uint64_t k = 0; k < 4; k++)
		assert_int_equal(atomic_load(&r.visits[k]), 1);
	free_record(&r);
	model_close(m);
}

static void test_shrunk(void **state)
{
	(void)state;
	struct ggufs_model *m = open_model();
	struct model_file_info fi;
	model_file(m, 0, &fi);
	const uint64_t size = fi.size;
	assert_int_equal(truncate(path, (off_t)(size / 3)), 0);
	struct record r;
	struct stats_scan sc;
	uint64_t failed = 9;
	assert_int_equal(run_scan(m, NULL, &r, &sc, UINT64_MAX, UINT64_MAX, &failed), -EIO);
	assert_true(failed < N_TENSORS);
	free_record(&r);
	model_close(m);
	write_model(path);
}

UNIT_TESTS_IN_GROUP(setup, teardown,
	cmocka_unit_test(test_every_item_once),
	cmocka_unit_test(test_two_models),
	cmocka_unit_test(test_first_failure),
	cmocka_unit_test(test_shrunk))
