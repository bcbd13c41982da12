/* What a mount serves, opened from the name on its command line (open_name.h): a
 * library, or one model with its tree and, with -o edits=FILE, its edits; and the mount
 * (mount.h) over it. The front end mounts source.mount, and closes the whole once
 * unmounted. */
#ifndef GGUFS_MOUNT_SOURCE_H
#define GGUFS_MOUNT_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "errline.h"
#include "open_name.h"

struct mount;
struct ggufs_model;
struct tree;
struct tree_edits;
struct library;
struct quants_mount;
struct tree_kit;
struct leaving;
struct imatrix;

/* How a name is opened for a mount. */
struct mount_source_opts {
	/* the command line's remote options; cancelled also ends a remote model's transfers,
	 * and note is told one warning per tensor that has no .f32 (raw file only) */
	struct open_name_opts names;
	const char *edits_file;   /* -o edits=FILE as given, or NULL: read-only */
	const char *mountpoint;   /* absolute, resolved: a local library's folder must not
	                           * hold it, nor the edits file lie in it */
	bool single_thread;       /* -s: one thread serves every request */
	bool requantize;          /* -o requantize: quants/ of already quantized models too
	                           * (quants_opts) */
	const char *imatrix;      /* -o imatrix=FILE as given (a local file, a URL, hf://,
	                           * s3://), or NULL: quants/ under that importance matrix */
	unsigned quant_threads;   /* -o quant_threads: the quantizer's workers at most (0: the
	                           * online cores) */
};

/* An opened source and its mount. */
struct mount_source {
	struct mount *mount;
	bool library;    /* a library's mount */
	bool remote;     /* a remote model, or a hub or S3 library: its transfers end with
	                  * the mount */
	bool edits;      /* metadata/ is writable (-o edits=FILE) */
	char *shown;     /* a remote model's name as it may be shown (open_name_model's), or
	                  * NULL */
	/* "", or one line (without "ggufs: ") saying that the disk cache cannot be used and
	 * why, for the front end to say on stderr once mounted, before the daemon detaches
	 * (the event log, which may be syslog, says it again at the first quants/ open) */
	char cache_warning[GGUF_ERR_MAX + 64];
	/* what the mount is over, freed by mount_source_close */
	struct ggufs_model *model;
	struct tree *tree;
	struct tree_edits *tree_edits;
	struct library *lib;
	struct quants_mount *quants;   /* quants/'s per-mount state: the options, the
	                                * workers and memory of every quants/ file the mount
	                                * serves */
	struct tree_kit *kit;          /* the providers every tree of the mount is built with */
	uint8_t *imatrix_bytes;        /* -o imatrix's file, whole, and its parse (quants/'s) */
	struct imatrix *imatrix;
	char *imatrix_name;            /* FILE as it may be shown (quantize.imatrix.file) */
	/* The mount is ending (the kernel has ended the session; its last requests may
	 * still be served): leaving_run(leaving), once: the edits file goes over to a
	 * quick remount of the same model, and the disk cache stores nothing more (a
	 * remote model's blocks, every remote model of a library's too, built then or
	 * later; every quants/ file of the mount, open then or later), whose entries the
	 * quick remount shares meanwhile. Each of them is in it from where it is made. */
	struct leaving *leaving;
};

/* Opens what name names into s, with o: the importance matrix first (one that
 * llama-quantize refuses, or with a weight that is not finite, which it refuses for
 * every file, refuses the mount: the line names FILE), then the library (the edits file
 * is not for one: the caller refuses that first), or the model, its tree built (a model the tree refuses is
 * refused) and its edits file opened (made absolute: the daemon moves to "/"), and the
 * mount over it. True; or false with one line in err, and nothing left open. */
bool mount_source_open(struct mount_source *s, const char *name, const struct mount_source_opts *o,
                       char err[GGUF_ERR_MAX]);

/* Frees the mount, then what it was over (each may be NULL); s is emptied. */
void mount_source_close(struct mount_source *s);

#endif
