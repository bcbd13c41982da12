/* Lookups in the converter's tensor name map (st_names.h). */
#include "st_names.h"

#include <stdio.h>
#include <string.h>

const struct st_names_arch *st_names_find(const char *arch)
{
	for (const struct st_names_arch *a = st_names_archs; a->arch; a++)
		if (strcmp(a->arch, arch) == 0)
			return a;
	return NULL;
}

/* Whether s[0 .. len) is template t with its "{bid}" (if any) a block number written as
 * Python writes it: the number into *bid (UINT64_MAX when t has none). */
static bool template_match(const char *t, const char *s, size_t len, uint64_t *bid)
{
	const char *hole = strstr(t, "{bid}");
	if (!hole) {
		*bid = UINT64_MAX;
		return strlen(t) == len && memcmp(t, s, len) == 0;
	}
	const size_t pre = (size_t)(hole - t), post = strlen(hole + 5);
	if (len < pre + post + 1 || memcmp(s, t, pre) != 0 ||
	    memcmp(s + len - post, hole + 5, post) != 0)
		return false;
	const char *d = s + pre, *end = s + len - post;
	if (*d == '0' && end - d > 1)
		return false;   /* "01": no block's name */
	uint64_t v = 0;
	for (; d < end; d++) {
		if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*d - '0');
	}
	*bid = v;
	return true;
}

/* The GGUF name of the last key of a that matches s[0 .. len), its block number put in,
 * into out: true, or false for no match (or out too small). */
static bool lookup(const struct st_names_arch *a, const char *s, size_t len,
                   uint64_t n_blocks, const char *suffix, char *out, size_t size)
{
	const struct st_name_pair *found = NULL;
	uint64_t found_bid = 0, bid;
	for (const struct st_name_pair *p = a->pairs; p->key; p++)
		if (template_match(p->key, s, len, &bid) && (bid == UINT64_MAX || bid < n_blocks)) {
			found = p;
			found_bid = bid;
		}
	if (!found)
		return false;
	const char *hole = strstr(found->name, "{bid}");
	int n;
	if (!hole)
		n = snprintf(out, size, "%s%s", found->name, suffix);
	else
		n = snprintf(out, size, "%.*s%llu%s%s", (int)(hole - found->name), found->name,
		             (unsigned long long)(found_bid == UINT64_MAX ? 0 : found_bid),
		             hole + 5, suffix);
	return n >= 0 && (size_t)n < size;
}

bool st_names_map(const struct st_names_arch *a, const char *name, size_t len,
                  uint64_t n_blocks, char *out, size_t size)
{
	static const char *const suffixes[] = { ".weight", ".bias" };
	if (lookup(a, name, len, n_blocks, "", out, size))
		return true;
	for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
		const size_t sl = strlen(suffixes[i]);
		if (len >= sl && memcmp(name + len - sl, suffixes[i], sl) == 0 &&
		    lookup(a, name, len - sl, n_blocks, suffixes[i], out, size))
			return true;
	}
	return false;
}

bool st_names_match(const char *name_template, const char *suffix, const char *name,
                    uint64_t *bid)
{
	const size_t len = strlen(name), sl = strlen(suffix);
	return len >= sl && strcmp(name + len - sl, suffix) == 0 &&
	       template_match(name_template, name, len - sl, bid);
}

bool st_names_always_f32(const struct st_names_arch *a, const char *name, uint64_t bid)
{
	uint64_t b;
	for (const char *const *t = a->f32; *t; t++)
		if (st_names_match(*t, ".weight", name, &b) && b == bid)
			return true;
	return false;
}
