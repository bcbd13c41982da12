/* libFuzzer target: one input as an importance matrix file (imatrix_parse, either
 * form). A file refused must leave one non-empty line; one read must describe only
 * bytes inside the input: every entry's sums and counts lie in it, the entries are
 * sorted with each name once and found by their name, and every weight is made (and
 * its finiteness told) without reading outside it. Any broken promise aborts. Also
 * built without libFuzzer into a regression runner (replay.c) over corpus_imatrix/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imatrix_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_imatrix: %s\n", why);
	abort();
}

static void inside(const uint8_t *data, size_t size, const void *p, uint64_t bytes)
{
	const uint8_t *b = p;
	if (bytes && (b < data || b > data + size || bytes > (uint64_t)(data + size - b)))
		broken("an entry's bytes outside the input");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct imatrix im;
	char err[GGUF_ERR_MAX] = "";
	/* a copy of exactly size bytes, so that a read past it is seen */
	uint8_t *img = malloc(size ? size : 1);
	if (!img)
		return 0;
	if (size)
		memcpy(img, data, size);
	if (imatrix_parse(img, size, &im, err) != 0) {
		if (!err[0] || strchr(err, '\n'))
			broken("a refusal without its one line");
		free(img);
		return 0;
	}
	for (uint64_t i = 0; i < im.n_entries; i++) {
		const struct imatrix_entry *e = &im.entries[i];
		inside(img, size, e->name.ptr, e->name.len);
		if (e->n_values > size / 4)
			broken("more values than the input holds");
		inside(img, size, e->sums, e->n_values * 4);
		if (!im.legacy)
			inside(img, size, e->counts, e->n_counts * 4);
		if (imatrix_find(&im, e->name.ptr, e->name.len) != e)
			broken("an entry not found by its name, or a name twice");
		float *w = malloc(e->n_values ? e->n_values * sizeof *w : 1);
		if (!w)
			break;
		imatrix_values(&im, e, w);
		float bad;
		if (imatrix_entry_finite(&im, e, &bad))
			for (uint64_t j = 0; j < e->n_values; j++)
				if (w[j] != w[j] || w[j] - w[j] != 0)
					broken("a weight not finite in an entry said finite");
		free(w);
	}
	if (im.has_dataset)
		inside(img, size, im.dataset.ptr, im.dataset.len);
	imatrix_free(&im);
	free(img);
	return 0;
}
