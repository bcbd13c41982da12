#include "render_npy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Preamble 10 + dict text without shape 60 + shape "(" + 4 * 20 digits + 3 * ", " +
 * ")" 88 + '\n' stays below 192, so padding to 64 never passes NPY_HEADER_MAX. */
_Static_assert(10 + 60 + 88 + 1 <= 192 && 192 <= NPY_HEADER_MAX, "npy header bound");

size_t npy_header(const struct gguf_tensor *t, char buf[NPY_HEADER_MAX])
{
	char shape[96];
	size_t sl = 0;
	uint32_t nd = t->n_dims < GGUF_MAX_DIMS ? t->n_dims : GGUF_MAX_DIMS;
	shape[sl++] = '(';
	for (uint32_t k = 0; k < nd; k++) {
		sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%" PRIu64,
		                       k ? ", " : "", t->ne[nd - 1 - k]);
	}
	/* a one-element tuple needs its comma */
	if (nd == 1)
		shape[sl++] = ',';
	shape[sl++] = ')';
	shape[sl] = '\0';

	int n = snprintf(buf + 10, NPY_HEADER_MAX - 10,
	                 "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
	size_t total = 10 + (size_t)n + 1;          /* with the final '\n' */
	size_t padded = (total + 63) / 64 * 64;
	memset(buf + 10 + n, ' ', padded - total);
	buf[padded - 1] = '\n';
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	size_t hlen = padded - 10;
	buf[8] = (char)(hlen & 0xff);
	buf[9] = (char)(hlen >> 8);
	return padded;
}
