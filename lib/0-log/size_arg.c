#include "size_arg.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

bool size_arg_parse(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (!isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
			return false;
	static const char units[] = "KMGT";
	const char *u = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
	if (u) {
		for (const char *k = units; k <= u; k++)
			if (__builtin_mul_overflow(v, 1024, &v))
				return false;
		p++;
		if (strcasecmp(p, "iB") == 0 || strcasecmp(p, "B") == 0)
			p += strlen(p);
	}
	if (*p)
		return false;
	*out = v;
	return true;
}
