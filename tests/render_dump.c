/* Prints one rendered file of a model, for tests/check_render.py:
 *   render_dump MODEL json | summary | meta KEY | type KEY | npy TENSOR | name TENSOR
 * Each is rendered twice, counted and then through a window, and both must agree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "names.h"
#include "render_json.h"
#include "render_npy.h"
#include "render_summary.h"
#include "render_value.h"
#include "tool_model.h"

struct job {
	const struct ggufs_model *m;
	const char *what;
	const struct gguf_value *v;
};

static void render(struct sink *s, const struct job *j)
{
	if (strcmp(j->what, "json") == 0)
		render_json(s, j->m, NULL);
	else if (strcmp(j->what, "summary") == 0)
		render_summary(s, j->m);
	else
		render_value(s, j->v);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: render_dump MODEL json|summary|meta KEY|type KEY|npy T|name T\n");
		return 2;
	}
	struct ggufs_model *m = tool_model_open("render_dump", argv[1]);
	if (!m)
		return 1;
	struct job j = { .m = m, .what = argv[2] };
	int rc = 0;
	if (argc > 3 && (strcmp(argv[2], "npy") == 0 || strcmp(argv[2], "name") == 0)) {
		uint64_t i;
		for (i = 0; i < model_n_tensors(m); i++) {
			const struct gguf_str *n = &model_tensor(m, i)->name;
			if (n->len == strlen(argv[3]) && memcmp(n->ptr, argv[3], n->len) == 0)
				break;
		}
		if (i == model_n_tensors(m)) {
			fprintf(stderr, "render_dump: no tensor %s\n", argv[3]);
			rc = 1;
		} else if (argv[2][0] == 'n' && argv[2][1] == 'p') {
			char buf[NPY_HEADER_MAX];
			fwrite(buf, 1, npy_header(model_tensor(m, i), buf), stdout);
		} else {
			char buf[NAMES_BUF];
			size_t n = names_encode(argv[3], strlen(argv[3]), true, buf);
			fwrite(buf, 1, n, stdout);
		}
		model_close(m);
		return rc;
	}
	if (argc > 3) {
		const struct gguf_kv *kv = gguf_find_kv(model_meta(m), argv[3]);
		if (!kv) {
			fprintf(stderr, "render_dump: no key %s\n", argv[3]);
			model_close(m);
			return 1;
		}
		j.v = &kv->value;
		if (strcmp(argv[2], "type") == 0) {
			char buf[RENDER_TYPE_MAX];
			fwrite(buf, 1, render_value_type(j.v, buf), stdout);
			model_close(m);
			return 0;
		}
	}
	struct sink c = sink_counter();
	render(&c, &j);
	char *a = malloc(c.pos + 1), *b = malloc(c.pos + 1);
	struct sink s = sink_window(a, 0, c.pos);
	render(&s, &j);
	/* the same bytes again in 4 KiB windows */
	for (uint64_t off = 0; off < c.pos; off += 4096) {
		struct sink w = sink_window(b + off, off, 4096);
		render(&w, &j);
	}
	if (sink_filled(&s) != c.pos || memcmp(a, b, c.pos) != 0) {
		fprintf(stderr, "render_dump: windows disagree with the whole\n");
		rc = 1;
	}
	fwrite(a, 1, c.pos, stdout);
	free(a);
	free(b);
	model_close(m);
	return rc;
}
