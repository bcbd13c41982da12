/* One tree as a mount's namespace (ns.h): a single model's mount. Its numbers and
 * names are the tree's (tree_ref, tree_ref_child); nothing under it changes, so a ref
 * holds nothing and the kernel's lookups keep nothing. */
#include <errno.h>
#include <stdlib.h>

#include "ns.h"
#include "tree_impl.h"
#include "tree_ino.h"

struct tree_ns {
	struct ns ns;   /* first: the mount's handle */
	const struct tree *t;
};

static const struct tree *tree_of(struct ns *ns)
{
	return ((struct tree_ns *)ns)->t;
}

/* The ref of ino: 0, or -ENOENT (the kernel asks only for numbers it was given). */
static int tns_get(struct ns *ns, uint64_t ino, unsigned how, struct node_ref *r,
                   char why[GGUF_ERR_MAX])
{
	(void)how;
	why[0] = 0;
	return tree_ref(tree_of(ns), ino, r);
}

/* The child name of parent: 0, -ENOENT (no such name, or no such parent), -ENOTDIR;
 * the parent's provider's flags into *dir_flags. */
static int tns_lookup(struct ns *ns, uint64_t parent, const char *name, struct node_ref *r,
                      unsigned *dir_flags, char why[GGUF_ERR_MAX])
{
	why[0] = 0;
	struct node_ref dir;
	int ret = tree_ref(tree_of(ns), parent, &dir);
	if (ret < 0)
		return ret;
	*dir_flags = dir.p->flags;
	return tree_ref_child(tree_of(ns), &dir, name, r);
}

/* A tree's refs hold nothing. */
static void tns_put(struct ns *ns, struct node_ref *r)
{
	(void)ns, (void)r;
}

/* Sizes in 4 KiB blocks, nothing free: a view of one file; the numbers tree_ino.h
 * gives (four per tensor: raw, .f32, .npy, stats/). */
static void tns_statfs(struct ns *ns, struct statvfs *sv)
{
	const struct ggufs_model *model = tree_model(tree_of(ns));
	sv->f_blocks = (fsblkcnt_t)(((uint64_t)model_stat(model)->st_size + 4095) / 4096);
	sv->f_files = (fsfilcnt_t)(TREE_FIRST_META + model_meta(model)->n_kv +
	                           4 * model_n_tensors(model));
}

/* The model's fetches are the root's counters; nothing else. */
static void tns_counted(struct ns *ns, struct ns_counted *c)
{
	*c = (struct ns_counted){ .model = tree_model(tree_of(ns)) };
}

/* model.gguf's file, when it is the model's file byte for byte. */
static int tns_passthrough_fd(struct ns *ns, const char **not_file)
{
	const struct tree *t = tree_of(ns);
	struct node_ref r;
	*not_file = NULL;
	if (tree_ref(t, tree_model_ino(t), &r) < 0 || !r.p->file_fd)
		return -1;
	const char *path;
	return r.p->file_fd(&r, not_file, &path);
}

static void tns_free(struct ns *ns)
{
	free(ns);
}

static const struct ns_ops tree_ns_ops = {
	.get = tns_get,
	.lookup = tns_lookup,
	.put = tns_put,
	.statfs = tns_statfs,
	.counted = tns_counted,
	.passthrough_fd = tns_passthrough_fd,
	.free = tns_free,
};

struct ns *tree_ns_new(const struct tree *t)
{
	struct tree_ns *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->ns = (struct ns){ .ops = &tree_ns_ops, .flags = 0 };
	n->t = t;
	return &n->ns;
}
