/* A model's mount with -o edits=FILE (private to lib/8-mount): edits_ns.c is its
 * namespace (ns.h) over the trees of the metadata's states and the scratch files
 * editors make in metadata/; edits_meta.c and edits_scratch.c are the providers of
 * metadata/'s keys and of those scratch files, whose per-open state (struct edit_file)
 * is a writer's; edits_writer.c the changes metadata/'s keys take (writes, truncations,
 * creations, renames, deletions, user.gguf.type, the closes of writers), as the
 * provider's writes (provider.h struct tree_writes), which the mount reaches as any
 * provider's.
 *
 * Each request works on the tree current when it came (held by its ref), an open file
 * on the tree current at its open, and every accepted edit has the front end's kernel
 * forget what it cached of the files it changed (their attributes and pages, metadata/'s
 * listing) before the request that made it is answered (mount_notify). */
#ifndef GGUFS_MOUNT_EDITS_H
#define GGUFS_MOUNT_EDITS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ns.h"
#include "provider.h"
#include "scratch.h"
#include "tree_edit.h"
#include "vbytes.h"

/* The most writers of keys open at once (ENFILE past it): each may hold EDIT_TEXT_MAX
 * of text, so this bounds what writers can make the daemon hold (ggufs(1)). */
#define EDIT_WRITERS_MAX 16

/* What a mount with edits shares between its namespace and its providers (the ctx of
 * edits_meta_provider and edits_scratch_provider): its caller's, zeroed, registered in
 * the kit before the first tree is built and filled (edits, base) before the first
 * request; it outlives the mount. */
struct edits_mount {
	struct tree_edits *edits;
	const struct tree *base;   /* the model's own metadata: its file's attributes */
	atomic_uint key_writers;   /* writers of keys open now (EDIT_WRITERS_MAX) */
};

/* A mount's namespace over em (ns.h): NS_STATES | NS_WRITABLE; NULL out of memory. */
struct ns *edits_ns_new(struct edits_mount *em);
/* The edits_mount of a namespace edits_ns_new made. */
struct edits_mount *edits_ns_mount(struct ns *ns);

/* What an open key or scratch file keeps (its providers' per-open state; NULL for a key
 * opened to read): for a file opened to write, the text written so far, made the key's
 * value at flush (close) or release. */
struct edit_file {
	bool writing;
	bool key_writer;        /* holds one of EDIT_WRITERS_MAX */
	bool dirty;             /* written since the last commit */
	int refused;            /* -errno of a write or truncation refused (EFBIG, EINVAL),
	                         * else 0: sticky, nothing written or truncated after it is
	                         * taken, and the close fails with it, making nothing of the
	                         * text */
	bool only_truncated;    /* opened with O_TRUNC and nothing written since: a shell's
	                         * "> KEY" closes a first descriptor (its dup2) before it
	                         * writes, so an empty text its key refuses fails that close
	                         * without counting a refusal (edits_writer.c ew_flush) */
	pthread_mutex_t lock;   /* text, dirty, refused, only_truncated, lines */
	struct vbytes text;     /* edit_text.h */
	/* An array's lines checked as they are written (tree_edits_precheck), while the
	 * writer writes in order from the start or the end of its text, as cp, a shell,
	 * an editor do: a write elsewhere (or a truncation into it) ends it for the open,
	 * since then a line written may yet be overwritten into one that parses. */
	enum { LINES_NONE, LINES_ON, LINES_OFF } lines_state;
	struct edit_lines lines;
};

/* metadata/ with edits (edits_meta.c): the kit of a mount with edits holds it in place
 * of tree_meta_provider (tree_kit_replace, ctx the edits_mount), before its first tree
 * is built. */
extern const struct tree_provider edits_meta_provider;
/* The scratch files of metadata/ (edits_scratch.c): the namespace's own provider. */
extern const struct tree_provider edits_scratch_provider;

/* edits_meta.c */

/* A new open file, writing or not, or NULL out of memory. */
struct edit_file *edit_file_new(bool writing);
/* Frees f with its writer place (em's). */
void edit_file_free(struct edits_mount *em, struct edit_file *f);
/* A writer's place among EDIT_WRITERS_MAX: false when all are taken. */
bool edit_writer_reserve(struct edits_mount *em);
void edit_writer_release(struct edits_mount *em);
/* The refusal of a writer past EDIT_WRITERS_MAX. */
#define EDIT_WRITERS_REFUSAL "too many keys open for writing at once (16)"

/* edits_ns.c */

/* The ref of scratch file f (held: the ref's put drops it) into *r. */
void edits_scratch_ref(struct edits_mount *em, struct scratch_file *f, struct node_ref *r);

/* edits_writer.c: the changes metadata/'s keys take (edits_meta_provider's writes). */
extern const struct tree_writes edits_meta_writes;

#endif
