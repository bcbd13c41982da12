/* The kit of providers (lib/6-tree/provider.h: tree_kit_new, tree_kit_add,
 * tree_kit_replace) and the numbers a tree built with it hands out (tree_ino.h's zones):
 * what registration refuses; where a feature's root entries, stable range and
 * per-state range land beside the core's; and a provider that is one table and one
 * registration line (fake_provider below) reached through tree_ref / tree_ref_child and
 * through tree.h's calls, on the bundled model. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "unit.h"

#include "model.h"
#include "provider.h"
#include "tiny_model.h"
#include "tree.h"

/* ---- a provider of a directory fake/ of three files and a per-state fake.txt ---- */

#define FAKE_FILES 3
static const char *const fake_names[FAKE_FILES] = { "a", "b", "c" };

/* What fake_make was handed, for the test to check against. */
struct fake_ctx {
	struct tree_range range;
	unsigned made;
	uint64_t stable;      /* widths() says these */
	uint64_t per_state;
	int refuse;           /* widths() returns this when not 0 */
};

struct fake_inst {
	struct tree_node dir, files[FAKE_FILES], txt;
};

enum { FAKE_DIR, FAKE_FILE, FAKE_TXT };

static const struct tree_root fake_roots[] = {
	{ .name = "fake", .dir = true },
	{ .name = "fake.txt", .per_state = true },
};

static int fake_widths(void *ctx, const struct ggufs_model *m, struct tree_widths *w,
                       char why[GGUF_ERR_MAX])
{
	(void)m;
	struct fake_ctx *c = ctx;
	if (c->refuse) {
		snprintf(why, GGUF_ERR_MAX, "fake refuses");
		return c->refuse;
	}
	w->stable = c->stable;
	w->per_state = c->per_state;
	return 0;
}

static int fake_make(void *ctx, const struct tree *t, const struct tree_range *r, void *base,
                     void *prev, void **inst, char why[GGUF_ERR_MAX])
{
	(void)t, (void)base, (void)prev, (void)why;
	struct fake_ctx *c = ctx;
	struct fake_inst *fi = calloc(1, sizeof *fi);
	if (!fi)
		return -ENOMEM;
	c->range = *r;
	c->made++;
	const uint16_t prov = (uint16_t)r->prov;
	fi->dir = (struct tree_node){ .ino = r->root[0], .parent = TREE_ROOT_INO, .kind = TREE_OTHER,
	                              .prov = prov, .role = FAKE_DIR, .flags = TREE_NODE_DIR,
	                              .name = "fake" };
	for (unsigned i = 0; i < FAKE_FILES; i++)
		fi->files[i] = (struct tree_node){ .ino = r->stable + i, .parent = r->root[0],
		                                   .kind = TREE_OTHER, .prov = prov,
		                                   .role = FAKE_FILE, .index = i,
		                                   .name = fake_names[i], .size = 1 + i };
	fi->txt = (struct tree_node){ .ino = r->root[1], .parent = TREE_ROOT_INO, .kind = TREE_OTHER,
	                              .prov = prov, .role = FAKE_TXT, .name = "fake.txt",
	                              .size = 5 };
	*inst = fi;
	return 0;
}

static void fake_free(void *inst)
{
	free(inst);
}

static const struct tree_node *fake_node(void *inst, uint64_t ino)
{
	struct fake_inst *fi = inst;
	if (ino == fi->dir.ino)
		return &fi->dir;
	if (ino == fi->txt.ino)
		return &fi->txt;
	for (unsigned i = 0; i < FAKE_FILES; i++)
		if (ino == fi->files[i].ino)
			return &fi->files[i];
	return NULL;
}

static const struct tree_node *fake_lookup(const struct node_ref *dir, const char *name)
{
	struct fake_inst *fi = dir->inst;
	for (unsigned i = 0; dir->n == &fi->dir && i < FAKE_FILES; i++)
		if (strcmp(fake_names[i], name) == 0)
			return &fi->files[i];
	return NULL;
}

static uint64_t fake_count(const struct node_ref *dir, void *open)
{
	(void)open;
	return dir->n->role == FAKE_DIR ? FAKE_FILES : 0;
}

static bool fake_entry(const struct node_ref *dir, void *open, uint64_t i, struct node_dirent *e)
{
	(void)open;
	struct fake_inst *fi = dir->inst;
	if (i >= FAKE_FILES)
		return false;
	*e = (struct node_dirent){ .name = fi->files[i].name, .ino = fi->files[i].ino };
	return true;
}

static void fake_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	tree_node_attr(r->tree, r->n, false, a);
}

/* A file's bytes: its name's first letter, size times ("b" is "bb"). */
static int64_t fake_read(const struct node_ref *r, void *open, char *buf, uint64_t len,
                         uint64_t off, char why[GGUF_ERR_MAX])
{
	(void)open, (void)why;
	uint64_t n = off < r->n->size ? r->n->size - off : 0;
	n = n < len ? n : len;
	memset(buf, r->n->name[0], n);
	return (int64_t)n;
}

static const struct tree_provider fake_provider = {
	.name = "fake",
	.roots = fake_roots,
	.n_roots = 2,
	.widths = fake_widths,
	.make = fake_make,
	.free = fake_free,
	.node = fake_node,
	.lookup = fake_lookup,
	.count = fake_count,
	.entry = fake_entry,
	.attr = fake_attr,
	.read = fake_read,
};

/* ---- registration ---- */

/* A provider with only a name, a node and roots (n of them, named prefix0, prefix1, ...,
 * stable), for refusals; names are kept in the static buffer given. */
static struct tree_provider bare(const char *name, struct tree_root *roots,
                                 char names[][16], unsigned n, const char *prefix)
{
	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], 16, "%s%u", prefix, i);
		roots[i] = (struct tree_root){ .name = names[i] };
	}
	return (struct tree_provider){ .name = name, .roots = roots, .n_roots = n,
	                               .node = fake_node };
}

static void assert_refused(bool ok, const char *why, const char *part)
{
	assert_false(ok);
	if (!strstr(why, part))
		fail_msg("why \"%s\" does not say \"%s\"", why, part);
}

static void test_refusals(void **state)
{
	(void)state;
	char why[GGUF_ERR_MAX];
	struct tree_kit *k = tree_kit_new(why);
	assert_non_null(k);
	struct fake_ctx ctx = { .stable = FAKE_FILES, .per_state = 1 };

	struct tree_provider p = fake_provider;
	p.node = NULL;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "without node");
	p = fake_provider;
	p.name = NULL;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "without a name");

	/* root names: the core's, a path, ".", twice in one provider */
	const struct tree_root taken[] = { { .name = "metadata", .dir = true } };
	p = fake_provider;
	p.roots = taken;
	p.n_roots = 1;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "taken");
	const struct tree_root slash[] = { { .name = "a/b" } }, dot[] = { { .name = ".." } };
	p.roots = slash;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "no file name");
	p.roots = dot;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "no file name");
	const struct tree_root twice[] = { { .name = "x" }, { .name = "x" } };
	p.roots = twice;
	p.n_roots = 2;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "taken");

	/* more roots than a provider has; a second open-ended range (metadata/'s is one) */
	struct tree_root five[TREE_ROOTS_MAX + 1];
	char five_names[TREE_ROOTS_MAX + 1][16];
	p = bare("five", five, five_names, TREE_ROOTS_MAX + 1, "five");
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "more root entries");
	p = fake_provider;
	p.flags = TREE_P_OPEN_END;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "open-ended");

	/* the fake itself, then not twice, by itself or by its name */
	assert_true(tree_kit_add(k, &fake_provider, &ctx, why));
	assert_refused(tree_kit_add(k, &fake_provider, &ctx, why), why, "there already");
	p = fake_provider;
	const struct tree_root other[] = { { .name = "other" } };
	p.roots = other;
	p.n_roots = 1;
	assert_refused(tree_kit_add(k, &p, &ctx, why), why, "there already");

	/* 14 stable root entries: the core's 6 (model.gguf is per state), the fake's 1, then
	 * 7 more fit and the 8th does not */
	struct tree_root r1[4], r2[3], r3[1];
	char n1[4][16], n2[3][16], n3[1][16];
	const struct tree_provider s1 = bare("s1", r1, n1, 4, "s1_"), s2 = bare("s2", r2, n2, 3, "s2_"),
	                           s3 = bare("s3", r3, n3, 1, "s3_");
	assert_true(tree_kit_add(k, &s1, NULL, why));
	assert_true(tree_kit_add(k, &s2, NULL, why));
	assert_refused(tree_kit_add(k, &s3, NULL, why), why, "more stable root entries");

	/* replace: the same roots only, of a provider in the kit */
	p = fake_provider;
	p.name = "fake2";
	assert_true(tree_kit_replace(k, &fake_provider, &p, &ctx, why));
	assert_refused(tree_kit_replace(k, &fake_provider, &p, &ctx, why), why, "not in the kit");
	struct tree_provider q = p;
	q.name = "fake3";
	q.roots = other;
	q.n_roots = 1;
	assert_refused(tree_kit_replace(k, &p, &q, &ctx, why), why, "root entries");
	q = p;
	q.name = "fake3";
	q.flags = TREE_P_OPEN_END;
	assert_refused(tree_kit_replace(k, &p, &q, &ctx, why), why, "open-ended");
	tree_kit_free(k);

	/* a kit holds 16 providers, the core's 5 among them */
	k = tree_kit_new(why);
	assert_non_null(k);
	char names[16][16];
	struct tree_provider many[16];
	unsigned added = 0;
	for (unsigned i = 0; i < 16; i++) {
		snprintf(names[i], sizeof names[i], "p%u", i);
		many[i] = (struct tree_provider){ .name = names[i], .node = fake_node };
		if (!tree_kit_add(k, &many[i], NULL, why))
			break;
		added++;
	}
	assert_int_equal(added, 16 - 5);
	assert_non_null(strstr(why, "full"));
	tree_kit_free(k);
}

/* ---- a tree built with the fake ---- */

/* The kit of the core and the fake with ctx, and the bundled model's tree: 0 or the
 * build's refusal in err. */
struct kit_tree {
	struct ggufs_model *m;
	struct tree_kit *k;
	struct tree *t;
};

static void kit_tree_open(struct kit_tree *kt, struct fake_ctx *ctx, char err[GGUF_ERR_MAX])
{
	kt->m = tiny_model_open();
	kt->k = tree_kit_new(err);
	assert_non_null(kt->k);
	assert_true(tree_kit_add(kt->k, &fake_provider, ctx, err));
	kt->t = tree_build(kt->m, kt->k, err);
}

static void kit_tree_close(struct kit_tree *kt)
{
	tree_free(kt->t);
	tree_kit_free(kt->k);
	model_close(kt->m);
}

static void test_layout(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct fake_ctx ctx = { .stable = FAKE_FILES, .per_state = 2 };
	struct kit_tree kt;
	kit_tree_open(&kt, &ctx, err);
	if (!kt.t)
		fail_msg("%s", err);
	const struct tree *t = kt.t;
	const uint64_t n_kv = model_meta(kt.m)->n_kv, n_t = model_n_tensors(kt.m);

	/* frozen by the build */
	struct tree_root r1[1];
	char n1[1][16];
	const struct tree_provider late = bare("late", r1, n1, 1, "late");
	assert_refused(tree_kit_add(kt.k, &late, NULL, err), err, "in use");
	assert_refused(tree_kit_replace(kt.k, &fake_provider, &late, NULL, err), err, "in use");

	/* the root lists the core's entries as always, then the fake's; the stable ones
	 * numbered 2.., the per-state ones the first numbers of their provider's state range
	 * (model.gguf's provider comes first: 1 number; then the fake's 2) */
	static const char *const names[] = { "metadata", "tensors", "gguf.json", "summary.txt",
	                                     "stats", "stats.tsv", "model.gguf", "fake",
	                                     "fake.txt" };
	const uint64_t inos[] = { 2, 3, 4, 5, 6, 7, TREE_ZONE_P, 8, TREE_ZONE_P + 1 };
	assert_int_equal(tree_dir_count(t, TREE_ROOT_INO), 9);
	for (uint64_t i = 0; i < 9; i++) {
		const struct tree_node *n = tree_dir_child(t, TREE_ROOT_INO, i);
		assert_non_null(n);
		assert_string_equal(n->name, names[i]);
		assert_int_equal(n->ino, inos[i]);
		assert_ptr_equal(tree_lookup(t, TREE_ROOT_INO, names[i]), n);
	}
	assert_int_equal(tree_model_ino(t), TREE_ZONE_P);

	/* zone S: the keys from 16, 4 numbers a tensor, then the fake's stable range */
	assert_int_equal(ctx.made, 1);
	assert_int_equal(tree_key_ino(t, 0), TREE_ZONE_S);
	assert_int_equal(tree_key_ino(t, n_kv - 1), TREE_ZONE_S + n_kv - 1);
	const struct tree_node *first = tree_dir_child(t, TREE_TENSORS_DIR_INO, 0);
	assert_int_equal(first->ino, TREE_ZONE_S + n_kv);
	assert_int_equal(ctx.range.stable, TREE_ZONE_S + n_kv + 4 * n_t);
	assert_int_equal(ctx.range.n_stable, FAKE_FILES);
	assert_int_equal(ctx.range.root[0], 8);
	assert_int_equal(ctx.range.root[1], TREE_ZONE_P + 1);
	assert_int_equal(ctx.range.state, TREE_ZONE_P + 1);
	assert_int_equal(ctx.range.n_state, 2);
	assert_int_equal(ctx.range.n_open, 0);   /* metadata/'s alone */
	/* the state's numbers past the fake's second are no node's, nor the zone's end */
	assert_null(tree_node(t, TREE_ZONE_P + 2));
	assert_null(tree_node(t, TREE_ZONE_P + 3));
	assert_null(tree_node(t, ctx.range.stable + FAKE_FILES));
	assert_null(tree_node(t, TREE_ZONE_X));
	assert_null(tree_node(t, 9));
	kit_tree_close(&kt);
}

/* The fake reached as a namespace reaches a tree (tree_ref, tree_ref_child), and through
 * tree.h's calls: its own ctx and instance, its nodes, its bytes and stat. */
static void test_reached(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct fake_ctx ctx = { .stable = FAKE_FILES, .per_state = 1 };
	struct kit_tree kt;
	kit_tree_open(&kt, &ctx, err);
	if (!kt.t)
		fail_msg("%s", err);
	const struct tree *t = kt.t;

	struct node_ref root, dir, file, txt;
	assert_int_equal(tree_ref(t, 0, &root), -ENOENT);
	assert_int_equal(tree_ref(t, TREE_ROOT_INO, &root), 0);
	assert_int_equal(tree_ref_child(t, &root, "nothing", &dir), -ENOENT);
	assert_int_equal(tree_ref_child(t, &root, "fake", &dir), 0);
	assert_ptr_equal(dir.p, &fake_provider);
	assert_ptr_equal(dir.ctx, &ctx);
	assert_ptr_equal(dir.tree, t);
	assert_non_null(dir.inst);
	assert_int_equal(dir.ino, 8);
	assert_int_equal(dir.parent, TREE_ROOT_INO);
	assert_int_equal(dir.ino_base, 0);
	assert_int_equal(dir.p->count(&dir, NULL), FAKE_FILES);

	assert_int_equal(tree_ref_child(t, &dir, "b", &file), 0);
	assert_ptr_equal(file.p, &fake_provider);
	assert_ptr_equal(file.inst, dir.inst);
	assert_int_equal(file.ino, ctx.range.stable + 1);
	assert_int_equal(file.parent, 8);
	assert_int_equal(tree_ref_child(t, &file, "x", &txt), -ENOTDIR);
	char buf[8] = { 0 };
	assert_int_equal(file.p->read(&file, NULL, buf, sizeof buf, 0, err), 2);
	assert_string_equal(buf, "bb");

	assert_int_equal(tree_ref_child(t, &root, "fake.txt", &txt), 0);
	assert_int_equal(txt.ino, TREE_ZONE_P + 1);
	assert_int_equal(tree_ref(t, txt.ino, &file), 0);
	assert_ptr_equal(file.n, txt.n);

	/* tree.h's calls reach it the same way */
	const struct tree_node *c = tree_lookup(t, 8, "c");
	assert_non_null(c);
	assert_int_equal(tree_dir_count(t, 8), FAKE_FILES);
	assert_ptr_equal(tree_dir_child(t, 8, 2), c);
	memset(buf, 0, sizeof buf);
	assert_int_equal(tree_read(t, c, buf, sizeof buf, 1, NULL), 2);
	assert_string_equal(buf, "cc");
	assert_int_equal(tree_read(t, tree_node(t, 8), buf, sizeof buf, 0, NULL), -EISDIR);
	struct stat st;
	tree_stat(t, c, false, &st);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 3);
	assert_int_equal(st.st_blocks, 1);
	assert_int_equal(st.st_ino, c->ino);
	tree_stat(t, tree_node(t, 8), false, &st);
	assert_true(S_ISDIR(st.st_mode));
	assert_true(tree_is_dir(tree_node(t, 8)));
	kit_tree_close(&kt);
}

/* A provider's widths refused, or past the zones: no tree, and the reason. */
static void test_widths_refused(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct fake_ctx ctx = { .refuse = -EINVAL };
	struct kit_tree kt;
	kit_tree_open(&kt, &ctx, err);
	assert_null(kt.t);
	assert_non_null(strstr(err, "fake refuses"));
	kit_tree_close(&kt);

	ctx = (struct fake_ctx){ .stable = TREE_ZONE_P, .per_state = 1 };
	kit_tree_open(&kt, &ctx, err);
	assert_null(kt.t);
	assert_non_null(strstr(err, "too many keys and tensors"));
	kit_tree_close(&kt);

	ctx = (struct fake_ctx){ .stable = 1, .per_state = TREE_STATE_WIDTH_MAX };
	kit_tree_open(&kt, &ctx, err);   /* model.gguf's 1 and the fake's: one too many */
	assert_null(kt.t);
	assert_non_null(strstr(err, "more numbers a state"));
	kit_tree_close(&kt);

	ctx = (struct fake_ctx){ .stable = 1, .per_state = 0 };   /* fewer than fake.txt */
	kit_tree_open(&kt, &ctx, err);
	assert_null(kt.t);
	assert_non_null(strstr(err, "fewer numbers a state"));
	assert_int_equal(ctx.made, 0);
	kit_tree_close(&kt);
}

UNIT_TESTS(
	cmocka_unit_test(test_refusals),
	cmocka_unit_test(test_layout),
	cmocka_unit_test(test_reached),
	cmocka_unit_test(test_widths_refused),
)
