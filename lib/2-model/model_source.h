/* The seam between a model (model.h) and what it is made from: a source of models (today
 * model_gguf.c: one GGUF file or the shards of a split one) opens its files, parses
 * them, and hands model_new what the model is: its metadata, its tensors, and the files
 * their bytes lie in, each read through a byte source (source.h). Everything else a
 * model answers (its stat and names, whether a file changed or shrank, its identity
 * for the caches, the passthrough descriptor, views for edits) is model.c's, the same
 * for every source. A new source implements this header in a folder of its own, and
 * nothing above model.h changes. */
#ifndef GGUFS_MODEL_SOURCE_H
#define GGUFS_MODEL_SOURCE_H

#include <stdint.h>
#include <sys/stat.h>

#include "gguf.h"
#include "model.h"
#include "source.h"

/* One tensor of a model: what it is (name, type, shape, size; offset: where its stored
 * bytes start in its file), and which file (an index into model_desc.files). */
struct model_tensor {
	const struct gguf_tensor *t;
	uint32_t file;
};

/* One file a model's bytes come from, as its source opened it. */
struct model_file {
	const char *path;                  /* as shown: a local path, a URL as shown */
	uint64_t size;                     /* its size at open */
	const struct stat *st;             /* a local file's fstat of the descriptor mapped and
	                                    * parsed, at open: which file, which version of
	                                    * its bytes (model_changed); NULL otherwise */
	const struct remote_file *remote;  /* a file read by range requests; NULL otherwise */
	struct source *src;                /* its bytes */
	const uint8_t *head;               /* its first bytes in memory: a mapped file's whole
	                                    * mapping (the source's), a fetched file's header
	                                    * prefix; NULL for none */
	const struct gguf_file *gguf;      /* its own GGUF header, parsed from head (the keys
	                                    * and tensor infos point into it); NULL when the
	                                    * file is no GGUF file */
};

/* What a source does that model.c cannot. */
struct model_source_ops {
	/* Frees what the source made (its files' sources, parses, the remote they share):
	 * at model_close, once nothing of the model is read any more. */
	void (*close)(void *ctx);
};

/* A model as a source describes it to model_new. The arrays, the metadata and what they
 * point into stay the source's, alive until ops->close. */
struct model_desc {
	const char *path;                  /* the name given (copied) */
	const char *url;                   /* a fetched or streamed model's URL as shown (and
	                                    * its commit), copied; NULL for a local model */
	struct stat st;                    /* what the model shows of itself (model_stat) */
	const struct gguf_file *meta;      /* its own metadata: the first file's keys, version,
	                                    * alignment */
	const struct model_tensor *tensors;
	uint64_t n_tensors;
	const struct model_file *files;    /* at least one: the model's file name is the
	                                    * first's base name */
	uint32_t n_files;
	/* The local files the model's files are computed from, when they are not the files
	 * themselves (a converted folder's .safetensors parts: each with its st, src mapped,
	 * path and size): model_changed and model_identity look at them as at local files,
	 * and at a computed file (no st, no remote) as its header's bytes and made_by (what
	 * computes it, with a version that changes when its bytes would); NULL and 0
	 * otherwise. */
	const struct model_file *made_from;
	uint32_t n_made_from;
	const char *made_by;
	struct remote *remote;             /* what a fetched model's files share (counters,
	                                    * the unmount hand-over); NULL otherwise */
	const struct model_source_ops *ops;  /* NULL: nothing to close (a model made by hand) */
	void *ctx;
};

/* The model d describes, or NULL out of memory (the source then frees what it made). */
struct ggufs_model *model_new(const struct model_desc *d);

#endif
