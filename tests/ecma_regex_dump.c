/* ecma_regex_dump: for each line "PATTERN<TAB>NAME" of standard input, what ecma_regex.h
 * makes of it, one line: "ERR" when the pattern does not compile, else the search's
 * answer (1 a match, 0 none, -1 gave up). tests/ecma_regex_ref.py compares it with
 * std::regex (ecma_regex_std.cpp). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecma_regex.h"

int main(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		if (n && line[n - 1] == '\n')
			line[--n] = 0;
		char *tab = memchr(line, '\t', (size_t)n);
		if (!tab) {
			fprintf(stderr, "ecma_regex_dump: a line without its tab\n");
			return 2;
		}
		char err[GGUF_ERR_MAX];
		struct ecma_regex *re = ecma_regex_compile(line, (size_t)(tab - line), err);
		if (!re) {
			puts("ERR");
			continue;
		}
		printf("%d\n", ecma_regex_search(re, tab + 1, strlen(tab + 1)));
		ecma_regex_free(re);
	}
	free(line);
	return 0;
}
