#include "edits_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "model.h"
#include "test_kit.h"
#include "tree.h"
#include "tree_edit.h"

int edits_fixture_open(struct edits_fixture *f, const char *dir, const char *model,
                       void (*write)(const char *path, uint64_t n), uint64_t n)
{
	char err[GGUF_ERR_MAX] = "";
	*f = (struct edits_fixture){ .wrote = write != NULL };
	snprintf(f->dir, sizeof f->dir, "%s", dir);
	if (!mkdtemp(f->dir)) {
		print_error("mkdtemp %s failed\n", dir);
		return -1;
	}
	if (write)
		snprintf(f->path, sizeof f->path, "%s/%s", f->dir, model);
	else
		snprintf(f->path, sizeof f->path, "%s", model);
	snprintf(f->file, sizeof f->file, "%s/fix.json", f->dir);
	if (write)
		write(f->path, n);
	f->m = model_open(f->path, err);
	f->base = f->m ? tree_build(f->m, test_kit(), err) : NULL;
	f->e = f->base ? tree_edits_open(f->base, f->file, NULL, err) : NULL;
	if (!f->e) {
		print_error("%s\n", err);
		edits_fixture_close(f);
		return -1;
	}
	return 0;
}

void edits_fixture_close(struct edits_fixture *f)
{
	tree_edits_close(f->e);
	tree_free(f->base);
	model_close(f->m);
	if (f->wrote)
		unlink(f->path);
	unlink(f->file);
	rmdir(f->dir);
	*f = (struct edits_fixture){ 0 };
}
