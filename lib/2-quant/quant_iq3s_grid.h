/* iq3_s's grid seen from every point of its cube: for each of the 8^4 = 4096 points
 * (four 3-bit levels l0..l3, packed as l0 | l1 << 3 | l2 << 6 | l3 << 9), either the
 * grid row that is that point or, for the 3584 points off the grid, the list of grid
 * rows nearest to it, as ggml's iq3xs_init_impl(512) builds them. Private to
 * quant_iq3s.c and the unit test. */
#ifndef GGUFS_QUANT_IQ3S_GRID_H
#define GGUFS_QUANT_IQ3S_GRID_H

#include <stdint.h>

/* Points of the cube, and neighbour list cells (a count and the rows, for each point
 * off the grid): the total for ggml's iq3s_grid, checked when the lists are built. */
#define IQ3S_POINTS 4096
#define IQ3S_NEIGHBOUR_CELLS 28317

struct iq3s_cube {
	/* >= 0: the grid row (0..511) at that point; < 0: -(1 + the offset in
	 * neighbours of the point's list) */
	int32_t map[IQ3S_POINTS];
	/* per point off the grid: n, then n grid rows, nearest first */
	uint16_t neighbours[IQ3S_NEIGHBOUR_CELLS];
	/* the cells filled: IQ3S_NEIGHBOUR_CELLS when the grid is ggml's */
	uint32_t filled;
};

/* The cube, built on first use (thread-safe, once a process) and never freed. */
const struct iq3s_cube *iq3s_cube_get(void);

#endif
