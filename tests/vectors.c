#include "vectors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TEST_DATA
#error "TEST_DATA must name tests/data"
#endif

void *vectors_slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		abort();
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		abort();
	buf[n] = 0;
	fclose(f);
	*size = (size_t)n;
	return buf;
}

size_t vectors_manifest(struct vector_row **rows)
{
	size_t size;
	char *text = vectors_slurp(TEST_DATA "/vectors/manifest.tsv", &size);
	size_t cap = 128, n = 0;
	struct vector_row *r = calloc(cap, sizeof *r);
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct vector_row row = { 0 };
		unsigned long long ne0, ne1;
		if (sscanf(line, "%63s %15s %llu %llu", row.tensor, row.type, &ne0, &ne1) != 4)
			continue; /* the header line */
		row.ne0 = ne0;
		row.ne1 = ne1;
		if (n == cap)
			abort();
		r[n++] = row;
	}
	free(text);
	*rows = r;
	return n;
}

void *vectors_raw(const char *tensor, size_t *size)
{
	char path[512];
	snprintf(path, sizeof path, TEST_DATA "/vectors/expected/%s.raw", tensor);
	return vectors_slurp(path, size);
}

float *vectors_f32(const char *tensor, size_t *count)
{
	char path[512];
	size_t size;
	snprintf(path, sizeof path, TEST_DATA "/vectors/expected/%s.f32", tensor);
	float *f = vectors_slurp(path, &size);
	*count = size / sizeof(float);
	return f;
}

size_t vectors_compare(const float *got, const float *want, size_t n)
{
	double scale = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(want[i]) && fabs(want[i]) > scale)
			scale = fabs(want[i]);
	double tol = 1e-6 * (scale > 0 ? scale : 1);
	for (size_t i = 0; i < n; i++) {
		if (isnan(want[i])) {
			if (!isnan(got[i]))
				return i + 1;
		} else if (isinf(want[i])) {
			if (got[i] != want[i])
				return i + 1;
		} else if (!(fabs((double)got[i] - want[i]) <= tol)) {
			return i + 1;
		}
	}
	return 0;
}
