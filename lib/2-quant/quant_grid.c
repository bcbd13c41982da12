/* The i-quants' grids and their neighbour lists (quant_grid.h), built from ggml's
 * dequantization grids (ggml_tables.h) as ggml's iq2xs_init_impl and iq3xs_init_impl
 * build theirs. ggml makes lists for every point of its map; here only the points a
 * quantizer can round to have one (for the 8-value grids, the 3^8 points of levels
 * 0..2: every quantizer clamps its levels there), which are the same lists. The sizes
 * are those of ggml's grids, checked as they are built; the arrays are static. */
#include "quant_grid.h"

#include "ggml_tables.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define GRID_MAX_ROWS 2048

/* What a grid is built from and into. */
struct grid_spec {
	const uint64_t *rows64;         /* the dequantization grid, 8 bytes a row, or */
	const uint32_t *rows32;         /* 4 bytes a row */
	uint32_t rows, nwant, cells;
	uint8_t value[8];               /* the byte that stands for level 0, 1, ... */
	uint32_t nvalues;
	int32_t *map;                   /* 1 << (bits * dims) cells */
	uint16_t *neighbours;           /* cells cells */
	uint8_t (*level)[8];            /* rows rows */
	float (*odd)[4];                /* rows rows, for the 4-value grids */
};

#define CELLS_IQ2_XXS 119462
#define CELLS_IQ2_XS 187770
#define CELLS_IQ2_S 50253
#define CELLS_IQ1_S 332234
#define CELLS_IQ3_XXS 22825
#define CELLS_IQ3_S 28317

static int32_t map_iq2_xxs[1 << 16], map_iq2_xs[1 << 16], map_iq2_s[1 << 16],
               map_iq1_s[1 << 16], map_iq3_xxs[1 << 12], map_iq3_s[1 << 12];
static uint16_t nb_iq2_xxs[CELLS_IQ2_XXS], nb_iq2_xs[CELLS_IQ2_XS], nb_iq2_s[CELLS_IQ2_S],
                nb_iq1_s[CELLS_IQ1_S], nb_iq3_xxs[CELLS_IQ3_XXS], nb_iq3_s[CELLS_IQ3_S];
static uint8_t lv_iq2_xxs[256][8], lv_iq2_xs[512][8], lv_iq2_s[1024][8], lv_iq1_s[2048][8],
               lv_iq3_xxs[256][8], lv_iq3_s[512][8];
static float odd_iq3_xxs[256][4] __attribute__((aligned(16))),
             odd_iq3_s[512][4] __attribute__((aligned(16)));

#define IQ2_VALUES { 0x08, 0x19, 0x2b }, 3
#define IQ1_VALUES { 0xff, 0x00, 0x01 }, 3
#define IQ3_XXS_VALUES { 4, 12, 20, 28, 36, 44, 52, 62 }, 8
#define IQ3_S_VALUES { 1, 3, 5, 7, 9, 11, 13, 15 }, 8

static const struct grid_spec specs[QUANT_GRID_COUNT] = {
	[QUANT_GRID_IQ2_XXS] = { iq2xxs_grid, NULL, 256, 2, CELLS_IQ2_XXS, IQ2_VALUES,
	                         map_iq2_xxs, nb_iq2_xxs, lv_iq2_xxs },
	[QUANT_GRID_IQ2_XS] = { iq2xs_grid, NULL, 512, 2, CELLS_IQ2_XS, IQ2_VALUES,
	                        map_iq2_xs, nb_iq2_xs, lv_iq2_xs },
	[QUANT_GRID_IQ2_S] = { iq2s_grid, NULL, 1024, 1, CELLS_IQ2_S, IQ2_VALUES,
	                       map_iq2_s, nb_iq2_s, lv_iq2_s },
	[QUANT_GRID_IQ1_S] = { iq1s_grid, NULL, 2048, 3, CELLS_IQ1_S, IQ1_VALUES,
	                       map_iq1_s, nb_iq1_s, lv_iq1_s },
	[QUANT_GRID_IQ3_XXS] = { NULL, iq3xxs_grid, 256, 2, CELLS_IQ3_XXS, IQ3_XXS_VALUES,
	                         map_iq3_xxs, nb_iq3_xxs, lv_iq3_xxs, odd_iq3_xxs },
	[QUANT_GRID_IQ3_S] = { NULL, iq3s_grid, 512, 3, CELLS_IQ3_S, IQ3_S_VALUES,
	                       map_iq3_s, nb_iq3_s, lv_iq3_s, odd_iq3_s },
};

static struct quant_grid grids[QUANT_GRID_COUNT];
static pthread_once_t once[QUANT_GRID_COUNT] = {
	PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
	PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
};

/* Reads row r of s's grid into levels; false when a byte is none of s's values (the
 * table is not ggml's). */
static bool read_row(const struct grid_spec *s, uint32_t r, uint8_t *levels)
{
	const uint32_t dims = s->rows64 ? 8 : 4;

	for (uint32_t k = 0; k < dims; k++) {
		const uint8_t byte = s->rows64 ? (uint8_t)(s->rows64[r] >> (8 * k))
		                               : (uint8_t)(s->rows32[r] >> (8 * k));
		uint32_t v = 0;
		while (v < s->nvalues && s->value[v] != byte)
			v++;
		if (v == s->nvalues)
			return false;
		levels[k] = (uint8_t)v;
	}
	return true;
}

/* Appends point pt's list (its levels in pt) at g's neighbours[at], as quant_grid.h
 * orders it: the count, then every row at one of the nwant smallest distances.
 * Returns the cells it took, or 0 if they do not fit in cells. */
static uint32_t list_neighbours(const struct grid_spec *s, const uint8_t *pt, uint32_t dims,
                                uint32_t at)
{
	int dist[GRID_MAX_ROWS];
	int want[3];
	uint32_t nwant = 0;

	for (uint32_t j = 0; j < s->rows; j++) {
		int d2 = 0;
		for (uint32_t k = 0; k < dims; k++) {
			const int diff = (int)s->level[j][k] - (int)pt[k];
			d2 += diff * diff;
		}
		dist[j] = d2;
	}
	/* the smallest distinct distances, ascending: an insertion into a short list */
	for (uint32_t j = 0; j < s->rows; j++) {
		uint32_t pos = 0;
		while (pos < nwant && want[pos] < dist[j])
			pos++;
		if ((pos < nwant && want[pos] == dist[j]) || pos == s->nwant)
			continue;
		if (nwant < s->nwant)
			nwant++;
		for (uint32_t m = nwant - 1; m > pos; m--)
			want[m] = want[m - 1];
		want[pos] = dist[j];
	}
	uint32_t n = 0;
	for (uint32_t l = 0; l < nwant; l++) {
		for (uint32_t j = 0; j < s->rows; j++) {
			if (dist[j] != want[l])
				continue;
			if (at + 1 + n >= s->cells)
				return 0;
			s->neighbours[at + 1 + n++] = (uint16_t)j;
		}
	}
	s->neighbours[at] = (uint16_t)n;
	return 1 + n;
}

/* Builds grid id from its spec: the rows' levels and points, then a list for every
 * other point a quantizer reaches, in point order. A grid that is not ggml's (a byte
 * of no level, two rows at one point, lists that do not fit) stops short, with filled
 * below cells and the points it did not reach at QUANT_GRID_NONE. */
static void build(enum quant_grid_id id)
{
	const struct grid_spec *s = &specs[id];
	const uint32_t dims = s->rows64 ? 8 : 4, bits = s->rows64 ? 2 : 3;
	const uint32_t points = 1u << (bits * dims);
	struct quant_grid *g = &grids[id];

	*g = (struct quant_grid){ .rows = s->rows, .dims = dims, .bits = bits,
	                          .nwant = s->nwant, .cells = s->cells,
	                          .level = (const uint8_t (*)[8])s->level,
	                          .odd = (const float (*)[4])s->odd, .map = s->map,
	                          .neighbours = s->neighbours };
	for (uint32_t u = 0; u < points; u++)
		s->map[u] = QUANT_GRID_NONE;
	for (uint32_t r = 0; r < s->rows; r++) {
		if (!read_row(s, r, s->level[r]))
			return;
		for (uint32_t k = 0; s->odd && k < 4; k++)
			s->odd[r][k] = (float)(2 * s->level[r][k] + 1);
		uint32_t u = 0;
		for (uint32_t k = 0; k < dims; k++)
			u |= (uint32_t)s->level[r][k] << (bits * k);
		if (s->map[u] >= 0)
			return;
		s->map[u] = (int32_t)r;
	}
	uint32_t at = 0;
	for (uint32_t u = 0; u < points; u++) {
		if (s->map[u] >= 0)
			continue;
		uint8_t pt[8];
		bool reached = true;
		for (uint32_t k = 0; k < dims; k++) {
			pt[k] = (uint8_t)((u >> (bits * k)) & ((1u << bits) - 1));
			reached = reached && pt[k] < s->nvalues;
		}
		if (!reached) {
			s->map[u] = QUANT_GRID_NONE;
			continue;
		}
		const uint32_t took = list_neighbours(s, pt, dims, at);
		if (took == 0)
			return;
		s->map[u] = -(int32_t)(at + 1);
		at += took;
	}
	g->filled = at;
}

static void build_iq2_xxs(void) { build(QUANT_GRID_IQ2_XXS); }
static void build_iq2_xs(void) { build(QUANT_GRID_IQ2_XS); }
static void build_iq2_s(void) { build(QUANT_GRID_IQ2_S); }
static void build_iq1_s(void) { build(QUANT_GRID_IQ1_S); }
static void build_iq3_xxs(void) { build(QUANT_GRID_IQ3_XXS); }
static void build_iq3_s(void) { build(QUANT_GRID_IQ3_S); }

static void (*const builders[QUANT_GRID_COUNT])(void) = {
	build_iq2_xxs, build_iq2_xs, build_iq2_s, build_iq1_s, build_iq3_xxs, build_iq3_s,
};

const struct quant_grid *quant_grid_get(enum quant_grid_id id)
{
	if ((unsigned)id >= QUANT_GRID_COUNT)
		return NULL;
	pthread_once(&once[id], builders[id]);
	return &grids[id];
}
