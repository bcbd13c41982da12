/* What a name on the command line names, by one rule shared by the mount, --check and
 * --diff: one model (a local file, a model folder, an http(s):// URL, an hf:// file or
 * :QUANT tag, an s3:// object) or a library (a local folder, an hf:// repository or
 * folder in it, an s3:// bucket or prefix), or nothing ggufs reads (a URL of another
 * scheme). */
#ifndef GGUFS_NAME_KIND_H
#define GGUFS_NAME_KIND_H

#include <stdbool.h>
#include <stddef.h>

enum name_kind {
	NAME_KIND_FILE,         /* a local path that is not a folder (opening it says if it
	                         * is missing or not a model) */
	NAME_KIND_FOLDER,       /* a local folder: a library */
	NAME_KIND_MODEL_FOLDER, /* a local folder holding config.json (st_model_is_folder): a
	                         * Hugging Face model folder, one model converted */
	NAME_KIND_URL,          /* http:// or https://: one model (a hub's blob/ page too) */
	NAME_KIND_HUB_FILE,     /* hf://OWNER/REPO[@REV]/PATH.gguf, or an hf:// name that
	                         * does not parse (opening it says why) */
	NAME_KIND_HUB_QUANT,    /* hf://OWNER/REPO[@REV]:QUANT: the one model of that tag */
	NAME_KIND_HUB_LIBRARY,  /* hf://OWNER/REPO[@REV][/FOLDER]: a library */
	NAME_KIND_S3_OBJECT,    /* s3://BUCKET/KEY, KEY not ending in '/' */
	NAME_KIND_S3_LIBRARY,   /* s3://BUCKET, s3://BUCKET/ or s3://BUCKET/PREFIX/: a library */
	NAME_KIND_SCHEME,       /* SCHEME://... of another scheme, with no local file so named */
};

/* The kind of name. Only a local path is looked at (stat, following symlinks); a URL
 * is classified by its text alone. */
enum name_kind name_kind_of(const char *name);

/* True for the kinds that are libraries (a folder of models), false for one model. */
bool name_kind_is_library(enum name_kind kind);

/* The length of name's scheme when it starts like a URL ("ftp://..."): letters, digits,
 * '+', '-' and '.' after a first letter, then "://"; else 0. */
size_t name_kind_scheme_len(const char *name);

#endif
