#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One error line into err; a long path may cut it short, never overflow it. */
static void errf(char err[GGUF_ERR_MAX], const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void errf(char err[GGUF_ERR_MAX], const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, GGUF_ERR_MAX, fmt, ap);
	va_end(ap);
}

/* Maps and parses one file into shard; on failure err holds "PATH: problem". */
static int shard_open(struct model_shard *s, const char *path, struct stat *st,
                      char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];

	s->fd = -1;
	s->map = MAP_FAILED;
	s->path = strdup(path);
	if (!s->path) {
		errf(err, "%s: out of memory", path);
		return -1;
	}
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0 || fstat(s->fd, st) < 0) {
		errf(err, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st->st_mode)) {
		errf(err, "%s: is a directory, not a GGUF file", path);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		errf(err, "%s: not a regular file", path);
		return -1;
	}
	s->size = (uint64_t)st->st_size;
	if (s->size == 0) {
		errf(err, "%s: empty file, not GGUF", path);
		return -1;
	}
	s->map = mmap(NULL, s->size, PROT_READ, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED) {
		errf(err, "%s: cannot map %" PRIu64 " bytes: %s", path, s->size,
		         strerror(errno));
		return -1;
	}
	if (gguf_parse(s->map, s->size, &s->gf, why) < 0) {
		errf(err, "%s: %s", path, why);
		return -1;
	}
	return 0;
}

static void shard_close(struct model_shard *s)
{
	gguf_file_free(&s->gf);
	if (s->map && s->map != MAP_FAILED)
		munmap((void *)s->map, s->size);
	if (s->fd >= 0)
		close(s->fd);
	free(s->path);
}

struct ggufs_model *model_open(const char *path, char err[GGUF_ERR_MAX])
{
	struct ggufs_model *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path))) {
		errf(err, "%s: out of memory", path);
		free(m);
		return NULL;
	}
	m->shards = calloc(1, sizeof *m->shards);
	if (!m->shards) {
		errf(err, "%s: out of memory", path);
		goto fail;
	}
	m->n_shards = 1;
	if (shard_open(&m->shards[0], path, &m->st, err) < 0)
		goto fail;
	m->meta = &m->shards[0].gf;
	const char *slash = strrchr(m->shards[0].path, '/');
	m->file_name = slash ? slash + 1 : m->shards[0].path;

	m->n_tensors = m->meta->n_tensors;
	m->tensors = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->tensors);
	if (!m->tensors) {
		errf(err, "%s: out of memory", path);
		goto fail;
	}
	for (uint64_t i = 0; i < m->n_tensors; i++)
		m->tensors[i] = (struct model_tensor){ .t = &m->meta->tensors[i], .shard = 0 };
	return m;
fail:
	model_close(m);
	return NULL;
}

void model_close(struct ggufs_model *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->n_shards; i++)
		shard_close(&m->shards[i]);
	free(m->shards);
	free(m->tensors);
	free(m->path);
	free(m);
}
