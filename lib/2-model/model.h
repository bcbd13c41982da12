/* A mounted model: one GGUF file, or every shard of a split model, each read through a
 * byte source (source.h: a local file mapped read-only, or a remote one read by URL)
 * and validated, seen as one list of metadata and one list of tensors. */
#ifndef GGUFS_MODEL_H
#define GGUFS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "gguf.h"
#include "source.h"
#include "stream.h"

struct remote;
struct remote_opts;

struct model_shard {
	char *path;             /* a remote shard: its URL as shown (no credentials, no query) */
	const uint8_t *map;     /* the header: a local file's whole mapping (the source's),
	                         * a remote file's fetched prefix */
	uint64_t size;          /* file size at open */
	struct stat st;         /* a local shard: fstat of the descriptor that was mapped and
	                         * parsed, at open: which file, and which version of its bytes
	                         * (model_changed) */
	struct gguf_file gf;
	struct source *src;     /* the file's bytes, local or remote; gf points into map */
};

struct model_tensor {
	const struct gguf_tensor *t;  /* into shards[shard].gf.tensors */
	uint32_t shard;
};

struct ggufs_model {
	char *path;             /* as the user gave it */
	const char *file_name;  /* basename of the first shard (gguf.json "file"), local or
	                         * remote alike: the metadata is the first shard's */
	struct stat st;         /* of the given file (a local one's, of the descriptor
	                         * mapped): modes, owner, times */
	uint32_t n_shards;
	struct model_shard *shards;
	const struct gguf_file *meta;  /* &shards[0].gf: metadata comes from the first shard */
	uint64_t n_tensors;
	struct model_tensor *tensors;  /* shard order, then file order */
	struct remote *remote;  /* what the shards of a remote model share; NULL if local */
	const char *source;     /* a remote model: the URL given, as shown, and the hub's
	                         * commit when it names one; NULL if local */
	char *source_buf;       /* what source points to when it is not path */
	long open_status;       /* while a remote model is opened: the HTTP status of the
	                         * answer that made a shard fail (0 for none) */
};

/* How the files of a local model are opened (model_open_by): open gives the file at
 * path open for reading, once checked as the opener checks (a regular file at least:
 * nothing else is opened), or -errno with "PATH: why" in err (-ENOENT: there is none;
 * the model then names the shard missing). The file named is opened first (named
 * NULL), then each other shard of its set, found beside it, the stat of the file named
 * in named (taken on the descriptor it was opened by) for a check against it. Nothing
 * of a file is read but through the descriptor open gave. */
struct model_opener {
	int (*open)(void *ctx, const char *path, const struct stat *named,
	            char err[GGUF_ERR_MAX]);
	void *ctx;
};

/* The opener of model_open: path resolved, symbolic links followed, to the file it
 * names now, and that file opened through the descriptor it was resolved to if it is a
 * regular file (local_check.h), so a FIFO or a device is never opened. shared (a mount
 * that other users read, under the named file's owner, group and mode): every other
 * shard must let read whom the named file lets read (local_check_reads), else it is
 * refused, unread, with why. */
struct model_opener model_opener_local(bool shared);

/* Opens, maps and validates the model at path (all shards of a split model), each file
 * opened by opener. On failure returns NULL with one line (no "ggufs: " prefix, no
 * newline) in err, naming the file and the exact problem: "model.gguf: tensor 'x' ends
 * at byte N, past the end ...". */
struct ggufs_model *model_open_by(const char *path, const struct model_opener *opener,
                                  char err[GGUF_ERR_MAX]);
/* model_open_by with model_opener_local(false): a model the mounting user alone reads. */
struct ggufs_model *model_open(const char *path, char err[GGUF_ERR_MAX]);
void model_close(struct ggufs_model *m);

/* Recognises llama.cpp's split names, PREFIX-00002-of-00003.gguf: the length of
 * PREFIX in path, the shard number (from 1) and the shard count. */
bool model_split_name(const char *path, size_t *prefix, unsigned *no, unsigned *count);

/* Whether k is one of the keys that make a file a shard (split.no, split.count,
 * split.tensors.count): model.gguf of a split model has none of them, so that the
 * merged file is never taken for a shard again. */
bool model_split_key(const struct gguf_str *k);

/* Opens the remote model at url (http or https; hf:// already expanded), all shards of
 * a split one, with one shared struct remote made from o: only each shard's header is
 * fetched (REMOTE_FIRST_BYTES first, then x REMOTE_GROWTH until it parses). shown is the
 * URL as messages, fsname and summary.txt name it (no credentials, no query; it keeps
 * the -0000K-of-0000N.gguf ending of url). On failure NULL with "SHOWN: problem" in err,
 * and *status (if not NULL) the HTTP status of the answer that made it fail, or 0: 200
 * when the server ignores Range requests. */
struct ggufs_model *model_open_remote(const char *url, const char *shown,
                                      const struct remote_opts *o, char err[GGUF_ERR_MAX],
                                      long *status);

/* Opens the model at url, on a server that ignores Range requests, as one stream read
 * front to back (stream.h): for a reader of its tensors in file order, one at a time
 * (ggufs --check). Only a single file: a split model's shards need Range. On failure
 * NULL with "SHOWN: problem" in err. */
struct ggufs_model *model_open_stream(const char *url, const char *shown,
                                      const struct stream_opts *o, char err[GGUF_ERR_MAX]);

/* Copies [off, off + len) of the stored bytes of tensor i (inside them) into buf: 0 or
 * -EIO (the bytes are gone from a local file that shrank, or could not be fetched).
 * The tensor reader (reader.h) reads tensors without a copy where it can. */
int model_tensor_read(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                      void *buf);

/* Whether m's local files are still the ones it parsed: each local shard's descriptor's
 * device, inode, size, mtime and ctime now against those recorded at open (model_shard.
 * st; any write moves ctime, whatever it does to mtime after; a ctime moved with the
 * file's links, mode or owner is no write: the file renamed over, removed, linked or
 * chmod'ed keeps its bytes). The first that differs: its index + 1, with "PATH: what
 * changed" in why (size bytes; NULL: none wanted); 0 when none does. An fstat that
 * fails counts as a change. A remote shard is not looked at (its reads check its ETag
 * themselves), nor a streamed one (read once, in order). For what is made from the
 * bytes and kept (a quantization's blocks): a check after making it tells that they
 * were the recorded version's. */
uint32_t model_changed(const struct ggufs_model *m, char *why, size_t size);

/* Why a read of m's bytes failed with -errno r, one phrase into cause (for a line that
 * names the file and the tensor itself): a streamed model's stream error, a remote
 * model's first failed read as the event log said it (remote_first_cause), else
 * strerror(-r) ("out of memory" for -ENOMEM). */
void model_read_cause(const struct ggufs_model *m, int r, char cause[GGUF_ERR_MAX]);

/* True when tensor i's bytes are fetched, not mapped. */
static inline bool model_tensor_remote(const struct ggufs_model *m, uint64_t i)
{
	return !source_mapped(m->shards[m->tensors[i].shard].src);
}

/* True when the model is read as one stream (model_open_stream): in order, once. */
static inline bool model_streamed(const struct ggufs_model *m)
{
	return !m->remote && m->n_shards == 1 && !source_mapped(m->shards[0].src);
}

/* The stored bytes of tensor i of a local model: a pointer into its shard's mapping. */
static inline const uint8_t *model_tensor_data(const struct ggufs_model *m, uint64_t i)
{
	return m->shards[m->tensors[i].shard].map + m->tensors[i].t->offset;
}

#endif
