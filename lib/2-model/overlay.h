/* Metadata edits: the metadata of a model as a sequence of immutable states, each the
 * original keys (some changed, renamed or deleted) followed by new keys. A state is
 * never changed once made: an edit makes the next state from the current one, and a
 * reader keeps the state it started with for as long as it holds a reference, so it
 * sees the old metadata or the new, never a mix.
 *
 * Keys have ids that stay the same across states: an original key's is its index in
 * the model's file, a new key's n_orig + the number of keys created before it (on this
 * mount, counting from the edits the mount started with). The tree makes inode numbers
 * of them. Values and names that differ from the model's own are kept in reference-
 * counted blobs shared by the states that hold them, so a state costs one entry per
 * key, not a copy of the metadata. */
#ifndef GGUFS_OVERLAY_H
#define GGUFS_OVERLAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "model.h"

struct blob;

struct ov_key {
	struct gguf_kv kv;        /* name and value: into the model's image or into blobs */
	uint64_t id;
	struct blob *name_blob;   /* what kv.key points into, when not the image; or NULL */
	struct blob *value_blob;  /* the same for kv.value */
};

struct ov_state {
	atomic_uint_fast64_t refs;
	uint64_t gen;             /* 0 for the model's own metadata, +1 per edit */
	uint64_t n;               /* keys: surviving original ones in file order, then new */
	struct ov_key *keys;
	uint64_t n_orig;          /* keys of the model's file */
	uint64_t next_id;         /* the id the next new key gets */
	struct gguf_kv *kv;       /* the keys' kvs in order, for file below */
	struct gguf_file file;    /* the first shard's parse with this state's metadata:
	                           * what renderers and the model.gguf header are made from */
	struct ggufs_model *view; /* the model seen with this metadata (model_view_new: its
	                           * metadata is file); shares everything else with the
	                           * model */
};

/* The state of the model's own metadata (gen 0, one reference), or NULL out of memory.
 * m must outlive every state made from it. */
struct ov_state *ov_initial(const struct ggufs_model *m);
/* The bytes s holds of its own: its key table (the blobs of edited names and values are
 * shared with the states that keep them, and not counted). */
uint64_t ov_state_bytes(const struct ov_state *s);
/* Another reference to s. */
struct ov_state *ov_get(struct ov_state *s);
/* Drops a reference; the last frees s (NULL is allowed). */
void ov_put(struct ov_state *s);

/* The position of the key with this id in s, or UINT64_MAX. */
uint64_t ov_find_id(const struct ov_state *s, uint64_t id);
/* The position of the key called [name, name + len) in s, or UINT64_MAX. */
uint64_t ov_find_name(const struct ov_state *s, const char *name, uint64_t len);

/* Whether a key may be edited: 0, or -EPERM ("general.alignment would move every
 * tensor", "the split.* keys describe the shards") or -EINVAL for a name GGUF cannot
 * hold (empty, too long, with a NUL), with the reason (a constant) in *why. */
int ov_refusal(const char *name, uint64_t len, const char **why);

/* The next states, made from s (which is not changed): NULL out of memory (ov_create:
 * 0 or -errno). The new state has one reference, the caller's. */
/* Key at position i gets value v (copied). */
struct ov_state *ov_set(const struct ov_state *s, uint64_t i, const struct gguf_value *v);
/* A new key [name, len) with value v (copied), at the end, with id next_id, into *next:
 * 0, -EEXIST when the name is taken or -ENOMEM. */
int ov_create(const struct ov_state *s, const char *name, uint64_t len,
              const struct gguf_value *v, struct ov_state **next);
/* Key at position i removed. */
struct ov_state *ov_delete(const struct ov_state *s, uint64_t i);
/* Key k (a key of some state of this model, held with ov_key_hold) back in its place:
 * in id order, with its id, name and value, into *next: 0, -EEXIST when its name or id
 * is there, or -ENOMEM. */
int ov_restore(const struct ov_state *s, const struct ov_key *k, struct ov_state **next);
/* A copy of key k that keeps its name and value (their blobs held) after every state
 * holding it is gone; ov_key_drop lets go of them. */
void ov_key_hold(const struct ov_key *k, struct ov_key *out);
void ov_key_drop(struct ov_key *k);
/* Key at position i renamed [name, len), keeping its id and place; a key already called
 * so is removed (rename(2) replaces its target). */
struct ov_state *ov_rename(const struct ov_state *s, uint64_t i, const char *name, uint64_t len);

/* What a patch does to one key of the model: deleted, or given another name and/or
 * value (NULL: its own). */
struct ov_change {
	bool deleted;
	const struct gguf_str *name;
	const struct gguf_value *value;
};
/* The state of a whole patch in one step (an edits file read at mount): key k of the
 * model changed as change[k] says, then n_new new keys (names and values copied), with
 * generation gen. Names must be unique (the caller checks); NULL out of memory. */
struct ov_state *ov_patched(const struct ggufs_model *m, const struct ov_change *change,
                            const struct gguf_kv *new_kv, uint64_t n_new, uint64_t gen);

/* True when the values are the same: type, element type, count and bytes. */
bool ov_value_equal(const struct gguf_value *a, const struct gguf_value *b);
/* True when s holds m's own metadata: every key of m's file, in its place, with its
 * name and value (no edit made, or each one undone). */
bool ov_unchanged(const struct ov_state *s, const struct ggufs_model *m);

/* The identity of the model an edits file belongs to (with the size of its unedited
 * model.gguf): the XXH3-64 of model.gguf's unedited header as gguf_header_write writes
 * it (a split model's merged one, without the split.* keys; a single file's own keys
 * and offsets), so a split model and the file it was cut from are one model when the
 * merge gives that file back. 0, or -1 out of memory or past 2^64. */
int ov_identity(const struct ggufs_model *m, uint64_t *header_hash);

#endif
