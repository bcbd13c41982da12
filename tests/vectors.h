/* Test helpers: the shared reference vectors copied into tests/data/vectors. */
#ifndef GGUFS_TEST_VECTORS_H
#define GGUFS_TEST_VECTORS_H

#include <stddef.h>
#include <stdint.h>

struct vector_row {
	char tensor[64];   /* "quant.q4_K" */
	char type[16];     /* "q4_K" */
	uint64_t ne0, ne1;
};

/* Reads tests/data/vectors/manifest.tsv; returns the number of rows (calloc'ed *rows). */
size_t vectors_manifest(struct vector_row **rows);

/* Reads a whole file into malloc'ed memory; aborts the test run if it cannot. */
void *vectors_slurp(const char *path, size_t *size);

/* Loads expected/TENSOR.raw and expected/TENSOR.f32. */
void *vectors_raw(const char *tensor, size_t *size);
float *vectors_f32(const char *tensor, size_t *count);

/* 0 when got matches want the way ggufs(1) asks: within 1e-6 of the largest finite
 * |want| (relative), NaN for NaN, infinities exactly; else the first bad index + 1. */
size_t vectors_compare(const float *got, const float *want, size_t n);

#endif
