/* Byte counts for people (render_size.h). */
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

const char *render_progress(const char *doing, uint64_t done, uint64_t total, double elapsed,
                           char *buf, size_t size)
{
	char a[RENDER_SIZE_MAX], b[RENDER_SIZE_MAX], c[RENDER_SIZE_MAX];
	const double rate = elapsed > 0 ? (double)done / elapsed : 0;
	snprintf(buf, size, "%s: %s / %s (%3.0f%%), %s/s", doing, render_size((double)done, a),
	         render_size((double)total, b),
	         total ? 100.0 * (double)done / (double)total : 100.0, render_size(rate, c));
	return buf;
}
