/* The one stat rule, the TTL rule and the open caching rule of every mount
 * (lib/6-tree/node.h), case by case, over a provider whose attr says what each case
 * gives; and the stat rule against the tree's own (tree_stat) for every node of a
 * model, which it is to replace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "unit.h"

#include "node.h"
#include "ns.h"
#include "test_kit.h"
#include "tree.h"

/* The attributes the fake provider says, and the open its attr was given. */
static struct node_attr said;
static void *attr_open;

static void fake_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)r;
	attr_open = open;
	*a = said;
}

static const struct tree_provider fake = { .name = "fake", .attr = fake_attr };

/* node_stat of a ref of number ino whose provider says a. */
static unsigned stat_of(const struct node_attr *a, uint64_t ino, struct stat *st)
{
	said = *a;
	struct node_ref r = { .p = &fake, .ino = ino };
	return node_stat(&r, NULL, st);
}

static void test_file_mode_owner_times(void **state)
{
	(void)state;
	struct node_attr a = { .read_bits = 06751, .uid = 4242, .gid = 4343, .size = 10,
	                       .atim = { 1, 2 }, .mtim = { 3, 4 }, .ctim = { 5, 6 } };
	struct stat st;
	assert_int_equal(stat_of(&a, 77, &st), 0);
	assert_int_equal(st.st_ino, 77);
	assert_int_equal(st.st_mode, S_IFREG | 0440);   /* read bits only */
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_uid, 4242);
	assert_int_equal(st.st_gid, 4343);
	assert_int_equal(st.st_size, 10);
	assert_int_equal(st.st_blksize, 4096);
	assert_int_equal(st.st_atim.tv_sec, 1);
	assert_int_equal(st.st_atim.tv_nsec, 2);
	assert_int_equal(st.st_mtim.tv_sec, 3);
	assert_int_equal(st.st_mtim.tv_nsec, 4);
	assert_int_equal(st.st_ctim.tv_sec, 5);
	assert_int_equal(st.st_ctim.tv_nsec, 6);
	assert_int_equal(st.st_dev, 0);
}

static void test_dir_mode(void **state)
{
	(void)state;
	static const mode_t bits[][2] = {   /* read bits, the mode shown */
		{ 0444, 0555 }, { 0440, 0550 }, { 0400, 0500 }, { 0004, 0005 }, { 0, 0 },
		{ 0777, 0555 },
	};
	for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
		struct node_attr a = { .dir = true, .read_bits = bits[i][0], .size = 4096 };
		struct stat st;
		stat_of(&a, 3, &st);
		assert_int_equal(st.st_mode, S_IFDIR | bits[i][1]);
		assert_int_equal(st.st_nlink, 2);
		assert_int_equal(st.st_size, 0);     /* a directory's size is 0 */
		assert_int_equal(st.st_blocks, 0);
		a.stored = true;                     /* never counts blocks either */
		stat_of(&a, 3, &st);
		assert_int_equal(st.st_blocks, 0);
	}
}

/* Writable: u+w, and the mount owner's (this process's) whatever the provider says. */
static void test_writable(void **state)
{
	(void)state;
	struct stat st;
	struct node_attr key = { .writable = true, .read_bits = 0444, .uid = 4242, .gid = 4343,
	                         .size = 3 };
	stat_of(&key, 20, &st);
	assert_int_equal(st.st_mode, S_IFREG | 0644);
	assert_int_equal(st.st_uid, getuid());
	assert_int_equal(st.st_gid, getgid());
	struct node_attr dir = { .dir = true, .writable = true, .read_bits = 0440, .uid = 4242 };
	stat_of(&dir, 2, &st);
	assert_int_equal(st.st_mode, S_IFDIR | 0750);
	assert_int_equal(st.st_uid, getuid());
}

/* st_blocks: a stored file its bytes, rounded up to 512; any other non-empty file 1,
 * an empty one 0. */
static void test_blocks(void **state)
{
	(void)state;
	static const struct {
		bool stored;
		uint64_t size;
		blkcnt_t blocks;
	} cases[] = {
		{ true, 0, 0 }, { true, 1, 1 }, { true, 511, 1 }, { true, 512, 1 }, { true, 513, 2 },
		{ true, (UINT64_C(1) << 40) + 1, (blkcnt_t)(UINT64_C(1) << 31) + 1 },
		{ false, 0, 0 }, { false, 1, 1 }, { false, 513, 1 },
		/* compare/OTHER, models.tsv, `error` of a library: 1 (their size / 512 before) */
		{ false, 1000, 1 }, { false, UINT64_C(1) << 40, 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct node_attr a = { .stored = cases[i].stored, .read_bits = 0444,
		                       .size = cases[i].size };
		struct stat st;
		stat_of(&a, 9, &st);
		assert_int_equal(st.st_size, (off_t)cases[i].size);
		assert_int_equal(st.st_blocks, cases[i].blocks);
	}
}

/* A size past off_t (a listing's, a hostile one) is shown as the largest, never
 * negative, and counted as such. */
static void test_size_past_off_t(void **state)
{
	(void)state;
	struct stat st;
	struct node_attr a = { .stored = true, .size = UINT64_MAX };
	stat_of(&a, 9, &st);
	assert_int_equal(st.st_size, INT64_MAX);
	assert_int_equal(st.st_blocks, (blkcnt_t)(INT64_MAX / 512 + 1));
	a.stored = false;
	stat_of(&a, 9, &st);
	assert_int_equal(st.st_size, INT64_MAX);
	assert_int_equal(st.st_blocks, 1);
}

/* The flags come back for the TTLs, and the open reaches attr (a writer's size). */
static void test_flags_and_open(void **state)
{
	(void)state;
	said = (struct node_attr){ .flags = NODE_ATTR_CHANGES | NODE_BYTES_CHANGE };
	struct node_ref r = { .p = &fake, .ino = 5 };
	struct stat st;
	int open_state;
	assert_int_equal(node_stat(&r, &open_state, &st), NODE_ATTR_CHANGES | NODE_BYTES_CHANGE);
	assert_ptr_equal(attr_open, &open_state);
	struct node_attr a = { .size = 99 };
	said.size = 7;
	node_attr(&r, NULL, &a);   /* zeroed, then the provider's */
	assert_int_equal(a.size, 7);
	assert_null(attr_open);
}

static void test_attr_ttl(void **state)
{
	(void)state;
	assert_true(node_attr_ttl(0) == NODE_TTL_FOREVER);
	assert_true(node_attr_ttl(NODE_ATTR_CHANGES) == 0);
	assert_true(node_attr_ttl(NODE_ATTR_CHANGES | NODE_BYTES_CHANGE) == 0);
	assert_true(node_attr_ttl(NODE_LIST_CHANGES | NODE_BYTES_CHANGE | NODE_ZERO_COPY |
	                          NODE_BYTES_FOLLOW_EDITS) == NODE_TTL_FOREVER);
}

/* The entry TTLs of each kind of mount, as today's three tables had them. */
static void test_entry_ttl(void **state)
{
	(void)state;
	const double F = NODE_TTL_FOREVER;
	const uint64_t slot = UINT64_C(5) << 32;
	const struct node_ref stable = { .ino = 16 }, root_entry = { .ino = 2 },
		per_state = { .ino = TREE_ZONE_P + 3 },
		later_state = { .ino = TREE_ZONE_P + 1000 * 37 + 36 },
		scratch = { .ino = TREE_ZONE_X + 1 },
		in_library = { .ino = slot | (TREE_ZONE_P + 3), .ino_base = slot },
		lib_folder = { .ino = slot | 1 };
	const unsigned lib = NS_NO_NEGATIVE, edits = NS_STATES | NS_WRITABLE,
		one = 0, changes = TREE_P_NAMES_CHANGE;
	static const unsigned nsf[] = { 0, NS_STATES, NS_STATES | NS_WRITABLE, NS_NO_NEGATIVE };
	/* a directory whose names change: nothing kept, found or not, in any mount */
	for (size_t i = 0; i < sizeof nsf / sizeof nsf[0]; i++) {
		assert_true(node_entry_ttl(nsf[i], changes, &stable) == 0);
		assert_true(node_entry_ttl(nsf[i], changes, &scratch) == 0);
		assert_true(node_entry_ttl(nsf[i], changes, NULL) == 0);
		assert_true(node_entry_ttl(nsf[i], changes | TREE_P_SHARED, &root_entry) == 0);
	}
	/* one model: every name and every absence forever, per-state numbers too */
	assert_true(node_entry_ttl(one, 0, &stable) == F);
	assert_true(node_entry_ttl(one, 0, &per_state) == F);
	assert_true(node_entry_ttl(one, 0, NULL) == F);
	/* edits: a state's own numbers (model.gguf, quants/'s files) looked up again, the
	 * rest, and absences outside metadata/, kept */
	assert_true(node_entry_ttl(edits, 0, &per_state) == 0);
	assert_true(node_entry_ttl(edits, 0, &later_state) == 0);
	assert_true(node_entry_ttl(edits, 0, &stable) == F);
	assert_true(node_entry_ttl(edits, 0, &root_entry) == F);
	assert_true(node_entry_ttl(edits, TREE_P_SHARED | TREE_P_OPEN_END, &stable) == F);
	assert_true(node_entry_ttl(edits, 0, NULL) == F);
	assert_true(node_entry_ttl(edits, 0, &scratch) == F);   /* zone X is no state's */
	/* a library: inside a model forever, whatever the low number; no absence kept */
	assert_true(node_entry_ttl(lib, 0, &in_library) == F);
	assert_true(node_entry_ttl(lib, 0, &lib_folder) == F);
	assert_true(node_entry_ttl(lib, 0, NULL) == 0);
}

static void test_open_cache(void **state)
{
	(void)state;
	static const struct {
		unsigned ns, flags;
		bool dir, writing, stale;
		bool direct_io, keep_cache, cache_readdir;
	} cases[] = {
		/* directories: listing cached and kept unless it changes */
		{ 0, 0, true, false, false, false, true, true },
		{ NS_STATES, NODE_BYTES_FOLLOW_EDITS, true, false, false, false, true, true },
		{ NS_NO_NEGATIVE, NODE_LIST_CHANGES, true, false, false, false, false, false },
		{ 0, NODE_LIST_CHANGES | NODE_BYTES_CHANGE, true, false, true, false, false, false },
		/* files of one model: pages kept, but a quant file's of a model changed */
		{ 0, 0, false, false, false, false, true, false },
		{ 0, NODE_ZERO_COPY, false, false, false, false, true, false },
		{ 0, 0, false, false, true, false, false, false },
		/* metadata/KEY, gguf.json: past the page cache with edits only */
		{ 0, NODE_BYTES_FOLLOW_EDITS, false, false, false, false, true, false },
		{ NS_STATES, NODE_BYTES_FOLLOW_EDITS, false, false, false, true, false, false },
		{ NS_STATES, 0, false, false, false, false, true, false },
		{ NS_STATES, 0, false, true, false, true, false, false },    /* a writer */
		{ NS_STATES, 0, false, false, true, false, false, false },
		/* models.tsv, compare/OTHER, a scratch file */
		{ NS_NO_NEGATIVE, NODE_BYTES_CHANGE, false, false, false, true, false, false },
		{ NS_STATES, NODE_BYTES_CHANGE | NODE_ATTR_CHANGES, false, true, false, true, false,
		  false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct node_attr a = { .dir = cases[i].dir, .flags = cases[i].flags };
		struct node_cache c = { true, true, true };
		node_open_cache(cases[i].ns, &a, cases[i].writing, cases[i].stale, &c);
		if (c.direct_io != cases[i].direct_io || c.keep_cache != cases[i].keep_cache ||
		    c.cache_readdir != cases[i].cache_readdir)
			fail_msg("case %zu: direct_io %d keep_cache %d cache_readdir %d", i,
			         c.direct_io, c.keep_cache, c.cache_readdir);
	}
}

/* ---- against the tree's own rule, for every node of a model ---- */

/* The tree node a ref names, and the stat tree_stat gives it, for tree_attr. */
static const struct tree *cross_tree;

/* A tree node's attributes as phase 2a's providers will say them: read bits, owner and
 * times from the model file (here: tree_stat's), stored for model.gguf only. */
static void tree_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	(void)open;
	struct stat ts;
	tree_stat(cross_tree, r->n, false, &ts);
	*a = (struct node_attr){ .dir = tree_is_dir(r->n), .stored = r->n->kind == TREE_MODEL,
		.read_bits = ts.st_mode, .uid = ts.st_uid, .gid = ts.st_gid, .size = r->n->size,
		.atim = ts.st_atim, .mtim = ts.st_mtim, .ctim = ts.st_ctim };
}

static const struct tree_provider tree_adapter = { .name = "tree", .attr = tree_attr };

/* node_stat and tree_stat agree on n and, a directory, every node under it: the count
 * of nodes compared added to *n_seen. */
static void same_stat_under(const struct tree *t, const struct tree_node *n, uint64_t *n_seen)
{
	struct stat want, got;
	struct node_ref r = { .p = &tree_adapter, .tree = t, .n = n, .ino = n->ino };
	tree_stat(t, n, false, &want);
	node_stat(&r, NULL, &got);
	if (memcmp(&want, &got, sizeof want) != 0)
		fail_msg("%s (ino %llu): mode %o/%o blocks %lld/%lld", n->name,
		         (unsigned long long)n->ino, (unsigned)want.st_mode, (unsigned)got.st_mode,
		         (long long)want.st_blocks, (long long)got.st_blocks);
	++*n_seen;
	if (!tree_is_dir(n))
		return;
	for (uint64_t i = 0; i < tree_dir_count(t, n->ino); i++)
		same_stat_under(t, tree_dir_child(t, n->ino, i), n_seen);
}

static void test_same_as_tree_stat(void **state)
{
	(void)state;
	char err[GGUF_ERR_MAX];
	struct ggufs_model *m = model_open(TEST_DATA "/tinyllama-q4km.gguf", err);
	assert_non_null(m);
	struct tree *t = tree_build(m, test_kit(), err);
	assert_non_null(t);
	cross_tree = t;
	uint64_t seen = 0;
	same_stat_under(t, tree_node(t, TREE_ROOT_INO), &seen);
	/* the root and its 8 entries, 23 keys, 21 tensors' 3 files and stats/, and more in
	 * quants/ */
	assert_true(seen > 1 + 8 + 23 + 4 * 21);
	tree_free(t);
	model_close(m);
}

UNIT_TESTS(
	cmocka_unit_test(test_file_mode_owner_times),
	cmocka_unit_test(test_dir_mode),
	cmocka_unit_test(test_writable),
	cmocka_unit_test(test_blocks),
	cmocka_unit_test(test_size_past_off_t),
	cmocka_unit_test(test_flags_and_open),
	cmocka_unit_test(test_attr_ttl),
	cmocka_unit_test(test_entry_ttl),
	cmocka_unit_test(test_open_cache),
	cmocka_unit_test(test_same_as_tree_stat),
)
