/* ggufs: mounts a GGUF model file as a read-only directory tree (libfuse3, low level).
 *
 * This file only translates between FUSE and lib/: the model is opened and its tree
 * built before anything is mounted, and every operation is a lookup in that tree.
 * Modelled on libfuse's example/hello_ll.c and squashfuse's front end. */
#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ggufs_config.h"
#include "model.h"
#include "tree.h"

/* Nothing under a mount ever changes, so the kernel may cache names and attributes
 * for as long as it likes. */
#define CACHE_TIMEOUT 86400.0

struct ggufs {
	struct ggufs_model *model;
	struct tree *tree;
	unsigned max_read;   /* -o max_read=N, 0 if not given */
	/* op_init tells the read-ahead thread that the kernel is about to get INIT's reply */
	pthread_mutex_t init_lock;
	pthread_cond_t init_cond;
	bool init_seen;
	char bdi[64];        /* "MAJ:MIN" of the mount, from mountinfo; "" if unknown */
};

/* The mounted model and its tree, as given to fuse_session_new. */
static struct ggufs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The node of ino, or NULL after replying ENOENT (the kernel only asks for inodes we
 * gave it, so this is a guard, not a path). */
static const struct tree_node *node_or_reply(fuse_req_t req, fuse_ino_t ino)
{
	const struct tree_node *n = tree_node(fs_of(req)->tree, ino);
	if (!n)
		fuse_reply_err(req, ENOENT);
	return n;
}

/* The directory of ino, or NULL after replying ENOENT or ENOTDIR. */
static const struct tree_node *dir_or_reply(fuse_req_t req, fuse_ino_t ino)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (n && !tree_is_dir(n)) {
		fuse_reply_err(req, ENOTDIR);
		return NULL;
	}
	return n;
}

/* Fills st for node n: sizes from the tree, owner and times from the model file. */
static void fill_stat(const struct ggufs *fs, const struct tree_node *n, struct stat *st)
{
	const struct stat *gs = &fs->model->st;

	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_mode = tree_mode(n, gs->st_mode);
	st->st_nlink = tree_is_dir(n) ? 2 : 1;
	st->st_uid = gs->st_uid;
	st->st_gid = gs->st_gid;
	st->st_size = (off_t)n->size;
	st->st_blksize = 4096;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_atim = gs->st_atim;
	st->st_mtim = gs->st_mtim;
	st->st_ctim = gs->st_ctim;
}

/* Reads as large as the kernel allows: max_readahead arrives as the kernel's maximum
 * (128 KiB by default) and is kept, and libfuse already asks for the largest requests
 * (max_pages: 1 MiB). Asynchronous reads keep several in flight; no writeback cache,
 * since nothing is ever written. */
static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct ggufs *fs = userdata;
	/* libfuse refuses the connection unless init repeats -o max_read=N */
	conn->max_read = fs->max_read;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;

	pthread_mutex_lock(&fs->init_lock);
	fs->init_seen = true;
	pthread_cond_signal(&fs->init_cond);
	pthread_mutex_unlock(&fs->init_lock);
}

/* A name in a directory: an entry with long timeouts, or a negative entry (ino 0),
 * which the kernel may cache just as long since no name ever appears. */
static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ggufs *fs = fs_of(req);
	const struct tree_node *dir = dir_or_reply(req, parent);
	if (!dir)
		return;

	struct fuse_entry_param e;
	memset(&e, 0, sizeof e);
	e.attr_timeout = CACHE_TIMEOUT;
	e.entry_timeout = CACHE_TIMEOUT;
	const struct tree_node *n = tree_lookup(fs->tree, parent, name);
	if (n) {
		e.ino = n->ino;
		e.generation = 1;
		fill_stat(fs, n, &e.attr);
	}
	fuse_reply_entry(req, &e);
}

/* Attributes never change: cached as long as names. */
static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	struct stat st;
	fill_stat(fs_of(req), n, &st);
	fuse_reply_attr(req, &st, CACHE_TIMEOUT);
}

/* Listings never change, so the kernel may cache them (cache_readdir) and keep the
 * cache across opens. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct tree_node *n = dir_or_reply(req, ino);
	if (!n)
		return;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* The stream offset of an entry is its position: 0 ".", 1 "..", 2 + i child i. Each
 * call starts where the last one stopped, so a large directory costs O(entries). */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	const struct tree_node *dir = dir_or_reply(req, ino);
	if (!dir)
		return;

	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t count = tree_dir_count(fs->tree, ino);
	size_t used = 0;
	for (uint64_t pos = off < 0 ? 0 : (uint64_t)off; pos < count + 2; pos++) {
		struct stat st;
		memset(&st, 0, sizeof st);
		const char *name;
		if (pos < 2) {
			const struct tree_node *d = pos == 0 ? dir : tree_node(fs->tree, dir->parent);
			name = pos == 0 ? "." : "..";
			st.st_ino = d->ino;
			st.st_mode = S_IFDIR;
		} else {
			const struct tree_node *c = tree_dir_child(fs->tree, ino, pos - 2);
			name = c->name;
			st.st_ino = c->ino;
			st.st_mode = tree_is_dir(c) ? S_IFDIR : S_IFREG;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st,
		                                (off_t)(pos + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

/* Nothing is allocated per open directory or file: release is a no-op. */
static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Read-only opens only. Contents are fixed, so the page cache may be kept across
 * opens; direct_io stays off so that mmap works. */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	if (tree_is_dir(n)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fi->direct_io = 0;
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* Raw tensor bytes are replied straight from the model's mapping: the kernel copies
 * them from the page cache into the reply with no copy through our memory (a pread
 * into a buffer first measured 3x slower cold). The span is checked against the file's
 * current size first; should the file still shrink before the kernel copies, that copy
 * fails inside the kernel, which answers the reader EIO: the daemon never touches the
 * gone pages itself, so never gets SIGBUS. */
static void read_raw(fuse_req_t req, const struct tree_node *n, size_t want, uint64_t off)
{
	struct ggufs *fs = fs_of(req);
	int fd;
	uint64_t file_off, count;
	if (!tree_raw_span(fs->tree, n, off, want, &fd, &file_off, &count) || count < want) {
		fuse_reply_err(req, EIO);
		return;
	}
	fuse_reply_buf(req, (const char *)model_tensor_data(fs->model, n->index) + off, want);
}

/* One reply buffer per worker thread, kept for the thread's life. A fresh 1 MiB
 * malloc per request is a fresh mmap, and faulting its 256 pages in cost more than
 * dequantizing into them; a kept buffer is faulted once and stays in cache. Requests
 * are at most 1 MiB (max_pages); a larger one falls back to malloc.
 *
 * The buffer is one 2 MiB-aligned transparent huge page where the kernel grants it
 * (THP "madvise" or "always"): the kernel takes the reply one 4 KiB page at a time,
 * looking each up in our page tables, and a huge page makes every lookup short. Cold
 * .f32 reads measured 3.8-4.0 -> 4.6 GB/s for q4_K. It costs 2 MiB of memory per
 * thread instead of 1 (libfuse runs at most max_threads, 10 by default). */
#define REPLY_BUF_SIZE (1u << 20)
#define HUGE_PAGE_SIZE (2u << 20)

static pthread_key_t reply_buf_key;
static pthread_once_t reply_buf_once = PTHREAD_ONCE_INIT;

static void reply_buf_key_init(void)
{
	if (pthread_key_create(&reply_buf_key, free) != 0)
		abort();
}

/* A buffer of size bytes: the thread's own (release_buffer does nothing to it) or, for
 * an oversized request, a malloc'ed one. NULL when out of memory. */
static char *reply_buffer(size_t size)
{
	if (size > REPLY_BUF_SIZE)
		return malloc(size);
	pthread_once(&reply_buf_once, reply_buf_key_init);
	char *buf = pthread_getspecific(reply_buf_key);
	if (!buf) {
		void *p;
		if (posix_memalign(&p, HUGE_PAGE_SIZE, HUGE_PAGE_SIZE) != 0)
			return NULL;
		madvise(p, HUGE_PAGE_SIZE, MADV_HUGEPAGE);   /* a hint: fine if refused */
		buf = p;
		if (pthread_setspecific(reply_buf_key, buf) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

static void release_buffer(char *buf, size_t size)
{
	if (size > REPLY_BUF_SIZE)
		free(buf);
}

/* Serves [off, off + size) of any file into a buffer of the request's size: the tree
 * renders or dequantizes only what the range touches. */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	(void)fi;
	struct ggufs *fs = fs_of(req);
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= n->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	uint64_t left = n->size - (uint64_t)off;
	size_t want = left < size ? (size_t)left : size;
	if (n->kind == TREE_RAW) {
		read_raw(req, n, want, (uint64_t)off);
		return;
	}
	char *buf = reply_buffer(want);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int64_t r = tree_read(fs->tree, n, buf, want, (uint64_t)off);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	release_buffer(buf, want);
}

/* Sizes in 4 KiB blocks, nothing free: this is a read-only view of one file. */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)(((uint64_t)fs_of(req)->model->st.st_size + 4095) / 4096);
	sv.f_files = TREE_FIRST_META + fs_of(req)->model->meta->n_kv +
	             3 * fs_of(req)->model->n_tensors;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* Replies to an xattr call from the tree's result: the size for a size-0 query, the
 * bytes otherwise, or the (negative) errno. */
static void reply_xattr(fuse_req_t req, int64_t r, const char *buf, size_t size)
{
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
}

/* user.gguf.* values from the tree, through a buffer of the size asked for. */
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, tree_getxattr(fs_of(req)->tree, n, name, buf, size), buf, size);
	free(buf);
}

/* The NUL-separated names of a node's attributes, from the tree. */
static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	const struct tree_node *n = node_or_reply(req, ino);
	if (!n)
		return;
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_xattr(req, tree_listxattr(fs_of(req)->tree, n, buf, size), buf, size);
	free(buf);
}

/* Every operation that would change the tree: EROFS. The mount is also "ro", so the
 * kernel answers most of these itself; these are for the ones that reach us anyway. */
static void erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	(void)ino, (void)attr, (void)to_set, (void)fi;
	erofs(req);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	erofs(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	erofs(req);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	erofs(req);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	erofs(req);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	erofs(req);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	erofs(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	erofs(req);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	erofs(req);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	erofs(req);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	(void)ino, (void)buf, (void)size, (void)off, (void)fi;
	erofs(req);
}

static const struct fuse_lowlevel_ops ggufs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
};

/* ---- command line ---- */

struct options {
	const char *model;
	const char *mountpoint;
	int extra;           /* non-option arguments beyond the two */
	int help;
	int version;
	int nonempty;        /* -o nonempty: mount over a non-empty directory */
	unsigned max_read;   /* -o max_read=N, read here and passed on */
};

enum { KEY_HELP, KEY_VERSION, KEY_MAX_READ };

static const struct fuse_opt ggufs_opts[] = {
	/* ours, not libfuse's (which dropped it in 3.0): taken out of the -o list */
	{ "nonempty", offsetof(struct options, nonempty), 1 },
	FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END,
};

/* Takes MODEL and MOUNTPOINT (and our -h/-V) out of the arguments and leaves the rest,
 * -f -d -s -o ..., for fuse_parse_cmdline and fuse_session_new. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)outargs;
	struct options *o = data;
	switch (key) {
	case KEY_HELP:
		o->help = 1;
		return 0;
	case KEY_VERSION:
		o->version = 1;
		return 0;
	case KEY_MAX_READ:
		/* kept for libfuse, which checks the number */
		if (sscanf(arg, "max_read=%u", &o->max_read) != 1)
			o->max_read = 0;
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->model)
			o->model = arg;
		else if (!o->mountpoint)
			o->mountpoint = arg;
		else
			o->extra++;
		return 0;
	default:
		return 1;
	}
}

/* --help on stdout: ours, then the mount options libfuse knows. */
static void usage(const char *prog)
{
	printf("usage: %s [options] MODEL.gguf MOUNTPOINT\n"
	       "\n"
	       "Mounts a GGUF model file read-only: metadata/KEY, tensors/NAME{,.f32,.npy},\n"
	       "gguf.json and summary.txt. See ggufs(1).\n"
	       "\n"
	       "options:\n"
	       "    -h   --help            print this help and exit\n"
	       "    -V   --version         print the version and exit\n"
	       "    -f                     stay in the foreground\n"
	       "    -d   -o debug          FUSE debug output (implies -f)\n"
	       "    -s                     single-threaded\n"
	       "    -o nonempty            mount even over a non-empty directory\n"
	       "    -o opt[,opt...]        mount options, below\n"
	       "\n",
	       prog);
	fflush(stdout);
	fuse_lowlevel_help();
}

/* 1 when directory path has no entries but . and .., 0 when it has, -errno when it
 * cannot be read. */
static int dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return -errno;
	int empty = 1;
	struct dirent *e;
	while (empty && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(d);
	return empty;
}

/* Undoes mountinfo's octal escapes (\040 for a space, ...) in place. */
static void unescape_mountinfo(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* True when a file system is mounted at path (absolute, symlinks resolved); what gets
 * the topmost one as "TYPE SOURCE" for the message, dev (64 bytes, may be NULL) its
 * "MAJ:MIN". Reads /proc/self/mountinfo, which touches no mounted file system:
 * "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS". */
static bool mounted_at(const char *path, char *what, size_t size, char *dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	bool found = false;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char *save, *field[5], *type = NULL, *source = NULL, *tok;
		int i = 0;
		for (tok = strtok_r(line, " \n", &save); tok && i < 5;
		     tok = strtok_r(NULL, " \n", &save))
			field[i++] = tok;
		if (i < 5)
			continue;
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " \n", &save);
		if (tok && (type = strtok_r(NULL, " \n", &save)))
			source = strtok_r(NULL, " \n", &save);
		unescape_mountinfo(field[4]);
		if (strcmp(field[4], path) != 0 || !source)
			continue;
		unescape_mountinfo(source);
		snprintf(what, size, "%s %s", type, source);
		if (dev)
			snprintf(dev, 64, "%s", field[2]);
		found = true;
	}
	free(line);
	fclose(f);
	return found;
}

/* Inserts "-oNAME=VALUE" at position pos, with commas and backslashes in VALUE
 * escaped (fuse_opt_parse undoes that), so that any model path can be the fsname. */
static int insert_escaped_opt(struct fuse_args *args, int pos, const char *name,
                              const char *value)
{
	size_t n = strlen(name), v = strlen(value);
	char *s = malloc(3 + n + 1 + 2 * v + 1);
	if (!s)
		return -1;
	char *p = s + sprintf(s, "-o%s=", name);
	for (const char *q = value; *q; q++) {
		if (*q == ',' || *q == '\\')
			*p++ = '\\';
		*p++ = *q;
	}
	*p = 0;
	int r = fuse_opt_insert_arg(args, pos, s);
	free(s);
	return r;
}

/* A tensor name for a one-line message: control bytes become '?' so a hostile name
 * cannot break the line. */
static void print_name(const struct gguf_str *s)
{
	for (uint64_t i = 0; i < s->len; i++) {
		unsigned char c = (unsigned char)s->ptr[i];
		fputc(c < 0x20 || c == 0x7f ? '?' : c, stderr);
	}
}

/* One line per tensor that has no .f32/.npy, printed before the daemon detaches from
 * the terminal. */
static void warn_raw_only(const struct ggufs_model *m)
{
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct gguf_tensor *t = m->tensors[i].t;
		if (t->has_f32)
			continue;
		fprintf(stderr, "ggufs: %s: warning: tensor '", m->path);
		print_name(&t->name);
		if (!t->ti) {
			fprintf(stderr, "' has unknown type %" PRIu32 ": raw file only\n", t->type);
		} else {
			char nb[16];
			fprintf(stderr, "' has type %s, which has no dequantizer: raw file only\n",
			        ggml_type_name(t->type, nb));
		}
	}
}

/* The hint after "Transport endpoint is not connected". */
#define DEAD_MOUNT " (a FUSE mount whose daemon is gone: unmount it)"

/* Raises the mount's read-ahead to MOUNT_READAHEAD_KB once INIT is answered. The
 * kernel caps FUSE read-ahead at its default 128 KiB, so a sequential reader gets
 * 128 KiB requests; only root may raise it, through the mount's own bdi. 4 MiB keeps
 * several 1 MiB requests in flight, so worker threads dequantize while the kernel
 * copies the previous reply (measured: cold .f32 3.0 -> 3.9 GB/s over 1 MiB).
 *
 * It must be written after the kernel has taken INIT's reply, which would lower it
 * again. The thread never touches the mount itself (a stat of it, in flight, would make
 * an unmount right after mounting fail with EBUSY): the bdi comes from mountinfo, and
 * the write follows op_init by a moment, then once more in case it was early. Failure
 * (not root) changes nothing. */
#define MOUNT_READAHEAD_KB 4096

static void write_readahead(const char *bdi)
{
	char path[96], kb[16];
	snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", bdi);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	int n = snprintf(kb, sizeof kb, "%d\n", MOUNT_READAHEAD_KB);
	if (write(fd, kb, (size_t)n) != n) {
		/* not ours to fix: the default read-ahead still works */
	}
	close(fd);
}

static void *raise_readahead(void *arg)
{
	struct ggufs *fs = arg;
	pthread_mutex_lock(&fs->init_lock);
	while (!fs->init_seen)
		pthread_cond_wait(&fs->init_cond, &fs->init_lock);
	pthread_mutex_unlock(&fs->init_lock);
	static const long delays_ms[] = { 20, 250 };
	for (size_t i = 0; i < sizeof delays_ms / sizeof delays_ms[0]; i++) {
		struct timespec ts = { 0, delays_ms[i] * 1000000L };
		nanosleep(&ts, NULL);
		write_readahead(fs->bdi);
	}
	return NULL;
}

/* Parses arguments, opens and checks the model and builds its tree, and only then
 * mounts, daemonizes and serves until unmounted. Exit 0 on a clean unmount, 1 when
 * nothing could be mounted (one line on stderr), 2 for wrong arguments. */
int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct options o = { 0 };
	struct fuse_cmdline_opts fo = { 0 };
	struct ggufs fs = { .init_lock = PTHREAD_MUTEX_INITIALIZER,
	                    .init_cond = PTHREAD_COND_INITIALIZER };
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	char err[GGUF_ERR_MAX];
	char *mountpoint = NULL;
	struct stat st;
	int ret = 1;

	if (fuse_opt_parse(&args, &o, ggufs_opts, opt_proc) != 0)
		goto out_args;
	if (o.help) {
		usage(argv[0]);
		ret = 0;
		goto out_args;
	}
	if (o.version) {
		printf("ggufs %s (libfuse %s)\n", GGUFS_VERSION, fuse_pkgversion());
		ret = 0;
		goto out_args;
	}
	if (fuse_parse_cmdline(&args, &fo) != 0)
		goto out_args;
	if (!o.model || !o.mountpoint || o.extra) {
		fprintf(stderr, "ggufs: usage: %s [options] MODEL.gguf MOUNTPOINT (--help for more)\n",
		        argv[0]);
		ret = 2;
		goto out_cmdline;
	}
	if (stat(o.mountpoint, &st) != 0) {
		fprintf(stderr, "ggufs: %s: %s%s\n", o.mountpoint, strerror(errno),
		        errno == ENOTCONN ? DEAD_MOUNT : "");
		goto out_cmdline;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "ggufs: %s: not a directory\n", o.mountpoint);
		goto out_cmdline;
	}
	/* absolute, as fuse_parse_cmdline would make it: the daemon runs in "/" and
	 * unmounts by this name on SIGTERM */
	mountpoint = realpath(o.mountpoint, NULL);
	if (!mountpoint) {
		fprintf(stderr, "ggufs: %s: %s\n", o.mountpoint, strerror(errno));
		goto out_cmdline;
	}
	/* Mounting over files hides them, and a second mount on a live one stacks a
	 * tree nobody can reach: both are refused unless asked for. An empty directory
	 * that is itself a mount point (a volume, a bind mount) is fine. A directory we
	 * cannot list is left to the mount to judge, but a dead FUSE mount (its
	 * attributes still cached, so stat passed) is named. */
	int empty = dir_is_empty(mountpoint);
	if (empty == -ENOTCONN) {
		fprintf(stderr, "ggufs: %s: %s%s\n", o.mountpoint, strerror(ENOTCONN), DEAD_MOUNT);
		goto out_cmdline;
	}
	if (!o.nonempty && empty == 0) {
		char what[PATH_MAX + 64];
		if (mounted_at(mountpoint, what, sizeof what, NULL))
			fprintf(stderr, "ggufs: %s: already mounted (%s): unmount it first\n",
			        o.mountpoint, what);
		else
			fprintf(stderr, "ggufs: %s: not empty (-o nonempty mounts over it)\n",
			        o.mountpoint);
		goto out_cmdline;
	}

	fs.model = model_open(o.model, err);
	if (!fs.model) {
		fprintf(stderr, "ggufs: %s\n", err);
		goto out_cmdline;
	}
	fs.max_read = o.max_read;
	fs.tree = tree_build(fs.model, err);
	if (!fs.tree) {
		fprintf(stderr, "ggufs: %s\n", err);
		goto out_model;
	}
	warn_raw_only(fs.model);

	/* fsname and subtype first, so that the user's given later win; ro and
	 * default_permissions last, so that nothing undoes them: mount(8) passes "rw"
	 * unless told otherwise, and is answered with a read-only mount, as for a CD */
	char *abs = realpath(o.model, NULL);
	int bad = fuse_opt_insert_arg(&args, 1, "-osubtype=ggufs") ||
	          insert_escaped_opt(&args, 2, "fsname", abs ? abs : o.model) ||
	          fuse_opt_add_arg(&args, "-oro,default_permissions");
	free(abs);
	if (bad) {
		fprintf(stderr, "ggufs: out of memory\n");
		goto out_tree;
	}
	se = fuse_session_new(&args, &ggufs_ops, sizeof ggufs_ops, &fs);
	if (!se)
		goto out_tree;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, mountpoint) != 0)
		goto out_signals;
	char what[PATH_MAX + 64];
	if (!mounted_at(mountpoint, what, sizeof what, fs.bdi))
		fs.bdi[0] = 0;
	/* the mount is ready: only now may the parent return to the shell */
	if (fuse_daemonize(fo.foreground) != 0)
		goto out_unmount;

	pthread_t ra_thread;
	if (fs.bdi[0] && pthread_create(&ra_thread, NULL, raise_readahead, &fs) == 0)
		pthread_detach(ra_thread);

	if (fo.singlethread) {
		ret = fuse_session_loop(se);
	} else {
		loop = fuse_loop_cfg_create();
		if (!loop)
			goto out_unmount;
		fuse_loop_cfg_set_clone_fd(loop, (unsigned)fo.clone_fd);
		/* UINT_MAX is libfuse's "not given", which its own setter rejects noisily */
		if (fo.max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(loop, fo.max_idle_threads);
		fuse_loop_cfg_set_max_threads(loop, fo.max_threads);
		ret = fuse_session_loop_mt(se, loop);
	}
	/* the loop returns -errno on failure, or the signal that ended it: a clean
	 * unmount on SIGTERM/SIGINT/SIGHUP is a success */
	ret = ret < 0;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_tree:
	fuse_loop_cfg_destroy(loop);
	tree_free(fs.tree);
out_model:
	model_close(fs.model);
out_cmdline:
	free(mountpoint);
	free(fo.mountpoint);
out_args:
	fuse_opt_free_args(&args);
	return ret;
}
