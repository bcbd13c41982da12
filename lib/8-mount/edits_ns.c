/* A model's mount with -o edits=FILE as a namespace (mount_edits.h, ns.h): numbers and
 * names from the trees of the metadata's states (lib/6-tree/tree_edit.h), each ref
 * holding its tree, and the scratch files editors make in metadata/ (scratch.h), each
 * ref holding its file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mount_edits.h"
#include "tree_ino.h"

struct edits_ns {
	struct ns ns;   /* first: the mount's handle */
	struct edits_mount *em;
	struct ns *base;   /* tree_ns_new(em->base): the model's own */
};

struct edits_mount *edits_ns_mount(struct ns *ns)
{
	return ((struct edits_ns *)ns)->em;
}

void edits_scratch_ref(struct edits_mount *em, struct scratch_file *f, struct node_ref *r)
{
	memset(r, 0, sizeof *r);
	r->p = &edits_scratch_provider;
	r->ctx = em;
	r->ino = scratch_ino(f);
	r->parent = TREE_METADATA_DIR_INO;
	r->hold[1] = (uintptr_t)f;
}

/* The scratch file of ino, held (scratch_drop it), when ino is one; else NULL. */
static struct scratch_file *scratch_of(struct edits_mount *em, uint64_t ino)
{
	return tree_ino_ns_own(ino) ? scratch_by_ino(tree_edits_scratch(em->edits), ino) : NULL;
}

/* The ref of ino: a scratch file's, or a node's in the tree that holds it (NS_NOW: the
 * current one); ESTALE for a model.gguf of a state gone (its name is looked up again),
 * ENOENT for any other number no state holds. */
static int ens_get(struct ns *ns, uint64_t ino, unsigned how, struct node_ref *r,
                   char why[GGUF_ERR_MAX])
{
	struct edits_mount *em = edits_ns_mount(ns);
	why[0] = 0;
	if (tree_ino_ns_own(ino)) {
		struct scratch_file *f = scratch_of(em, ino);
		if (!f)
			return -ENOENT;
		edits_scratch_ref(em, f, r);
		return 0;
	}
	struct tree *t = how & NS_NOW ? tree_edits_current(em->edits)
	                              : tree_edits_holding(em->edits, ino);
	if (!t)
		return tree_ino_state_root(em->base, ino) ? -ESTALE : -ENOENT;
	const int ret = tree_ref(t, ino, r);
	if (ret < 0) {
		tree_release(t);
		return ret;
	}
	r->hold[0] = (uintptr_t)t;
	return 0;
}

/* The child name of parent in the state now: a key moved aside is not there (tree_edit.h),
 * a scratch name in metadata/ is a scratch file's. */
static int ens_lookup(struct ns *ns, uint64_t parent, const char *name, struct node_ref *r,
                      unsigned *dir_flags, char why[GGUF_ERR_MAX])
{
	struct edits_mount *em = edits_ns_mount(ns);
	why[0] = 0;
	struct tree *t = tree_edits_current(em->edits);
	struct node_ref dir;
	int ret = tree_ref(t, parent, &dir);
	if (ret == 0) {
		*dir_flags = dir.p->flags;
		ret = tree_ref_child(t, &dir, name, r);
		if (ret == 0 && tree_edits_aside(em->edits, t, r->n))
			ret = -ENOENT;
	}
	struct scratch_file *f = (ret == 0 || ret == -ENOENT) && parent == TREE_METADATA_DIR_INO &&
	                         scratch_is_name(name) ?
	                         scratch_by_name(tree_edits_scratch(em->edits), name) : NULL;
	if (f) {
		tree_release(t);
		edits_scratch_ref(em, f, r);
		return 0;
	}
	if (ret == 0)
		r->hold[0] = (uintptr_t)t;
	else
		tree_release(t);
	return ret;
}

/* Lets go of r's tree or scratch file. */
static void ens_put(struct ns *ns, struct node_ref *r)
{
	(void)ns;
	if (r->hold[0])
		tree_release((struct tree *)r->hold[0]);
	scratch_drop((struct scratch_file *)r->hold[1]);
	r->hold[0] = r->hold[1] = 0;
}

/* The model's sizes, counters and passthrough file are its own metadata's tree's, as
 * a single model's mount says them (tree_ns.c): the base's namespace answers. */
static void ens_statfs(struct ns *ns, struct statvfs *sv)
{
	struct ns *base = ((struct edits_ns *)ns)->base;
	base->ops->statfs(base, sv);
}

static void ens_counted(struct ns *ns, struct ns_counted *c)
{
	struct ns *base = ((struct edits_ns *)ns)->base;
	base->ops->counted(base, c);
}

/* The model's own model.gguf's file (state 0), whatever the edits since. */
static int ens_passthrough_fd(struct ns *ns, const char **not_file)
{
	struct ns *base = ((struct edits_ns *)ns)->base;
	return base->ops->passthrough_fd(base, not_file);
}

static void ens_free(struct ns *ns)
{
	struct ns *base = ((struct edits_ns *)ns)->base;
	base->ops->free(base);
	free(ns);
}

static const struct ns_ops edits_ns_ops = {
	.get = ens_get,
	.lookup = ens_lookup,
	.put = ens_put,
	.statfs = ens_statfs,
	.counted = ens_counted,
	.passthrough_fd = ens_passthrough_fd,
	.free = ens_free,
};

struct ns *edits_ns_new(struct edits_mount *em)
{
	struct edits_ns *n = calloc(1, sizeof *n);
	if (!n || !(n->base = tree_ns_new(em->base))) {
		free(n);
		return NULL;
	}
	n->ns = (struct ns){ .ops = &edits_ns_ops, .flags = NS_STATES | NS_WRITABLE };
	n->em = em;
	return &n->ns;
}
