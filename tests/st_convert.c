/* Writes model.gguf of a safetensors model folder, as ggufs serves it, to stdout:
 *     st_convert FOLDER OUTTYPE        (OUTTYPE: auto, f32, f16, bf16, q8_0)
 * for tests/st_outtypes.py, which compares its sha256 with the converter's. Exit 1
 * with the refusal's line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "modelfile.h"
#include "st_model.h"

int main(int argc, char **argv)
{
	static const char *const names[] = { "auto", "f32", "f16", "bf16", "q8_0" };
	static const enum st_outtype types[] = { ST_OUT_AUTO, ST_OUT_F32, ST_OUT_F16,
	                                         ST_OUT_BF16, ST_OUT_Q8_0 };
	size_t t = 0;
	while (argc == 3 && t < 5 && strcmp(argv[2], names[t]) != 0)
		t++;
	if (argc != 3 || t == 5) {
		fprintf(stderr, "usage: st_convert FOLDER auto|f32|f16|bf16|q8_0\n");
		return 2;
	}
	const struct model_opener o = model_opener_local(false);
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = st_model_open(argv[1], types[t], &o, err);
	struct modelfile mf;
	if (!m || modelfile_build(m, &mf, err) < 0) {
		fprintf(stderr, "st_convert: %s\n", err);
		model_close(m);
		return 1;
	}
	static char buf[1 << 16];
	int rc = 0;
	for (uint64_t off = 0; off < mf.size && rc == 0; off += sizeof buf) {
		const uint64_t len = mf.size - off < sizeof buf ? mf.size - off : sizeof buf;
		if (modelfile_read(m, &mf, off, len, buf, err) < 0 ||
		    fwrite(buf, 1, len, stdout) != len) {
			fprintf(stderr, "st_convert: %s\n", err);
			rc = 1;
		}
	}
	modelfile_free(&mf);
	model_close(m);
	return rc;
}
