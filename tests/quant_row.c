/* Quantizes float32 values with lib/2-quant, for the reference test against llama.cpp
 * (tests/quant_ref.py):
 *     quant_row TYPE [FILE]
 * reads little-endian float32 values from FILE (or stdin) and writes quant_row's bytes
 * for them to stdout. TYPE is ggml's name (q4_K, bf16, ...). The count of values must
 * be a multiple of the type's block size.
 *     quant_row --list
 * prints every type quant_can_make says yes to, one line each: name, id, block_elems,
 * block_bytes. Exit 0, or 2 with a line on stderr. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "types.h"

/* The type id named name, or -1. */
static int type_by_name(const char *name)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (t && t->name && strcmp(t->name, name) == 0)
			return (int)id;
	}
	return -1;
}

/* Reads all of f into a malloc'd buffer; its byte count in *len. NULL on failure. */
static char *slurp(FILE *f, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap * 2);
		if (!bigger)
			free(buf);
		buf = bigger;
		cap *= 2;
	}
	if (buf && ferror(f)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

/* The --list output. */
static int list_types(void)
{
	for (uint32_t id = 0; id < GGML_TYPE_COUNT; id++) {
		const struct ggml_type *t = ggml_type_get(id);
		if (t && quant_can_make((enum ggml_type_id)id))
			printf("%s %u %u %u\n", t->name, id, t->block_elems, t->block_bytes);
	}
	return fflush(stdout) == 0 ? 0 : 2;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--list") == 0)
		return list_types();
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: quant_row TYPE [FILE]\n");
		return 2;
	}
	int type = type_by_name(argv[1]);
	if (type < 0 || !quant_can_make((enum ggml_type_id)type)) {
		fprintf(stderr, "quant_row: %s: not a type lib/2-quant makes\n", argv[1]);
		return 2;
	}
	FILE *in = argc == 3 ? fopen(argv[2], "rb") : stdin;
	if (!in) {
		fprintf(stderr, "quant_row: %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	size_t len = 0;
	char *buf = slurp(in, &len);
	if (in != stdin)
		fclose(in);
	if (!buf || len % sizeof(float) != 0) {
		fprintf(stderr, "quant_row: cannot read whole float32 values\n");
		free(buf);
		return 2;
	}
	const struct ggml_type *t = ggml_type_get((uint32_t)type);
	int64_t n = (int64_t)(len / sizeof(float));
	size_t out_len = (size_t)(n / t->block_elems) * t->block_bytes;
	float *x = malloc(len ? len : 1);
	void *y = malloc(out_len ? out_len : 1);
	int rc = 2;
	if (x && y) {
		memcpy(x, buf, len);
		if (quant_row((enum ggml_type_id)type, x, y, n) != 0)
			fprintf(stderr, "quant_row: %lld values are not whole %s blocks\n",
			        (long long)n, argv[1]);
		else if (fwrite(y, 1, out_len, stdout) != out_len || fflush(stdout) != 0)
			fprintf(stderr, "quant_row: cannot write the output\n");
		else
			rc = 0;
	}
	free(buf);
	free(x);
	free(y);
	return rc;
}
