/* Sizes given on the command line: "268435456", "256M", "1G". */
#ifndef GGUFS_SIZE_ARG_H
#define GGUFS_SIZE_ARG_H

#include <stdbool.h>
#include <stdint.h>

/* Parses digits with an optional suffix K, M, G or T (any case, powers of 1024, an
 * optional "B" or "iB" after it) into *out. False for anything else, an empty number,
 * or a value past 2^64 - 1. */
bool size_arg_parse(const char *s, uint64_t *out);

#endif
