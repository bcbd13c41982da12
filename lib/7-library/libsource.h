/* Where a library's listings and bytes come from, behind one interface: a local folder
 * (libsource_local.c), a hub repository at one commit (libsource_hub.c), an S3 prefix
 * (libsource_s3.c). A source may be asked from several threads at once; a listing is
 * asked for without the library's lock held.
 * The library (library.h) asks a source for the entries of one folder at a time, for a
 * fresh look at one entry, for a model opened from its first file, and for the bytes of
 * a plain file; it never reads a listing it was not asked for.
 *
 * Paths are relative to the library's root, parts joined by '/', "" for the root
 * itself; no part is empty, "." or "..". */
#ifndef GGUFS_LIBSOURCE_H
#define GGUFS_LIBSOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "gguf.h"
#include "model.h"
#include "remote.h"

enum lib_entry_type { LIB_ENTRY_DIR, LIB_ENTRY_FILE };

/* One entry of a folder's listing. Its name is kept once: a source gives the entry's
 * whole path, which the library takes for its slot (or borrows, lent), and the name is
 * its end; a source that gives only the name leaves path NULL (the library joins). */
struct lib_entry {
	char *name;               /* one path part: malloc'ed, or the end of path */
	char *path;               /* NULL, or the entry's path in the source (dir/name, or
	                           * name at the root): malloc'ed, or lent */
	bool lent;                /* path belongs to the source, which keeps it while it
	                           * lives: borrowed, never freed */
	enum lib_entry_type type;
	bool model_folder;        /* a folder that is one model (a local one holding
	                           * config.json, st_model_is_folder): the model's files,
	                           * shown as one model directory, not listed as a folder */
	uint64_t version;         /* differs between two versions of one file (a local
	                           * file's device, inode, size and times hashed) */
	struct stat st;           /* what the library shows of it: mode, owner, size, times */
};

/* Frees the n entries e and the strings they own (their path, else their name; a lent
 * path is not theirs). */
void lib_entries_free(struct lib_entry *e, size_t n);
/* Frees what one entry owns, as lib_entries_free does, and forgets it. */
void lib_entry_clear(struct lib_entry *e);
/* Gives e the path dir/name (name at the root "": the name's len bytes) and its name at
 * the end: false out of memory. */
bool lib_entry_name(struct lib_entry *e, const char *dir, const char *name, size_t len);

struct lib_source_ops {
	/* The entries of folder dir (files and folders only, in any order) into *out, and
	 * the folder's own version into *version: 0, or -errno with one line in err
	 * (-ENOENT when dir is no folder any more). A folder its parent's listing named
	 * and whose names are all left out is an empty folder (0, no entries). */
	int (*list)(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
	            uint64_t *version, char err[GGUF_ERR_MAX]);
	/* True when folder dir still has the version a listing gave: its entries' names
	 * are as they were. */
	bool (*unchanged)(void *ctx, const char *dir, uint64_t version);
	/* A fresh look at the entry at path (name, type, version, st): 0 or -errno. A source
	 * whose listings stand for the mount's life (lib_source.listed_once) is asked only
	 * about its root (""). */
	int (*stat)(void *ctx, const char *path, struct lib_entry *e);
	/* True when model m, just opened from its first file at path, is the version the
	 * listing gave that file (version); NULL: the library compares the file's identity
	 * (device, inode, size, times) with the listing's instead. */
	bool (*same_version)(void *ctx, const char *path, uint64_t version,
	                     const struct ggufs_model *m);
	/* The model whose first file is at path (its other shards found beside it, as a
	 * single mount finds them; for a model_folder entry, the folder's model, as a mount
	 * of the folder converts it), named as a single mount of it is (a local file's path,
	 * hf://OWNER/REPO@COMMIT/PATH, s3://BUCKET/KEY), or NULL with the line `ggufs FILE` prints, less its
	 * "ggufs: ", in err. */
	struct ggufs_model *(*open_model)(void *ctx, const char *path, char err[GGUF_ERR_MAX]);
	/* Optional: the model of a listing, whose first file is at path, opened as
	 * open_model opens it if its files still are the versions the listing gave: the
	 * first file first_version, checked before a byte of it is read (so that neither the
	 * model nor an error line comes from another file that took the name since), and
	 * all of them version (lib_names_version_add of theirs in shard order), checked once
	 * they are open. NULL with *stale set and err empty when they are not; else NULL
	 * with one line in err as open_model's, or the model. Without it the library opens
	 * with open_model and compares the first file after (same_version, or its device,
	 * inode, size and times). */
	struct ggufs_model *(*open_listed)(void *ctx, const char *path, uint64_t first_version,
	                                   uint64_t version, bool *stale, char err[GGUF_ERR_MAX]);
	/* A plain file opened for reading, if it still is the version a listing gave
	 * (another file that took its name since, by rename, symlink or in place, is
	 * -ESTALE: the kernel checked the reader's permissions against the version looked
	 * up; a source whose versions its open cannot see takes it on trust): 0 with its
	 * handle in *file, or -errno; for -EIO, its cause in err (one line naming the file;
	 * left as it was when not known). */
	int (*open_file)(void *ctx, const char *path, uint64_t version, void **file,
	                 char err[GGUF_ERR_MAX]);
	/* Up to len bytes of an opened file at off: the count (short only at its end), or
	 * -errno. */
	int64_t (*read_file)(void *ctx, void *file, char *buf, uint64_t len, uint64_t off);
	void (*close_file)(void *ctx, void *file);
	/* The sha256 of the file at path as the source knows it (lower-case hex), or NULL:
	 * a local file's is never computed (NULL op). */
	const char *(*sha256)(void *ctx, const char *path);
	/* Frees the source. */
	void (*free)(void *ctx);
};

struct lib_source {
	const struct lib_source_ops *ops;
	void *ctx;
	bool pinned;   /* its files never change (a hub commit): a model opened is the
	                * version listed, with no check of its file's identity */
	bool listed_once;   /* a folder's listing stands for the mount's life (S3 keeps no
	                     * folder versions to ask about cheaply): a lookup is answered
	                     * from it, with no fresh look at the entry (a changed object is
	                     * still caught by its ETag when read) */
	bool links;   /* its folders may show under many paths (symbolic links are followed;
	               * each path is a folder of the library, and n levels of two links
	               * each make 2^n): the listings of folders nobody uses are let go past
	               * a bound (library.h) */
};

/* The local folder at root (made absolute: the daemon changes its directory to "/"):
 * a source, or NULL with one line in err. Symbolic links are followed; confine (a mount
 * that other users read, allow_other) leaves out every file and folder whose real path
 * leaves root, since the daemon reads what its own user may, and a symlink would show
 * others what the modes of the directories on its way keep from them. A model's files
 * are each opened once, through the descriptor checked (local_check.h): found in the
 * folder of its first file, never a FIFO or a device; confined, inside root, and every
 * shard but the first letting read whom the first lets read (local_check_reads), since
 * the tree shows the first file's owner and mode. */
struct lib_source *lib_source_local(const char *root, bool confine, char err[GGUF_ERR_MAX]);

/* The objects under prefix ("" or ending in '/') of bucket at endpoint, addressed
 * virtual-hosted or by path, read with ro (ro->s3: the credentials, region and context;
 * copied): a source, or NULL with one line in err. Nothing is listed until asked. */
struct lib_source *lib_source_s3(const struct remote_opts *ro, const char *endpoint,
                                 const char *bucket, const char *prefix, bool virtual_host,
                                 char err[GGUF_ERR_MAX]);

#endif
