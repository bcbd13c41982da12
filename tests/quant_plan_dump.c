/* quant_plan_dump MODEL NAME OUT [requantize] [imatrix=FILE] [recipes=FILE]: the quant file
 * ggufs plans for MODEL and file type NAME (quant_plan.h; with requantize, llama-quantize
 * --allow-requantize's; with imatrix=FILE, --imatrix FILE's, FILE named as given; with
 * recipes=FILE, NAME may be a recipe of that file: recipe_file.h), for
 * tests/quant/test_quant_plan.py to compare with what
 * llama.cpp's llama_model_quantize() writes. OUT gets the file as far as the plan makes
 * it without a quantizer: the whole header, every tensor whose type stays copied from
 * MODEL, every converted one quantized (quant_read.h: its values through the
 * reader, lib/2-quant's quantizers), the padding. stdout gets one line "size N
 * data_offset N", then one line per tensor in file order: "name type offset size how"
 * (type a ggml id, offset from the data section, how 1 copied, 2 quantized, 3 zeros: a
 * type lib/2-quant does not make yet). A model
 * llama.cpp makes no such file from: exit 3 with the reason on stderr. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "imatrix_file.h"
#include "model.h"
#include "quant.h"
#include "quant_plan.h"
#include "quant_read.h"
#include "recipe_file.h"
#include "tool_model.h"

int main(int argc, char **argv)
{
	bool requantize = false;
	const char *imatrix_file = NULL, *recipes_file = NULL;
	for (int a = 4; a < argc; a++) {
		if (strcmp(argv[a], "requantize") == 0)
			requantize = true;
		else if (strncmp(argv[a], "recipes=", 8) == 0)
			recipes_file = argv[a] + 8;
		else if (strncmp(argv[a], "imatrix=", 8) == 0)
			imatrix_file = argv[a] + 8;
		else
			argc = 0;
	}
	if (argc < 4) {
		fprintf(stderr, "usage: quant_plan_dump MODEL NAME OUT [requantize] [imatrix=FILE] "
		        "[recipes=FILE]\n");
		return 2;
	}
	char err[GGUF_ERR_MAX];
	struct recipe_set rs = { 0 };
	if (recipes_file && recipes_read(recipes_file, &rs, err) < 0) {
		fprintf(stderr, "quant_plan_dump: %s\n", err);
		return 4;
	}
	const struct recipe *recipe = recipe_find(&rs, argv[2]);
	const struct quant_name *qn = recipe ? recipe->base : quant_name_find(argv[2]);
	if (!qn) {
		fprintf(stderr, "quant_plan_dump: no file type %s\n", argv[2]);
		return 2;
	}
	struct ggufs_model *m = tool_model_open("quant_plan_dump", argv[1]);
	if (!m)
		return 1;
	struct quant_params p;
	if (recipe)
		recipe_params(recipe, &p);
	else
		quant_params_default(&p, qn->ftype);
	p.allow_requantize = requantize;
	struct imatrix im = { 0 };
	if (imatrix_file) {
		int fd = open(imatrix_file, O_RDONLY);
		struct stat st;
		void *img = MAP_FAILED;
		if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0 ||
		    (img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED ||
		    imatrix_parse(img, (uint64_t)st.st_size, &im, err) != 0) {
			fprintf(stderr, "quant_plan_dump: %s: cannot read the importance matrix\n",
			        imatrix_file);
			return 1;
		}
		quant_params_imatrix(&p, &im, imatrix_file);
	}
	struct quant_plan qp;
	if (quant_plan_build(m, &p, &qp, err) < 0) {
		fprintf(stderr, "quant_plan_dump: %s\n", err);
		if (imatrix_file)
			imatrix_free(&im);
		model_close(m);
		recipes_free(&rs);
		return 3;
	}
	FILE *out = fopen(argv[3], "wb");
	uint8_t *buf = malloc(qp.data_offset ? qp.data_offset : 1);
	if (!out || !buf) {
		perror("quant_plan_dump");
		return 1;
	}
	quant_plan_header_read(&qp, 0, qp.data_offset, buf);
	fwrite(buf, 1, qp.data_offset, out);
	printf("size %" PRIu64 " data_offset %" PRIu64 "\n", qp.size, qp.data_offset);
	int rc = 0;
	for (uint64_t i = 0; i < qp.n_tensors; i++) {
		const struct quant_tensor *qt = &qp.tensors[i];
		const struct gguf_tensor *t = model_tensor(m, qt->src);
		const bool copied = qt->type == t->type;
		const bool makes = copied || quant_can_make((enum ggml_type_id)qt->type) ||
		                   (qt->weights && quant_can_make_weighted((enum ggml_type_id)qt->type));
		uint8_t *data = calloc(1, qt->size ? qt->size : 1);
		if (!data) {
			perror("quant_plan_dump");
			return 1;
		}
		if (makes && (copied ? model_tensor_read(m, qt->src, 0, qt->size, data, NULL)
		                     : reader_quant_weighted(m, qt->src, qt->type, p.imatrix,
		                                             qt->weights, 0, qt->size, data, NULL)) < 0) {
			fprintf(stderr, "quant_plan_dump: cannot make %.*s\n", (int)t->name.len,
			        t->name.ptr);
			rc = 1;
		}
		static const uint8_t zeros[QUANT_ALIGNMENT];
		fseeko(out, (off_t)(qp.data_offset + qt->offset), SEEK_SET);
		fwrite(data, 1, qt->size, out);
		fwrite(zeros, 1, (QUANT_ALIGNMENT - qt->size % QUANT_ALIGNMENT) % QUANT_ALIGNMENT, out);
		free(data);
		printf("%.*s %" PRIu32 " %" PRIu64 " %" PRIu64 " %d\n", (int)t->name.len, t->name.ptr,
		       qt->type, qt->offset, qt->size, copied ? 1 : makes ? 2 : 3);
	}
	if (fclose(out) != 0)
		rc = 1;
	free(buf);
	quant_plan_free(&qp);
	if (imatrix_file)
		imatrix_free(&im);   /* its mapping goes with the process */
	model_close(m);
	recipes_free(&rs);
	return rc;
}
