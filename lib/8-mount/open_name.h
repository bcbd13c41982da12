/* Opening what a name on the command line names (name_kind.h): one model (a local file or
 * split set, an http(s):// URL, a hub page's blob/ URL read as its resolve/ form,
 * hf://OWNER/REPO[@REV]/PATH, hf://OWNER/REPO:QUANT found in the repository, an s3://
 * object) or a library (a local folder, an hf:// repository or folder, an s3:// bucket
 * or prefix), with the command line's remote options. The mount, --check and --diff
 * open names only through here, so that they open the same things alike. */
#ifndef GGUFS_OPEN_NAME_H
#define GGUFS_OPEN_NAME_H

#include <stdbool.h>
#include <stdint.h>

#include "errline.h"
#include "name_kind.h"

struct ggufs_model;
struct leaving;
struct library;

/* The options a name is opened with: the command line's remote options and where the
 * lines that are not errors go. Strings are the caller's, kept while it opens. */
struct open_name_opts {
	const char *token_file;   /* -o token_file: the bearer token (else HF_TOKEN), or NULL */
	const char *cafile;       /* -o cafile, or NULL */
	uint64_t cache_size;      /* -o cache_size in bytes, 0: the default */
	const char *cache_dir;    /* -o cache_dir as given ("none": no disk cache), or NULL:
	                           * the default (cache_dir_default) */
	uint64_t cache_max;       /* -o cache_max in bytes, 0: the default */
	unsigned timeout;         /* -o timeout in seconds, 0: the default */
	bool s3_anonymous;        /* -o s3_anonymous */
	bool s3_virtual_host;     /* -o s3_virtual_host */
	const char *outtype;      /* -o outtype: what a model folder's tensors are converted
	                           * to (open_name_outtype_ok), or NULL: auto */
	/* --check reads a model front to back once: a server that ignores Range requests
	 * (a 200 to the first one) is then read as one stream (stream.h) */
	bool stream_ok;
	/* the environment: HF_ENDPOINT, HF_TOKEN, the AWS variables (getenv; a test may
	 * pass its own) */
	const char *(*env)(const char *name);
	/* NULL, or told each line worth telling that is not an error, without "ggufs: ":
	 * which file an hf://OWNER/REPO:QUANT tag names, that a blob/ URL is read as its
	 * resolve/ form */
	void (*note)(void *arg, const char *line);
	void *note_arg;
	/* NULL, or told what a remote open waits for (remote_opts.waiting) */
	void (*waiting)(void *arg, const char *line);
	void *waiting_arg;
	/* a local library that other users read (-o allow_other): files and folders whose
	 * real path leaves its folder are left out (lib_source_local's confine); a local
	 * model so read: its shards must let read whom its named file lets read
	 * (model_opener_local's shared) */
	bool confine;
	/* NULL, or true once the transfers of a remote model or a hub library are to stop
	 * (the mount ends) */
	bool (*cancelled)(void *arg);
	void *cancel_arg;
	/* NULL, or the mount's hand-over (leaving.h), which the disk cache of every remote
	 * model (a library's too, built later) and of a hub library's plain files is in
	 * (remote_opts.leaving) */
	struct leaving *leaving;
};

/* The outtypes a model folder is converted to, as -o outtype takes them (the converter's
 * --outtype): "f32|f16|bf16|q8_0|auto". */
#define OUTTYPES "f32|f16|bf16|q8_0|auto"
/* True when name is one of OUTTYPES. */
bool open_name_outtype_ok(const char *name);

/* name as it may be shown when it is an http(s):// URL, which may hold credentials or a
 * query (url_display; malloc'ed): what a command line keeps in /proc/PID/cmdline. NULL
 * for any other name (hf://, s3://, a local path: nothing to hide), or out of memory. */
char *open_name_shown(const char *name);

/* Keeps a URL's user:password@ and query (a signature) out of /proc/PID/cmdline, which
 * every user can read, for the mount's life: when *name is a name open_name_shown
 * hides, every argument argv[1..argc) equal to it is overwritten in place with the name
 * as shown (cut to the argument's length; the rest of the argument NUL), and *name is
 * pointed to a copy of it first (*name may be one of those arguments). The copy
 * (malloc'ed, for the caller to free), or NULL when there was nothing to hide (or
 * *name is NULL) or memory ran out: then nothing is changed. */
char *open_name_scrub_args(int argc, char *argv[], const char **name);

/* Opens the one model name names (name_kind_of says it is not a library): a local file
 * or split set, a model folder converted to o's outtype (st_model.h), or a remote one; *shown gets a remote name as it may be shown (no
 * credentials, no query; malloc'ed), NULL for a local file. The model, or NULL with
 * one line in err naming the file or URL and the problem (*shown freed and NULL). */
struct ggufs_model *open_name_model(const char *name, const struct open_name_opts *o,
                                    char **shown, char err[GGUF_ERR_MAX]);

/* A whole file's bytes (open_name_bytes). */
struct open_name_bytes {
	uint8_t *data;   /* malloc'ed */
	uint64_t size;
};

/* Reads the whole of the one file name names (a local file, an http(s):// URL, an
 * hf:// file, an s3:// object: each as a model's bytes are fetched, with o's remote
 * options) into *b, for a small file a mount needs whole (an importance matrix). True;
 * or false with one line in err naming the file (nothing to free). */
bool open_name_bytes(const char *name, const struct open_name_opts *o,
                     struct open_name_bytes *b, char err[GGUF_ERR_MAX]);

/* Opens the library name names (kind: name_kind_of(name), a library's): its source made
 * (a remote one's credentials and revision found as for one model) and its root listed,
 * its models' trees to be built with kit (library_open's: the mount's, or NULL for the
 * core's providers alone). mountpoint (absolute, or NULL): a local folder that holds it
 * is refused, since every listing of the folder would then wait for itself. The library,
 * or NULL with one line in err. */
struct tree_kit;
struct library *open_name_library(const char *name, enum name_kind kind,
                                  const struct open_name_opts *o, const char *mountpoint,
                                  const struct tree_kit *kit, char err[GGUF_ERR_MAX]);

#endif
