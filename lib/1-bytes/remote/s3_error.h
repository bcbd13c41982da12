/* S3's error bodies (<Error><Code>NoSuchKey</Code>...</Error>), read with expat as the
 * hostile input a server's reply is: bounded, no DTD, only what a message may show
 * (a code is letters and digits; a region or endpoint is a host name's bytes). */
#ifndef GGUFS_S3_ERROR_H
#define GGUFS_S3_ERROR_H

#include <stdbool.h>
#include <stddef.h>

struct s3_error {
	char code[64];           /* "" when the body has none (or not a plain one) */
	char region[64];         /* <Region>, from an AuthorizationHeaderMalformed */
	char endpoint[256];      /* <Endpoint>, from a PermanentRedirect */
};

/* Fills e from the first len bytes of body; false (e all "") when it is not an S3
 * error document. */
bool s3_error_parse(const char *body, size_t len, struct s3_error *e);

#endif
