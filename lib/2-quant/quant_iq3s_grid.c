/* iq3_s's cube: which grid row each point of 8^4 is, or which rows are nearest to it,
 * built from ggml's iq3s_grid as ggml's iq3xs_init_impl(512) builds its kmap_q3xs and
 * kneighbors_q3xs. The order of a neighbour list matters (iq3_s's quantizer keeps the
 * first of equally good rows), so it is ggml's: by squared distance, then by row, and
 * only the rows at the three smallest distances. */
#include "quant_iq3s_grid.h"

#include "ggml_tables.h"

#include <pthread.h>

#define IQ3S_ROWS 512

/* How many of the smallest distinct distances a point's list covers (ggml's nwant for
 * the 512-row grid). */
#define IQ3S_NWANT 3

static struct iq3s_cube cube;
static pthread_once_t cube_once = PTHREAD_ONCE_INIT;

/* Level k (0..7) of a grid row: its byte k is 2 * level + 1. */
static int row_level(uint32_t row, int k)
{
	return (int)(((row >> (8 * k)) & 0xff) - 1) / 2;
}

/* The point whose levels are those of grid row r. */
static int row_point(uint32_t row)
{
	int u = 0;

	for (int k = 0; k < 4; k++)
		u |= row_level(row, k) << (3 * k);
	return u;
}

/* Appends point u's neighbour list at cube.neighbours[at]: the count, then every row at
 * one of the IQ3S_NWANT smallest squared distances from u, nearer first and, at one
 * distance, lower row first. The grid's bytes are odd, 2l + 1, so distances are those
 * of the levels, times 4. Returns the cells it took, or 0 if they do not fit (the grid
 * is then not ggml's; the caller leaves filled short). */
static uint32_t list_neighbours(int u, uint32_t at)
{
	int dist[IQ3S_ROWS];
	int levels[IQ3S_NWANT], nlevels = 0;

	for (int j = 0; j < IQ3S_ROWS; j++) {
		int d2 = 0;
		for (int k = 0; k < 4; k++) {
			const int diff = 2 * row_level(iq3s_grid[j], k) - 2 * ((u >> (3 * k)) & 7);
			d2 += diff * diff;
		}
		dist[j] = d2;
	}
	/* the smallest distinct distances, ascending: an insertion into a short sorted list */
	for (int j = 0; j < IQ3S_ROWS; j++) {
		int pos = 0;
		while (pos < nlevels && levels[pos] < dist[j])
			pos++;
		if (pos < nlevels && levels[pos] == dist[j])
			continue;
		if (pos == IQ3S_NWANT)
			continue;
		if (nlevels < IQ3S_NWANT)
			nlevels++;
		for (int m = nlevels - 1; m > pos; m--)
			levels[m] = levels[m - 1];
		levels[pos] = dist[j];
	}

	uint32_t n = 0;
	for (int l = 0; l < nlevels; l++) {
		for (int j = 0; j < IQ3S_ROWS; j++) {
			if (dist[j] != levels[l])
				continue;
			if (at + 1 + n >= IQ3S_NEIGHBOUR_CELLS)
				return 0;
			cube.neighbours[at + 1 + n++] = (uint16_t)j;
		}
	}
	cube.neighbours[at] = (uint16_t)n;
	return 1 + n;
}

/* Fills cube: the rows' points first, then a list for every other point, in point
 * order. */
static void build_cube(void)
{
	for (int u = 0; u < IQ3S_POINTS; u++)
		cube.map[u] = -1;
	for (int j = 0; j < IQ3S_ROWS; j++)
		cube.map[row_point(iq3s_grid[j])] = j;

	uint32_t at = 0;
	for (int u = 0; u < IQ3S_POINTS; u++) {
		if (cube.map[u] >= 0)
			continue;
		const uint32_t took = list_neighbours(u, at);
		if (took == 0)
			break;
		cube.map[u] = -(int32_t)(at + 1);
		at += took;
	}
	cube.filled = at;
}

const struct iq3s_cube *iq3s_cube_get(void)
{
	pthread_once(&cube_once, build_cube);
	return &cube;
}
