/* A library's source in a local folder: listings by readdir, versions from stat, models
 * opened as `ggufs FILE` opens them but each file through the descriptor checked, plain
 * files read with pread. */
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

#include "library_names.h"
#include "libsource.h"
#include "local_check.h"
#include "st_model.h"

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
		e->model_folder = S_ISDIR(st.st_mode) && st_model_is_folder_at(fd, de->d_name);
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
	if (r == 0 && !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
		r = -ENOENT;
	e->model_folder = r == 0 && *path && S_ISDIR(st.st_mode) && st_model_is_folder(full);
	free(full);
	if (r < 0)
		return r;
	e->name = e->path = NULL;
	e->type = S_ISDIR(st.st_mode) ? LIB_ENTRY_DIR : LIB_ENTRY_FILE;
	e->version = version_of(&st);
	e->st = st;
	return 0;
}

/* How a library's local model is opened (a model_opener): each file by its name in the
 * folder of the first file, resolved relative to that folder's descriptor, checked on
 * the descriptor it resolved to, and opened through it (local_check.h). */
struct local_opener {
	const struct local_source *ls;
	int dirfd;                /* the folder of the first file (O_PATH) */
	const char *path;         /* the first file's full path */
	size_t base_at;           /* where a name in that folder starts in it */
	bool check;               /* the first file must be of first_version */
	uint64_t first_version;
	bool stale;               /* it was not */
	const struct stat *folder;  /* a model folder's stat (its files are shown under its
	                             * owner and mode), or NULL */
};

/* 0 when the file resolved to pfd (of stat st), at path, may be opened for the model:
 * a regular file, and, confined, inside the root and, for a shard other than the file
 * named (named: its stat), letting read whom that file lets read; else -errno with
 * "PATH: why" in err. */
static int file_refusal(const struct local_opener *o, int pfd, const struct stat *st,
                        const struct stat *named, const char *path, char err[GGUF_ERR_MAX])
{
	char why[GGUF_ERR_MAX];
	int r = local_check_regular(st, path, err);
	if (r < 0)
		return r;
	if (o->ls->confine && !fd_inside(o->ls, pfd)) {
		gguf_errf(err, "%s: it leads out of the library's folder", path);
		return -EACCES;
	}
	if (named && o->ls->confine && !local_check_reads(named, st, why)) {
		gguf_errf(err, "%s: not read, as other users read the library: %s", path, why);
		return -EACCES;
	}
	return 0;
}

/* model_opener.open of a library's model (ctx: its local_opener): the file at path, a
 * name in the folder of the first file, resolved there (symbolic links followed, as the
 * listing follows them); the first file refused unread when it is not the version
 * listed (stale), any file when file_refusal says so; else opened through the
 * descriptor resolved. */
static int open_in_folder(void *ctx, const char *path, const struct stat *named,
                          char err[GGUF_ERR_MAX])
{
	struct local_opener *o = ctx;
	const char *name = path + o->base_at;
	if (strlen(path) <= o->base_at || strncmp(path, o->path, o->base_at) != 0 ||
	    strchr(name, '/')) {
		gguf_errf(err, "%s: not in the folder of %s", path, o->path);
		return -EINVAL;
	}
	struct stat st;
	int pfd = local_check_resolve(o->dirfd, name, &st);
	if (pfd < 0) {
		if (!named && o->check && pfd == -ENOENT)
			o->stale = true;   /* gone since it was listed */
		gguf_errf(err, "%s: %s", path, strerror(-pfd));
		return pfd;
	}
	int fd;
	if (!named && o->check && version_of(&st) != o->first_version) {
		o->stale = true;
		gguf_errf(err, "%s: another version than the one listed", path);
		fd = -ESTALE;
	} else {
		fd = file_refusal(o, pfd, &st, named, path, err);
		if (fd == 0)
			fd = local_check_reopen(pfd, &st, path, err);
	}
	close(pfd);
	return fd;
}

/* model_opener.open of a model folder's files (ctx: its local_opener): as
 * open_in_folder opens a shard, the folder standing for the first file (confined, each
 * file must let read whom the folder lets read: the model directory shows its owner and
 * mode). */
static int open_in_model_folder(void *ctx, const char *path, const struct stat *named,
                                char err[GGUF_ERR_MAX])
{
	(void)named;
	const struct local_opener *o = ctx;
	return open_in_folder(ctx, path, o->folder, err);
}

/* The model of the model folder at full (descriptor dirfd, O_PATH), converted as a
 * mount of the folder converts it, each of its files opened by open_in_model_folder
 * (in the folder, regular, confined and read as the folder is); check: the folder must still be
 * first_version (its entries as listed), else NULL with *stale. NULL with one line in
 * err when it does not open. */
static struct ggufs_model *open_local_folder(const struct local_source *ls, const char *full,
                                             int dirfd, bool check, uint64_t first_version,
                                             bool *stale, char err[GGUF_ERR_MAX])
{
	struct stat st;
	if (fstat(dirfd, &st) != 0 || (check && version_of(&st) != first_version)) {
		*stale = true;
		err[0] = 0;
		return NULL;
	}
	if (ls->confine && !fd_inside(ls, dirfd)) {
		gguf_errf(err, "%s: it leads out of the library's folder", full);
		return NULL;
	}
	const size_t n = strlen(full);
	char *prefix = malloc(n + 2);
	if (!prefix) {
		gguf_errf(err, "%s: out of memory", full);
		return NULL;
	}
	memcpy(prefix, full, n);
	memcpy(prefix + n, "/", 2);
	struct local_opener o = { .ls = ls, .dirfd = dirfd, .path = prefix, .base_at = n + 1,
	                          .folder = &st };
	const struct model_opener opener = { open_in_model_folder, &o };
	struct ggufs_model *m = st_model_open(full, ST_OUT_AUTO, &opener, err);
	free(prefix);
	return m;
}

/* The model whose first file is path, its files opened by open_in_folder (check: the
 * first file must be first_version, and all of them version: else NULL with *stale).
 * NULL with one line in err when it does not open. */
static struct ggufs_model *open_local_model(const struct local_source *ls, const char *path,
                                            bool check, uint64_t first_version,
                                            uint64_t version, bool *stale,
                                            char err[GGUF_ERR_MAX])
{
	*stale = false;
	char *full = full_path(ls, path);
	const char *slash = full ? strrchr(full, '/') : NULL;   /* full is absolute */
	char *dir = slash ? strndup(full, slash == full ? 1 : (size_t)(slash - full)) : NULL;
	if (!dir) {
		gguf_errf(err, "%s: out of memory", path);
		free(full);
		return NULL;
	}
	struct local_opener o = { .ls = ls, .path = full, .base_at = (size_t)(slash - full) + 1,
	                          .check = check, .first_version = first_version };
	struct ggufs_model *m = NULL;
	/* a model folder: the model it converts to */
	const int folder = open(full, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (folder >= 0) {
		m = open_local_folder(ls, full, folder, check, first_version, stale, err);
		close(folder);
		free(dir);
		free(full);
		return m;
	}
	o.dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (o.dirfd < 0) {
		if (check && errno == ENOENT)
			o.stale = true;
		gguf_errf(err, "%s: %s", dir, strerror(errno));
	} else {
		const struct model_opener opener = { open_in_folder, &o };
		m = model_open_by(full, &opener, err);
		close(o.dirfd);
	}
	uint64_t v = 0;
	for (uint32_t i = 0; check && m && i < model_n_files(m); i++) {
		struct model_file_info f;
		model_file(m, i, &f);   /* a local file's: st is there */
		v = i ? lib_names_version_add(v, version_of(f.st)) : version_of(f.st);
	}
	if (m && check && v != version)
		o.stale = true;   /* a shard replaced, come or gone since the listing */
	if (o.stale) {
		model_close(m);
		m = NULL;
		*stale = true;
		err[0] = 0;
	}
	free(dir);
	free(full);
	return m;
}

/* The model is opened as `ggufs FILE` opens it (its shards found beside it), every file
 * of it checked before it is opened (open_in_folder). */
static struct ggufs_model *local_open_model(void *ctx, const char *path, char err[GGUF_ERR_MAX])
{
	bool stale;
	return open_local_model(ctx, path, false, 0, 0, &stale, err);
}

/* As local_open_model, the files checked to be the versions listed, the first before a
 * byte of it is read. */
static struct ggufs_model *local_open_listed(void *ctx, const char *path, uint64_t first_version,
                                             uint64_t version, bool *stale,
                                             char err[GGUF_ERR_MAX])
{
	return open_local_model(ctx, path, true, first_version, version, stale, err);
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
	struct stat st;
	int pfd = local_check_resolve(AT_FDCWD, full, &st);
	free(full);
	if (pfd < 0)
		return pfd;
	int r = 0;
	if (!S_ISREG(st.st_mode) || version_of(&st) != version ||
	    (ls->confine && !fd_inside(ls, pfd)))
		r = -ESTALE;
	char why[GGUF_ERR_MAX];
	int fd = r == 0 ? local_check_reopen(pfd, &st, path, why) : r;
	close(pfd);
	if (fd < 0)
		return fd;
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
	.open_listed = local_open_listed,
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
