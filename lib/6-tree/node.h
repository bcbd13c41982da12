/* The rules every kind of mount applies alike to a node, said once: its stat, how long
 * the kernel may keep a name or attributes, and how an open is cached. A single model,
 * a model with edits and a library answer through these (lib/8-mount/mount.c), so ls,
 * du and tar see one file alike wherever it is mounted. Pure over what the provider
 * says (provider.h: struct node_attr), but for the one call of its attr. */
#ifndef GGUFS_NODE_H
#define GGUFS_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "provider.h"

/* How long the kernel may keep what never changes (a day): mount.h's
 * MOUNT_TTL_FOREVER. */
#define NODE_TTL_FOREVER 86400.0

/* r's attributes (through open, its provider's per-open state, or NULL) into *a:
 * zeroed, then as r's provider says them. */
void node_attr(const struct node_ref *r, void *open, struct node_attr *a);

/* The one stat rule: r's attributes (node_attr) as a struct stat, and their flags
 * returned (NODE_*, for the TTLs and the open below).
 *   st_ino   r->ino, the kernel's number
 *   st_mode  a directory S_IFDIR | b | (b >> 2), a file S_IFREG | b, b = read_bits &
 *            0444; writable: | S_IWUSR
 *   owner    the attributes', or the mount owner's (this process's) when writable
 *   st_nlink 2 for a directory, 1 for a file
 *   st_size  the attributes' (0 for a directory; at most INT64_MAX)
 *   st_blocks  stored: ceil(size / 512), the bytes it holds; any other non-empty file
 *            1 (a view of stored bytes or computed from them takes no storage, and
 *            GNU tar --sparse archives a file of 0 blocks as all holes); else 0
 *   st_blksize 4096; times the attributes' */
unsigned node_stat(const struct node_ref *r, void *open, struct stat *st);

/* How long the kernel may keep attributes of flags (node_stat's): 0 with
 * NODE_ATTR_CHANGES, else NODE_TTL_FOREVER. */
double node_attr_ttl(unsigned flags);

/* How long the kernel may keep the entry of a name looked up in a directory whose
 * provider has flags dir_flags (ns.h lookup), in a namespace of flags ns_flags: child
 * its ref, or NULL for a name not there (a negative entry). 0 when the directory's
 * names change (TREE_P_NAMES_CHANGE); for a name found, when the namespace has edit
 * states and its number is a state's own (zone P: model.gguf and quants/'s files are
 * other numbers in each state); for a name not there, in a namespace that keeps none
 * (NS_NO_NEGATIVE). Else NODE_TTL_FOREVER. */
double node_entry_ttl(unsigned ns_flags, unsigned dir_flags, const struct node_ref *child);

/* How the kernel is to cache an open. */
struct node_cache {
	bool direct_io;       /* reads past the page cache */
	bool keep_cache;      /* the page cache (a directory's listing) kept across opens */
	bool cache_readdir;   /* a directory's listing may be cached */
};
/* The caching of an open of a node of attributes a in a namespace of flags ns_flags,
 * for writing or not, stale (its provider's stale()) or not, into *c: a directory's
 * listing cached and kept unless NODE_LIST_CHANGES; a file direct_io when written,
 * NODE_BYTES_CHANGE, or NODE_BYTES_FOLLOW_EDITS with edit states (NS_STATES), and its
 * pages kept when not direct_io and not stale. */
void node_open_cache(unsigned ns_flags, const struct node_attr *a, bool writing, bool stale,
                     struct node_cache *c);

/* r's extended attributes as its provider says them (tree_xattr.c): listxattr's
 * NUL-separated names into buf, getxattr's value of name (copied under the SIGBUS
 * guard: a value may lie in a mapping). The full length needed (size 0: the size
 * query), -ERANGE when size is short, -ENODATA for a name r does not have, -EIO for a
 * value whose page went. */
int64_t node_listxattr(const struct node_ref *r, char *buf, uint64_t size);
int64_t node_getxattr(const struct node_ref *r, const char *name, char *buf, uint64_t size);

#endif
