/* What the unit tests of lib/6-tree's edits share: a model, its tree and its edit states
 * kept in an edits file in a temporary folder of their own. */
#ifndef GGUFS_TEST_EDITS_FIXTURE_H
#define GGUFS_TEST_EDITS_FIXTURE_H

#include <stdint.h>

struct ggufs_model;
struct tree;
struct tree_edits;

struct edits_fixture {
	char dir[64];     /* the folder, made from a mkdtemp template */
	char path[128];   /* the model: in dir when the fixture wrote it */
	char file[96];    /* the edits file, dir/fix.json */
	struct ggufs_model *m;
	struct tree *base;
	struct tree_edits *e;
	int wrote;        /* path is the fixture's, removed with the folder */
};

/* Makes the folder from the mkdtemp template dir and opens into f the model at model
 * (with write NULL, a path used as it is; else a name in the folder, written there
 * first by write(path, n)), its tree and its edit states kept in dir/fix.json. 0, or -1
 * with why said (cmocka's print_error) and what was made undone. */
int edits_fixture_open(struct edits_fixture *f, const char *dir, const char *model,
                       void (*write)(const char *path, uint64_t n), uint64_t n);

/* Closes what edits_fixture_open opened and removes the files it made and the folder. */
void edits_fixture_close(struct edits_fixture *f);

#endif
