/* libFuzzer target: one input as a ListObjectsV2 page (s3_list_parse) under the
 * prefix "p/", twice into one listing (as two pages are), and as an S3 error body
 * (s3_error_parse). A page refused must leave one non-empty line and nothing of its
 * own; every name kept must be one a library can show (one part, no control byte, at
 * most 255 bytes, taken from the bound of names); an error's fields must be
 * NUL-terminated within their arrays and hold only what a message may show. Any broken
 * promise aborts. Also built without libFuzzer into a regression runner (replay.c)
 * over corpus_s3/. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_error.h"
#include "s3_list.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_s3: %s\n", why);
	abort();
}

/* Entries [from, n) of e are names a library can show; their bytes with NULs. */
static uint64_t check_names(const struct s3_entry *e, size_t from, size_t n)
{
	uint64_t bytes = 0;
	for (size_t i = from; i < n; i++) {
		const char *name = e[i].name;
		size_t len = strlen(name);
		if (len == 0 || len > S3_PART_MAX || strchr(name, '/') || strcmp(name, ".") == 0 ||
		    strcmp(name, "..") == 0)
			broken("a name that is not one part kept");
		for (size_t j = 0; j < len; j++)
			if ((unsigned char)name[j] < 0x20 || name[j] == 0x7f)
				broken("a name with a control byte kept");
		bytes += len + 1;
	}
	return bytes;
}

/* A field of an error: NUL-terminated in its array, printable ASCII only. */
static void check_field(const char *f, size_t size)
{
	size_t len = strnlen(f, size);
	if (len == size)
		broken("an error field past its array");
	for (size_t i = 0; i < len; i++)
		if (!isprint((unsigned char)f[i]))
			broken("an error field with a byte a message may not show");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_entry *e = NULL;
	size_t n = 0, cap = 0;
	uint64_t budget = 1 << 16;
	struct s3_page *pg = malloc(sizeof *pg);
	if (!pg)
		return 0;
	for (int page = 0; page < 2; page++) {
		char err[GGUF_ERR_MAX] = "";
		const size_t before = n;
		const uint64_t left = budget;
		if (s3_list_parse((const char *)data, size, "p/", &e, &n, &cap, &budget, pg, err) < 0) {
			if (!err[0] || strchr(err, '\n'))
				broken("a refused page without one line");
			if (n != before)
				broken("a refused page kept entries");
			budget = left;
			continue;
		}
		if (check_names(e, before, n) != left - budget)
			broken("the bytes of names miscounted");
		if (strnlen(pg->token, sizeof pg->token) == sizeof pg->token)
			broken("a token past its array");
	}
	s3_entries_free(e, n);
	free(pg);

	struct s3_error se;
	memset(&se, 0x55, sizeof se);
	bool ok = s3_error_parse((const char *)data, size, &se);
	check_field(se.code, sizeof se.code);
	check_field(se.region, sizeof se.region);
	check_field(se.endpoint, sizeof se.endpoint);
	if (!ok && (se.code[0] || se.region[0] || se.endpoint[0]))
		broken("a body that is no error document gave fields");
	return 0;
}
