/* A tree node's extended attributes (tree.h: tree_listxattr, tree_getxattr), as its
 * provider says them (provider.h: xattrs), listed and copied out in one place. */
#include "tree_impl.h"

#include <errno.h>
#include <string.h>

#include "guard.h"

/* n's attributes into x: their count. */
static int node_xattrs(const struct tree *t, const struct tree_node *n,
                       struct node_xattr x[NODE_XATTR_MAX])
{
	struct node_ref r;
	tree_ref_of(t, n, &r);
	return r.p->xattrs ? r.p->xattrs(&r, x) : 0;
}

int64_t tree_listxattr(const struct tree *t, const struct tree_node *n, char *buf, uint64_t size)
{
	struct node_xattr x[NODE_XATTR_MAX];
	int count = node_xattrs(t, n, x);
	uint64_t need = 0;
	for (int i = 0; i < count; i++)
		need += strlen(x[i].name) + 1;
	if (size == 0)
		return (int64_t)need;
	if (size < need)
		return -ERANGE;
	for (int i = 0; i < count; i++) {
		size_t l = strlen(x[i].name) + 1;
		memcpy(buf, x[i].name, l);
		buf += l;
	}
	return (int64_t)need;
}

/* A copy out of the mapping, as guard_call runs it. */
struct copy {
	char *to;
	const char *from;
	uint64_t len;
};

static void run_copy(void *ctx)
{
	const struct copy *c = ctx;
	memcpy(c->to, c->from, c->len);
}

int64_t tree_getxattr(const struct tree *t, const struct tree_node *n, const char *name,
                      char *buf, uint64_t size)
{
	struct node_xattr x[NODE_XATTR_MAX];
	int count = node_xattrs(t, n, x);
	for (int i = 0; i < count; i++) {
		if (strcmp(x[i].name, name) != 0)
			continue;
		if (size == 0)
			return (int64_t)x[i].len;
		if (size < x[i].len)
			return -ERANGE;
		/* a value may lie in the mapping (a tensor's name), which may have shrunk */
		struct copy c = { .to = buf, .from = x[i].value, .len = x[i].len };
		int e = guard_call(run_copy, &c);
		return e < 0 ? e : (int64_t)x[i].len;
	}
	return -ENODATA;
}
