/* libFuzzer target: one input as a sentencepiece tokenizer.model (st_spm_parse), then
 * the converter's vocabulary of it (st_vocab_spm, its keys written). A file refused
 * must leave one non-empty line; one read must describe only bytes inside the input:
 * every piece's text in it, its type one sentencepiece defines; the vocabulary holds
 * the model's count of tokens, each text inside the text written, and its keys count
 * five. Any broken promise aborts. Also built without libFuzzer into a regression
 * runner (replay.c) over corpus_st_spm/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "st_spm.h"
#include "st_vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *why)
{
	fprintf(stderr, "fuzz_st_spm: %s\n", why);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[GGUF_ERR_MAX] = "";
	/* a copy of exactly size bytes, so that a read past it is seen */
	uint8_t *img = malloc(size ? size : 1);
	if (!img)
		return 0;
	if (size)
		memcpy(img, data, size);
	struct st_spm spm;
	if (st_spm_parse(img, size, "tokenizer.model", &spm, err) != 0) {
		if (!err[0] || strchr(err, '\n'))
			broken("a refusal without its one line");
		free(img);
		return 0;
	}
	if (spm.n == 0 || spm.n > size / 2)
		broken("more pieces than the input holds");
	for (uint64_t i = 0; i < spm.n; i++) {
		const struct st_spm_piece *p = &spm.pieces[i];
		if (p->len && (p->text < img || p->len > (uint64_t)(img + size - p->text)))
			broken("a piece's text outside the input");
		if (p->type < ST_SPM_NORMAL || p->type > ST_SPM_BYTE)
			broken("a piece of no type");
	}
	struct st_vocab v;
	if (st_vocab_spm(&spm, 0, NULL, 0, NULL, 0, &v, err) == 0) {
		if (v.n != spm.n)
			broken("a vocabulary not of the model's count");
		for (uint64_t i = 0; i < v.n; i++)
			if (v.off[i] > v.text.len || v.len[i] > v.text.len - v.off[i])
				broken("a token's text outside the vocabulary's");
		struct st_kv kv = { 0 };
		st_vocab_write_spm(&v, &kv);
		if (!kv.b.failed && kv.n != 5)
			broken("not five keys");
		free(kv.b.p);
		st_vocab_free(&v);
	} else if (!err[0] || strchr(err, '\n')) {
		broken("a refusal without its one line");
	}
	st_spm_free(&spm);
	free(img);
	return 0;
}
