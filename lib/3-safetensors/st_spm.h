/* A sentencepiece model (tokenizer.model) read as hostile input: the protobuf's
 * ModelProto, of which only its pieces (field 1: SentencePiece, each a piece's text,
 * score and type) matter to the converter; every other field is skipped by its wire
 * type, every length checked against what is left. A file sentencepiece would not load
 * the converter could not convert, so it is refused (in one line naming the file): a
 * wire type protobuf does not have here, a length past its message, a piece whose text
 * is no UTF-8, a type sentencepiece does not define, no pieces at all. */
#ifndef GGUFS_ST_SPM_H
#define GGUFS_ST_SPM_H

#include <stdint.h>

#include "errline.h"

/* The most bytes of tokenizer.model ggufs reads (real ones hold up to a few MiB). */
#define ST_SPM_MAX (64u << 20)

/* A piece's type, sentencepiece's numbers (and gguf-py's SentencePieceTokenTypes). */
enum st_spm_type {
	ST_SPM_NORMAL = 1,
	ST_SPM_UNKNOWN = 2,
	ST_SPM_CONTROL = 3,
	ST_SPM_USER_DEFINED = 4,
	ST_SPM_UNUSED = 5,
	ST_SPM_BYTE = 6,
};

struct st_spm_piece {
	const uint8_t *text;   /* into the file's bytes, not NUL-terminated */
	uint32_t len;
	float score;
	enum st_spm_type type;
};

struct st_spm {
	struct st_spm_piece *pieces;   /* by id */
	uint64_t n;
};

/* Reads the len bytes of a tokenizer.model at p (kept by the caller while m is used:
 * pieces point into it) into *m: 0, or -1 with "SHOWN: why" in err (m then holds
 * nothing to free). */
int st_spm_parse(const uint8_t *p, uint64_t len, const char *shown, struct st_spm *m,
                 char err[GGUF_ERR_MAX]);

/* Frees what st_spm_parse made. */
void st_spm_free(struct st_spm *m);

#endif
