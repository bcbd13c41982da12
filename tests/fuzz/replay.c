/* The regression runner: feeds every file in the directories given (not recursing, dot
 * files skipped) to the fuzz target, each from an exact-size heap copy so that the
 * sanitizers of an ASan build see what the fuzzer saw. A failure aborts in the target. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file; -1 if it cannot be read. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	for (size_t n; buf && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
		len += n;
		if (len == cap)
			buf = realloc(buf, cap *= 2);
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		free(buf);
		return -1;
	}
	/* exact size: a read one past the end is a heap overflow, not a read of slack */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned n = 0;
	for (int a = 1; a < argc; a++) {
		DIR *d = opendir(argv[a]);
		if (!d) {
			perror(argv[a]);
			return 1;
		}
		for (struct dirent *e; (e = readdir(d));) {
			if (e->d_name[0] == '.')
				continue;
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
			if (run_file(path) < 0) {
				perror(path);
				closedir(d);
				return 1;
			}
			n++;
		}
		closedir(d);
	}
	printf("replayed %u inputs\n", n);
	return 0;
}
