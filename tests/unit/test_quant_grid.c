/* lib/2-quant's i-quant grids (quant_grid.h), as ggml's iq2xs_init_impl and
 * iq3xs_init_impl build them: each row read from ggml's dequantization table sits at
 * the point ggml's own encoding of it (kgrid_2bit_256 and the others in ggml-quants.c,
 * a few entries of each quoted here) says; every point a quantizer reaches and no row
 * is at has a list of rows sorted by distance then row, holding every row at its nwant
 * smallest distances and no other; the lists fill ggml's count of cells exactly; points
 * no quantizer reaches have none; and two threads asking for a grid at once get the one
 * grid, built once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "unit.h"

#include "quant_grid.h"

/* Rows and ggml's point for them (level k at bit bits * k), from ggml-quants.c: the
 * first three, one at a third, the last two of each kgrid table. */
struct known_row {
	uint32_t row, point;
};

static const struct {
	enum quant_grid_id id;
	uint32_t rows, dims, nwant;
	struct known_row known[6];
} grids[] = {
	{ QUANT_GRID_IQ2_XXS, 256, 8, 2,
	  { { 0, 0 }, { 1, 2 }, { 2, 5 }, { 85, 4442 }, { 254, 43088 }, { 255, 43268 } } },
	{ QUANT_GRID_IQ2_XS, 512, 8, 2,
	  { { 0, 0 }, { 1, 2 }, { 2, 5 }, { 170, 4624 }, { 510, 43665 }, { 511, 43690 } } },
	{ QUANT_GRID_IQ2_S, 1024, 8, 1,
	  { { 0, 0 }, { 1, 2 }, { 2, 5 }, { 341, 6150 }, { 1022, 43656 }, { 1023, 43690 } } },
	{ QUANT_GRID_IQ1_S, 2048, 8, 3,
	  { { 0, 0 }, { 1, 2 }, { 2, 5 }, { 682, 16918 }, { 2046, 43688 }, { 2047, 43690 } } },
	{ QUANT_GRID_IQ3_XXS, 256, 4, 2,
	  { { 0, 0 }, { 1, 2 }, { 2, 4 }, { 85, 742 }, { 254, 3924 }, { 255, 3992 } } },
	{ QUANT_GRID_IQ3_S, 512, 4, 3,
	  { { 0, 0 }, { 1, 1 }, { 2, 2 }, { 170, 795 }, { 510, 3993 }, { 511, 4032 } } },
};

/* The squared distance of row r of g from point u. */
static int distance(const struct quant_grid *g, uint32_t r, uint32_t u)
{
	int d2 = 0;

	for (uint32_t k = 0; k < g->dims; k++) {
		const int l = (int)((u >> (g->bits * k)) & ((1u << g->bits) - 1));
		const int diff = (int)g->level[r][k] - l;
		d2 += diff * diff;
	}
	return d2;
}

/* Checks point u's list in g against every row's distance from it. */
static void check_list(const struct quant_grid *g, uint32_t u)
{
	const uint16_t *nb = quant_grid_neighbours(g, u);

	assert_non_null(nb);
	assert_true(nb[0] > 0);
	int levels = 1, last = distance(g, nb[1], u);
	for (int j = 2; j <= nb[0]; j++) {
		const int dj = distance(g, nb[j], u), dp = distance(g, nb[j - 1], u);
		assert_true(dj > dp || (dj == dp && nb[j] > nb[j - 1]));
		if (dj > last) {
			levels++;
			last = dj;
		}
	}
	/* every row at the distances listed, none nearer than the first, and nwant
	 * distances unless fewer exist */
	int count = 0, beyond = 0;
	for (uint32_t r = 0; r < g->rows; r++) {
		const int d = distance(g, r, u);
		assert_true(d >= distance(g, nb[1], u));
		count += d <= last;
		beyond += d > last;
	}
	assert_int_equal(count, nb[0]);
	assert_true(levels == (int)g->nwant || (levels < (int)g->nwant && beyond == 0));
}

/* One grid: its shape, the known rows, and every point's entry. */
static void check_grid(size_t i)
{
	const struct quant_grid *g = quant_grid_get(grids[i].id);

	assert_non_null(g);
	assert_int_equal(g->rows, grids[i].rows);
	assert_int_equal(g->dims, grids[i].dims);
	assert_int_equal(g->nwant, grids[i].nwant);
	assert_int_equal(g->filled, g->cells);
	for (size_t k = 0; k < 6; k++)
		assert_int_equal(g->map[grids[i].known[k].point], (int32_t)grids[i].known[k].row);

	const uint32_t points = 1u << (g->bits * g->dims);
	uint32_t on_grid = 0, listed = 0;
	for (uint32_t u = 0; u < points; u++) {
		bool reached = true;
		for (uint32_t k = 0; k < g->dims; k++)
			reached = reached && ((u >> (g->bits * k)) & ((1u << g->bits) - 1)) <
			                     (g->dims == 8 ? 3u : 8u);
		if (!reached) {
			assert_int_equal(g->map[u], QUANT_GRID_NONE);
			assert_null(quant_grid_neighbours(g, u));
			continue;
		}
		if (g->map[u] >= 0) {
			on_grid++;
			assert_int_equal(distance(g, (uint32_t)g->map[u], u), 0);
			assert_null(quant_grid_neighbours(g, u));
			continue;
		}
		check_list(g, u);
		listed += 1 + quant_grid_neighbours(g, u)[0];
	}
	assert_int_equal(on_grid, g->rows);
	assert_int_equal(listed, g->cells);
}

static void test_iq2_xxs(void **state)
{
	(void)state;
	check_grid(0);
}

static void test_iq2_xs(void **state)
{
	(void)state;
	check_grid(1);
}

static void test_iq2_s(void **state)
{
	(void)state;
	check_grid(2);
}

static void test_iq1_s(void **state)
{
	(void)state;
	check_grid(3);
}

static void test_iq3_xxs(void **state)
{
	(void)state;
	check_grid(4);
}

static void test_iq3_s(void **state)
{
	(void)state;
	check_grid(5);
}

/* An id out of range has no grid. */
static void test_out_of_range(void **state)
{
	(void)state;
	assert_null(quant_grid_get(QUANT_GRID_COUNT));
	assert_null(quant_grid_get((enum quant_grid_id)-1));
}

/* What each of two threads saw: the grids it was given, and their cells. */
struct seen {
	const struct quant_grid *g[QUANT_GRID_COUNT];
	uint32_t filled[QUANT_GRID_COUNT];
};

static void *ask_all(void *arg)
{
	struct seen *s = arg;

	for (int id = QUANT_GRID_COUNT - 1; id >= 0; id--) {
		s->g[id] = quant_grid_get((enum quant_grid_id)id);
		s->filled[id] = s->g[id]->filled;
	}
	return NULL;
}

/* Two threads asking for every grid at once (each the first to ask, in a fresh
 * process: run this case alone to see it under TSan) get the same grids, whole. */
static void test_two_threads(void **state)
{
	(void)state;
	struct seen a, b;
	pthread_t ta, tb;

	assert_int_equal(pthread_create(&ta, NULL, ask_all, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, ask_all, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	for (int id = 0; id < QUANT_GRID_COUNT; id++) {
		assert_ptr_equal(a.g[id], b.g[id]);
		assert_int_equal(a.filled[id], a.g[id]->cells);
		assert_int_equal(b.filled[id], b.g[id]->cells);
	}
}

UNIT_TESTS(
	cmocka_unit_test(test_two_threads),
	cmocka_unit_test(test_iq2_xxs),
	cmocka_unit_test(test_iq2_xs),
	cmocka_unit_test(test_iq2_s),
	cmocka_unit_test(test_iq1_s),
	cmocka_unit_test(test_iq3_xxs),
	cmocka_unit_test(test_iq3_s),
	cmocka_unit_test(test_out_of_range),
)
