/* A mounted model: one GGUF file, or every shard of a split model, each mmapped
 * read-only and validated, seen as one list of metadata and one list of tensors. */
#ifndef GGUFS_MODEL_H
#define GGUFS_MODEL_H

#include <stdint.h>
#include <sys/stat.h>

#include "gguf.h"

struct model_shard {
	char *path;
	int fd;
	const uint8_t *map;     /* the whole file, PROT_READ, MAP_SHARED */
	uint64_t size;          /* file size at open */
	struct gguf_file gf;
};

struct model_tensor {
	const struct gguf_tensor *t;  /* into shards[shard].gf.tensors */
	uint32_t shard;
};

struct ggufs_model {
	char *path;             /* as the user gave it */
	const char *file_name;  /* basename of the first shard (gguf.json "file") */
	struct stat st;         /* of the given file: modes, owner, times */
	uint32_t n_shards;
	struct model_shard *shards;
	const struct gguf_file *meta;  /* &shards[0].gf: metadata comes from the first shard */
	uint64_t n_tensors;
	struct model_tensor *tensors;  /* shard order, then file order */
};

/* Opens, maps and validates the model at path (all shards of a split model). On failure
 * returns NULL with one line (no "ggufs: " prefix, no newline) in err, naming the file
 * and the exact problem: "model.gguf: tensor 'x' ends at byte N, past the end ...". */
struct ggufs_model *model_open(const char *path, char err[GGUF_ERR_MAX]);
void model_close(struct ggufs_model *m);

/* The stored bytes of tensor i: a pointer into its shard's mapping. */
static inline const uint8_t *model_tensor_data(const struct ggufs_model *m, uint64_t i)
{
	return m->shards[m->tensors[i].shard].map + m->tensors[i].t->offset;
}

#endif
