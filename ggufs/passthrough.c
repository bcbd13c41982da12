/* FUSE passthrough for model.gguf on libfuse 3.14, which has no API for it (libfuse
 * 3.17 has fuse_passthrough_open): when model.gguf is byte for byte the model's one
 * local file, an open of it is answered with a backing id of that file, and the
 * kernel reads and maps the file itself, through its own page cache, never asking us.
 *
 * The three pieces of the kernel's protocol (include/uapi/linux/fuse.h, 7.40, and
 * fs/fuse/backing.c, passthrough.c, iomode.c), the replies put in by wire.c:
 *   - INIT: when the kernel offers FUSE_PASSTHROUGH (flags2) and speaks 7.40 or later,
 *     libfuse's reply gets FUSE_PASSTHROUGH and max_stack_depth 1 (the mount may be the
 *     lower layer of an overlay), or 2 for a model on a stacked file system
 *     (passthrough_ask).
 *   - FUSE_DEV_IOC_BACKING_OPEN of the model's fd, once, just after that reply, when
 *     the kernel has set up the connection: one backing id for the mount's life (one
 *     backing file per inode is all the kernel allows), closed before unmount.
 *   - OPEN of model.gguf: libfuse's reply gets FOPEN_PASSTHROUGH (without keep_cache,
 *     which the kernel refuses with it; with direct_io for an O_DIRECT open, whose
 *     reads then still come here) and the backing id in what 7.38 calls padding.
 *
 * The kernel allows one kind of open per inode at a time (a normal open of a file
 * open with passthrough fails, and the other way round): every open of one model.gguf
 * is of one kind, since with edits each state's model.gguf is an inode of its own
 * (lib/6-tree/tree.h) and whether it is the file is the state's.
 *
 * A local library has many model files, opened and closed as its models are built
 * and released, so there the backing id is per model.gguf inode and lazy: opened at
 * the first open of that inode, kept while it has opens (the kernel also wants one
 * backing file per inode while any is open), closed after the last release; the
 * kernel keeps what live opens and mappings use. A library's inode is one version of
 * one file (lib/7-library/library.h: never reused in a mount), so whether it is the
 * file never changes; an inode the kernel refused a backing id stays refused. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "evlog.h"

#include "ggufs.h"

/* The kernel's ABI, as include/uapi/linux/fuse.h has it (protocol 7.40 and later);
 * Debian 12's headers (linux 6.1, libfuse 3.14) predate it. */
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
_Static_assert(sizeof(struct pt_backing_map) == 16, "fuse_backing_map");

#define PT_MINOR_PASSTHROUGH 40
#define PT_INIT_EXT (1u << 30)
#define PT_WRITEBACK_CACHE (1u << 16)
#define PT_FOPEN_DIRECT_IO (1u << 0)
#define PT_FOPEN_PASSTHROUGH (1u << 7)
#define PT_FUSE_SUPER_MAGIC 0x65735546
#define PT_OVERLAYFS_SUPER_MAGIC 0x794c7630
#define PT_ECRYPTFS_SUPER_MAGIC 0xf15f
#define PT_IOC_MAGIC 229
#define PT_IOC_BACKING_OPEN _IOW(PT_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(PT_IOC_MAGIC, 2, uint32_t)

/* A library's model.gguf inode with a backing id (while opens > 0), or refused one. */
struct pt_file {
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

/* After the INIT reply that asked for passthrough went out: the one backing id of the
 * model's file, or the kernel's refusal recorded. On the session's own fd, which stays
 * open until unmount (a clone_fd worker's closes when the worker ends). */
static void open_backing(struct ggufs *fs)
{
	int fd = fuse_session_fd(fs->se);
	if (fs->pt.library) {   /* a backing id per model file, at its first open */
		pthread_mutex_lock(&fs->pt.lock);
		fs->pt.pending = false;
		fs->pt.negotiated = true;
		fs->pt.fuse_fd = fd;
		pthread_cond_broadcast(&fs->pt.settled);
		pthread_mutex_unlock(&fs->pt.lock);
		return;
	}
	/* fs->tree, of the model's own metadata, is the file whenever the model is one
	 * local file (passthrough_start) */
	struct pt_backing_map map = { .fd = tree_model_file_fd(fs->tree) };
	int id = -1, err = 0;
	if (map.fd >= 0) {
		id = ioctl(fd, PT_IOC_BACKING_OPEN, &map);
		err = errno;
	}
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.pending = false;
	pthread_cond_broadcast(&fs->pt.settled);
	if (map.fd < 0) {
		refuse_locked(fs, "model.gguf is not the file itself");
	} else if (id > 0) {
		fs->pt.backing_id = id;
		fs->pt.fuse_fd = fd;
		if (fs->pt.debug)
			fprintf(stderr, "   passthrough: backing id %d opened for model.gguf\n", id);
	} else {
		char why[sizeof fs->pt.refused];
		snprintf(why, sizeof why, "the kernel refused the backing file "
		         "(FUSE_DEV_IOC_BACKING_OPEN: %s%s)", strerror(id < 0 ? err : EINVAL),
		         id < 0 && err == EPERM ? "; it takes CAP_SYS_ADMIN, and passthrough "
		         "enabled at INIT" : "");
		refuse_locked(fs, why);
	}
	pthread_mutex_unlock(&fs->pt.lock);
}

bool passthrough_ask(struct ggufs *fs, uint32_t kernel_minor, bool offered, bool reply_fits,
                     uint32_t reply_flags, uint32_t *stack_depth)
{
	char why[96];
	const char *no = NULL;
	if (!offered && kernel_minor < PT_MINOR_PASSTHROUGH) {
		snprintf(why, sizeof why, "the kernel speaks FUSE 7.%" PRIu32
		         ", passthrough came with 7.40 (Linux 6.9)", kernel_minor);
		no = why;
	} else if (!offered) {
		no = "the kernel does not offer FUSE passthrough (CONFIG_FUSE_PASSTHROUGH)";
	} else if (!reply_fits) {
		no = "libfuse's INIT reply is not the size the kernel's has";
	} else if (!(reply_flags & PT_INIT_EXT) || (reply_flags & PT_WRITEBACK_CACHE)) {
		no = "the connection is not one passthrough goes with";
	}
	pthread_mutex_lock(&fs->pt.lock);
	if (no) {
		refuse_locked(fs, no);
	} else {
		/* Once the kernel has the reply, other threads may read requests (an open or a
		 * getxattr of model.gguf) before the backing id is there: they wait for it
		 * (why_not_locked), so that no open of model.gguf is of the wrong kind. */
		fs->pt.pending = true;
		*stack_depth = fs->pt.stack_depth;
	}
	pthread_mutex_unlock(&fs->pt.lock);
	return no == NULL;
}

void passthrough_asked(struct ggufs *fs, bool sent)
{
	if (sent) {
		open_backing(fs);
		return;
	}
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.pending = false;
	pthread_cond_broadcast(&fs->pt.settled);
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
	const struct ggufs_model *m = fs->model;
	fs->pt.fuse_fd = -1;
	if (off) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "off (-o passthrough=no)");
		fs->pt.logged = true;   /* asked for: nothing to say */
		return;
	}
	if (!m && !folder) {
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "a remote library's model");
		fs->pt.logged = true;
		return;
	}
	if (m && (m->remote || m->n_shards != 1)) {
		/* model.gguf is never one local file: no refusal, just what it is */
		snprintf(fs->pt.refused, sizeof fs->pt.refused, "%s",
		         m->remote ? "a remote model" : "a split model, merged here");
		fs->pt.logged = true;
		return;
	}
	if (m) {
		fs->pt.stack_depth = stack_depth_for(tree_model_file_fd(fs->tree));
	} else {
		/* the folder's file system stands for its models' (one on another, through a
		 * symlink, that needs more is refused its backing id: served as before) */
		int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fs->pt.stack_depth = stack_depth_for(dfd);
		if (dfd >= 0)
			close(dfd);
		fs->pt.library = true;
	}
	fs->pt.wanted = true;   /* wire.c sees INIT and the opens' replies */
}

void passthrough_init(struct ggufs *fs)
{
	pthread_mutex_lock(&fs->pt.lock);
	fs->pt.log_running = true;
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
	uint32_t id = (uint32_t)backing_id;
	if (ioctl(fs->pt.fuse_fd, PT_IOC_BACKING_CLOSE, &id) != 0)
		evlog(EVLOG_WARNING, NULL, "closing backing id %" PRIu32 " of model.gguf: %s", id,
		      strerror(errno));
	else if (fs->pt.debug)
		fprintf(stderr, "   passthrough: backing id %" PRIu32 " closed\n", id);
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

/* Library inode ino's entry (under pt.lock), or NULL. */
static struct pt_file *file_of_locked(struct ggufs *fs, uint64_t ino)
{
	for (size_t i = 0; i < fs->pt.n_files; i++)
		if (fs->pt.files[i].ino == ino)
			return &fs->pt.files[i];
	return NULL;
}

/* Why an open of model.gguf (library inode ino, or 0) whose file is fd (-1: not one
 * file as it lies, not_file says why) now is not a passthrough one (a static or the
 * mount's text), or NULL when it is. Called with pt.lock held. */
static const char *why_not_locked(struct ggufs *fs, int fd, const char *not_file, uint64_t ino)
{
	/* the backing id is being asked for: a moment (one ioctl) */
	while (fs->pt.pending)
		pthread_cond_wait(&fs->pt.settled, &fs->pt.lock);
	if (fs->pt.refused[0])
		return fs->pt.refused;
	if (fd < 0)
		return not_file;
	if (fs->pt.library) {
		const struct pt_file *f = file_of_locked(fs, ino);
		if (f && f->backing_id == 0)
			return f->why;
		return fs->pt.negotiated ? NULL : "not negotiated with the kernel yet";
	}
	if (fs->pt.backing_id <= 0)
		return "not negotiated with the kernel yet";
	return NULL;
}

/* The open flags of a passthrough open: O_DIRECT on the file itself would hold the
 * reader to its alignment rules, so its reads come here, as before; its mappings still
 * go to the file. */
static uint32_t open_flags_for(bool direct)
{
	return PT_FOPEN_PASSTHROUGH | (direct ? PT_FOPEN_DIRECT_IO : 0);
}

/* Why model.gguf of t is not the model's file byte for byte, or NULL when it is. */
static const char *not_the_file(const struct tree *t)
{
	const struct ggufs_model *m = tree_model(t);
	if (tree_model_file_fd(t) >= 0)
		return NULL;
	if (m->remote)
		return "a remote model";
	if (m->n_shards != 1)
		return "a split model, merged here";
	return "edited: model.gguf has a header of its own in front of the file's data";
}

bool passthrough_open(struct ggufs *fs, const struct tree *t, bool direct)
{
	pthread_mutex_lock(&fs->pt.lock);
	bool pt = why_not_locked(fs, tree_model_file_fd(t), not_the_file(t), 0) == NULL;
	int32_t backing_id = pt ? fs->pt.backing_id : 0;
	pthread_mutex_unlock(&fs->pt.lock);
	wire_open_reply(open_flags_for(direct), backing_id);
	return pt;
}

/* A new entry for ino in the table (under pt.lock), or NULL out of memory. */
static struct pt_file *file_add_locked(struct ggufs *fs, uint64_t ino)
{
	if (fs->pt.n_files == fs->pt.cap_files) {
		size_t cap = fs->pt.cap_files ? 2 * fs->pt.cap_files : 16;
		struct pt_file *files = realloc(fs->pt.files, cap * sizeof *files);
		if (!files)
			return NULL;
		fs->pt.files = files;
		fs->pt.cap_files = cap;
	}
	struct pt_file *f = &fs->pt.files[fs->pt.n_files++];
	memset(f, 0, sizeof *f);
	f->ino = ino;
	return f;
}

/* A new entry for library inode ino, model.gguf of the model at path whose file is fd,
 * (under pt.lock) with a backing id of that file, or refused by the kernel (said once
 * per cause: every model of a folder may be refused alike); NULL out of memory. */
static struct pt_file *backing_open_locked(struct ggufs *fs, uint64_t ino, int fd,
                                           const char *path)
{
	struct pt_backing_map map = { .fd = fd };
	int id = ioctl(fs->pt.fuse_fd, PT_IOC_BACKING_OPEN, &map);
	int err = errno;
	struct pt_file *f = file_add_locked(fs, ino);
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
		snprintf(f->why, sizeof f->why, "the kernel refused the backing file "
		         "(FUSE_DEV_IOC_BACKING_OPEN: %s)", strerror(id < 0 ? err : EINVAL));
		evlog(EVLOG_WARNING, f->why, "%s: model.gguf without passthrough: %s", path, f->why);
	}
	return f;
}

/* Removes f from the table (under pt.lock), its backing id closed. */
static void file_remove_locked(struct ggufs *fs, struct pt_file *f)
{
	close_backing_locked(fs, f->backing_id);
	*f = fs->pt.files[--fs->pt.n_files];
}

void passthrough_why_not(void *arg, uint64_t ino, int fd, const char *not_file,
                         const char *path, char *buf, size_t size)
{
	struct ggufs *fs = arg;
	pthread_mutex_lock(&fs->pt.lock);
	const char *why = why_not_locked(fs, fd, not_file, ino);
	if (!why && fs->pt.library && !file_of_locked(fs, ino)) {
		/* never opened: whether the kernel takes the file is known by asking it */
		struct pt_file *f = backing_open_locked(fs, ino, fd, path);
		if (f && f->backing_id > 0)
			file_remove_locked(fs, f);
		else if (f)
			why = f->why;
	}
	snprintf(buf, size, "%s", why ? why : "yes");
	pthread_mutex_unlock(&fs->pt.lock);
}

int64_t passthrough_xattr(struct ggufs *fs, const struct tree *t, char *buf, size_t size)
{
	char value[256];
	passthrough_why_not(fs, 0, tree_model_file_fd(t), not_the_file(t), tree_model(t)->path,
	                    value, sizeof value);
	return xattr_value(buf, size, value, strlen(value));
}

bool passthrough_open_ino(struct ggufs *fs, uint64_t ino, int fd, const char *not_file,
                          const char *path, bool direct)
{
	int32_t backing_id = 0;
	pthread_mutex_lock(&fs->pt.lock);
	struct pt_file *f = NULL;
	if (!why_not_locked(fs, fd, not_file, ino)) {
		f = file_of_locked(fs, ino);
		if (!f)   /* the inode's first open since it had none: its backing id */
			f = backing_open_locked(fs, ino, fd, path);
	}
	/* (out of memory: a normal open, that a passthrough one must not meet; rare) */
	bool pt = f && f->backing_id > 0;
	if (pt) {
		f->opens++;
		backing_id = f->backing_id;
	}
	pthread_mutex_unlock(&fs->pt.lock);
	wire_open_reply(open_flags_for(direct), backing_id);
	return pt;
}

void passthrough_release(struct ggufs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->pt.lock);
	struct pt_file *f = file_of_locked(fs, ino);
	if (f && f->backing_id > 0 && --f->opens == 0) {
		/* the kernel let go of the inode's backing file at its last release, before
		 * telling us: the next open may bring another id */
		file_remove_locked(fs, f);
	}
	pthread_mutex_unlock(&fs->pt.lock);
}
