/* A mounted model: one GGUF file, or every shard of a split model, each read through a
 * byte source (source.h: a local file mapped read-only, or a remote one read by URL)
 * and validated, seen as one list of metadata and one list of tensors. The files are
 * opened by a source of models (model_source.h: model_gguf.c's GGUF files); everything
 * above reads a model through the functions here. */
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
struct remote_counters;
struct remote_file;
struct remote_opts;

/* A model: its metadata, its tensors, the files their bytes lie in (model_source.h
 * makes one; model.c answers everything below the same for every source). Opaque:
 * read through the functions below. */
struct ggufs_model;

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
/* Closes the model's files and frees it (a view: as model_view_free); NULL is ignored. */
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
 * -EIO (the bytes are gone from a local file that shrank, or could not be fetched) with
 * why as its source said it (source.h; NULL: not wanted). The tensor reader (reader.h)
 * reads tensors without a copy where it can. */
int model_tensor_read(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                      void *buf, char why[GGUF_ERR_MAX]);

/* Whether m's local files (and those its files are computed from: model_desc's
 * made_from, counted after its files) are still the ones it parsed: each local file's descriptor's
 * device, inode, size, mtime and ctime now against those recorded at open (model_file:
 * st; any write moves ctime, whatever it does to mtime after; a ctime moved with the
 * file's links, mode or owner is no write: the file renamed over, removed, linked or
 * chmod'ed keeps its bytes). The first that differs: its index + 1, with "PATH: what
 * changed" in why (NULL: none wanted; a file that shrank: as its reads say it, "PATH:
 * the file shrank from A to B bytes ..."); 0 when none does. An fstat that fails counts
 * as a change. A remote file is not looked at (its reads check its ETag themselves),
 * nor a streamed one (read once, in order). For what is made from the
 * bytes and kept (a quantization's blocks): a check after making it tells that they
 * were the recorded version's. */
uint32_t model_changed(const struct ggufs_model *m, char why[GGUF_ERR_MAX]);

/* Why a read of m's bytes failed with -errno r, one phrase into cause (for a line that
 * names the file and the tensor itself): a streamed model's stream error, a remote
 * model's first failed read as the event log said it (remote_first_cause), else
 * strerror(-r) ("out of memory" for -ENOMEM). */
void model_read_cause(const struct ggufs_model *m, int r, char cause[GGUF_ERR_MAX]);

/* ---- what a model is made of ---- */

/* The name the model was opened by, as the user gave it (a remote one's URL as shown:
 * no credentials, no query). */
const char *model_path(const struct ggufs_model *m);
/* The base name of its first file (gguf.json's "file"): the metadata is that file's. */
const char *model_file_name(const struct ggufs_model *m);
/* The stat the model shows (modes, owner, times, size): a local model's of the file
 * named, taken on the descriptor mapped; a fetched one's made up (read-only, the
 * mounting user's, Last-Modified or the time of the open). */
const struct stat *model_stat(const struct ggufs_model *m);
/* A fetched or streamed model's URL as shown, followed by " (commit C)" when the hub
 * named the commit it served (summary.txt's source line); NULL for a local model. */
const char *model_url(const struct ggufs_model *m);

/* The metadata the model shows: its version, alignment, keys (a view's own, model_view_
 * new; else the first file's) and tensor count. */
const struct gguf_file *model_meta(const struct ggufs_model *m);
/* The metadata its first file holds, whatever a view shows (edits compare with it). */
const struct gguf_file *model_own_meta(const struct ggufs_model *m);
/* True when m shows metadata other than its first file's own (a view of an edit). */
bool model_edited(const struct ggufs_model *m);
/* 0 when every file still holds the bytes of its header (the keys and tensor infos
 * model_meta and model_tensor point into, which a rendering reads in place under the
 * SIGBUS guard), else -EIO, a local file shrank under them, with why as its source says
 * it ("PATH: the file shrank from A to B bytes ..."; NULL: not wanted). */
int model_header_holds(const struct ggufs_model *m, char why[GGUF_ERR_MAX]);

/* Its tensors: every file's, in file order, then each file's own order. */
uint64_t model_n_tensors(const struct ggufs_model *m);
/* Tensor i (< model_n_tensors): its name, type, shape, size and offset in its file. */
const struct gguf_tensor *model_tensor(const struct ggufs_model *m, uint64_t i);
/* The file (< model_n_files) that holds tensor i's bytes. */
uint32_t model_tensor_file(const struct ggufs_model *m, uint64_t i);
/* Where tensor i's stored bytes lie: the source they are read through (mapped, fetched
 * or computed alike), with the offset of their first byte in it into *off. */
struct source *model_tensor_bytes(const struct ggufs_model *m, uint64_t i, uint64_t *off);
/* Tensor i's stored bytes in a local file's mapping (for a reply without a copy, once
 * the file is known to still hold them: reader_raw_span), or NULL when they are not
 * mapped (fetched). */
const uint8_t *model_tensor_mapped(const struct ggufs_model *m, uint64_t i);

/* The files the model's bytes come from: one, or each shard of a split model. */
uint32_t model_n_files(const struct ggufs_model *m);
struct model_file_info {
	const char *path;                  /* as shown: a local path, a URL as shown */
	uint64_t size;                     /* its size at open */
	const struct stat *st;             /* a local file's fstat at open (which file, which
	                                    * version of its bytes); NULL when fetched */
	const struct remote_file *remote;  /* a file read by range requests; NULL otherwise */
};
/* What file f (< model_n_files) is, into *info. */
void model_file(const struct ggufs_model *m, uint32_t f, struct model_file_info *info);
/* The descriptor of the one local file whose bytes are the model's as they are (for
 * the kernel to read them itself), or -1 with why not in *not_file (if not NULL): "a
 * remote model", "a split model, merged here", "not a local file". */
int model_file_fd(const struct ggufs_model *m, const char **not_file);

/* Feeds add with what the model's bytes are, file by file: a local file's device,
 * inode, size and times as recorded at open (the version parsed; any change of its
 * bytes moves its ctime), a remote one's URL, size and ETag (or Last-Modified), a
 * computed one's maker and header, then the files it is computed from. For the
 * keys of what is made from them and kept (the disk cache). False when some file's
 * version cannot be told (a streamed model, a server that names none): keep nothing. */
bool model_identity(const struct ggufs_model *m,
                    void (*add)(void *arg, const void *p, uint64_t n), void *arg);
/* The model's name for people in a cache's key, never a path (one file is one entry
 * whatever names lead to it): "file DEV:INO" of its first file, "MADE_BY of file
 * DEV:INO" of the first file a computed one is made from, or a remote one's URL (cut
 * at 1,024 bytes), into buf. */
void model_cache_name(const struct ggufs_model *m, char *buf, size_t size);
/* True when the model's files are fetched by range requests (a remote model). */
bool model_fetched(const struct ggufs_model *m);
/* True when the model is read as one stream (model_open_stream): in order, once. A
 * computed file (made_from) is none, though no mapping holds it either. */
bool model_streamed(const struct ggufs_model *m);
/* A fetched model's fetch counters now, into *rc: true; false for another model. */
bool model_fetch_counters(const struct ggufs_model *m, struct remote_counters *rc);

/* A view of m with metadata meta (an edit state's: overlay.h) instead of its own: the
 * same files and tensors, meta shown (which must outlive it, as m must). NULL out of
 * memory. model_view_free frees it, never m. */
struct ggufs_model *model_view_new(const struct ggufs_model *m, const struct gguf_file *meta);
void model_view_free(struct ggufs_model *v);

#endif
