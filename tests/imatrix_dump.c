/* ggufs's reading of an importance matrix (lib/1-format/imatrix_file.h), for tests: what
 * imatrix_parse and imatrix_values make of FILE, written to OUT in the form
 * tests/llama/imatrix_ref.cpp writes llama-quantize's (see there), so that the two
 * compare as text. On a refusal: the error line on stderr, exit 1.
 *
 *     imatrix_dump FILE OUT */
#include "imatrix_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void hex(FILE *f, const struct gguf_str *s)
{
	for (uint64_t i = 0; i < s->len; i++)
		fprintf(f, "%02x", (unsigned char)s->ptr[i]);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return 2;
	const uint8_t *img = NULL;
	static const uint8_t empty[1];
	if (st.st_size == 0)
		img = empty;
	else if ((img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
		return 2;
	struct imatrix im;
	char err[GGUF_ERR_MAX];
	if (imatrix_parse(img, (uint64_t)st.st_size, &im, err) != 0) {
		fprintf(stderr, "imatrix_dump: %s: %s\n", argv[1], err);
		return 1;
	}
	FILE *f = fopen(argv[2], "w");
	if (!f)
		return 2;
	fprintf(f, "chunks %d\ndataset ", (int)im.chunk_count);
	if (im.has_dataset)
		hex(f, &im.dataset);
	else
		fputs("-", f);
	fputc('\n', f);
	for (uint64_t i = 0; i < im.n_entries; i++) {
		const struct imatrix_entry *e = &im.entries[i];
		float *w = malloc(e->n_values ? e->n_values * sizeof *w : 1);
		if (!w)
			return 2;
		imatrix_values(&im, e, w);
		hex(f, &e->name);
		fprintf(f, " %llu ", (unsigned long long)e->n_values);
		for (uint64_t j = 0; j < e->n_values; j++) {
			uint32_t u;
			memcpy(&u, &w[j], 4);
			fprintf(f, "%08x", u);
		}
		fputc('\n', f);
		free(w);
	}
	imatrix_free(&im);
	return fclose(f) == 0 ? 0 : 2;
}
