/* The i-quants' grids seen from every point their quantizers round to, as ggml's
 * iq2xs_init_impl and iq3xs_init_impl build them (kmap_q2xs and kneighbors_q2xs,
 * kmap_q3xs and kneighbors_q3xs). A grid is a list of rows of dims levels each (8
 * levels of 0..2 for iq2_xxs, iq2_xs, iq2_s and iq1_s/iq1_m; 4 of 0..7 for iq3_xxs
 * and iq3_s), the rows of ggml's dequantization grid (ggml_tables.h) with each byte
 * read as the level it stands for. A point packs dims levels, level k at bit bits * k
 * (bits 2 or 3). For every point a quantizer can round a group to, the map gives
 * either the grid row that is that point or the list of rows nearest to it: those at
 * the nwant smallest distances (squared, over the levels), nearer first and, at one
 * distance, lower row first, as ggml sorts them (a total order: the same list whatever
 * the sort). Private to this layer and the unit test. */
#ifndef GGUFS_QUANT_GRID_H
#define GGUFS_QUANT_GRID_H

#include <stdint.h>

enum quant_grid_id {
	QUANT_GRID_IQ2_XXS,     /* 256 rows of 8, lists over the 2 nearest distances */
	QUANT_GRID_IQ2_XS,      /* 512 rows of 8, 2 distances */
	QUANT_GRID_IQ2_S,       /* 1024 rows of 8, 1 distance */
	QUANT_GRID_IQ1_S,       /* 2048 rows of 8 (iq1_s and iq1_m), 3 distances */
	QUANT_GRID_IQ3_XXS,     /* 256 rows of 4, 2 distances */
	QUANT_GRID_IQ3_S,       /* 512 rows of 4, 3 distances */
	QUANT_GRID_COUNT
};

/* map's value at a point no quantizer rounds to (an 8-value point with a level 3). */
#define QUANT_GRID_NONE INT32_MIN

struct quant_grid {
	uint32_t rows;          /* grid rows */
	uint32_t dims;          /* levels a row: 8 or 4 */
	uint32_t bits;          /* bits a level takes in a point: 2 or 3 */
	uint32_t nwant;         /* how many of the smallest distances a list covers */
	uint32_t cells;         /* neighbour cells for ggml's grid: the lists' total */
	uint32_t filled;        /* the cells built: cells when the grid is ggml's */
	/* row r's levels, level k at level[r][k] */
	const uint8_t (*level)[8];
	/* row r's odd values 2 * level + 1 as floats, for the 4-value grids (NULL for the
	 * others): the q of ggml's distances, one vector a row */
	const float (*odd)[4];
	/* by point (1 << (bits * dims) of them): >= 0, the row at that point; < 0 but not
	 * QUANT_GRID_NONE, -(1 + the offset in neighbours of the point's list) */
	const int32_t *map;
	/* the lists, one per point off the grid: n, then n rows, nearest first */
	const uint16_t *neighbours;
};

/* Grid id, built on first use (thread-safe, once a process; never freed); NULL for an
 * id out of range. */
const struct quant_grid *quant_grid_get(enum quant_grid_id id);

/* The list of rows nearest to point u of g: nb[0] rows at nb[1..], or NULL when u is a
 * grid row (then map[u] is it) or a point no quantizer rounds to. */
static inline const uint16_t *quant_grid_neighbours(const struct quant_grid *g, uint32_t u)
{
	const int32_t m = g->map[u];

	if (m >= 0 || m == QUANT_GRID_NONE)
		return (const uint16_t *)0;
	return g->neighbours + (-(int64_t)m - 1);
}

#endif
