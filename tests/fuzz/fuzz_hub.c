/* libFuzzer target: one input as a page of the hub's tree API (hub_parse_page), read
 * for the whole repository and for a folder "d" of it, and (its first 16 KiB, up to a
 * NUL) as a Link header (hub_link_next). A page refused must leave one non-empty line
 * and no entries of its own; every path kept must be one the library can serve
 * (relative, no empty, "." or ".." part, no control byte, no part over 255 bytes, no
 * more bytes of paths than the bound), and once finished as hub_list finishes a
 * listing, sorted, each path once, every folder on the way to a path named; a next URL must fit its buffer and come from
 * between '<' and '>'. Any broken promise aborts. Also built without libFuzzer into a
 * regression runner (replay.c) over corpus_hub/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evlog.h"
#include "hub_listing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_hub: %s\n", why);
	abort();
}

/* The log's lines go nowhere: a page of bad paths says one per reason. */
static void quiet(void *arg, enum evlog_level level, const char *line)
{
	(void)arg, (void)level, (void)line;
}

/* Every path of l is one the library can serve. */
static void check_paths(const struct hub_listing *l)
{
	uint64_t bytes = 0;
	for (size_t i = 0; i < l->n; i++) {
		const char *p = l->files[i].path;
		size_t len = strlen(p);
		if (!len || p[0] == '/')
			broken("an empty or absolute path kept");
		for (const char *part = p; part; ) {
			const char *slash = strchr(part, '/');
			size_t n = slash ? (size_t)(slash - part) : strlen(part);
			if (n == 0 || n > HUB_NAME_MAX || (n == 1 && part[0] == '.') ||
			    (n == 2 && part[0] == '.' && part[1] == '.'))
				broken("a path with an empty, '.', '..' or too long part kept");
			part = slash ? slash + 1 : NULL;
		}
		for (size_t j = 0; j < len; j++)
			if ((unsigned char)p[j] < 0x20 || p[j] == 0x7f)
				broken("a path with a control byte kept");
		bytes += len + 1;
	}
	if (bytes != l->path_bytes || bytes > HUB_NAMES_MAX)
		broken("the bytes of paths miscounted, or past the bound");
}

/* l as hub_list leaves it (hub_listing_finish): sorted, each path once, every folder
 * on the way to a path named, found by hub_listing_find. */
static void check_finished(const struct hub_listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		const char *p = l->files[i].path;
		if (i && strcmp(l->files[i - 1].path, p) >= 0)
			broken("a finished listing not sorted, or a path twice");
		if (hub_listing_find(l, p) != &l->files[i])
			broken("hub_listing_find missed a path");
		for (const char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
			char dir[HUB_PATH_MAX + 1];
			size_t n = (size_t)(slash - p);
			if (n > HUB_PATH_MAX)
				broken("a path longer than the bound kept");
			memcpy(dir, p, n);
			dir[n] = 0;
			if (!hub_listing_find(l, dir))
				broken("a folder on the way to a path not named");
		}
	}
}

/* One page read for folder into a fresh listing. */
static void one_page(const uint8_t *data, size_t size, const char *folder)
{
	struct hub_listing l;
	memset(&l, 0, sizeof l);
	char err[GGUF_ERR_MAX] = "";
	int r = hub_parse_page((const char *)data, size, folder, &l, err);
	if (r < 0 && (!err[0] || strchr(err, '\n')))
		broken("a refused page without one line");
	if (r < 0 && l.n)
		broken("a refused page kept entries");
	if (r == 0) {
		check_paths(&l);
		if (hub_listing_finish(&l) == 0) {
			check_paths(&l);
			check_finished(&l);
		}
	}
	hub_listing_free(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	evlog_set_sink(quiet, NULL);
	one_page(data, size, "");
	one_page(data, size, "d");

	char link[16384], next[256];
	size_t n = size < sizeof link - 1 ? size : sizeof link - 1;
	memcpy(link, data, n);
	link[n] = 0;
	memset(next, 0x55, sizeof next);
	if (hub_link_next(link, next, sizeof next)) {
		size_t len = strnlen(next, sizeof next);
		if (len == sizeof next)
			broken("a next URL past its buffer");
		/* some occurrence of it (the text may hold it more than once) is <NEXT> */
		bool between = false;
		for (const char *at = strstr(link, next); len && at && !between;
		     at = strstr(at + 1, next))
			between = at > link && at[-1] == '<' && at[len] == '>';
		if (len && !between)
			broken("a next URL not from between '<' and '>'");
	}
	return 0;
}
