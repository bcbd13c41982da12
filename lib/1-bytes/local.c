#include "local.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guard.h"
#include "local_check.h"

struct local_file {
	struct source src;      /* first: the source is the file */
	int fd;
	const uint8_t *map;     /* the whole file as it was at open */
	uint64_t size;          /* its size at open */
	char *shown;            /* its name in what is said of it */
};

/* Why bytes of f are gone, into why (when wanted): "PATH: the file shrank from A to B
 * bytes while mounted: ...", as the file is now. */
static void gone_why(const struct local_file *f, char why[GGUF_ERR_MAX])
{
	struct stat st;
	if (!why)
		return;
	if (fstat(f->fd, &st) < 0)
		gguf_errf(why, "%s: its state cannot be read (%s)", f->shown, strerror(errno));
	else if ((uint64_t)st.st_size < f->size)
		gguf_errf(why, "%s: the file shrank from %" PRIu64 " to %" PRIu64 " bytes while "
		          "mounted: reads of the bytes that went fail with EIO", f->shown, f->size,
		          (uint64_t)st.st_size);
	else
		gguf_errf(why, "%s: a page of the file could not be read", f->shown);
}

/* True when the file still holds bytes [0, end): the file may have shrunk since it was
 * mapped, and a read of what is gone must fail, not return zeros from the tail of the
 * last page. False with why (gone_why). */
static bool still_there(const struct local_file *f, uint64_t end, char why[GGUF_ERR_MAX])
{
	struct stat st;
	if (fstat(f->fd, &st) == 0 && (uint64_t)st.st_size >= end)
		return true;
	gone_why(f, why);
	return false;
}

/* A visit of bytes in the mapping, as guard_call runs it. */
struct visit {
	source_visit_fn fn;
	void *ctx;
	const uint8_t *p;
	uint64_t len;
};

static void run_visit(void *ctx)
{
	const struct visit *v = ctx;
	v->fn(v->ctx, v->p, v->len);
}

/* Source visit: fn on the mapping itself, under the SIGBUS guard (a page gone while it
 * runs: the file shrank under it). */
static int local_visit(struct source *src, uint64_t off, uint64_t len, source_visit_fn fn,
                       void *ctx, char why[GGUF_ERR_MAX])
{
	const struct local_file *f = (const struct local_file *)src;
	if (!still_there(f, off + len, why))
		return -EIO;
	struct visit v = { .fn = fn, .ctx = ctx, .p = f->map + off, .len = len };
	const int r = guard_call(run_visit, &v);
	if (r < 0)
		gone_why(f, why);
	return r;
}

/* A visit that copies the bytes to ctx, a buffer. */
static void copy_out(void *ctx, const uint8_t *p, uint64_t len)
{
	memcpy(ctx, p, len);
}

/* Source read: a copy out of the mapping, under the SIGBUS guard. */
static int local_read(struct source *src, uint64_t off, uint64_t len, void *buf,
                      char why[GGUF_ERR_MAX])
{
	return local_visit(src, off, len, copy_out, buf, why);
}

static int local_holds(struct source *src, uint64_t end, char why[GGUF_ERR_MAX])
{
	return still_there((const struct local_file *)src, end, why) ? 0 : -EIO;
}

static void local_span(struct source *src, uint64_t off, uint64_t len, int *fd,
                       uint64_t *count)
{
	const struct local_file *f = (const struct local_file *)src;
	struct stat st;
	*fd = f->fd;
	*count = len;
	/* what the file holds now: it may have shrunk since it was mapped */
	if (fstat(f->fd, &st) < 0 || (uint64_t)st.st_size <= off)
		*count = 0;
	else if (*count > (uint64_t)st.st_size - off)
		*count = (uint64_t)st.st_size - off;
}

static void local_close(struct source *src)
{
	struct local_file *f = (struct local_file *)src;
	if (f->map != MAP_FAILED)
		munmap((void *)f->map, f->size);
	if (f->fd >= 0)
		close(f->fd);
	free(f->shown);
	free(f);
}

static const struct source_ops local_ops = {
	.read = local_read,
	.close = local_close,
	.visit = local_visit,
	.holds = local_holds,
	.span = local_span,
};

struct source *local_open_fd(int fd, const char *shown, struct stat *st, const uint8_t **map,
                             uint64_t *size, char err[GGUF_ERR_MAX])
{
	struct local_file *f = calloc(1, sizeof *f);
	if (!f) {
		gguf_errf(err, "%s: out of memory", shown);
		close(fd);
		return NULL;
	}
	f->src.ops = &local_ops;
	f->map = MAP_FAILED;
	f->fd = fd;
	if (!(f->shown = strdup(shown))) {
		gguf_errf(err, "%s: out of memory", shown);
		goto fail;
	}
	if (fstat(f->fd, st) < 0) {
		gguf_errf(err, "%s: %s", shown, strerror(errno));
		goto fail;
	}
	if (local_check_regular(st, shown, err) < 0)
		goto fail;
	f->size = (uint64_t)st->st_size;
	if (f->size == 0) {
		gguf_errf(err, "%s: empty file, not GGUF", shown);
		goto fail;
	}
	f->map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
	if (f->map == MAP_FAILED) {
		gguf_errf(err, "%s: cannot map %" PRIu64 " bytes: %s", shown, f->size,
		          strerror(errno));
		goto fail;
	}
	*map = f->map;
	*size = f->size;
	return &f->src;
fail:
	local_close(&f->src);
	return NULL;
}
