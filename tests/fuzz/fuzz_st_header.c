/* libFuzzer target: one input as a whole .safetensors file (st_header_size, then
 * st_header_parse over the bytes it asks for). A file refused must leave one non-empty
 * line; a header read must describe only bytes inside the input: every tensor's range in
 * the data after the header, no two non-empty ranges overlapping, its bytes its shape's
 * elements times its dtype's size, at most four dimensions, the names sorted with each
 * once and each found by its name. Any broken promise aborts. Also built without
 * libFuzzer into a regression runner (replay.c) over corpus_st_header/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_st_header: %s\n", why);
	abort();
}

/* Checks the promises of header h read from a file of size bytes. */
static void check(const struct st_header *h, uint64_t size)
{
	if (h->data_offset < 8 || h->data_offset > size)
		broken("the data begins outside the input");
	for (size_t i = 0; i < h->n; i++) {
		const struct st_tensor *t = &h->t[i];
		if (t->offset < h->data_offset || t->offset > size || t->size > size - t->offset)
			broken("a tensor's bytes outside the data");
		if (t->n_dims > ST_MAX_DIMS)
			broken("more dimensions than GGUF's");
		uint64_t n = 1;
		for (uint32_t d = 0; d < t->n_dims; d++)
			if (__builtin_mul_overflow(n, t->shape[d], &n))
				broken("a shape that overflows");
		if (n != t->n_elements || n * st_dtype_size(t->dtype) != t->size)
			broken("a tensor's bytes not its shape's");
		if (i > 0 && strcmp(h->t[i - 1].name, t->name) >= 0)
			broken("names not sorted, or one twice");
		if (st_header_find(h, t->name) != t)
			broken("a tensor not found by its name");
		for (size_t j = 0; j < i; j++) {
			const struct st_tensor *u = &h->t[j];
			if (t->size && u->size && t->offset < u->offset + u->size &&
			    u->offset < t->offset + t->size)
				broken("two tensors' bytes overlap");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[GGUF_ERR_MAX] = "";
	uint64_t need;
	struct st_header h;
	/* the size check reads 8 bytes: give it them even when the input is shorter */
	uint8_t first[8] = { 0 };
	memcpy(first, data, size < 8 ? size : 8);
	if (!st_header_size(first, size, "f.safetensors", &need, err)) {
		if (!err[0] || strchr(err, '\n'))
			broken("a refusal without its one line");
		return 0;
	}
	if (need > size)
		broken("a header longer than the input");
	/* exactly need bytes, so that a read past the header is seen */
	uint8_t *head = malloc(need);
	if (!head)
		return 0;
	memcpy(head, data, need);
	if (st_header_parse(head, need, size, "f.safetensors", &h, err) != 0) {
		if (!err[0] || strchr(err, '\n'))
			broken("a refusal without its one line");
		free(head);
		return 0;
	}
	free(head);
	check(&h, size);
	st_header_free(&h);
	return 0;
}
