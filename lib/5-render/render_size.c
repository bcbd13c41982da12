#include "render_size.h"

#include <stdio.h>

const char *render_size(double n, char buf[RENDER_SIZE_MAX])
{
	static const char *const unit[] = { "KB", "MB", "GB", "TB", "PB" };
	if (n < 999.5) {
		snprintf(buf, RENDER_SIZE_MAX, "%.0f bytes", n);
		return buf;
	}
	unsigned u = 0;
	n /= 1e3;
	while (n >= 999.5 && u + 1 < sizeof unit / sizeof unit[0]) {
		n /= 1e3;
		u++;
	}
	snprintf(buf, RENDER_SIZE_MAX, n < 9.995 ? "%.2f %s" : n < 99.95 ? "%.1f %s" : "%.0f %s", n,
	         unit[u]);
	return buf;
}
