/* FUSE passthrough of model.gguf: when model.gguf is byte for byte the model's one local
 * file, an open of it is answered with a backing id of that file, and the kernel reads
 * and maps the file itself, through its own page cache, never asking us. Written
 * against libfuse 3.17's API (compat/fuse_compat.h gives it on 3.14): INIT asks for
 * FUSE_CAP_PASSTHROUGH with a max_stack_depth of 1 (the mount may be the lower layer of
 * an overlay), or 2 for a model on a stacked file system; an open passes through with
 * a backing id (without keep_cache, which the kernel refuses with it; with direct_io
 * for an O_DIRECT open, whose reads then still come here).
 *
 * The kernel allows one kind of open per inode at a time (a normal open of a file
 * open with passthrough fails, and the other way round): every open of one model.gguf
 * is of one kind, since with edits each state's model.gguf is an inode of its own
 * (lib/6-tree/tree.h) and whether it is the file is the state's.
 *
 * A single mount has one file: one backing id, opened at the first open (or the first
 * question of the attribute) and kept until unmount. A local library has many model
 * files, opened and closed as its models are built and released, so there the backing
 * id is per model.gguf inode: opened at the first open of that inode, kept while it has
 * opens (the kernel also wants one backing file per inode while any is open), closed
 * after the last release; the kernel keeps what live opens and mappings use. A
 * library's inode is one version of one file (lib/7-library/library.h: never reused in
 * a mount), so whether it is the file never changes; an inode the kernel refused a
 * backing id stays refused. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "compat/fuse_compat.h"
#include "evlog.h"
#include "mount.h"

#include "ggufs.h"

#define PT_MINOR_PASSTHROUGH 40
#define PT_FUSE_SUPER_MAGIC 0x65735546
#define PT_OVERLAYFS_SUPER_MAGIC 0x794c7630
#define PT_ECRYPTFS_SUPER_MAGIC 0xf15f

/* A library's model.gguf inode with a backing id (while opens > 0), or refused one. */
struct passthrough_file {
	uint64_t ino;
	int32_t backing_id;   /* > 0, or 0: refused (why says why) */
	uint32_t opens;       /* passthrough opens not yet released */
	char why[160];
};

/* Records why the mount cannot pass through (the first reason stays), and logs it once
 * when the log is running (else at INIT: passthrough_init). Called with pt.lock held. */
static void refuse_locked(struct ggufs *fs, const char *why)
{
	if (fs->pt.refused[0])
		return;
	snprintf(fs->pt.refused, sizeof fs->pt.refused, "%s", why);
	if (fs->pt.log_running) {
		evlog(EVLOG_WARNING, NULL, "model.gguf without passthrough: %s", fs->pt.refused);
		fs->pt.logged = true;
	}
}

void passthrough_refuse(struct ggufs *fs, const char *why)
{
	pthread_mutex_lock(&fs->pt.lock);
	refuse_locked(fs, why);
	pthread_mutex_unlock(&fs->pt.lock);
}

/* The max_stack_depth for backing files on the file system of fd: 1 lets the mount be
 * the lower layer of an overlay; a file on a stacked file system (a FUSE mount, which
 * may pass through itself, or an overlay) needs 2. */
static uint32_t stack_depth_for(int fd)
{
	struct statfs sfs;
	if (fd >= 0 && fstatfs(fd, &sfs) == 0 &&
	    (sfs.f_type == PT_FUSE_SUPER_MAGIC || sfs.f_type == PT_OVERLAYFS_SUPER_MAGIC ||
	     sfs.f_type == PT_ECRYPTFS_SUPER_MAGIC))
		return 2;
	return 1;
}

void passthrough_start(struct ggufs *fs, bool off, const char *folder)
{
	const char *not_file = NULL;
	int fd = mount_passthrough_file(fs->src.mount, &not_file);
	if (off) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "off (-o passthrough=no)");
		fs->pt.logged = true;   /* asked for: nothing to say */
		return;
	}
	if (!fs->src.library && not_file) {
		/* model.gguf is never one local file: no refusal, just what it is */
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "%s", not_file);
		fs->pt.logged = true;
		return;
	}
	if (fs->src.library && !folder) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "a remote library's model");
		fs->pt.logged = true;
		return;
	}
	if (!fs->src.library) {
		fs->pt.stack_depth = stack_depth_for(fd);
	} else {
		/* the folder's file system stands for its models' (one on another, through a
		 * symlink, that needs more is refused its backing id: served as before) */
		int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fs->pt.stack_depth = stack_depth_for(dfd);
		if (dfd >= 0)
			close(dfd);
		fs->pt.library = true;
	}
	fs->pt.wanted = true;   /* INIT asks for it */
}

void passthrough_init(struct ggufs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.log_running = true;
	if (fs->pt.wanted && !fs->pt.refused[0]) {
		uint32_t minor = compat_kernel_minor();
		char why[96];
		if (compat_capable(COMPAT_CAP_PASSTHROUGH)) {
			compat_want(COMPAT_CAP_PASSTHROUGH);
			compat_want_stack_depth(fs->pt.stack_depth);
		} else if (compat_refused()) {
			refuse_locked(fs, compat_refused());
		} else if (minor < PT_MINOR_PASSTHROUGH) {
			snprintf(why, sizeof why, "the kernel speaks FUSE 7.%" PRIu32
			         ", passthrough came with 7.40 (Linux 6.9)", minor);
			refuse_locked(fs, why);
		} else {
			refuse_locked(fs, "the kernel does not offer FUSE passthrough "
			              "(CONFIG_FUSE_PASSTHROUGH)");
		}
	}
	if (fs->pt.refused[0] && !fs->pt.logged) {
		evlog(EVLOG_WARNING, NULL, "model.gguf without passthrough: %s", fs->pt.refused);
		fs->pt.logged = true;
	}
	pthread_mutex_unlock(&fs->pt.lock);
}

/* Closes backing id (under pt.lock): the kernel keeps the file for opens still alive
 * and for mappings, only the id goes. */
static void close_backing_locked(struct ggufs *fs, int32_t backing_id)
{
	int r = compat_passthrough_close(fs->se, backing_id);
	if (r < 0)
		evlog(EVLOG_WARNING, NULL, "closing backing id %" PRId32 " of model.gguf: %s",
		      backing_id, strerror(-r));
	else if (fs->pt.debug)
		fprintf(stderr, "   passthrough: backing id %" PRId32 " closed\n", backing_id);
}

void passthrough_stop(struct ggufs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	if (fs->pt.backing_id > 0)
		close_backing_locked(fs, fs->pt.backing_id);
	fs->pt.backing_id = 0;
	for (size_t i = 0; i < fs->pt.n_files; i++)   /* opens not released before the end */
		if (fs->pt.files[i].backing_id > 0)
			close_backing_locked(fs, fs->pt.files[i].backing_id);
	free(fs->pt.files);
	fs->pt.files = NULL;
	fs->pt.n_files = fs->pt.cap_files = 0;
	pthread_mutex_unlock(&fs->pt.lock);
}

/* The words of a backing id the kernel refused (FUSE_DEV_IOC_BACKING_OPEN's -errno r),
 * into why. */
static void kernel_refused(char *why, size_t size, int r)
{
	snprintf(why, size, "the kernel refused the backing file (FUSE_DEV_IOC_BACKING_OPEN: "
	         "%s%s)", strerror(-r), r == -EPERM ? "; it takes CAP_SYS_ADMIN, and passthrough "
	         "enabled at INIT" : "");
}

/* A single mount's backing id of its model file fd (under pt.lock): opened at the first
 * call, kept until unmount; 0 after the kernel's refusal, recorded for the mount. */
static int32_t single_backing_locked(struct ggufs *fs, int fd)
{
	if (fs->pt.backing_id > 0)
		return fs->pt.backing_id;
	int id = compat_passthrough_open(fs->se, fd);
	if (id > 0) {
		fs->pt.backing_id = id;
		if (fs->pt.debug)
			fprintf(stderr, "   passthrough: backing id %d opened for model.gguf\n", id);
		return id;
	}
	char why[sizeof fs->pt.refused];
	kernel_refused(why, sizeof why, id);
	refuse_locked(fs, why);
	return 0;
}

/* Library inode ino's entry (under pt.lock), or NULL. */
static struct passthrough_file *file_of_locked(struct ggufs *fs, uint64_t ino)
{
	for (size_t i = 0; i < fs->pt.n_files; i++)
		if (fs->pt.files[i].ino == ino)
			return &fs->pt.files[i];
	return NULL;
}

/* A new entry for ino in the table (under pt.lock), or NULL out of memory. */
static struct passthrough_file *file_add_locked(struct ggufs *fs, uint64_t ino)
{
	if (fs->pt.n_files == fs->pt.cap_files) {
		size_t cap = fs->pt.cap_files ? 2 * fs->pt.cap_files : 16;
		struct passthrough_file *files = realloc(fs->pt.files, cap * sizeof *files);
		if (!files)
			return NULL;
		fs->pt.files = files;
		fs->pt.cap_files = cap;
	}
	struct passthrough_file *f = &fs->pt.files[fs->pt.n_files++];
	memset(f, 0, sizeof *f);
	f->ino = ino;
	return f;
}

/* A new entry for library inode ino, model.gguf of the model at path whose file is fd
 * (under pt.lock), with a backing id of that file, or refused by the kernel (said once
 * per cause: every model of a folder may be refused alike); NULL out of memory. */
static struct passthrough_file *backing_open_locked(struct ggufs *fs, uint64_t ino, int fd,
                                           const char *path)
{
	int id = compat_passthrough_open(fs->se, fd);
	struct passthrough_file *f = file_add_locked(fs, ino);
	if (!f) {
		if (id > 0)
			close_backing_locked(fs, id);
		return NULL;
	}
	if (id > 0) {
		f->backing_id = id;
		if (fs->pt.debug)
			fprintf(stderr, "   passthrough: backing id %d opened for inode %#" PRIx64 "\n",
			        id, ino);
	} else {
		kernel_refused(f->why, sizeof f->why, id);
		evlog(EVLOG_WARNING, f->why, "%s: model.gguf without passthrough: %s", path, f->why);
	}
	return f;
}

/* Removes f from the table (under pt.lock), its backing id closed. */
static void file_remove_locked(struct ggufs *fs, struct passthrough_file *f)
{
	close_backing_locked(fs, f->backing_id);
	*f = fs->pt.files[--fs->pt.n_files];
}

/* Why an open of model.gguf (library inode ino, or any on a single mount) whose file is
 * fd (-1: not one file as it lies, not_file says why) now is not a passthrough one (a
 * static or the mount's text), or NULL when it may be. Called with pt.lock held. */
static const char *why_not_locked(struct ggufs *fs, int fd, const char *not_file, uint64_t ino)
{
	if (!fs->pt.refused[0] && compat_refused())   /* INIT's reply could not ask */
		refuse_locked(fs, compat_refused());
	if (fs->pt.refused[0])
		return fs->pt.refused;
	if (fd < 0)
		return not_file;
	if (!fs->pt.log_running)
		return "not negotiated with the kernel yet";
	const struct passthrough_file *f = fs->pt.library ? file_of_locked(fs, ino) : NULL;
	return f && f->backing_id == 0 ? f->why : NULL;
}

void passthrough_why_not(void *arg, uint64_t ino, int fd, const char *not_file,
                         const char *path, char *buf, size_t size)
{
	struct ggufs *fs = arg;
	pthread_mutex_lock(&fs->pt.lock);
	const char *why = why_not_locked(fs, fd, not_file, ino);
	if (!why && !fs->pt.library && !single_backing_locked(fs, fd)) {
		why = fs->pt.refused;
	} else if (!why && fs->pt.library && !file_of_locked(fs, ino)) {
		/* never opened: whether the kernel takes the file is known by asking it */
		struct passthrough_file *f = backing_open_locked(fs, ino, fd, path);
		if (f && f->backing_id > 0)
			file_remove_locked(fs, f);
		else if (f)
			why = f->why;
	}
	snprintf(buf, size, "%s", why ? why : "yes");
	pthread_mutex_unlock(&fs->pt.lock);
}

int passthrough_reply_open(fuse_req_t req, struct ggufs *fs, struct fuse_file_info *fi,
                           uint64_t ino, int fd, const char *not_file, const char *path)
{
	int32_t backing_id = 0;
	pthread_mutex_lock(&fs->pt.lock);
	if (!why_not_locked(fs, fd, not_file, ino)) {
		if (!fs->pt.library) {
			backing_id = single_backing_locked(fs, fd);
		} else {
			struct passthrough_file *f = file_of_locked(fs, ino);
			if (!f)   /* the inode's first open since it had none: its backing id */
				f = backing_open_locked(fs, ino, fd, path);
			/* (out of memory: a normal open, that a passthrough one must not meet;
			 * rare) */
			if (f && f->backing_id > 0) {
				f->opens++;
				backing_id = f->backing_id;
			}
		}
	}
	pthread_mutex_unlock(&fs->pt.lock);
	if (backing_id > 0) {
		/* O_DIRECT on the file itself would hold the reader to its alignment rules,
		 * so its reads come here, as before; its mappings still go to the file */
		fi->keep_cache = 0;
		fi->direct_io = (fi->flags & O_DIRECT) != 0;
	}
	return compat_reply_open(req, fi, backing_id);
}

void passthrough_release(struct ggufs *fs, uint64_t ino)
{
	if (!fs->pt.library)
		return;   /* a single mount keeps its backing id */
	pthread_mutex_lock(&fs->pt.lock);
	struct passthrough_file *f = file_of_locked(fs, ino);
	if (f && f->backing_id > 0 && --f->opens == 0) {
		/* the kernel let go of the inode's backing file at its last release, before
		 * telling us: the next open may bring another id */
		file_remove_locked(fs, f);
	}
	pthread_mutex_unlock(&fs->pt.lock);
}

