/* The model as every source makes it (model_source.h): its names, metadata, tensors and
 * files, and what is answered from the files alone, whatever they hold (a change, a
 * shrink, the identity for the caches, the passthrough descriptor), and views for the
 * states of edits. */
#include "model_impl.h"
#include "remote.h"
#include "stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ggufs_model *model_new(const struct model_desc *d)
{
	struct ggufs_model *m = calloc(1, sizeof *m);
	if (!m || !(m->path = strdup(d->path)) || (d->url && !(m->url = strdup(d->url)))) {
		if (m)
			free(m->path);
		free(m);
		return NULL;
	}
	const char *first = d->files[0].path, *slash = strrchr(first, '/');
	m->file_name = slash ? slash + 1 : first;
	m->st = d->st;
	m->meta = m->own = d->meta;
	m->n_tensors = d->n_tensors;
	m->tensors = d->tensors;
	m->n_files = d->n_files;
	m->files = d->files;
	m->made_from = d->made_from;
	m->n_made_from = d->n_made_from;
	m->made_by = d->made_by;
	m->remote = d->remote;
	m->ops = d->ops;
	m->ctx = d->ctx;
	return m;
}

void model_close(struct ggufs_model *m)
{
	if (!m)
		return;
	if (m->base) {   /* a view holds nothing of the model's */
		model_view_free(m);
		return;
	}
	if (m->ops)
		m->ops->close(m->ctx);
	free(m->path);
	free(m->url);
	free(m);
}

struct ggufs_model *model_view_new(const struct ggufs_model *m, const struct gguf_file *meta)
{
	struct ggufs_model *v = malloc(sizeof *v);
	if (v) {
		*v = *m;
		v->meta = meta;
		v->base = m->base ? m->base : m;
	}
	return v;
}

void model_view_free(struct ggufs_model *v)
{
	free(v);
}

const char *model_path(const struct ggufs_model *m)
{
	return m->path;
}

const char *model_file_name(const struct ggufs_model *m)
{
	return m->file_name;
}

const struct stat *model_stat(const struct ggufs_model *m)
{
	return &m->st;
}

const char *model_url(const struct ggufs_model *m)
{
	return m->url;
}

const struct gguf_file *model_meta(const struct ggufs_model *m)
{
	return m->meta;
}

const struct gguf_file *model_own_meta(const struct ggufs_model *m)
{
	return m->own;
}

bool model_edited(const struct ggufs_model *m)
{
	return m->meta != m->own;
}

int model_header_holds(const struct ggufs_model *m, char why[GGUF_ERR_MAX])
{
	for (uint32_t f = 0; f < m->n_files; f++) {
		const struct model_file *mf = &m->files[f];
		if (mf->gguf && source_holds(mf->src, mf->gguf->data_offset, why) < 0) {
			if (why && !why[0])
				gguf_errf(why, "%s: the file has shrunk: its header is gone", mf->path);
			return -EIO;
		}
	}
	return 0;
}

uint64_t model_n_tensors(const struct ggufs_model *m)
{
	return m->n_tensors;
}

const struct gguf_tensor *model_tensor(const struct ggufs_model *m, uint64_t i)
{
	return m->tensors[i].t;
}

uint32_t model_tensor_file(const struct ggufs_model *m, uint64_t i)
{
	return m->tensors[i].file;
}

struct source *model_tensor_bytes(const struct ggufs_model *m, uint64_t i, uint64_t *off)
{
	*off = m->tensors[i].t->offset;
	return m->files[m->tensors[i].file].src;
}

const uint8_t *model_tensor_mapped(const struct ggufs_model *m, uint64_t i)
{
	const struct model_file *f = &m->files[m->tensors[i].file];
	return f->head && source_mapped(f->src) ? f->head + m->tensors[i].t->offset : NULL;
}

int model_tensor_read(const struct ggufs_model *m, uint64_t i, uint64_t off, uint64_t len,
                      void *buf, char why[GGUF_ERR_MAX])
{
	uint64_t at;
	struct source *src = model_tensor_bytes(m, i, &at);
	return source_read(src, at + off, len, buf, why);
}

uint32_t model_n_files(const struct ggufs_model *m)
{
	return m->n_files;
}

void model_file(const struct ggufs_model *m, uint32_t f, struct model_file_info *info)
{
	const struct model_file *mf = &m->files[f];
	*info = (struct model_file_info){ .path = mf->path, .size = mf->size, .st = mf->st,
	                                  .remote = mf->remote };
}

int model_file_fd(const struct ggufs_model *m, const char **not_file)
{
	const char *why = NULL;
	int fd = -1;
	uint64_t count;
	if (m->remote)
		why = "a remote model";
	else if (m->n_files != 1)
		why = "a split model, merged here";
	else if (!m->files[0].st || !source_span(m->files[0].src, 0, 0, &fd, &count))
		why = "not a local file";
	if (not_file)
		*not_file = why;
	return why ? -1 : fd;
}

/* Feeds add with what file mf of m is (model_identity): false when its version cannot
 * be told. */
static bool file_identity(const struct ggufs_model *m, const struct model_file *mf,
                          void (*add)(void *arg, const void *p, uint64_t n), void *arg)
{
	const struct stat *st = mf->st;
	char line[512];
	int n;
	if (st) {
		n = snprintf(line, sizeof line, "local %ju %ju %jd %jd.%09ld %jd.%09ld\n",
		             (uintmax_t)st->st_dev, (uintmax_t)st->st_ino, (intmax_t)st->st_size,
		             (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
		             (intmax_t)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	} else if (mf->remote) {
		const char *etag = remote_etag(mf->remote);
		const time_t mt = remote_mtime(mf->remote);
		if (!etag[0] && mt == (time_t)-1)
			return false;
		add(arg, mf->path, strlen(mf->path));
		n = snprintf(line, sizeof line, "\nremote %" PRIu64 " %s %jd\n",
		             remote_size(mf->remote), etag, (intmax_t)(etag[0] ? 0 : mt));
	} else if (m->made_by && m->n_made_from && mf->head && mf->gguf) {
		/* computed: by what, from the header it was given (the rest is made_from's) */
		n = snprintf(line, sizeof line, "computed %s %" PRIu64 "\n", m->made_by, mf->size);
		add(arg, line, (uint64_t)n);
		add(arg, mf->head, mf->gguf->data_offset);
		n = snprintf(line, sizeof line, "\n");
	} else {
		return false;
	}
	add(arg, line, (uint64_t)n);
	return true;
}

bool model_identity(const struct ggufs_model *m,
                    void (*add)(void *arg, const void *p, uint64_t n), void *arg)
{
	for (uint32_t f = 0; f < m->n_files; f++)
		if (!file_identity(m, &m->files[f], add, arg))
			return false;
	for (uint32_t f = 0; f < m->n_made_from; f++)
		if (!file_identity(m, &m->made_from[f], add, arg))
			return false;
	return true;
}

void model_cache_name(const struct ggufs_model *m, char *buf, size_t size)
{
	const struct model_file *first = &m->files[0];
	if (!first->st && m->made_by && m->n_made_from && m->made_from[0].st)
		snprintf(buf, size, "%.512s of file %ju:%ju", m->made_by,
		         (uintmax_t)m->made_from[0].st->st_dev,
		         (uintmax_t)m->made_from[0].st->st_ino);
	else if (first->st)
		snprintf(buf, size, "file %ju:%ju", (uintmax_t)first->st->st_dev,
		         (uintmax_t)first->st->st_ino);
	else
		snprintf(buf, size, "%.1024s", first->path);
}

bool model_fetched(const struct ggufs_model *m)
{
	return m->remote != NULL;
}

bool model_streamed(const struct ggufs_model *m)
{
	return !m->remote && !m->n_made_from && m->n_files == 1 &&
	       !source_mapped(m->files[0].src);
}

bool model_fetch_counters(const struct ggufs_model *m, struct remote_counters *rc)
{
	if (!m->remote)
		return false;
	remote_counters(m->remote, rc);
	return true;
}

/* True when stat now is of the file of stat was, with the same bytes as far as a stat
 * can tell: the same device, inode, size and mtime, and the same ctime, or another one
 * that a change of its links, mode or owner explains (the file renamed over or removed, linked,
 * chmod'ed: no byte written). A write moves mtime and ctime; one whose mtime was set
 * back after it (touch -d, cp -p) still moved ctime. */
static bool same_version(const struct stat *was, const struct stat *now)
{
	if (was->st_dev != now->st_dev || was->st_ino != now->st_ino ||
	    was->st_size != now->st_size || was->st_mtim.tv_sec != now->st_mtim.tv_sec ||
	    was->st_mtim.tv_nsec != now->st_mtim.tv_nsec)
		return false;
	if (was->st_ctim.tv_sec == now->st_ctim.tv_sec && was->st_ctim.tv_nsec == now->st_ctim.tv_nsec)
		return true;
	return was->st_nlink != now->st_nlink || was->st_mode != now->st_mode ||
	       was->st_uid != now->st_uid || was->st_gid != now->st_gid;
}

/* Whether local file mf (index + 1: ret) is still the version recorded: 0, or ret with
 * why as model_changed says it, what fails with EIO named by fails. */
static uint32_t file_changed(const struct model_file *mf, uint32_t ret, const char *fails,
                             char why[GGUF_ERR_MAX])
{
	int fd;
	uint64_t count;
	struct stat now;
	if (!mf->st || !source_span(mf->src, 0, 0, &fd, &count))
		return 0;
	const bool gone = fstat(fd, &now) < 0;
	if (!gone && same_version(mf->st, &now))
		return 0;
	if (!why)
		return ret;
	/* shrunk: said as its reads say it (the source's why) */
	const bool shrunk = !gone && (uint64_t)now.st_size < mf->size &&
	                    source_holds(mf->src, mf->size, why) < 0 && why[0];
	if (gone)
		gguf_errf(why, "%s: its state cannot be read (%s)", mf->path, strerror(errno));
	else if (!shrunk)
		gguf_errf(why, "%s: the file changed while mounted (%s): %s fail with EIO",
		          mf->path, now.st_size != mf->st->st_size ? "its size changed" :
		          "written to in place, its size unchanged", fails);
	return ret;
}

uint32_t model_changed(const struct ggufs_model *m, char why[GGUF_ERR_MAX])
{
	uint32_t r = 0;
	for (uint32_t f = 0; f < m->n_files && !r; f++)
		r = file_changed(&m->files[f], f + 1, "its quantizations (quants/)", why);
	for (uint32_t f = 0; f < m->n_made_from && !r; f++)
		r = file_changed(&m->made_from[f], m->n_files + f + 1,
		                 "the model converted from it (model.gguf, quants/)", why);
	return r;
}

void model_read_cause(const struct ggufs_model *m, int r, char cause[GGUF_ERR_MAX])
{
	const char *why = model_streamed(m) ? stream_error(m->files[0].src) : NULL;
	if (why)
		snprintf(cause, GGUF_ERR_MAX, "%s", why);
	else if (!(m->remote && remote_first_cause(m->remote, cause)))
		snprintf(cause, GGUF_ERR_MAX, "%s", r == -ENOMEM ? "out of memory" : strerror(-r));
}
