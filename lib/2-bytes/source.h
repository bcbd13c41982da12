/* Where a shard's bytes come from when they are not in a local mapping: the interface
 * between the model and a fetcher (lib/remote/remote.c), so that the tree reads tensor bytes
 * without knowing from where. A local shard has no source: its whole file is mapped
 * (model_shard.map) and read in place, zero-copy. */
#ifndef GGUFS_SOURCE_H
#define GGUFS_SOURCE_H

#include <stdint.h>

struct source;

struct source_ops {
	/* Copies bytes [off, off + len) of the file (inside its size) into buf: 0, or
	 * -errno (-EIO when they cannot be had, or the file changed since it was opened). */
	int (*read)(struct source *src, uint64_t off, uint64_t len, void *buf);
	void (*close)(struct source *src);
};

struct source {
	const struct source_ops *ops;
};

static inline int source_read(struct source *src, uint64_t off, uint64_t len, void *buf)
{
	return src->ops->read(src, off, len, buf);
}

static inline void source_close(struct source *src)
{
	if (src)
		src->ops->close(src);
}

#endif
