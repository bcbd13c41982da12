/* A library as a mount's namespace (ns.h, library.h): its numbers and names are the
 * library's (library_get, library_lookup: parent and child under one hold of its
 * lock), each ref holding its slots and model until put; the kernel's lookups hold
 * their slots until it forgets them. compare/OTHER is sized here, its comparison made
 * by its first get or lookup, so that its st_size is exact from the first stat. */
#include <stdlib.h>

#include "library_impl.h"

struct library_ns {
	struct ns ns;   /* first: the mount's handle */
	struct library *lib;
};

static struct library *lib_of(struct ns *ns)
{
	return ((struct library_ns *)ns)->lib;
}

/* r (held) sized when it is compare/OTHER: 0, or -errno with why (EIO: a model of the
 * pair does not parse or cannot be read), r let go. */
static int sized(struct library *lib, struct node_ref *r, char why[GGUF_ERR_MAX])
{
	if (r->p != &lib_compare_provider)
		return 0;
	uint64_t size;
	const int ret = lib_compare_size(lib, r, &size, why);
	if (ret < 0)
		library_put(lib, r);
	return ret;
}

static int lns_get(struct ns *ns, uint64_t ino, unsigned how, struct node_ref *r,
                   char why[GGUF_ERR_MAX])
{
	why[0] = 0;
	const int ret = library_get(lib_of(ns), ino, how & NS_FOR_OPEN, r);
	return ret < 0 ? ret : sized(lib_of(ns), r, why);
}

static int lns_lookup(struct ns *ns, uint64_t parent, const char *name, struct node_ref *r,
                      unsigned *dir_flags, char why[GGUF_ERR_MAX])
{
	why[0] = 0;
	const int ret = library_lookup(lib_of(ns), parent, name, r, dir_flags);
	return ret < 0 ? ret : sized(lib_of(ns), r, why);
}

static void lns_put(struct ns *ns, struct node_ref *r)
{
	library_put(lib_of(ns), r);
}

static void lns_kernel_hold(struct ns *ns, const struct node_ref *r)
{
	library_kernel_hold(lib_of(ns), r);
}

static void lns_forget(struct ns *ns, uint64_t ino, uint64_t n)
{
	library_forget(lib_of(ns), ino, n);
}

/* A read-only file system of no fixed size: nothing beyond what the mount fills. */
static void lns_statfs(struct ns *ns, struct statvfs *sv)
{
	(void)ns, (void)sv;
}

/* The root's own counters: models opened so far, built now, and the slots now. */
static const char *const lns_extra[] = { "user.ggufs.models_opened", "user.ggufs.models_built",
                                         "user.ggufs.slots" };

static uint64_t lns_extra_value(struct ns *ns, size_t i)
{
	uint64_t v[3];
	library_counts(lib_of(ns), &v[0], &v[1]);
	v[2] = library_slots(lib_of(ns));
	return i < 3 ? v[i] : 0;
}

static void lns_counted(struct ns *ns, struct ns_counted *c)
{
	(void)ns;
	*c = (struct ns_counted){ .model = NULL, .extra = lns_extra, .n_extra = 3,
	                          .extra_value = lns_extra_value };
}

static void lns_free(struct ns *ns)
{
	free(ns);
}

static const struct ns_ops library_ns_ops = {
	.get = lns_get,
	.lookup = lns_lookup,
	.put = lns_put,
	.kernel_hold = lns_kernel_hold,
	.forget = lns_forget,
	.statfs = lns_statfs,
	.counted = lns_counted,
	.passthrough_fd = NULL,   /* each model its own */
	.free = lns_free,
};

struct ns *library_ns_new(struct library *lib)
{
	struct library_ns *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->ns = (struct ns){ .ops = &library_ns_ops, .flags = NS_NO_NEGATIVE };
	l->lib = lib;
	return &l->ns;
}
