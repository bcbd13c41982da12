/* The model itself (model.h declares it): what model_new made of a source's description
 * (model_source.h), or a view of one with other metadata. lib/2-model's own files and
 * its unit tests see this header; every other layer reads a model through model.h. */
#ifndef GGUFS_MODEL_IMPL_H
#define GGUFS_MODEL_IMPL_H

#include <stdint.h>
#include <sys/stat.h>

#include "gguf.h"
#include "model.h"
#include "model_source.h"

struct ggufs_model {
	char *path;                        /* as the user gave it */
	char *url;                         /* model_url; NULL for a local model */
	const char *file_name;             /* the base name of files[0].path */
	struct stat st;                    /* what the model shows of itself */
	const struct gguf_file *meta;      /* the metadata shown: own, or a view's */
	const struct gguf_file *own;       /* the source's metadata (the first file's) */
	uint64_t n_tensors;
	const struct model_tensor *tensors;  /* the source's: file order, then each file's */
	uint32_t n_files;
	const struct model_file *files;    /* the source's */
	const struct model_file *made_from;  /* the source's: what the files are computed
	                                      * from (model_desc) */
	uint32_t n_made_from;
	const char *made_by;
	struct remote *remote;             /* the source's, for a fetched model; else NULL */
	const struct model_source_ops *ops;  /* the source's close, or NULL */
	void *ctx;
	const struct ggufs_model *base;    /* a view (model_view_new): the model it shows;
	                                    * NULL for a model */
};

#endif
