/* Sizes given on the command line (-o cache_size=, cache_max=): "268435456", "256M",
 * "1G". In the base layer, beside the other helpers the front end may use. */
#ifndef GGUFS_SIZE_ARG_H
#define GGUFS_SIZE_ARG_H

#include <stdbool.h>
#include <stdint.h>

/* Parses digits with an optional suffix K, M, G or T (any case, powers of 1024, an
 * optional "B" or "iB" after it) into *out. False for anything else, an empty number,
 * or a value past 2^64 - 1. */
bool size_arg_parse(const char *s, uint64_t *out);

#endif
