/* A library's source in a local folder: listings by readdir, versions from stat, models
 * opened as `ggufs FILE` opens them, plain files read with pread. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "libsource.h"

/* A listing longer than this is refused: the library keeps every folder's names. */
#define LOCAL_ENTRIES_MAX (1u << 20)

struct local_source {
	char *root;     /* absolute, no trailing '/' (but "/" itself) */
	bool confine;   /* nothing served whose real path leaves root */
};

void lib_entry_clear(struct lib_entry *e)
{
	if (!e->path)
		free(e->name);
	else if (!e->lent)
		free(e->path);
	e->name = e->path = NULL;
}

void lib_entries_free(struct lib_entry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		lib_entry_clear(&e[i]);
	free(e);
}

bool lib_entry_name(struct lib_entry *e, const char *dir, const char *name, size_t len)
{
	const size_t dlen = strlen(dir), at = dlen ? dlen + 1 : 0;
	e->path = malloc(at + len + 1);
	if (!e->path)
		return false;
	memcpy(e->path, dir, dlen);
	if (dlen)
		e->path[dlen] = '/';
	memcpy(e->path + at, name, len);
	e->path[at + len] = 0;
	e->name = e->path + at;
	e->lent = false;
	return true;
}

/* root/path (root alone for ""), malloc'ed, or NULL. */
static char *full_path(const struct local_source *ls, const char *path)
{
	size_t n = strlen(ls->root) + strlen(path) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s%s", ls->root, *path && strcmp(ls->root, "/") ? "/" : "", path);
	return p;
}

/* True when descriptor fd (O_PATH too) is of a file inside the root: its path as the
 * kernel knows it now (symbolic links resolved) is the root or under it. */
static bool fd_inside(const struct local_source *ls, int fd)
{
	char proc[40], real[PATH_MAX + 1];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(proc, real, sizeof real - 1);
	if (n <= 0 || (size_t)n >= sizeof real - 1 || real[0] != '/')
		return false;
	real[n] = 0;
	size_t len = strlen(ls->root);
	return !strcmp(ls->root, "/") ||
	       (!strncmp(real, ls->root, len) && (real[len] == 0 || real[len] == '/'));
}

/* The attributes of entry name of folder fd, symbolic links followed, into *st: true
 * for a regular file or a folder that the library may show (confined: one whose real
 * path stays inside the root, checked on the very file stat'ed). */
static bool entry_stat(const struct local_source *ls, int fd, const struct dirent *de,
                       struct stat *st)
{
	if (!ls->confine || (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN))
		return fstatat(fd, de->d_name, st, 0) == 0 && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode));
	int efd = openat(fd, de->d_name, O_PATH | O_CLOEXEC);
	bool ok = efd >= 0 && fstat(efd, st) == 0 && (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) &&
	          fd_inside(ls, efd);
	if (efd >= 0)
		close(efd);
	return ok;
}

/* What tells two versions of a file or folder apart: where it is, its size and times
 * (a file replaced by rename has another inode; one rewritten in place, another mtime). */
static uint64_t version_of(const struct stat *st)
{
	uint64_t v[8] = { (uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
	                  (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
	                  (uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec,
	                  (uint64_t)(st->st_mode & S_IFMT) };
	return XXH3_64bits(v, sizeof v);
}

static int local_list(void *ctx, const char *dir, struct lib_entry **out, size_t *n,
                      uint64_t *version, char err[GGUF_ERR_MAX])
{
	struct local_source *ls = ctx;
	*out = NULL;
	*n = 0;
	char *path = full_path(ls, dir);
	int fd = path ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct stat dst;
	if (d && ls->confine && !fd_inside(ls, fd)) {
		snprintf(err, GGUF_ERR_MAX, "%s: cannot list the folder: it leads out of the "
		         "library's folder", path);
		closedir(d);
		free(path);
		return -ENOENT;
	}
	if (!d || fstat(fd, &dst) != 0) {
		int e = path ? errno : ENOMEM;
		snprintf(err, GGUF_ERR_MAX, "%s: cannot list the folder: %s", path ? path : dir,
		         strerror(e));
		if (fd >= 0 && !d)
			close(fd);
		if (d)
			closedir(d);
		free(path);
		return -e;
	}
	*version = version_of(&dst);
	size_t cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		/* symbolic links are followed, as ls -L would; a dangling one is left out, and,
		 * confined, one that leads out of the root */
		if (!entry_stat(ls, fd, de, &st))
			continue;
		if (*n == LOCAL_ENTRIES_MAX) {
			snprintf(err, GGUF_ERR_MAX, "%s: more than %u entries in one folder", path,
			         LOCAL_ENTRIES_MAX);
			r = -EFBIG;
			break;
		}
		if (*n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct lib_entry *ne = realloc(*out, nc * sizeof *ne);
			if (!ne) {
				r = -ENOMEM;
				break;
			}
			*out = ne;
			cap = nc;
		}
		struct lib_entry *e = &(*out)[*n];
		if (!lib_entry_name(e, dir, de->d_name, strlen(de->d_name))) {
			r = -ENOMEM;
			break;
		}
		e->type = S_ISDIR(st.st_mode) ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
		e->version = version_of(&st);
		e->st = st;
		(*n)++;
	}
	if (r == -ENOMEM)
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory listing the folder", path);
	closedir(d);
	free(path);
	if (r < 0) {
		lib_entries_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return r;
}

static bool local_unchanged(void *ctx, const char *dir, uint64_t version)
{
	char *path = full_path(ctx, dir);
	struct stat st;
	bool same = path && stat(path, &st) == 0 && version_of(&st) == version;
	free(path);
	return same;
}

static int local_stat(void *ctx, const char *path, struct lib_entry *e)
{
	char *full = full_path(ctx, path);
	if (!full)
		return -ENOMEM;
	struct stat st;
	int r = stat(full, &st) == 0 ? 0 : -errno;
	free(full);
	if (r == 0 && !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
		r = -ENOENT;
	if (r < 0)
		return r;
	e->name = e->path = NULL;
	e->type = S_ISDIR(st.st_mode) ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
	e->version = version_of(&st);
	e->st = st;
	return 0;
}

/* The model is opened by its path, as `ggufs FILE` opens it (its shards are found beside
 * it), after a look at what the path leads to now that opens nothing: a device is not
 * opened for a name swapped for a symlink to one, and, confined, a file outside the
 * root not at all. The caller checks that the model opened is the version listed. */
static struct ggufs_model *local_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	const struct local_source *ls = ctx;
	char *full = full_path(ls, path);
	if (!full) {
		snprintf(err, GGUF_ERR_MAX, "%s: out of memory", path);
		return NULL;
	}
	int pfd = open(full, O_PATH | O_CLOEXEC);
	struct stat st;
	const char *why = pfd < 0 || fstat(pfd, &st) != 0 ? strerror(errno)
	                  : !S_ISREG(st.st_mode)          ? "not a regular file"
	                  : ls->confine && !fd_inside(ls, pfd) ? "it leads out of the library's folder"
	                                                       : NULL;
	if (pfd >= 0)
		close(pfd);
	if (why) {
		snprintf(err, GGUF_ERR_MAX, "%s: %s", full, why);
		free(full);
		return NULL;
	}
	struct ggufs_model *m = model_open(full, err);
	free(full);
	return m;
}

/* A plain file's handle: its descriptor, biased by one so that fd 0 is not NULL.
 *
 * The daemon opens as its own user (often root) what the kernel let a reader open for
 * the attributes of the lookup, so the file opened must be the one looked up: its name
 * is resolved (symbolic links followed, as the listing follows them) to a descriptor
 * that opens nothing (O_PATH: a FIFO waits for no writer, a device is not opened), that
 * descriptor's file must be a regular file of the version given (device, inode, type,
 * size, times), and only then is that same file opened for reading, through /proc
 * (O_NONBLOCK all the same). A name exchanged meanwhile for a symlink to another file,
 * or for a FIFO, is -ESTALE. */
static int local_open_file(void *ctx, const char *path, uint64_t version, void **file,
                           char err[GGUF_ERR_MAX])
{
	(void)err;   /* an errno says it all */
	const struct local_source *ls = ctx;
	*file = NULL;
	char *full = full_path(ls, path);
	if (!full)
		return -ENOMEM;
	int pfd = open(full, O_PATH | O_CLOEXEC);
	free(full);
	if (pfd < 0)
		return -errno;
	struct stat st, got;
	int r = fstat(pfd, &st) == 0 ? 0 : -errno;
	if (r == 0 && (!S_ISREG(st.st_mode) || version_of(&st) != version ||
	               (ls->confine && !fd_inside(ls, pfd))))
		r = -ESTALE;
	int fd = -1;
	if (r == 0) {
		char proc[40];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
		fd = open(proc, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			r = -errno;
		else if (fstat(fd, &got) != 0 || got.st_dev != st.st_dev || got.st_ino != st.st_ino)
			r = -ESTALE;
	}
	close(pfd);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	*file = (void *)(intptr_t)(fd + 1);
	return 0;
}

static int64_t local_read_file(void *ctx, void *file, char *buf, uint64_t len, uint64_t off)
{
	(void)ctx;
	int fd = (int)(intptr_t)file - 1;
	uint64_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (uint64_t)r;
	}
	return (int64_t)got;
}

static void local_close_file(void *ctx, void *file)
{
	(void)ctx;
	close((int)(intptr_t)file - 1);
}

static void local_free(void *ctx)
{
	struct local_source *ls = ctx;
	free(ls->root);
	free(ls);
}

static const struct lib_source_ops local_ops = {
	.list = local_list,
	.unchanged = local_unchanged,
	.stat = local_stat,
	.open_model = local_open_model,
	.open_file = local_open_file,
	.read_file = local_read_file,
	.close_file = local_close_file,
	.free = local_free,
};

struct lib_source *lib_source_local(const char *root, bool confine, char err[GGUF_ERR_MAX])
{
	struct lib_source *s = calloc(1, sizeof *s);
	struct local_source *ls = calloc(1, sizeof *ls);
	char *abs = realpath(root, NULL);
	if (!s || !ls || !abs) {
		snprintf(err, GGUF_ERR_MAX, "%s: %s", root, abs ? "out of memory" : strerror(errno));
		free(s);
		free(ls);
		free(abs);
		return NULL;
	}
	ls->root = abs;
	ls->confine = confine;
	s->ops = &local_ops;
	s->links = true;
	s->ctx = ls;
	return s;
}
