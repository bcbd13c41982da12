/* node.h: the stat, TTL and open caching rules, once for every kind of mount. */
#include "node.h"

#include <string.h>
#include <unistd.h>

#include "ns.h"
#include "render_value.h"
#include "tree_ino.h"

_Static_assert(NODE_XATTR_BUF >= RENDER_TYPE_MAX + 64,
               "a node_xattr's buf holds a value's type name and a number");

void node_attr(const struct node_ref *r, void *open, struct node_attr *a)
{
	memset(a, 0, sizeof *a);
	r->p->attr(r, open, a);
}

unsigned node_stat(const struct node_ref *r, void *open, struct stat *st)
{
	struct node_attr a;
	node_attr(r, open, &a);
	const mode_t b = a.read_bits & 0444;
	const uint64_t size = a.dir ? 0 : a.size > INT64_MAX ? INT64_MAX : a.size;

	memset(st, 0, sizeof *st);
	st->st_ino = r->ino;
	st->st_mode = a.dir ? S_IFDIR | b | (b >> 2) : S_IFREG | b;
	st->st_nlink = a.dir ? 2 : 1;
	st->st_uid = a.uid;
	st->st_gid = a.gid;
	if (a.writable) {   /* writable by the mount's owner alone */
		st->st_mode |= S_IWUSR;
		st->st_uid = getuid();
		st->st_gid = getgid();
	}
	st->st_size = (off_t)size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)(a.stored ? size / 512 + (size % 512 != 0) : size != 0);
	st->st_atim = a.atim;
	st->st_mtim = a.mtim;
	st->st_ctim = a.ctim;
	return a.flags;
}

double node_attr_ttl(unsigned flags)
{
	return flags & NODE_ATTR_CHANGES ? 0 : NODE_TTL_FOREVER;
}

double node_entry_ttl(unsigned ns_flags, unsigned dir_flags, const struct node_ref *child)
{
	if (dir_flags & TREE_P_NAMES_CHANGE)
		return 0;
	if (!child)
		return ns_flags & NS_NO_NEGATIVE ? 0 : NODE_TTL_FOREVER;
	const bool per_state = tree_ino_per_state(child->ino - child->ino_base);
	return (ns_flags & NS_STATES) && per_state ? 0 : NODE_TTL_FOREVER;
}

void node_open_cache(unsigned ns_flags, const struct node_attr *a, bool writing, bool stale,
                     struct node_cache *c)
{
	memset(c, 0, sizeof *c);
	if (a->dir) {
		c->cache_readdir = c->keep_cache = !(a->flags & NODE_LIST_CHANGES);
		return;
	}
	c->direct_io = writing || (a->flags & NODE_BYTES_CHANGE) ||
	               ((ns_flags & NS_STATES) && (a->flags & NODE_BYTES_FOLLOW_EDITS));
	c->keep_cache = !c->direct_io && !stale;
}
