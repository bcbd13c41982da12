#include "model.h"
#include "nameset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
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

/* An unsigned integer metadata value of any integer type. */
static bool kv_uint(const struct gguf_file *f, const char *key, uint64_t *v)
{
	const struct gguf_kv *kv = gguf_find_kv(f, key);
	if (!kv)
		return false;
	const uint8_t *p = kv->value.data;
	switch (kv->value.type) {
	case GGUF_TYPE_UINT8: *v = p[0]; return true;
	case GGUF_TYPE_UINT16: *v = gguf_le16(p); return true;
	case GGUF_TYPE_UINT32: *v = gguf_le32(p); return true;
	case GGUF_TYPE_UINT64: *v = gguf_le64(p); return true;
	case GGUF_TYPE_INT8: *v = (uint64_t)(int64_t)(int8_t)p[0]; return (int8_t)p[0] >= 0;
	case GGUF_TYPE_INT16: *v = (uint64_t)(int16_t)gguf_le16(p); return (int16_t)gguf_le16(p) >= 0;
	case GGUF_TYPE_INT32: *v = (uint64_t)(int32_t)gguf_le32(p); return (int32_t)gguf_le32(p) >= 0;
	case GGUF_TYPE_INT64: *v = gguf_le64(p); return (int64_t)*v >= 0;
	default: return false;
	}
}

/* Recognises llama.cpp's split names, PREFIX-00002-of-00003.gguf: the length of
 * PREFIX in path, the shard number (from 1) and the shard count. */
static bool split_name(const char *path, size_t *prefix, unsigned *no, unsigned *count)
{
	size_t n = strlen(path);
	const char *tail = "-00000-of-00000.gguf";
	size_t tl = strlen(tail);
	if (n < tl)
		return false;
	const char *p = path + n - tl;
	for (size_t i = 0; i < tl; i++) {
		bool digit = tail[i] == '0';
		if (digit ? !(p[i] >= '0' && p[i] <= '9') : p[i] != tail[i])
			return false;
	}
	*no = (unsigned)strtoul(p + 1, NULL, 10);
	*count = (unsigned)strtoul(p + 10, NULL, 10);
	*prefix = n - tl;
	return *no >= 1 && *count >= 1 && *no <= *count;
}

/* Checks that shard i (from 0) of count belongs to the set that shard 0 starts. */
static int split_check(struct ggufs_model *m, uint32_t i, uint64_t tensors_total,
                       char err[GGUF_ERR_MAX])
{
	const struct model_shard *s = &m->shards[i];
	uint64_t no, count, total;
	if (!kv_uint(&s->gf, "split.no", &no) || !kv_uint(&s->gf, "split.count", &count)) {
		errf(err, "%s: shard %u of %u has no split.no or split.count key", s->path, i + 1,
		     m->n_shards);
		return -1;
	}
	if (count != m->n_shards || no != i) {
		errf(err, "%s: not shard %u of %u of this model: its split.no is %" PRIu64
		     " and split.count %" PRIu64, s->path, i + 1, m->n_shards, no, count);
		return -1;
	}
	if (kv_uint(&s->gf, "split.tensors.count", &total) && total != tensors_total) {
		errf(err, "%s: belongs to another model: split.tensors.count is %" PRIu64
		     ", the first shard says %" PRIu64, s->path, total, tensors_total);
		return -1;
	}
	return 0;
}

/* Opens every shard of the split set that path belongs to, or path alone. */
static int open_shards(struct ggufs_model *m, const char *path, char err[GGUF_ERR_MAX])
{
	size_t prefix;
	unsigned no, count;
	struct stat st;

	if (!split_name(path, &prefix, &no, &count) || count == 1) {
		m->shards = calloc(1, sizeof *m->shards);
		if (!m->shards) {
			errf(err, "%s: out of memory", path);
			return -1;
		}
		m->n_shards = 1;
		if (shard_open(&m->shards[0], path, &m->st, err) < 0)
			return -1;
		uint64_t c;
		if (kv_uint(&m->shards[0].gf, "split.count", &c) && c > 1) {
			errf(err, "%s: shard of a model split in %" PRIu64 " files, but its name is not "
			     "NAME-0000N-of-0000M.gguf, so the others cannot be found", path, c);
			return -1;
		}
		return 0;
	}
	m->shards = calloc(count, sizeof *m->shards);
	char *name = malloc(prefix + 32);
	if (!m->shards || !name) {
		free(name);
		errf(err, "%s: out of memory", path);
		return -1;
	}
	memcpy(name, path, prefix);
	for (unsigned i = 0; i < count; i++) {
		snprintf(name + prefix, 32, "-%05u-of-%05u.gguf", i + 1, count);
		if (access(name, F_OK) < 0 && errno == ENOENT) {
			errf(err, "%s: shard %u of %u is missing", name, i + 1, count);
			free(name);
			return -1;
		}
		m->n_shards = i + 1;
		if (shard_open(&m->shards[i], name, i + 1 == no ? &m->st : &st, err) < 0) {
			free(name);
			return -1;
		}
	}
	free(name);
	uint64_t total = 0;
	for (unsigned i = 0; i < count; i++)
		total += m->shards[i].gf.n_tensors;
	uint64_t claimed = total;
	kv_uint(&m->shards[0].gf, "split.tensors.count", &claimed);
	for (unsigned i = 0; i < count; i++)
		if (split_check(m, i, claimed, err) < 0)
			return -1;
	if (claimed != total) {
		errf(err, "%s: split.tensors.count is %" PRIu64 " but the %u shards hold %" PRIu64
		     " tensors", m->shards[0].path, claimed, count, total);
		return -1;
	}
	return 0;
}

struct ggufs_model *model_open(const char *path, char err[GGUF_ERR_MAX])
{
	struct ggufs_model *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(path))) {
		errf(err, "%s: out of memory", path);
		free(m);
		return NULL;
	}
	if (open_shards(m, path, err) < 0)
		goto fail;
	m->meta = &m->shards[0].gf;
	const char *slash = strrchr(m->shards[0].path, '/');
	m->file_name = slash ? slash + 1 : m->shards[0].path;

	for (uint32_t s = 0; s < m->n_shards; s++)
		m->n_tensors += m->shards[s].gf.n_tensors;
	m->tensors = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *m->tensors);
	struct nameset seen;
	if (!m->tensors || !nameset_init(&seen, m->n_tensors)) {
		errf(err, "%s: out of memory", path);
		goto fail;
	}
	uint64_t k = 0;
	for (uint32_t s = 0; s < m->n_shards; s++) {
		for (uint64_t i = 0; i < m->shards[s].gf.n_tensors; i++, k++) {
			const struct gguf_tensor *t = &m->shards[s].gf.tensors[i];
			m->tensors[k] = (struct model_tensor){ .t = t, .shard = s };
			if (!nameset_add(&seen, &t->name)) {
				char q[80];
				errf(err, "%s: tensor '%s' is also in an earlier shard", m->shards[s].path,
				     gguf_quote(&t->name, q));
				nameset_free(&seen);
				goto fail;
			}
		}
	}
	nameset_free(&seen);
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
